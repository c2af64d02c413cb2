package ai.arbor.kernels;

import static ai.arbor.kernels.Check.addr;

import ai.arbor.bindings.ArborCpu;
import ai.arbor.bindings.ArborCuda;

/**
 * Token statistics of a policy's logits (docs/algorithms.md §1): per row, with z = logits / temperature,
 * <pre>
 *   lse      = log Σ_j e^{z_j}
 *   logprob  = z_label − lse
 *   entropy  = lse − Σ_j p_j z_j            (never p·log p, so p = 0 is exact)
 * </pre>
 * and the backward pass from per-row upstream gradients g_lp = ∂L/∂logprob and g_H = ∂L/∂entropy:
 * <pre>
 *   ∂L/∂logits_j = ( g_lp (1[j = label] − p_j) − g_H p_j (z_j − Σ_k p_k z_k) ) / temperature
 * </pre>
 *
 * <p>Three kinds of entry point: Java arrays (convenience; the arrays are pinned, not copied),
 * {@link LogitsView}/{@link MemRef} over host memory (direct buffers, JavaCPP pointers, foreign memory;
 * no copy) and over CUDA device memory (dispatched to the CUDA kernels on the given stream). Every
 * entry validates all sizes, lengths, labels and dtypes first and throws
 * {@link IllegalArgumentException} naming the bad value.
 *
 * <p>Semantics shared by all forms: masked rows give 0 and a zero gradient; a valid row whose logits
 * contain NaN or +inf, or no finite value, gives NaN; the forward reads each row once and uses O(1)
 * extra memory per thread.
 */
public final class TokenStats {
    private TokenStats() {}

    // ---------------------------------------------------------------------------------------------
    // Java arrays
    // ---------------------------------------------------------------------------------------------

    /**
     * Forward over a row-major {@code [rows, vocab]} array.
     *
     * @param logits      {@code rows * vocab} logits
     * @param labels      {@code rows} labels in [0, vocab); may be null when {@code logprobOut} is null
     * @param temperature finite, > 0
     * @param logprobOut  {@code rows} outputs, or null
     * @param entropyOut  {@code rows} outputs, or null
     */
    public static void forward(float[] logits, int rows, int vocab, int[] labels, float temperature,
                               float[] logprobOut, float[] entropyOut) {
        forward(logits, rows, vocab, vocab, labels, temperature, null, logprobOut, entropyOut, null);
    }

    /**
     * Forward with a padded vocabulary, an optional row mask and the log-sum-exp output (which
     * {@link #backward(float[], int, int, int, int[], float, boolean[], float[], float[], float[], float[], float[])}
     * can reuse).
     *
     * @param vocabLimit columns {@code >= vocabLimit} are padding
     * @param rowMask    {@code rows} flags (false = masked: outputs 0, label unread), or null
     * @param lseOut     {@code rows} outputs, or null
     */
    public static void forward(float[] logits, int rows, int vocab, int vocabLimit, int[] labels, float temperature,
                               boolean[] rowMask, float[] logprobOut, float[] entropyOut, float[] lseOut) {
        Check.nonNegative("rows", rows);
        Check.positive("vocab", vocab);
        checkVocabLimit(vocabLimit, vocab);
        Check.length("logits", logits, Check.arrayProduct("rows * vocab", rows, vocab));
        Check.finitePositive("temperature", temperature);
        if (rowMask != null) Check.length("rowMask", rowMask, rows);
        Check.lengthOrNull("logprobOut", logprobOut, rows);
        Check.lengthOrNull("entropyOut", entropyOut, rows);
        Check.lengthOrNull("lseOut", lseOut, rows);
        if (logprobOut != null) {
            Check.length("labels", labels, rows);
            Check.labels("labels", labels, rowMask, vocabLimit);
        }
        Check.notSame("logprobOut", logprobOut, "entropyOut", entropyOut);
        Check.notSame("logprobOut", logprobOut, "lseOut", lseOut);
        Check.notSame("entropyOut", entropyOut, "lseOut", lseOut);
        Check.notSame("logprobOut", logprobOut, "logits", logits);
        Check.notSame("entropyOut", entropyOut, "logits", logits);
        Check.notSame("lseOut", lseOut, "logits", logits);
        int rc = ArborCpu.arbor_cpu_token_stats_fwd_f32(logits, rows, vocab, vocab, vocabLimit,
                logprobOut != null ? labels : null, ArborCpu.I32, temperature, Check.mask(rowMask), logprobOut,
                entropyOut, lseOut, Kernels.threads());
        Kernels.check(rc, "token stats forward");
    }

    /**
     * Backward over a row-major {@code [rows, vocab]} array: writes ∂L/∂logits into
     * {@code gradLogitsOut} ({@code rows * vocab}; may be {@code logits} itself to write in place).
     *
     * @param gradLogprob {@code rows} upstream gradients ∂L/∂logprob, or null for 0 (labels unread)
     * @param gradEntropy {@code rows} upstream gradients ∂L/∂entropy, or null for 0
     */
    public static void backward(float[] logits, int rows, int vocab, int[] labels, float temperature,
                                float[] gradLogprob, float[] gradEntropy, float[] gradLogitsOut) {
        backward(logits, rows, vocab, vocab, labels, temperature, null, null, null, gradLogprob, gradEntropy, gradLogitsOut);
    }

    /**
     * Backward with a padded vocabulary, an optional row mask, and optionally the forward's saved
     * {@code lse} and {@code entropy} (both or neither; when absent they are recomputed from the row).
     */
    public static void backward(float[] logits, int rows, int vocab, int vocabLimit, int[] labels, float temperature,
                                boolean[] rowMask, float[] lse, float[] entropy, float[] gradLogprob,
                                float[] gradEntropy, float[] gradLogitsOut) {
        Check.nonNegative("rows", rows);
        Check.positive("vocab", vocab);
        checkVocabLimit(vocabLimit, vocab);
        int n = Check.arrayProduct("rows * vocab", rows, vocab);
        Check.length("logits", logits, n);
        Check.length("gradLogitsOut", gradLogitsOut, n);
        Check.finitePositive("temperature", temperature);
        if (rowMask != null) Check.length("rowMask", rowMask, rows);
        if ((lse == null) != (entropy == null))
            throw new IllegalArgumentException("lse and entropy must be given together (or both null to recompute)");
        Check.lengthOrNull("lse", lse, rows);
        Check.lengthOrNull("entropy", entropy, rows);
        Check.lengthOrNull("gradLogprob", gradLogprob, rows);
        Check.lengthOrNull("gradEntropy", gradEntropy, rows);
        if (gradLogprob != null) {
            Check.length("labels", labels, rows);
            Check.labels("labels", labels, rowMask, vocabLimit);
        }
        // in place over the logits is the documented exception (docs/kernels.md); the per-row inputs are read
        // while the gradient is written
        Check.notSame("gradLogitsOut", gradLogitsOut, "lse", lse);
        Check.notSame("gradLogitsOut", gradLogitsOut, "entropy", entropy);
        Check.notSame("gradLogitsOut", gradLogitsOut, "gradLogprob", gradLogprob);
        Check.notSame("gradLogitsOut", gradLogitsOut, "gradEntropy", gradEntropy);
        int rc = ArborCpu.arbor_cpu_token_stats_bwd_f32(logits, rows, vocab, vocab, vocabLimit,
                gradLogprob != null ? labels : null, ArborCpu.I32, temperature, Check.mask(rowMask), lse, entropy,
                gradLogprob, gradEntropy, gradLogitsOut, ArborCpu.F32, vocab, Kernels.threads());
        Kernels.check(rc, "token stats backward");
    }

    // ---------------------------------------------------------------------------------------------
    // Memory (host or CUDA), no copy
    // ---------------------------------------------------------------------------------------------

    /**
     * Forward over logits in memory. Dispatches on the logits' device: host memory to the CPU kernels
     * ({@link Kernels#threads()} threads), CUDA memory to the CUDA kernels on {@code cudaStream}
     * (asynchronous; ignored for the CPU).
     *
     * @param labels    {@code rows} labels of {@code labelType} (I32 or I64); may be null when
     *                  {@code logprob} is null. In host memory a label outside [0, vocabLimit) on a valid
     *                  row throws before the kernel runs, naming the row and value; on CUDA it gives a NaN row.
     * @param rowMask   {@code rows} bytes (0 = masked), or null
     * @param logprob   {@code rows} fp32 outputs, or null (likewise {@code entropy}, {@code lse})
     */
    public static void forward(LogitsView logits, MemRef labels, DType labelType, float temperature, MemRef rowMask,
                               MemRef logprob, MemRef entropy, MemRef lse, long cudaStream) {
        Check.notNull("logits", logits);
        Check.live("logits", logits.data());
        Check.finitePositive("temperature", temperature);
        long rows = logits.rows();
        if (logprob != null) checkLabels(labels, labelType, rows);
        Check.fitsOrNull("rowMask", rowMask, rows, DType.U8);
        Check.fitsOrNull("logprob", logprob, rows, DType.F32);
        Check.fitsOrNull("entropy", entropy, rows, DType.F32);
        Check.fitsOrNull("lse", lse, rows, DType.F32);
        Device dev = logits.device();
        Check.sameDevice(dev, new String[] {"labels", "rowMask", "logprob", "entropy", "lse"},
                logprob != null ? labels : null, rowMask, logprob, entropy, lse);
        Check.overlaps().in("logits", logits).in("labels", logprob != null ? labels : null, rows, labelType)
                .in("rowMask", rowMask, rows, DType.U8).out("logprob", logprob, rows, DType.F32)
                .out("entropy", entropy, rows, DType.F32).out("lse", lse, rows, DType.F32).check();
        if (logprob != null) Check.hostLabels("labels", labels, labelType, rows, rowMask, logits.vocabLimit());
        long lab = logprob != null ? addr(labels) : 0L;
        int lt = labelType == null ? DType.I64.code() : labelType.code();
        long x = logits.data().address(), v = logits.vocab(), s = logits.rowStride(), vl = logits.vocabLimit();
        long m = addr(rowMask), lp = addr(logprob), h = addr(entropy), l = addr(lse);
        int rc;
        if (dev.isCuda()) {
            rc = Kernels.onCudaDevice(dev.index(), () -> switch (logits.dtype()) {
                case F32 -> ArborCuda.arbor_cuda_token_stats_fwd_f32(x, rows, v, s, vl, lab, lt, temperature, m, lp, h, l, cudaStream);
                case BF16 -> ArborCuda.arbor_cuda_token_stats_fwd_bf16(x, rows, v, s, vl, lab, lt, temperature, m, lp, h, l, cudaStream);
                default -> ArborCuda.arbor_cuda_token_stats_fwd_f16(x, rows, v, s, vl, lab, lt, temperature, m, lp, h, l, cudaStream);
            });
        } else {
            int t = Kernels.threads();
            rc = switch (logits.dtype()) {
                case F32 -> ArborCpu.arbor_cpu_token_stats_fwd_f32(x, rows, v, s, vl, lab, lt, temperature, m, lp, h, l, t);
                case BF16 -> ArborCpu.arbor_cpu_token_stats_fwd_bf16(x, rows, v, s, vl, lab, lt, temperature, m, lp, h, l, t);
                default -> ArborCpu.arbor_cpu_token_stats_fwd_f16(x, rows, v, s, vl, lab, lt, temperature, m, lp, h, l, t);
            };
        }
        Check.keepAlive(logits, labels, rowMask, logprob, entropy, lse);
        Kernels.check(rc, "token stats forward");
    }

    /**
     * Backward over logits in memory: writes ∂L/∂logits into {@code gradLogits}, a
     * {@code [rows, vocab]} matrix of {@code gradType} (F32 or the logits' dtype) with row stride
     * {@code gradRowStride}. {@code gradLogits} may be the logits' own memory (same dtype and stride):
     * the gradient is then written in place. {@code lse}/{@code entropy} are the forward's saved
     * outputs (both or neither; when absent they are recomputed); {@code gradLogprob} /
     * {@code gradEntropy} may be null for 0. Device dispatch as in the forward.
     */
    public static void backward(LogitsView logits, MemRef labels, DType labelType, float temperature, MemRef rowMask,
                                MemRef lse, MemRef entropy, MemRef gradLogprob, MemRef gradEntropy,
                                MemRef gradLogits, DType gradType, long gradRowStride, long cudaStream) {
        Check.notNull("logits", logits);
        Check.live("logits", logits.data());
        Check.finitePositive("temperature", temperature);
        long rows = logits.rows();
        if (gradLogprob != null) checkLabels(labels, labelType, rows);
        if ((lse == null) != (entropy == null))
            throw new IllegalArgumentException("lse and entropy must be given together (or both null to recompute)");
        Check.fitsOrNull("rowMask", rowMask, rows, DType.U8);
        Check.fitsOrNull("lse", lse, rows, DType.F32);
        Check.fitsOrNull("entropy", entropy, rows, DType.F32);
        Check.fitsOrNull("gradLogprob", gradLogprob, rows, DType.F32);
        Check.fitsOrNull("gradEntropy", gradEntropy, rows, DType.F32);
        Check.notNull("gradType", gradType);
        if (gradType != DType.F32 && gradType != logits.dtype())
            throw new IllegalArgumentException("gradType must be F32 or the logits' dtype " + logits.dtype() + ", got " + gradType);
        if (gradRowStride < logits.vocab())
            throw new IllegalArgumentException("gradRowStride must be >= vocab (" + logits.vocab() + "), got " + gradRowStride);
        Check.fits("gradLogits", gradLogits, LogitsView.elements(rows, logits.vocab(), gradRowStride), gradType);
        if (gradLogits.address() == logits.data().address()
                && (gradType != logits.dtype() || gradRowStride != logits.rowStride()))
            throw new IllegalArgumentException("in-place gradient must have the logits' dtype and row stride");
        Device dev = logits.device();
        Check.sameDevice(dev, new String[] {"labels", "rowMask", "lse", "entropy", "gradLogprob", "gradEntropy", "gradLogits"},
                gradLogprob != null ? labels : null, rowMask, lse, entropy, gradLogprob, gradEntropy, gradLogits);
        Check.overlaps().in("logits", logits).in("labels", gradLogprob != null ? labels : null, rows, labelType)
                .in("rowMask", rowMask, rows, DType.U8).in("lse", lse, rows, DType.F32)
                .in("entropy", entropy, rows, DType.F32).in("gradLogprob", gradLogprob, rows, DType.F32)
                .in("gradEntropy", gradEntropy, rows, DType.F32)
                .outMatrix("gradLogits", gradLogits, rows, logits.vocab(), gradRowStride, gradType, "logits").check();
        if (gradLogprob != null) Check.hostLabels("labels", labels, labelType, rows, rowMask, logits.vocabLimit());
        long lab = gradLogprob != null ? addr(labels) : 0L;
        int lt = labelType == null ? DType.I64.code() : labelType.code();
        long x = logits.data().address(), v = logits.vocab(), s = logits.rowStride(), vl = logits.vocabLimit();
        long m = addr(rowMask), l = addr(lse), h = addr(entropy), glp = addr(gradLogprob), gh = addr(gradEntropy);
        long g = gradLogits.address();
        int gt = gradType.code();
        int rc;
        if (dev.isCuda()) {
            rc = Kernels.onCudaDevice(dev.index(), () -> switch (logits.dtype()) {
                case F32 -> ArborCuda.arbor_cuda_token_stats_bwd_f32(x, rows, v, s, vl, lab, lt, temperature, m, l, h, glp, gh, g, gt, gradRowStride, cudaStream);
                case BF16 -> ArborCuda.arbor_cuda_token_stats_bwd_bf16(x, rows, v, s, vl, lab, lt, temperature, m, l, h, glp, gh, g, gt, gradRowStride, cudaStream);
                default -> ArborCuda.arbor_cuda_token_stats_bwd_f16(x, rows, v, s, vl, lab, lt, temperature, m, l, h, glp, gh, g, gt, gradRowStride, cudaStream);
            });
        } else {
            int t = Kernels.threads();
            rc = switch (logits.dtype()) {
                case F32 -> ArborCpu.arbor_cpu_token_stats_bwd_f32(x, rows, v, s, vl, lab, lt, temperature, m, l, h, glp, gh, g, gt, gradRowStride, t);
                case BF16 -> ArborCpu.arbor_cpu_token_stats_bwd_bf16(x, rows, v, s, vl, lab, lt, temperature, m, l, h, glp, gh, g, gt, gradRowStride, t);
                default -> ArborCpu.arbor_cpu_token_stats_bwd_f16(x, rows, v, s, vl, lab, lt, temperature, m, l, h, glp, gh, g, gt, gradRowStride, t);
            };
        }
        Check.keepAlive(logits, labels, rowMask, lse, entropy, gradLogprob, gradEntropy, gradLogits);
        Kernels.check(rc, "token stats backward");
    }

    private static void checkVocabLimit(int vocabLimit, int vocab) {
        if (vocabLimit < 1 || vocabLimit > vocab)
            throw new IllegalArgumentException("vocabLimit must be in [1, " + vocab + "], got " + vocabLimit);
    }

    private static void checkLabels(MemRef labels, DType labelType, long rows) {
        if (labelType != DType.I32 && labelType != DType.I64)
            throw new IllegalArgumentException("labelType must be I32 or I64, got " + labelType);
        Check.fits("labels", labels, rows, labelType);
    }
}
