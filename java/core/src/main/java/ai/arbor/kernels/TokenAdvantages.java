package ai.arbor.kernels;

import static ai.arbor.kernels.Check.addr;

import ai.arbor.bindings.ArborCpu;
import ai.arbor.bindings.ArborCuda;

/**
 * Token-level advantages (docs/algorithms.md §3): the sequence advantage of each trajectory broadcast over its
 * valid tokens, optionally shaped by token entropy — AEPO's entropy-aware advantage or TAO-RL's
 * post-tool shaping ({@link TokenShaping} documents the formulas). Native kernels, CPU and CUDA, with
 * batch statistics reduced in a fixed order: the result is bitwise identical for every thread count.
 *
 * <p>Layouts. <b>Flat</b>: {@code nTokens} tokens, {@code seqIds[t]} the trajectory of token t (tokens of
 * many trajectories in any order, e.g. a packed micro-batch). <b>Padded</b>: a row-major
 * {@code [nSeqs, seqLen]} batch, token t in row {@code t / seqLen} (no id array). In both, the loss mask
 * marks the trained tokens (false for prompt, tool observations, padding, and filtered trajectories):
 * only those are read and shaped, the others get 0.
 *
 * <p>Entry points: Java arrays (the arrays are pinned, not copied, for the call), and memory
 * ({@link MemRef}: direct buffers, JavaCPP pointers, tensor data — host or CUDA, no copy). All validate
 * every size first and throw {@link IllegalArgumentException} naming the bad value. The scalar
 * double-precision reference the native kernels are tested against is {@code TokenAdvantagesReference}
 * in the tests.
 */
public final class TokenAdvantages {
    private TokenAdvantages() {}

    /** Token roles for {@link #postToolFlags}: prompt, user turns, padding (the next assistant turn is not post-tool). */
    public static final byte ROLE_OTHER = 0;
    /** A token the policy generated. */
    public static final byte ROLE_ASSISTANT = 1;
    /** A tool observation token, including the chat-template tokens that wrap the observation. */
    public static final byte ROLE_TOOL = 2;

    /** Token advantages and the batch statistics of one call. */
    public record Result(float[] advantages, ShapingStats stats) {}

    // ---------------------------------------------------------------------------------------------
    // Java arrays
    // ---------------------------------------------------------------------------------------------

    /**
     * Flat layout.
     *
     * @param seqAdvantages one advantage per trajectory (e.g. from {@link Advantages#grpo})
     * @param seqIds        per token, the trajectory index in [0, seqAdvantages.length) (read on valid tokens)
     * @param lossMask      per token, true = trained; null = all
     * @param entropy       per token entropy (finite on valid tokens); required by AEPO/TAO-RL, else may be null
     * @param postTool      per token M_post flag (TAO-RL; see {@link #postToolFlags}); null = none
     */
    public static Result compute(float[] seqAdvantages, int[] seqIds, boolean[] lossMask, float[] entropy,
                                 boolean[] postTool, TokenShaping shaping) {
        Check.notNull("seqIds", seqIds);
        float[] out = new float[seqIds.length];
        return new Result(out, run(seqAdvantages, seqIds, 0, lossMask, entropy, postTool, shaping, out));
    }

    /** As {@link #compute(float[], int[], boolean[], float[], boolean[], TokenShaping)}, writing into {@code out}. */
    public static ShapingStats computeInto(float[] seqAdvantages, int[] seqIds, boolean[] lossMask, float[] entropy,
                                           boolean[] postTool, TokenShaping shaping, float[] out) {
        Check.notNull("seqIds", seqIds);
        Check.length("out", out, seqIds.length);
        Check.notSame("out", out, "seqAdvantages", seqAdvantages);
        Check.notSame("out", out, "entropy", entropy);
        return run(seqAdvantages, seqIds, 0, lossMask, entropy, postTool, shaping, out);
    }

    /**
     * Padded layout: per-token arrays are row-major {@code [seqAdvantages.length, seqLen]}.
     *
     * @param lossMask required here: padding must be masked
     */
    public static Result computePadded(float[] seqAdvantages, int seqLen, boolean[] lossMask, float[] entropy,
                                       boolean[] postTool, TokenShaping shaping) {
        Check.notNull("seqAdvantages", seqAdvantages);
        Check.positive("seqLen", seqLen);
        float[] out = new float[Check.arrayProduct("nSeqs * seqLen", seqAdvantages.length, seqLen)];
        Check.length("lossMask", lossMask, out.length);
        return new Result(out, run(seqAdvantages, null, seqLen, lossMask, entropy, postTool, shaping, out));
    }

    private static ShapingStats run(float[] seqAdv, int[] seqIds, int seqLen, boolean[] mask, float[] entropy,
                                    boolean[] post, TokenShaping shaping, float[] out) {
        Check.notNull("seqAdvantages", seqAdv);
        Check.notNull("shaping", shaping);
        int n = out.length;
        if (mask != null) Check.length("lossMask", mask, n);
        if (post != null) Check.length("postTool", post, n);
        if (entropy != null) Check.length("entropy", entropy, n);
        else if (shaping.needsEntropy()) throw new IllegalArgumentException(shaping.mode() + " needs token entropies");
        for (int t = 0; t < n; t++) {
            if (mask != null && !mask[t]) continue;
            if (seqIds != null && (seqIds[t] < 0 || seqIds[t] >= seqAdv.length))
                throw new IllegalArgumentException("seqIds[" + t + "] = " + seqIds[t] + " is outside [0, " + seqAdv.length + ")");
            if (shaping.needsEntropy() && !Float.isFinite(entropy[t]))
                throw new IllegalArgumentException("entropy[" + t + "] = " + entropy[t] + " is not finite");
        }
        double[] stats = new double[ShapingStats.LENGTH];
        int rc = ArborCpu.arbor_cpu_token_advantages(seqAdv, seqAdv.length, seqIds, ArborCpu.I32, n,
                seqIds == null ? seqLen : 0, Check.mask(mask), entropy, Check.mask(post), shaping.mode().code(),
                shaping.coef(), shaping.topFraction(), out, stats, Kernels.threads());
        check(rc);
        return ShapingStats.of(stats);
    }

    // ---------------------------------------------------------------------------------------------
    // Memory (host or CUDA), no copy
    // ---------------------------------------------------------------------------------------------

    /**
     * Token advantages over memory. Dispatches on {@code out}'s device: host memory to the CPU kernel
     * ({@link Kernels#threads()} threads), CUDA memory to the CUDA kernel on {@code cudaStream}
     * (asynchronous; ignored for the CPU). Every ref must live on that device.
     *
     * @param seqAdvantages {@code nSeqs} fp32
     * @param seqIds        {@code nTokens} ids of {@code seqIdType} (I32 or I64), or null for the padded
     *                      layout ({@code nTokens = nSeqs * seqLen})
     * @param seqLen        row length of the padded layout; ignored when {@code seqIds} is given
     * @param lossMask      {@code nTokens} bytes (0 = masked), or null = all valid
     * @param entropy       {@code nTokens} fp32; required by AEPO/TAO-RL
     * @param postTool      {@code nTokens} bytes (1 = M_post), or null
     * @param out           {@code nTokens} fp32 outputs
     * @param stats         {@link ShapingStats#LENGTH} doubles (64 bytes) receiving the batch statistics;
     *                      required by AEPO/TAO-RL, may be null for broadcast. On CUDA it is written
     *                      asynchronously: read it after synchronizing the stream.
     * @throws IllegalArgumentException on the CPU also when a valid token's sequence id is outside
     *         [0, nSeqs) or its entropy is not finite (checked by the kernel); on CUDA those tokens become
     *         NaN and non-finite entropies are counted in the stats
     */
    public static void compute(MemRef seqAdvantages, long nSeqs, MemRef seqIds, DType seqIdType, long nTokens,
                               long seqLen, MemRef lossMask, MemRef entropy, MemRef postTool, TokenShaping shaping,
                               MemRef out, MemRef stats, long cudaStream) {
        Check.notNull("shaping", shaping);
        Check.nonNegative("nSeqs", nSeqs);
        Check.nonNegative("nTokens", nTokens);
        Check.notNull("out", out);
        Check.fits("seqAdvantages", seqAdvantages, nSeqs, DType.F32);
        if (seqIds != null) {
            if (seqIdType != DType.I32 && seqIdType != DType.I64)
                throw new IllegalArgumentException("seqIdType must be I32 or I64, got " + seqIdType);
            Check.fits("seqIds", seqIds, nTokens, seqIdType);
        } else {
            Check.positive("seqLen", seqLen);
            if (Check.product("nSeqs * seqLen", nSeqs, seqLen) != nTokens)
                throw new IllegalArgumentException("padded layout needs nTokens = nSeqs * seqLen = " + nSeqs + " * "
                        + seqLen + ", got " + nTokens);
        }
        Check.fitsOrNull("lossMask", lossMask, nTokens, DType.U8);
        Check.fitsOrNull("postTool", postTool, nTokens, DType.U8);
        if (shaping.needsEntropy()) Check.fits("entropy", entropy, nTokens, DType.F32);
        else Check.fitsOrNull("entropy", entropy, nTokens, DType.F32);
        Check.fits("out", out, nTokens, DType.F32);
        if (shaping.needsEntropy() && stats == null)
            throw new IllegalArgumentException(shaping.mode() + " needs a stats buffer (" + ShapingStats.LENGTH + " doubles)");
        if (stats != null) Check.fits("stats", stats, ShapingStats.LENGTH, DType.I64);  // 8 doubles, 8-byte aligned
        Device dev = out.device();
        String[] names = {"seqAdvantages", "seqIds", "lossMask", "entropy", "postTool", "stats"};
        MemRef[] refs = {seqAdvantages, seqIds, lossMask, entropy, postTool, stats};
        for (int i = 0; i < refs.length; i++)
            if (refs[i] != null && !refs[i].device().equals(dev))
                throw new IllegalArgumentException(names[i] + " is on " + refs[i].device() + " but out is on " + dev);
        Check.overlaps().in("seqAdvantages", seqAdvantages, nSeqs, DType.F32).in("seqIds", seqIds, nTokens, seqIdType)
                .in("lossMask", lossMask, nTokens, DType.U8).in("entropy", entropy, nTokens, DType.F32)
                .in("postTool", postTool, nTokens, DType.U8).out("out", out, nTokens, DType.F32)
                .out("stats", stats, ShapingStats.LENGTH, DType.I64).check();
        if (!dev.isCuda()) checkHostTokens(seqIds, seqIdType, nSeqs, nTokens, lossMask, entropy, shaping);
        long a = addr(seqAdvantages), ids = addr(seqIds), m = addr(lossMask), h = addr(entropy), p = addr(postTool);
        long o = out.address(), st = addr(stats);
        int idType = seqIds == null ? DType.I32.code() : seqIdType.code();
        long len = seqIds == null ? seqLen : 0;
        int mode = shaping.mode().code();
        float coef = shaping.coef();
        double q = shaping.topFraction();
        int rc;
        if (dev.isCuda()) {
            rc = Kernels.onCudaDevice(dev.index(), () -> ArborCuda.arbor_cuda_token_advantages(a, nSeqs, ids, idType,
                    nTokens, len, m, h, p, mode, coef, q, o, st, cudaStream));
        } else {
            rc = ArborCpu.arbor_cpu_token_advantages(a, nSeqs, ids, idType, nTokens, len, m, h, p, mode, coef, q, o, st,
                    Kernels.threads());
        }
        Check.keepAlive(seqAdvantages, seqIds, lossMask, entropy, postTool, out, stats);
        check(rc);
    }

    /** Host memory: the first valid token with a bad sequence id or (shaping) entropy, named before the kernel runs. */
    private static void checkHostTokens(MemRef seqIds, DType idType, long nSeqs, long nTokens, MemRef lossMask,
                                        MemRef entropy, TokenShaping shaping) {
        boolean h = shaping.needsEntropy();
        if (nTokens == 0 || (seqIds == null && !h)) return;
        org.bytedeco.javacpp.BytePointer m = lossMask == null ? null : new org.bytedeco.javacpp.BytePointer(host(lossMask));
        org.bytedeco.javacpp.IntPointer i32 = seqIds != null && idType == DType.I32 ? new org.bytedeco.javacpp.IntPointer(host(seqIds)) : null;
        org.bytedeco.javacpp.LongPointer i64 = seqIds != null && idType == DType.I64 ? new org.bytedeco.javacpp.LongPointer(host(seqIds)) : null;
        org.bytedeco.javacpp.FloatPointer e = h ? new org.bytedeco.javacpp.FloatPointer(host(entropy)) : null;
        for (long t = 0; t < nTokens; t++) {
            if (m != null && m.get(t) == 0) continue;
            if (seqIds != null) {
                long id = i32 != null ? i32.get(t) : i64.get(t);
                if (id < 0 || id >= nSeqs)
                    throw new IllegalArgumentException("seqIds[" + t + "] = " + id + " is outside [0, " + nSeqs + ")");
            }
            if (e != null && !Float.isFinite(e.get(t)))
                throw new IllegalArgumentException("entropy[" + t + "] = " + e.get(t) + " is not finite");
        }
        Check.keepAlive(seqIds, lossMask, entropy);
    }

    private static org.bytedeco.javacpp.Pointer host(MemRef ref) {
        return new org.bytedeco.javacpp.Pointer() {
            {
                address = ref.address();
                capacity = ref.bytes();
                limit = ref.bytes();
            }
        };
    }

    private static void check(int rc) {
        if (rc == ArborCpu.ERR_NAN)
            throw new IllegalArgumentException("token advantages: a valid token's entropy is NaN or infinite"
                    + " (ARBOR_ERR_NAN); every valid output is NaN");
        if (rc == ArborCpu.ERR_ARG)
            throw new IllegalArgumentException("token advantages: a valid token's sequence id is outside [0, nSeqs)"
                    + " (ARBOR_ERR_ARG); that token's output is NaN");
        Kernels.check(rc, "token advantages");
    }

    // ---------------------------------------------------------------------------------------------
    // Layout helpers
    // ---------------------------------------------------------------------------------------------

    /**
     * TAO-RL's M_post flags from token roles: a token is flagged when it is an assistant token of the
     * assistant turn that directly follows a tool observation in its trajectory. Tokens of each trajectory
     * must appear in order (trajectories may be interleaved).
     *
     * @param seqIds per token, its trajectory (>= 0)
     * @param roles  per token, {@link #ROLE_OTHER}, {@link #ROLE_ASSISTANT} or {@link #ROLE_TOOL}. Label
     *               the chat-template tokens around an observation as TOOL: an OTHER token between the
     *               observation and the next assistant turn means that turn is not post-tool.
     */
    public static boolean[] postToolFlags(int[] seqIds, byte[] roles) {
        Check.notNull("seqIds", seqIds);
        if (roles == null) throw new IllegalArgumentException("roles must not be null");
        if (roles.length != seqIds.length)
            throw new IllegalArgumentException("roles.length must be " + seqIds.length + ", got " + roles.length);
        int maxId = -1;
        for (int t = 0; t < seqIds.length; t++) {
            if (seqIds[t] < 0) throw new IllegalArgumentException("seqIds[" + t + "] = " + seqIds[t] + " is negative");
            maxId = Math.max(maxId, seqIds[t]);
        }
        // per trajectory, what its previous token was: nothing/OTHER, TOOL, a post-tool or another assistant turn
        final byte none = 0, tool = 1, postTurn = 2, plainTurn = 3;
        // ids index the state directly when dense (at most one trajectory per token); sparse ids are renumbered
        java.util.HashMap<Integer, Integer> dense = maxId < seqIds.length ? null : new java.util.HashMap<>();
        if (dense != null) for (int id : seqIds) dense.putIfAbsent(id, dense.size());
        byte[] state = new byte[dense == null ? maxId + 1 : dense.size()];
        boolean[] flags = new boolean[seqIds.length];
        for (int t = 0; t < seqIds.length; t++) {
            int s = dense == null ? seqIds[t] : dense.get(seqIds[t]);
            byte r = roles[t];
            byte next;
            if (r == ROLE_TOOL) next = tool;
            else if (r == ROLE_ASSISTANT) next = (state[s] == tool || state[s] == postTurn) ? postTurn : plainTurn;
            else if (r == ROLE_OTHER) next = none;
            else throw new IllegalArgumentException("roles[" + t + "] = " + r + " is not a ROLE_* constant");
            flags[t] = next == postTurn;
            state[s] = next;
        }
        return flags;
    }

    /** Sequence ids of trajectories laid end to end: lengths (3, 2) give (0, 0, 0, 1, 1). */
    public static int[] seqIdsOf(int... lengths) {
        Check.notNull("lengths", lengths);
        long total = 0;
        for (int i = 0; i < lengths.length; i++) {
            Check.nonNegative("lengths[" + i + "]", lengths[i]);
            total += lengths[i];
        }
        if (total > Integer.MAX_VALUE - 8) throw new IllegalArgumentException("total length " + total + " exceeds a Java array");
        int[] ids = new int[(int) total];
        int t = 0;
        for (int i = 0; i < lengths.length; i++)
            for (int j = 0; j < lengths[i]; j++) ids[t++] = i;
        return ids;
    }
}
