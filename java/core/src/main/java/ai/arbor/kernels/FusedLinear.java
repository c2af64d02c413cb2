package ai.arbor.kernels;

import static ai.arbor.kernels.Check.addr;

import ai.arbor.bindings.ArborCpu;
import ai.arbor.bindings.ArborCuda;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.javacpp.Pointer;

/**
 * The output projection fused with token statistics and the policy loss (docs/algorithms.md §1–§2;
 * the memory design of verl's and Liger's fused linear-cross-entropy kernels): from final hidden states
 * {@code h [rows, dim]} and the LM-head weight {@code W [vocab, dim]}, the policy loss of
 * {@code logits = h·Wᵀ} with {@link PolicyLoss}'s inputs, configuration and results, and
 * {@code ∂loss/∂h}, {@code ∂loss/∂W} — without ever holding the {@code [rows, vocab]} logits.
 *
 * <p>The kernels (native/include/arbor/fused_linear.h) work on tiles of {@link Chunks#rows} ×
 * {@link Chunks#vocab}: pass 1 computes each tile with one product and merges its rows' softmax
 * statistics, then the per-token loss; pass 2 recomputes each tile, overwrites it with ∂loss/∂logits
 * and accumulates {@code dh += G·W_v}, {@code dW_v += Gᵀ·h}. Extra memory:
 * {@link #workspaceBytes} — one tile plus O(rows), independent of rows·vocab; cost: four products of
 * the logits' size instead of three. With {@link Chunks#wholeVocabulary whole-vocabulary tiles} (CPU) pass 2 reuses
 * pass 1's tile, row block by row block: three products, for a tile of chunk rows × vocabulary. The loss, its
 * weights ({@link LossAgg}, global normalizers included) and its sums are those of
 * {@link PolicyLoss#forwardBackward}: equal to the unfused path (product, then the fused policy loss, then the two
 * products) to fp32 rounding.
 *
 * <p>CPU: the products are OpenBLAS's {@code cblas_sgemm} from the JavaCPP openblas preset
 * (OpenBLAS runs its own threads: {@code OPENBLAS_NUM_THREADS} or {@code openblas_set_num_threads};
 * {@link Kernels#threads()} for the per-element work); bf16 or fp16 {@code h} and {@code W} (memory entries) are
 * widened to fp32 a tile's block at a time (the fp32 call's results on the widened values, to the bit). CUDA: cuBLAS (fp32, or
 * bf16 inputs with fp32 accumulation), loaded on first use; gradients are fp32 on both.
 *
 * <p>Tied embeddings: pass {@code accumulateGradWeight = true} to add ∂loss/∂W into the embedding's
 * gradient (from the lookup) instead of overwriting it.
 */
public final class FusedLinear {
    private FusedLinear() {}

    /**
     * Tile sizes: rows × vocabulary columns of one tile (fp32, plus a bf16 copy for bf16 inputs).
     * {@link #cpu()}: 512 × 8192 (16 MiB; at T 1024, d 512, V 151936 on 2 cores 1.2× faster than 256 × 8192, and
     * within 1.4× of the unfused path's three products — the bound of the fused path's four; bench/RESULTS.md
     * "Fused linear"); {@link #cuda()}: 4096 × 16384 (256 MiB + 128 MiB for bf16).
     */
    public record Chunks(long rows, long vocab) {
        public Chunks {
            Check.positive("chunk rows", rows);
            Check.positive("chunk vocab", vocab);
            if (rows > (1 << 30) || vocab > (1 << 30) || rows * vocab > (1L << 36))
                throw new IllegalArgumentException("tile " + rows + " x " + vocab + " is too large");
        }

        public static Chunks cpu() {
            return new Chunks(512, 8192);
        }

        public static Chunks cuda() {
            return new Chunks(4096, 16384);
        }

        /**
         * Tiles of {@code rows} × the whole vocabulary ({@code vocab} ≥ the call's vocabulary limit): on the CPU
         * pass 2 then reuses the logits pass 1 left in the tile instead of computing them again — three products
         * instead of four, for {@code 4 · rows · vocab} bytes of tile (at T 1024, d 512, V 151936 on 2 cores, 256
         * rows: 148 MiB, 0.85× the time of {@link #cpu()}'s tiles; bench/RESULTS.md "Fused linear").
         */
        public static Chunks wholeVocabulary(long rows, long vocab) {
            return new Chunks(rows, vocab);
        }

        static Chunks orDefault(Chunks c, Device d) {
            return c != null ? c : d.isCuda() ? cuda() : cpu();
        }
    }

    /**
     * Hidden states and the LM-head weight in memory (one device).
     *
     * @param hidden       {@code [rows, dim]}, row stride {@code hiddenStride}
     * @param weight       {@code [vocab, dim]}, row stride {@code weightStride}; rows ≥ {@code vocabLimit}
     *                     are padding (never read; their gradient is 0)
     * @param dtype        F32 or BF16, or F16 in host memory (CPU: bf16 and fp16 are widened to fp32 a tile's block at
     *                     a time, then the fp32 products — the results of the fp32 call on the widened values; CUDA:
     *                     bf16 tensor-core products)
     */
    public record Linear(MemRef hidden, MemRef weight, DType dtype, long rows, long dim, long hiddenStride, long vocab,
                         long weightStride, long vocabLimit) {
        public Linear {
            Check.notNull("hidden", hidden);
            Check.notNull("weight", weight);
            Check.notNull("dtype", dtype);
            if (dtype != DType.F32 && dtype != DType.BF16 && dtype != DType.F16)
                throw new IllegalArgumentException("hidden/weight dtype must be F32, BF16 or (host) F16, got " + dtype);
            Check.nonNegative("rows", rows);
            Check.positive("dim", dim);
            Check.positive("vocab", vocab);
            if (dim > Integer.MAX_VALUE) throw new IllegalArgumentException("dim " + dim + " exceeds BLAS's int range");
            if (hiddenStride < dim || hiddenStride > Integer.MAX_VALUE)
                throw new IllegalArgumentException("hiddenStride must be in [dim = " + dim + ", 2^31), got " + hiddenStride);
            if (weightStride < dim || weightStride > Integer.MAX_VALUE)
                throw new IllegalArgumentException("weightStride must be in [dim = " + dim + ", 2^31), got " + weightStride);
            if (vocabLimit < 1 || vocabLimit > vocab)
                throw new IllegalArgumentException("vocabLimit must be in [1, " + vocab + "], got " + vocabLimit);
            Check.fits("hidden", hidden, LogitsView.elements(rows, dim, hiddenStride), dtype);
            Check.fits("weight", weight, LogitsView.elements(vocab, dim, weightStride), dtype);
            if (!hidden.device().equals(weight.device()))
                throw new IllegalArgumentException("weight is on " + weight.device() + " but hidden is on " + hidden.device());
            if (dtype == DType.F16 && hidden.device().isCuda())
                throw new IllegalArgumentException("F16 hidden/weight need host memory (the CUDA kernel takes F32 or BF16)");
        }

        /** Contiguous {@code h [rows, dim]} and {@code W [vocab, dim]}. */
        public static Linear of(MemRef hidden, MemRef weight, DType dtype, long rows, long dim, long vocab) {
            return new Linear(hidden, weight, dtype, rows, dim, dim, vocab, dim, vocab);
        }

        public Device device() {
            return hidden.device();
        }
    }

    /** Bytes of the kernels' scratch memory for one call ({@code rows} rows). */
    public static long workspaceBytes(long rows, long vocabLimit, Chunks chunks, DType dtype) {
        Check.notNull("chunks", chunks);
        long b = ArborCpu.arbor_fused_linear_workspace_bytes(rows, vocabLimit, chunks.rows(), chunks.vocab(),
                dtype == null ? ArborCpu.F32 : dtype.code());
        if (b < 0) throw new IllegalArgumentException("workspace for rows " + rows + ", vocabLimit " + vocabLimit + " overflows");
        return b;
    }

    // ---------------------------------------------------------------------------------------------
    // Java arrays (fp32, CPU)
    // ---------------------------------------------------------------------------------------------

    /**
     * Fused forward + backward over arrays: {@code hidden [rows, dim]} and {@code weight [vocab, dim]}
     * row-major; per-row inputs as {@link PolicyLoss#forwardBackward(PolicyLossConfig, float[], int, int,
     * int[], float[], float[], float[], float[], int[], float[])}. Writes ∂loss/∂h into {@code gradHidden}
     * ({@code rows * dim}) and ∂loss/∂W into {@code gradWeight} ({@code vocab * dim}); either may be null.
     */
    public static PolicyLossResult forwardBackward(PolicyLossConfig cfg, float[] hidden, int rows, int dim,
                                                   float[] weight, int vocab, int[] labels, float[] oldLogprob,
                                                   float[] advantages, float[] mask, float[] refLogprob, int[] seqIds,
                                                   float[] gradHidden, float[] gradWeight) {
        return forwardBackward(cfg, hidden, rows, dim, weight, vocab, vocab, labels, oldLogprob, advantages, mask,
                refLogprob, seqIds, null, gradHidden, gradWeight, false, null, null, null);
    }

    /**
     * As {@link #forwardBackward(PolicyLossConfig, float[], int, int, float[], int, int[], float[], float[],
     * float[], float[], int[], float[], float[])} with a padded vocabulary (weight rows ≥ {@code vocabLimit}
     * are never read; their gradient is 0, or left as is when accumulating), AEPO's selection entropies
     * ({@code selectEntropy}, null = from an extra statistics pass when q &lt; 1), tied embeddings
     * ({@code accumulateGradWeight}: add into {@code gradWeight}), the tile sizes (null = {@link Chunks#cpu()})
     * and optional per-row log-prob / entropy outputs.
     */
    public static PolicyLossResult forwardBackward(PolicyLossConfig cfg, float[] hidden, int rows, int dim,
                                                   float[] weight, int vocab, int vocabLimit, int[] labels,
                                                   float[] oldLogprob, float[] advantages, float[] mask,
                                                   float[] refLogprob, int[] seqIds, float[] selectEntropy,
                                                   float[] gradHidden, float[] gradWeight,
                                                   boolean accumulateGradWeight, Chunks chunks, float[] logprobOut,
                                                   float[] entropyOut) {
        Check.notNull("cfg", cfg);
        checkArrays(hidden, rows, dim, weight, vocab, vocabLimit);
        Check.lengthOrNull("gradHidden", gradHidden, (long) rows * dim);
        Check.lengthOrNull("gradWeight", gradWeight, (long) vocab * dim);
        Check.lengthOrNull("logprobOut", logprobOut, rows);
        Check.lengthOrNull("entropyOut", entropyOut, rows);
        Chunks ch = Chunks.orDefault(chunks, Device.CPU);
        float[][] outs = {gradHidden, gradWeight, logprobOut, entropyOut};
        String[] outNames = {"gradHidden", "gradWeight", "logprobOut", "entropyOut"};
        float[][] ins = {hidden, weight, oldLogprob, advantages, mask, refLogprob, selectEntropy};
        String[] inNames = {"hidden", "weight", "oldLogprob", "advantages", "mask", "refLogprob", "selectEntropy"};
        for (int i = 0; i < outs.length; i++) {
            for (int j = 0; j < ins.length; j++) Check.notSame(outNames[i], outs[i], inNames[j], ins[j]);
            for (int j = i + 1; j < outs.length; j++) Check.notSame(outNames[i], outs[i], outNames[j], outs[j]);
        }
        PolicyLoss.Prepared p = PolicyLoss.prepareRows(cfg, rows, vocabLimit, labels, oldLogprob, advantages, mask,
                refLogprob, seqIds, selectEntropy);
        float[] sel = selectEntropy;
        float thr = Float.NEGATIVE_INFINITY;
        if (cfg.selectsByEntropy()) {
            if (sel == null) {  // the extra statistics pass (entropy only: one product)
                sel = new float[rows];
                stats(hidden, rows, dim, weight, vocab, vocabLimit, null, (float) cfg.temperature(), p.rowMask(), null,
                        sel, null, ch);
            }
            thr = PolicyLoss.aepoEntropyThreshold(cfg.aepoTopEntropyFraction(), sel, mask);
        }
        double[] sums = new double[PolicyLossResult.NUM_SUMS];
        long sgemm = Blas.sgemm();
        int rc;
        try (ArborCpu.PolicyLossParams params = cfg.params(thr)) {
            rc = ArborCpu.arbor_cpu_fused_linear_policy_loss(params, hidden, rows, dim, dim, weight, vocab, dim,
                    vocabLimit, ArborCpu.F32, labels, ArborCpu.I32, oldLogprob, advantages, mask, p.weights(),
                    PolicyLoss.refLogprob(cfg, refLogprob), cfg.selectsByEntropy() ? sel : null, logprobOut, entropyOut,
                    gradHidden, dim, gradWeight, dim, accumulateGradWeight ? 1 : 0, sums, ch.rows(), ch.vocab(), 0L, 0L,
                    sgemm, Kernels.threads());
        }
        check(rc, "fused linear policy loss", rows, vocabLimit, ch);
        return PolicyLossResult.fromSums(cfg, sums, p.counts()[PolicyLossResult.C_NORMALIZER], thr);
    }

    /**
     * Token statistics of {@code logits = hidden·weightᵀ / temperature} over arrays without the logits
     * ({@link TokenStats#forward}'s outputs; any may be null; {@code labels} may be null when
     * {@code logprob} is). {@code rowMask} null = every row valid; masked rows get 0.
     */
    public static void stats(float[] hidden, int rows, int dim, float[] weight, int vocab, int vocabLimit, int[] labels,
                             float temperature, boolean[] rowMask, float[] logprob, float[] entropy, float[] lse,
                             Chunks chunks) {
        checkArrays(hidden, rows, dim, weight, vocab, vocabLimit);
        Check.finitePositive("temperature", temperature);
        Check.lengthOrNull("logprob", logprob, rows);
        Check.lengthOrNull("entropy", entropy, rows);
        Check.lengthOrNull("lse", lse, rows);
        if (rowMask != null) Check.length("rowMask", rowMask, rows);
        if (logprob != null) {
            Check.length("labels", labels, rows);
            boolean[] valid = rowMask;
            if (valid == null) {
                valid = new boolean[rows];
                java.util.Arrays.fill(valid, true);
            }
            Check.labels("labels", labels, valid, vocabLimit);
        }
        float[][] outs = {logprob, entropy, lse};
        String[] names = {"logprob", "entropy", "lse"};
        for (int i = 0; i < 3; i++) {
            Check.notSame(names[i], outs[i], "hidden", hidden);
            Check.notSame(names[i], outs[i], "weight", weight);
            for (int j = i + 1; j < 3; j++) Check.notSame(names[i], outs[i], names[j], outs[j]);
        }
        Chunks ch = Chunks.orDefault(chunks, Device.CPU);
        int rc = ArborCpu.arbor_cpu_fused_linear_stats(hidden, rows, dim, dim, weight, vocab, dim, vocabLimit,
                ArborCpu.F32, logprob != null ? labels : null, ArborCpu.I32, temperature,
                rowMask == null ? null : Check.mask(rowMask), logprob, entropy, lse, ch.rows(), ch.vocab(), 0L, 0L,
                Blas.sgemm(), Kernels.threads());
        check(rc, "fused linear token stats", rows, vocabLimit, ch);
    }

    /**
     * {@link Kernels#check}, naming the workspace when the CPU kernel could not allocate it (it allocates one tile
     * plus O(rows) itself when given none).
     */
    private static void check(int rc, String what, long rows, long vocabLimit, Chunks ch) {
        if (rc == ArborCpu.ERR_ALLOC)
            throw new OutOfMemoryError(what + ": could not allocate its " + workspaceBytes(rows, vocabLimit, ch, DType.F32)
                    + "-byte workspace (tiles of " + ch.rows() + " x " + ch.vocab()
                    + ", clamped to the call's sizes; ARBOR_ERR_ALLOC) — smaller Chunks need less");
        Kernels.check(rc, what);
    }

    private static void checkArrays(float[] hidden, int rows, int dim, float[] weight, int vocab, int vocabLimit) {
        Check.nonNegative("rows", rows);
        Check.positive("dim", dim);
        Check.positive("vocab", vocab);
        if (vocabLimit < 1 || vocabLimit > vocab)
            throw new IllegalArgumentException("vocabLimit must be in [1, " + vocab + "], got " + vocabLimit);
        Check.length("hidden", hidden, Check.arrayProduct("rows * dim", rows, dim));
        Check.length("weight", weight, Check.arrayProduct("vocab * dim", vocab, dim));
    }

    // ---------------------------------------------------------------------------------------------
    // Memory (host or CUDA), no copy
    // ---------------------------------------------------------------------------------------------

    /**
     * Fused forward + backward over memory (host: the CPU kernel; CUDA: cuBLAS on {@code cudaStream}; h and W fp32 or
     * bf16 on both, fp16 on the host). Per-row inputs as {@link PolicyLoss.Inputs} on the same device;
     * {@code gradHidden} ({@code [rows, dim]} fp32, stride {@code gradHiddenStride}) and {@code gradWeight}
     * ({@code [vocab, dim]} fp32, stride {@code gradWeightStride}) may each be null. Returns after the
     * work is done (CUDA: waits for the stream). Host inputs are scanned; on CUDA an invalid mask makes
     * the loss NaN and a bad label a NaN row (and NaN gradients), as {@link PolicyLoss} documents.
     *
     * @param rowOut optional per-row log-prob and entropy outputs ({@code gradLogprob}, {@code gradEntropy}
     *               must be null), or null
     * @param chunks tile sizes, or null for the device's default
     */
    public static PolicyLossResult forwardBackward(PolicyLossConfig cfg, Linear lin, PolicyLoss.Inputs in,
                                                   MemRef gradHidden, long gradHiddenStride, MemRef gradWeight,
                                                   long gradWeightStride, boolean accumulateGradWeight,
                                                   PolicyLoss.RowOutputs rowOut, Chunks chunks, long cudaStream) {
        Check.notNull("cfg", cfg);
        Check.notNull("lin", lin);
        Check.notNull("in", in);
        Check.live("hidden", lin.hidden());
        Check.live("weight", lin.weight());
        Device dev = lin.device();
        long rows = lin.rows(), dim = lin.dim(), vocab = lin.vocab(), vl = lin.vocabLimit();
        Chunks ch = Chunks.orDefault(chunks, dev);
        PolicyLoss.RowOutputs ro = rowOut == null ? new PolicyLoss.RowOutputs(null, null, null, null) : rowOut;
        if (ro.gradLogprob() != null || ro.gradEntropy() != null)
            throw new IllegalArgumentException("rowOut.gradLogprob / gradEntropy are not written by the fused linear loss; pass null");
        Check.fitsOrNull("rowOut.logprob", ro.logprob(), rows, DType.F32);
        Check.fitsOrNull("rowOut.entropy", ro.entropy(), rows, DType.F32);
        if (gradHidden != null) {
            if (gradHiddenStride < dim || gradHiddenStride > Integer.MAX_VALUE)
                throw new IllegalArgumentException("gradHiddenStride must be in [dim = " + dim + ", 2^31), got " + gradHiddenStride);
            Check.fits("gradHidden", gradHidden, LogitsView.elements(rows, dim, gradHiddenStride), DType.F32);
        }
        if (gradWeight != null) {
            if (gradWeightStride < dim || gradWeightStride > Integer.MAX_VALUE)
                throw new IllegalArgumentException("gradWeightStride must be in [dim = " + dim + ", 2^31), got " + gradWeightStride);
            Check.fits("gradWeight", gradWeight, LogitsView.elements(vocab, dim, gradWeightStride), DType.F32);
        }
        Check.sameDevice(dev, new String[] {"mask", "gradHidden", "gradWeight", "rowOut.logprob", "rowOut.entropy"},
                in.mask(), gradHidden, gradWeight, ro.logprob(), ro.entropy());
        long ns = cfg.agg().needsSequences() ? in.numSeqs() : 0;
        PolicyLoss.checkNumSeqs(cfg, rows, ns);
        long flBytes = workspaceBytes(rows, vl, ch, lin.dtype());
        try (PolicyLoss.Scratch ws = PolicyLoss.Scratch.of(null, rows, ns, dev);
             Owned flw = Owned.allocate(dev.isCuda() ? flBytes : 0, dev)) {
            PolicyLoss.Layout l = ws.layout;
            MemRef weights = ws.at(l.weights, 4 * rows), sums = ws.at(l.sums, 72);
            PolicyLoss.checkStageInputs(cfg, Float.NEGATIVE_INFINITY, in, rows, dev, vl, weights, sums, ws.ref);
            Check.Overlaps ov = PolicyLoss.stageOverlaps(cfg, in, rows, true, weights, sums, ws.ref);
            ov.in("hidden", lin.hidden(), LogitsView.elements(rows, dim, lin.hiddenStride()), lin.dtype())
                    .in("weight", lin.weight(), LogitsView.elements(vocab, dim, lin.weightStride()), lin.dtype())
                    .out("rowOut.logprob", ro.logprob(), rows, DType.F32).out("rowOut.entropy", ro.entropy(), rows, DType.F32);
            if (gradHidden != null) ov.outMatrix("gradHidden", gradHidden, rows, dim, gradHiddenStride, DType.F32, null);
            if (gradWeight != null) ov.outMatrix("gradWeight", gradWeight, vocab, dim, gradWeightStride, DType.F32, null);
            ov.check();
            PolicyLoss.weights(cfg, rows, in.mask(), in.seqIds(), ns, weights, ws.at(l.counts, 32), ws.ref, cudaStream);
            float thr = Float.NEGATIVE_INFINITY;
            MemRef sel = in.selectEntropy();
            if (cfg.selectsByEntropy()) {
                if (sel == null) {  // the extra statistics pass (entropy only: one product)
                    sel = ws.at(l.sel, 4 * rows);
                    stats(lin, null, null, (float) cfg.temperature(), null, null, sel, null, ch, cudaStream);
                }
                thr = PolicyLoss.aepoEntropyThreshold(cfg.aepoTopEntropyFraction(),
                        PolicyLoss.readFloats("selectEntropy", sel, rows, cudaStream),
                        PolicyLoss.readFloats("mask", in.mask(), rows, cudaStream));
            }
            long h = lin.hidden().address(), w = lin.weight().address(), hs = lin.hiddenStride(), wst = lin.weightStride();
            int dt = lin.dtype().code();
            long lab = in.labels().address();
            int lt = in.labelType().code();
            long old = in.oldLogprob().address(), adv = in.advantages().address(), m = in.mask().address();
            long wa = weights.address(), ref = cfg.klType() == KlType.NONE ? 0L : addr(in.refLogprob());
            long sa = cfg.selectsByEntropy() ? sel.address() : 0L;
            long lp = addr(ro.logprob()), en = addr(ro.entropy()), gh = addr(gradHidden), gw = addr(gradWeight);
            long su = sums.address();
            int acc = accumulateGradWeight ? 1 : 0;
            long wsa = addr(flw.ref), wsb = flw.ref == null ? 0 : flw.ref.bytes();
            long cr = ch.rows(), cv = ch.vocab();
            int rc;
            try (ArborCpu.PolicyLossParams p = cfg.params(thr)) {
                rc = dev.isCuda()
                        ? Kernels.onCudaDevice(dev.index(), () -> ArborCuda.arbor_cuda_fused_linear_policy_loss(p, h, rows,
                                dim, hs, w, vocab, wst, vl, dt, lab, lt, old, adv, m, wa, ref, sa, lp, en, gh,
                                gradHiddenStride, gw, gradWeightStride, acc, su, cr, cv, wsa, wsb, 0L, cudaStream))
                        : ArborCpu.arbor_cpu_fused_linear_policy_loss(p, h, rows, dim, hs, w, vocab, wst, vl, dt, lab, lt,
                                old, adv, m, wa, ref, sa, lp, en, gh, gradHiddenStride, gw, gradWeightStride, acc, su, cr,
                                cv, 0L, 0L, Blas.sgemm(), Kernels.threads());
            }
            Check.keepAlive(lin, in, gradHidden, gradWeight, ro);
            check(rc, "fused linear policy loss", rows, vl, ch);
            return ws.result(cfg, thr, cudaStream);
        }
    }

    /**
     * Token statistics of {@code logits = h·Wᵀ / temperature} over memory without the logits (outputs
     * fp32 {@code rows} values each, any may be null; {@code rowMask} uint8, null = all rows valid).
     * Synchronous on CUDA (the workspace is freed at the end).
     */
    public static void stats(Linear lin, MemRef labels, DType labelType, float temperature, MemRef rowMask,
                             MemRef logprob, MemRef entropy, MemRef lse, Chunks chunks, long cudaStream) {
        Check.notNull("lin", lin);
        Check.finitePositive("temperature", temperature);
        Device dev = lin.device();
        long rows = lin.rows();
        Chunks ch = Chunks.orDefault(chunks, dev);
        if (logprob != null) {
            if (labelType != DType.I32 && labelType != DType.I64)
                throw new IllegalArgumentException("labelType must be I32 or I64, got " + labelType);
            Check.fits("labels", labels, rows, labelType);
        }
        Check.fitsOrNull("rowMask", rowMask, rows, DType.U8);
        Check.fitsOrNull("logprob", logprob, rows, DType.F32);
        Check.fitsOrNull("entropy", entropy, rows, DType.F32);
        Check.fitsOrNull("lse", lse, rows, DType.F32);
        Check.sameDevice(dev, new String[] {"labels", "rowMask", "logprob", "entropy", "lse"},
                logprob != null ? labels : null, rowMask, logprob, entropy, lse);
        Check.overlaps().in("hidden", lin.hidden(), LogitsView.elements(rows, lin.dim(), lin.hiddenStride()), lin.dtype())
                .in("weight", lin.weight(), LogitsView.elements(lin.vocab(), lin.dim(), lin.weightStride()), lin.dtype())
                .in("labels", logprob != null ? labels : null, rows, logprob != null ? labelType : DType.U8)
                .in("rowMask", rowMask, rows, DType.U8).out("logprob", logprob, rows, DType.F32)
                .out("entropy", entropy, rows, DType.F32).out("lse", lse, rows, DType.F32).check();
        if (!dev.isCuda() && logprob != null) Check.hostLabels("labels", labels, labelType, rows, rowMask, lin.vocabLimit());
        long flBytes = workspaceBytes(rows, lin.vocabLimit(), ch, lin.dtype());
        try (Owned flw = Owned.allocate(dev.isCuda() ? flBytes : 0, dev)) {
            long h = lin.hidden().address(), w = lin.weight().address();
            long lab = logprob != null ? labels.address() : 0L;
            int lt = logprob != null ? labelType.code() : ArborCpu.I32;
            long rm = addr(rowMask), lp = addr(logprob), en = addr(entropy), ls = addr(lse);
            long wsa = addr(flw.ref), wsb = flw.ref == null ? 0 : flw.ref.bytes();
            int rc = dev.isCuda()
                    ? Kernels.onCudaDevice(dev.index(), () -> {
                        int r = ArborCuda.arbor_cuda_fused_linear_stats(h, rows, lin.dim(), lin.hiddenStride(), w,
                                lin.vocab(), lin.weightStride(), lin.vocabLimit(), lin.dtype().code(), lab, lt,
                                temperature, rm, lp, en, ls, ch.rows(), ch.vocab(), wsa, wsb, 0L, cudaStream);
                        return r != ArborCpu.OK ? r : ArborCuda.arbor_cuda_stream_synchronize(cudaStream);
                    })
                    : ArborCpu.arbor_cpu_fused_linear_stats(h, rows, lin.dim(), lin.hiddenStride(), w, lin.vocab(),
                            lin.weightStride(), lin.vocabLimit(), lin.dtype().code(), lab, lt, temperature, rm, lp, en,
                            ls, ch.rows(), ch.vocab(), 0L, 0L, Blas.sgemm(), Kernels.threads());
            Check.keepAlive(lin, labels, rowMask, logprob, entropy, lse);
            check(rc, "fused linear token stats", rows, lin.vocabLimit(), ch);
        }
    }

    /** Device scratch memory owned by one call (none on the host: the CPU kernel allocates its own). */
    private static final class Owned implements AutoCloseable {
        final MemRef ref;
        private final CudaBuffer buf;

        private Owned(MemRef ref, CudaBuffer buf) {
            this.ref = ref;
            this.buf = buf;
        }

        static Owned allocate(long bytes, Device dev) {
            if (bytes == 0 || !dev.isCuda()) return new Owned(null, null);
            CudaBuffer b = CudaBuffer.allocate(bytes, dev.index());
            return new Owned(b.ref(), b);
        }

        @Override
        public void close() {
            if (buf != null) buf.close();  // cudaFree waits for the device
        }
    }

    /** OpenBLAS's {@code cblas_sgemm} from the JavaCPP openblas preset, loaded once. */
    static final class Blas {
        private static volatile long sgemm;

        private Blas() {}

        static long sgemm() {
            long a = sgemm;
            if (a != 0) return a;
            synchronized (Blas.class) {
                if (sgemm == 0) {
                    try {
                        Loader.load(org.bytedeco.openblas.global.openblas_nolapack.class);
                    } catch (NoClassDefFoundError | UnsatisfiedLinkError e) {
                        throw new IllegalStateException("FusedLinear on the CPU needs the JavaCPP OpenBLAS preset on the classpath "
                                + "(org.bytedeco:openblas:0.3.31-1.5.13 and its linux-x86_64 natives; arbor-torch brings it, "
                                + "arbor-core declares it optional): " + e, e);
                    }
                    Pointer p = Loader.addressof("cblas_sgemm");
                    if (p == null || p.isNull())
                        throw new IllegalStateException("cblas_sgemm not found in the loaded OpenBLAS library");
                    sgemm = p.address();
                }
                return sgemm;
            }
        }
    }
}
