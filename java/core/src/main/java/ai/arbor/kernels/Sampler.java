package ai.arbor.kernels;

import static ai.arbor.kernels.Check.addr;

import ai.arbor.bindings.ArborCpu;
import ai.arbor.bindings.ArborCuda;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.IntPointer;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.javacpp.Pointer;

/**
 * Fused next-token sampling (docs/algorithms.md §10): one read of each row of logits draws a token and
 * returns, per row,
 * <pre>
 *   token            y ~ q,  q = the sampling distribution (tempered, truncated by {@link SamplingParams}, renormalized)
 *   logprobSampled   log q(y)
 *   logprob          log p(y),  p = softmax(logits / T) over the real vocabulary (untruncated)
 *   entropy          H(p) = lse − Σ_j p_j z_j                 (docs/algorithms.md §1)
 * </pre>
 * {@code logprob} and {@code entropy} are exactly {@link TokenStats}' values for the same logits,
 * temperature and label {@code y}. Greedy rows (T = 0) report them at T = 1 and {@code logprobSampled} 0.
 *
 * <p><b>Which logprob a trainer stores.</b> PPO/GRPO trainers (verl's {@code dp_actor}, OpenRLHF, TRL)
 * recompute the policy's logprob as {@code log_softmax(logits / T)} — tempered but never truncated — and
 * form the ratio r = exp(logprob_θ − logprob_old). The old/behaviour logprob must come from the same
 * function of the same logits, or r ≠ 1 at the first step: with top-k/top-p, log q(y) ≥ log p(y) for every
 * kept token, so a truncated old logprob biases every ratio below 1 and fills the clip. Store
 * {@code logprob}. {@code logprobSampled} is the exact probability of the draw, for importance
 * corrections that want the true behaviour distribution; vLLM returns it as {@code processed_logprobs}
 * (its default {@code raw_logprobs} are untempered), and TRL/ms-swift/open-instruct switched their
 * rollout-vs-trainer corrections to temperature-scaled logprobs for this reason — the mismatch remains
 * whenever top-k/top-p are on, which is why RL rollouts usually sample with truncation off. Details:
 * docs/sampling.md.
 *
 * <p><b>Randomness.</b> Counter-based Philox-4x32-10 keyed per row by (seed, key, step): a row's token
 * depends only on its logits, its parameters and that triple — not on its position in the batch, the
 * other rows, the thread count, the ISA path, or CPU versus CUDA (bitwise). {@code keys} name each
 * row's stream (e.g. a trajectory id, so a tree branch or a resumed trajectory draws the same tokens
 * whatever batch it lands in); without them the key is the row index. {@code step} (the decode position)
 * must be in [0, 2<sup>32</sup>). The draw is the Gumbel-max race argmax_j (z_j + G_j) over kept tokens,
 * ties to the lowest index.
 *
 * <p>Errors: every size, length and parameter is checked first ({@link IllegalArgumentException} naming
 * it); a valid row with NaN or +inf logits, or no finite logit, or logits that overflow at its
 * temperature has no distribution: on the CPU this throws naming the row (after all rows are computed);
 * on CUDA that row gets token −1 and NaN outputs. Masked rows get token −1 and 0 outputs.
 */
public final class Sampler {
    private Sampler() {}

    /** Largest valid step (steps are a 32-bit Philox counter word). */
    public static final long MAX_STEP = 0xffffffffL;

    // ---------------------------------------------------------------------------------------------
    // Java arrays
    // ---------------------------------------------------------------------------------------------

    /**
     * Samples one token per row of a row-major {@code [rows, vocab]} array, every row with the same
     * parameters, seed and step; row r's random stream is keyed by r.
     */
    public static SampleResult sample(float[] logits, int rows, int vocab, SamplingParams params, long seed, long step) {
        Check.notNull("params", params);
        checkStep("step", step);
        return sampleArrays(logits, rows, vocab, vocab, params, null, seed, null, step, null, null);
    }

    /**
     * Samples with per-row stream keys and steps — the form a batched generator uses: row r draws from
     * the stream (seed, keys[r], steps[r]), so its token is the same in any batch.
     *
     * @param vocabLimit columns {@code >= vocabLimit} are padding and never sampled
     * @param keys       {@code rows} stream keys (e.g. trajectory ids)
     * @param steps      {@code rows} steps in [0, 2^32) (e.g. each trajectory's decode position)
     * @param rowMask    {@code rows} flags (false = masked: token −1, outputs 0), or null
     */
    public static SampleResult sample(float[] logits, int rows, int vocab, int vocabLimit, SamplingParams params,
                                      long seed, long[] keys, long[] steps, boolean[] rowMask) {
        Check.notNull("params", params);
        checkRowKeys(keys, steps, rows);
        return sampleArrays(logits, rows, vocab, vocabLimit, params, null, seed, keys, 0, steps, rowMask);
    }

    /** As {@link #sample(float[], int, int, int, SamplingParams, long, long[], long[], boolean[])} with parameters per row. */
    public static SampleResult sample(float[] logits, int rows, int vocab, int vocabLimit, SamplingParams[] rowParams,
                                      long seed, long[] keys, long[] steps, boolean[] rowMask) {
        Check.notNull("rowParams", rowParams);
        if (rowParams.length != rows)
            throw new IllegalArgumentException("rowParams.length must be " + rows + ", got " + rowParams.length);
        for (int r = 0; r < rows; r++) Check.notNull("rowParams[" + r + "]", rowParams[r]);
        checkRowKeys(keys, steps, rows);
        return sampleArrays(logits, rows, vocab, vocabLimit, null, rowParams, seed, keys, 0, steps, rowMask);
    }

    private static SampleResult sampleArrays(float[] logits, int rows, int vocab, int vocabLimit, SamplingParams params,
                                             SamplingParams[] rowParams, long seed, long[] keys, long step,
                                             long[] steps, boolean[] rowMask) {
        Check.nonNegative("rows", rows);
        Check.positive("vocab", vocab);
        if (vocabLimit < 1 || vocabLimit > vocab)
            throw new IllegalArgumentException("vocabLimit must be in [1, " + vocab + "], got " + vocabLimit);
        Check.length("logits", logits, Check.arrayProduct("rows * vocab", rows, vocab));
        if (rowMask != null) Check.length("rowMask", rowMask, rows);
        SamplingParams uniform = rowParams == null ? params : SamplingParams.greedy();
        float[] temps = null, topPs = null, minPs = null;
        int[] topKs = null;
        if (rowParams != null) {
            temps = new float[rows];
            topPs = new float[rows];
            minPs = new float[rows];
            topKs = new int[rows];
            for (int r = 0; r < rows; r++) {
                temps[r] = rowParams[r].temperature();
                topKs[r] = rowParams[r].topK();
                topPs[r] = rowParams[r].topP();
                minPs[r] = rowParams[r].minP();
            }
        }
        int[] tokens = new int[rows];
        float[] lps = new float[rows], lp = new float[rows], h = new float[rows];
        int rc = ArborCpu.arbor_cpu_sample_f32(logits, rows, vocab, vocab, vocabLimit, uniform.temperature(), temps,
                uniform.topK(), topKs, uniform.topP(), topPs, uniform.minP(), minPs, seed, null, keys, step, steps,
                Check.mask(rowMask), tokens, ArborCpu.I32, lps, lp, h, Kernels.threads());
        if (rc == ArborCpu.ERR_NAN) {
            int r = firstFailedRow(rows, i -> tokens[i], rowMask == null ? null : i -> rowMask[i]);
            float t = rowParams == null ? params.temperature() : rowParams[r].temperature();
            throw noDistribution(r, describeRow(logits, r, vocab, vocabLimit, t));
        }
        Kernels.check(rc, "sample");
        return new SampleResult(tokens, lps, lp, h);
    }

    // ---------------------------------------------------------------------------------------------
    // Memory (host or CUDA), no copy
    // ---------------------------------------------------------------------------------------------

    /**
     * The inputs of one call over logits in memory: uniform parameters, seed and step, each optionally
     * overridden per row by an array in memory on the logits' device (null = use the uniform value).
     * Build with {@link #of} and the {@code with…} methods.
     *
     * @param keys         {@code rows} I64 stream keys; null = the row index
     * @param steps        {@code rows} I64 steps in [0, 2^32); null = {@code step}
     * @param seeds        {@code rows} I64 seeds; null = {@code seed}
     * @param temperatures {@code rows} F32; likewise {@code topKs} (I32), {@code topPs}, {@code minPs} (F32)
     * @param rowMask      {@code rows} U8 (0 = masked), or null
     */
    public record Batch(LogitsView logits, SamplingParams params, long seed, long step, MemRef keys, MemRef steps,
                        MemRef seeds, MemRef temperatures, MemRef topKs, MemRef topPs, MemRef minPs, MemRef rowMask) {

        public Batch {
            Check.notNull("logits", logits);
            Check.notNull("params", params);
            checkStep("step", step);
        }

        public static Batch of(LogitsView logits, SamplingParams params, long seed, long step) {
            return new Batch(logits, params, seed, step, null, null, null, null, null, null, null, null);
        }

        public Batch withKeys(MemRef k) {
            return new Batch(logits, params, seed, step, k, steps, seeds, temperatures, topKs, topPs, minPs, rowMask);
        }

        public Batch withSteps(MemRef s) {
            return new Batch(logits, params, seed, step, keys, s, seeds, temperatures, topKs, topPs, minPs, rowMask);
        }

        public Batch withSeeds(MemRef s) {
            return new Batch(logits, params, seed, step, keys, steps, s, temperatures, topKs, topPs, minPs, rowMask);
        }

        /** Per-row parameters; any may be null (= {@code params}' value for every row). */
        public Batch withRowParams(MemRef temperatures, MemRef topKs, MemRef topPs, MemRef minPs) {
            return new Batch(logits, params, seed, step, keys, steps, seeds, temperatures, topKs, topPs, minPs, rowMask);
        }

        public Batch withRowMask(MemRef m) {
            return new Batch(logits, params, seed, step, keys, steps, seeds, temperatures, topKs, topPs, minPs, m);
        }
    }

    /**
     * Where the per-row outputs go (on the logits' device).
     *
     * @param tokens    {@code rows} tokens of {@code tokenType} (I32 or I64)
     * @param logprobSampled {@code rows} F32, or null; likewise {@code logprob}, {@code entropy}
     */
    public record Outputs(MemRef tokens, DType tokenType, MemRef logprobSampled, MemRef logprob, MemRef entropy) {
        public Outputs {
            Check.notNull("tokens", tokens);
            if (tokenType != DType.I32 && tokenType != DType.I64)
                throw new IllegalArgumentException("tokenType must be I32 or I64, got " + tokenType);
        }
    }

    /**
     * Samples over logits in memory. Host memory goes to the CPU kernels ({@link Kernels#threads()}
     * threads; per-row values are checked first and a row without a distribution throws), CUDA memory to
     * the CUDA kernels on {@code cudaStream} (asynchronous: such a row gets token −1 and NaN outputs).
     */
    public static void sample(Batch in, Outputs out, long cudaStream) {
        Check.notNull("batch", in);
        Check.notNull("outputs", out);
        LogitsView x = in.logits();
        Check.live("logits", x.data());
        long rows = x.rows();
        Check.fitsOrNull("keys", in.keys(), rows, DType.I64);
        Check.fitsOrNull("steps", in.steps(), rows, DType.I64);
        Check.fitsOrNull("seeds", in.seeds(), rows, DType.I64);
        Check.fitsOrNull("temperatures", in.temperatures(), rows, DType.F32);
        Check.fitsOrNull("topKs", in.topKs(), rows, DType.I32);
        Check.fitsOrNull("topPs", in.topPs(), rows, DType.F32);
        Check.fitsOrNull("minPs", in.minPs(), rows, DType.F32);
        Check.fitsOrNull("rowMask", in.rowMask(), rows, DType.U8);
        Check.fits("tokens", out.tokens(), rows, out.tokenType());
        Check.fitsOrNull("logprobSampled", out.logprobSampled(), rows, DType.F32);
        Check.fitsOrNull("logprob", out.logprob(), rows, DType.F32);
        Check.fitsOrNull("entropy", out.entropy(), rows, DType.F32);
        if (x.vocabLimit() > Integer.MAX_VALUE)
            throw new IllegalArgumentException("vocabLimit must be < 2^31 (tokens are int32), got " + x.vocabLimit());
        Device dev = x.device();
        Check.sameDevice(dev, new String[] {"keys", "steps", "seeds", "temperatures", "topKs", "topPs", "minPs", "rowMask",
                        "tokens", "logprobSampled", "logprob", "entropy"}, in.keys(), in.steps(), in.seeds(),
                in.temperatures(), in.topKs(), in.topPs(), in.minPs(), in.rowMask(), out.tokens(), out.logprobSampled(),
                out.logprob(), out.entropy());
        Check.overlaps().in("logits", x).in("keys", in.keys(), rows, DType.I64).in("steps", in.steps(), rows, DType.I64)
                .in("seeds", in.seeds(), rows, DType.I64).in("temperatures", in.temperatures(), rows, DType.F32)
                .in("topKs", in.topKs(), rows, DType.I32).in("topPs", in.topPs(), rows, DType.F32)
                .in("minPs", in.minPs(), rows, DType.F32).in("rowMask", in.rowMask(), rows, DType.U8)
                .out("tokens", out.tokens(), rows, out.tokenType())
                .out("logprobSampled", out.logprobSampled(), rows, DType.F32).out("logprob", out.logprob(), rows, DType.F32)
                .out("entropy", out.entropy(), rows, DType.F32).check();
        if (!dev.isCuda()) checkHostRows(in, rows);
        SamplingParams p = in.params();
        long lx = x.data().address(), v = x.vocab(), s = x.rowStride(), vl = x.vocabLimit();
        long kt = addr(in.temperatures()), kk = addr(in.topKs()), kp = addr(in.topPs()), km = addr(in.minPs());
        long sd = addr(in.seeds()), ky = addr(in.keys()), st = addr(in.steps()), mk = addr(in.rowMask());
        long tk = out.tokens().address(), ls = addr(out.logprobSampled()), lp = addr(out.logprob()), en = addr(out.entropy());
        int tt = out.tokenType().code();
        float t = p.temperature(), tp = p.topP(), mp = p.minP();
        int k = p.topK();
        long seed = in.seed(), step = in.step();
        int rc;
        if (dev.isCuda()) {
            rc = Kernels.onCudaDevice(dev.index(), () -> switch (x.dtype()) {
                case F32 -> ArborCuda.arbor_cuda_sample_f32(lx, rows, v, s, vl, t, kt, k, kk, tp, kp, mp, km, seed, sd, ky, step, st, mk, tk, tt, ls, lp, en, cudaStream);
                case BF16 -> ArborCuda.arbor_cuda_sample_bf16(lx, rows, v, s, vl, t, kt, k, kk, tp, kp, mp, km, seed, sd, ky, step, st, mk, tk, tt, ls, lp, en, cudaStream);
                default -> ArborCuda.arbor_cuda_sample_f16(lx, rows, v, s, vl, t, kt, k, kk, tp, kp, mp, km, seed, sd, ky, step, st, mk, tk, tt, ls, lp, en, cudaStream);
            });
        } else {
            int th = Kernels.threads();
            rc = switch (x.dtype()) {
                case F32 -> ArborCpu.arbor_cpu_sample_f32(lx, rows, v, s, vl, t, kt, k, kk, tp, kp, mp, km, seed, sd, ky, step, st, mk, tk, tt, ls, lp, en, th);
                case BF16 -> ArborCpu.arbor_cpu_sample_bf16(lx, rows, v, s, vl, t, kt, k, kk, tp, kp, mp, km, seed, sd, ky, step, st, mk, tk, tt, ls, lp, en, th);
                default -> ArborCpu.arbor_cpu_sample_f16(lx, rows, v, s, vl, t, kt, k, kk, tp, kp, mp, km, seed, sd, ky, step, st, mk, tk, tt, ls, lp, en, th);
            };
        }
        if (rc == ArborCpu.ERR_NAN) {
            LongPointer tok64 = out.tokenType() == DType.I64 ? new LongPointer(host(out.tokens())) : null;
            IntPointer tok32 = tok64 == null ? new IntPointer(host(out.tokens())) : null;
            BytePointer mask = in.rowMask() == null ? null : new BytePointer(host(in.rowMask()));
            int r = firstFailedRow((int) rows, i -> tok64 != null ? tok64.get(i) : tok32.get(i),
                    mask == null ? null : i -> mask.get(i) != 0);
            Check.keepAlive(in, out);
            throw noDistribution(r, "NaN or +inf logits, no finite logit in [0, vocabLimit), or logits that overflow"
                    + " at its temperature");
        }
        Check.keepAlive(x, in.keys(), in.steps(), in.seeds(), in.temperatures(), in.topKs(), in.topPs(), in.minPs(),
                in.rowMask(), out.tokens(), out.logprobSampled(), out.logprob(), out.entropy());
        Kernels.check(rc, "sample");
    }

    // ---------------------------------------------------------------------------------------------
    // The generator, for tests and for reproducing draws elsewhere
    // ---------------------------------------------------------------------------------------------

    /** The uniform u ∈ (0, 1) the kernels draw for {@code column} of the stream (seed, key, step). */
    public static float uniform(long seed, long key, long step, long column) {
        checkStep("step", step);
        Check.nonNegative("column", column);
        return ArborCpu.arbor_sample_uniform(seed, key, step, column);
    }

    /** Its Gumbel noise G = −log(−log u), exactly as the kernels compute it. */
    public static float gumbel(long seed, long key, long step, long column) {
        checkStep("step", step);
        Check.nonNegative("column", column);
        return ArborCpu.arbor_sample_gumbel(seed, key, step, column);
    }

    /**
     * The uniforms u ∈ (0, 1) of an untruncated row's draw (temperature &gt; 0, no min-p / top-k / top-p):
     * {@code which} 0 picks the chunk of columns by its mass, 1 the column within it (docs/sampling.md).
     */
    public static double drawUniform(long seed, long key, long step, int which) {
        checkStep("step", step);
        if (which != 0 && which != 1) throw new IllegalArgumentException("which must be 0 or 1, got " + which);
        return ArborCpu.arbor_sample_draw_uniform(seed, key, step, which);
    }

    // ---------------------------------------------------------------------------------------------

    static void checkStep(String name, long step) {
        if (step < 0 || step > MAX_STEP)
            throw new IllegalArgumentException(name + " must be in [0, 2^32), got " + step);
    }

    private static void checkRowKeys(long[] keys, long[] steps, int rows) {
        Check.notNull("keys", keys);
        Check.notNull("steps", steps);
        if (keys.length != rows) throw new IllegalArgumentException("keys.length must be " + rows + ", got " + keys.length);
        if (steps.length != rows) throw new IllegalArgumentException("steps.length must be " + rows + ", got " + steps.length);
        for (int r = 0; r < rows; r++) checkStep("steps[" + r + "]", steps[r]);
    }

    /** Per-row values in host memory, checked with the row named (native code would only say ERR_ARG). */
    private static void checkHostRows(Batch in, long rows) {
        if (rows == 0) return;
        BytePointer mask = in.rowMask() == null ? null : new BytePointer(host(in.rowMask()));
        FloatPointer t = in.temperatures() == null ? null : new FloatPointer(host(in.temperatures()));
        FloatPointer tp = in.topPs() == null ? null : new FloatPointer(host(in.topPs()));
        FloatPointer mp = in.minPs() == null ? null : new FloatPointer(host(in.minPs()));
        LongPointer st = in.steps() == null ? null : new LongPointer(host(in.steps()));
        IntPointer tk = in.topKs() == null ? null : new IntPointer(host(in.topKs()));
        if (t == null && tp == null && mp == null && st == null && tk == null) return;
        for (long r = 0; r < rows; r++) {
            if (mask != null && mask.get(r) == 0) continue;
            try {
                new SamplingParams(t == null ? 0f : t.get(r), tk == null ? 0 : tk.get(r), tp == null ? 1f : tp.get(r),
                        mp == null ? 0f : mp.get(r));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("row " + r + ": " + e.getMessage(), e);
            }
            if (st != null) checkStep("steps[" + r + "]", st.get(r));
        }
        Check.keepAlive(in);
    }

    /** A pointer over host memory owned elsewhere (read-only use, never freed here). */
    private static Pointer host(MemRef ref) {
        return new Pointer() {
            {
                address = ref.address();
                capacity = ref.bytes();
                limit = ref.bytes();
            }
        };
    }

    private interface RowLong {
        long get(int r);
    }

    private interface RowFlag {
        boolean get(int r);
    }

    private static int firstFailedRow(int rows, RowLong token, RowFlag valid) {
        for (int r = 0; r < rows; r++)
            if (token.get(r) == -1 && (valid == null || valid.get(r))) return r;
        return -1;
    }

    private static IllegalArgumentException noDistribution(int row, String why) {
        return new IllegalArgumentException("sample: row " + row + " has no distribution: " + why + " (ARBOR_ERR_NAN)");
    }

    private static String describeRow(float[] logits, int r, int vocab, int limit, float temperature) {
        boolean finite = false;
        for (int j = 0; j < limit; j++) {
            float v = logits[r * vocab + j];
            if (Float.isNaN(v)) return "logits[" + r + ", " + j + "] is NaN";
            if (v == Float.POSITIVE_INFINITY) return "logits[" + r + ", " + j + "] is +inf";
            finite |= v != Float.NEGATIVE_INFINITY;
        }
        if (!finite) return "no finite logit in [0, " + limit + ")";
        return "its logits overflow fp32 when divided by temperature " + temperature;
    }
}
