package ai.arbor.bindings;

import org.bytedeco.javacpp.Loader;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.annotation.Cast;
import org.bytedeco.javacpp.annotation.CriticalRegion;
import org.bytedeco.javacpp.annotation.Name;
import org.bytedeco.javacpp.annotation.Platform;

/**
 * JavaCPP binding of the CPU half of Arbor's C ABI ({@code native/include/arbor/arbor.h}).
 *
 * <p>Declarations only: argument meaning, return codes and formulas are documented in the header.
 * Pointers cross as {@code long} addresses (direct buffers, JavaCPP pointers, tensor data) or, in the
 * {@link CriticalRegion} overloads, as pinned Java arrays. Nothing here validates anything — callers
 * go through {@code ai.arbor.kernels}, which checks every size before calling.
 */
@Platform(compiler = "cpp17", include = {"arbor/arbor.h", "arbor_cpu.cpp"})
public final class ArborCpu {
    static {
        Loader.load();
    }

    private ArborCpu() {}

    public static final int OK = 0, ERR_ARG = 1, ERR_LABEL = 2, ERR_CUDA = 3, ERR_UNSUPPORTED = 4, ERR_NAN = 5,
            ERR_ALLOC = 6;
    public static final int F32 = 0, BF16 = 1, F16 = 2, I32 = 3, I64 = 4, U8 = 5;

    public static native @Cast("const char*") org.bytedeco.javacpp.BytePointer arbor_cpu_isa();

    public static native void arbor_cpu_force_scalar(int force);

    public static native @Cast("const char*") org.bytedeco.javacpp.BytePointer arbor_cpu_best_isa();

    public static native int arbor_cpu_force_isa(@Cast("const char*") String name);

    // ---- the memory floor and the kernels' exp ---------------------------------------------------

    public static native int arbor_cpu_stream_read(@Cast("const float*") long src, long rows, long cols,
            @Cast("float*") long sums, int numThreads);

    public static native int arbor_cpu_stream_copy(@Cast("const float*") long src, @Cast("float*") long dst, long rows,
            long cols, int numThreads);

    public static native int arbor_cpu_exp(@Cast("const float*") float[] x, long n, float[] out, float[] dc);

    public static native int arbor_cpu_to_bf16(@Cast("const float*") float[] x, long n, @Cast("uint16_t*") short[] out);

    // ---- token stats forward -------------------------------------------------------------------

    public static native int arbor_cpu_token_stats_fwd_f32(@Cast("const float*") long logits, long rows, long vocab,
            long rowStride, long vocabLimit, @Cast("const void*") long labels, int labelDtype, float temperature,
            @Cast("const uint8_t*") long rowMask, @Cast("float*") long logprob, @Cast("float*") long entropy,
            @Cast("float*") long lse, int numThreads);

    public static native int arbor_cpu_token_stats_fwd_bf16(@Cast("const uint16_t*") long logits, long rows,
            long vocab, long rowStride, long vocabLimit, @Cast("const void*") long labels, int labelDtype,
            float temperature, @Cast("const uint8_t*") long rowMask, @Cast("float*") long logprob,
            @Cast("float*") long entropy, @Cast("float*") long lse, int numThreads);

    public static native int arbor_cpu_token_stats_fwd_f16(@Cast("const uint16_t*") long logits, long rows,
            long vocab, long rowStride, long vocabLimit, @Cast("const void*") long labels, int labelDtype,
            float temperature, @Cast("const uint8_t*") long rowMask, @Cast("float*") long logprob,
            @Cast("float*") long entropy, @Cast("float*") long lse, int numThreads);

    @CriticalRegion
    public static native int arbor_cpu_token_stats_fwd_f32(@Cast("const float*") float[] logits, long rows,
            long vocab, long rowStride, long vocabLimit, @Cast("const void*") int[] labels, int labelDtype,
            float temperature, @Cast("const uint8_t*") byte[] rowMask, float[] logprob, float[] entropy,
            float[] lse, int numThreads);

    // ---- token stats backward ------------------------------------------------------------------

    public static native int arbor_cpu_token_stats_bwd_f32(@Cast("const float*") long logits, long rows, long vocab,
            long rowStride, long vocabLimit, @Cast("const void*") long labels, int labelDtype, float temperature,
            @Cast("const uint8_t*") long rowMask, @Cast("const float*") long lse, @Cast("const float*") long entropy,
            @Cast("const float*") long gradLogprob, @Cast("const float*") long gradEntropy,
            @Cast("void*") long gradLogits, int gradDtype, long gradRowStride, int numThreads);

    public static native int arbor_cpu_token_stats_bwd_bf16(@Cast("const uint16_t*") long logits, long rows,
            long vocab, long rowStride, long vocabLimit, @Cast("const void*") long labels, int labelDtype,
            float temperature, @Cast("const uint8_t*") long rowMask, @Cast("const float*") long lse,
            @Cast("const float*") long entropy, @Cast("const float*") long gradLogprob,
            @Cast("const float*") long gradEntropy, @Cast("void*") long gradLogits, int gradDtype,
            long gradRowStride, int numThreads);

    public static native int arbor_cpu_token_stats_bwd_f16(@Cast("const uint16_t*") long logits, long rows,
            long vocab, long rowStride, long vocabLimit, @Cast("const void*") long labels, int labelDtype,
            float temperature, @Cast("const uint8_t*") long rowMask, @Cast("const float*") long lse,
            @Cast("const float*") long entropy, @Cast("const float*") long gradLogprob,
            @Cast("const float*") long gradEntropy, @Cast("void*") long gradLogits, int gradDtype,
            long gradRowStride, int numThreads);

    @CriticalRegion
    public static native int arbor_cpu_token_stats_bwd_f32(@Cast("const float*") float[] logits, long rows,
            long vocab, long rowStride, long vocabLimit, @Cast("const void*") int[] labels, int labelDtype,
            float temperature, @Cast("const uint8_t*") byte[] rowMask, @Cast("const float*") float[] lse,
            @Cast("const float*") float[] entropy, @Cast("const float*") float[] gradLogprob,
            @Cast("const float*") float[] gradEntropy, @Cast("void*") float[] gradLogits, int gradDtype,
            long gradRowStride, int numThreads);

    // ---- policy loss ---------------------------------------------------------------------

    /**
     * {@code arbor_policy_loss_config} ({@code arbor/policy_loss.h}): the hyper-parameters of one loss
     * call, a host struct read when the call is made (also by the CUDA entry points).
     */
    @Name("arbor_policy_loss_config")
    public static class PolicyLossParams extends Pointer {
        static {
            Loader.load();
        }

        public PolicyLossParams() {
            super((Pointer) null);
            allocate();
        }

        private native void allocate();

        public native int clip_mode();
        public native PolicyLossParams clip_mode(int v);
        public native float eps_low();
        public native PolicyLossParams eps_low(float v);
        public native float eps_high();
        public native PolicyLossParams eps_high(float v);
        public native float dual_clip_c();
        public native PolicyLossParams dual_clip_c(float v);
        public native float aepo_entropy_threshold();
        public native PolicyLossParams aepo_entropy_threshold(float v);
        public native int kl_type();
        public native PolicyLossParams kl_type(int v);
        public native float kl_coef();
        public native PolicyLossParams kl_coef(float v);
        public native float entropy_coef();
        public native PolicyLossParams entropy_coef(float v);
        public native float temperature();
        public native PolicyLossParams temperature(float v);
    }

    public static final int CLIP_PPO = 0, CLIP_DUAL = 1, CLIP_AEPO = 2;
    public static final int KL_NONE = 0, KL_K1 = 1, KL_K2 = 2, KL_K3 = 3;
    public static final int AGG_TOKEN_MEAN = 0, AGG_SEQ_MEAN_TOKEN_SUM = 1, AGG_SEQ_MEAN_TOKEN_MEAN = 2,
            AGG_SEQ_MEAN_TOKEN_SUM_NORM = 3;
    public static final int PL_NUM_SUMS = 9, PL_NUM_COUNTS = 4;

    public static native long arbor_policy_loss_workspace_bytes(long rows, long numSeqs);

    public static native int arbor_cpu_policy_loss_weights(@Cast("const float*") long mask,
            @Cast("const int32_t*") long seqIds, long rows, long numSeqs, int aggMode, double aggNormalizer,
            @Cast("float*") long weights, @Cast("double*") long counts, @Cast("void*") long workspace,
            long workspaceBytes, int numThreads);

    @CriticalRegion
    public static native int arbor_cpu_policy_loss_weights(@Cast("const float*") float[] mask,
            @Cast("const int32_t*") int[] seqIds, long rows, long numSeqs, int aggMode, double aggNormalizer,
            float[] weights, double[] counts, @Cast("void*") long workspace, long workspaceBytes, int numThreads);

    public static native int arbor_cpu_policy_loss(PolicyLossParams cfg, long rows, @Cast("const float*") long logprob,
            @Cast("const float*") long entropy, @Cast("const float*") long oldLogprob,
            @Cast("const float*") long advantages, @Cast("const float*") long mask, @Cast("const float*") long weights,
            @Cast("const float*") long refLogprob, @Cast("const float*") long selectEntropy,
            @Cast("float*") long gradLogprob, @Cast("float*") long gradEntropy, @Cast("double*") long sums,
            @Cast("void*") long workspace, long workspaceBytes, int numThreads);

    @CriticalRegion
    public static native int arbor_cpu_policy_loss(PolicyLossParams cfg, long rows, @Cast("const float*") float[] logprob,
            @Cast("const float*") float[] entropy, @Cast("const float*") float[] oldLogprob,
            @Cast("const float*") float[] advantages, @Cast("const float*") float[] mask,
            @Cast("const float*") float[] weights, @Cast("const float*") float[] refLogprob,
            @Cast("const float*") float[] selectEntropy, float[] gradLogprob, float[] gradEntropy, double[] sums,
            @Cast("void*") long workspace, long workspaceBytes, int numThreads);

    public static native int arbor_cpu_policy_loss_fused_f32(PolicyLossParams cfg, @Cast("const float*") long logits,
            long rows, long vocab, long rowStride, long vocabLimit, @Cast("const void*") long labels, int labelDtype,
            @Cast("const float*") long oldLogprob, @Cast("const float*") long advantages, @Cast("const float*") long mask,
            @Cast("const float*") long weights, @Cast("const float*") long refLogprob,
            @Cast("const float*") long selectEntropy, @Cast("float*") long logprobOut, @Cast("float*") long entropyOut,
            @Cast("float*") long gradLogprobOut, @Cast("float*") long gradEntropyOut, @Cast("void*") long gradLogits,
            int gradDtype, long gradRowStride, @Cast("double*") long sums, @Cast("void*") long workspace,
            long workspaceBytes, int numThreads);

    public static native int arbor_cpu_policy_loss_fused_bf16(PolicyLossParams cfg, @Cast("const uint16_t*") long logits,
            long rows, long vocab, long rowStride, long vocabLimit, @Cast("const void*") long labels, int labelDtype,
            @Cast("const float*") long oldLogprob, @Cast("const float*") long advantages, @Cast("const float*") long mask,
            @Cast("const float*") long weights, @Cast("const float*") long refLogprob,
            @Cast("const float*") long selectEntropy, @Cast("float*") long logprobOut, @Cast("float*") long entropyOut,
            @Cast("float*") long gradLogprobOut, @Cast("float*") long gradEntropyOut, @Cast("void*") long gradLogits,
            int gradDtype, long gradRowStride, @Cast("double*") long sums, @Cast("void*") long workspace,
            long workspaceBytes, int numThreads);

    public static native int arbor_cpu_policy_loss_fused_f16(PolicyLossParams cfg, @Cast("const uint16_t*") long logits,
            long rows, long vocab, long rowStride, long vocabLimit, @Cast("const void*") long labels, int labelDtype,
            @Cast("const float*") long oldLogprob, @Cast("const float*") long advantages, @Cast("const float*") long mask,
            @Cast("const float*") long weights, @Cast("const float*") long refLogprob,
            @Cast("const float*") long selectEntropy, @Cast("float*") long logprobOut, @Cast("float*") long entropyOut,
            @Cast("float*") long gradLogprobOut, @Cast("float*") long gradEntropyOut, @Cast("void*") long gradLogits,
            int gradDtype, long gradRowStride, @Cast("double*") long sums, @Cast("void*") long workspace,
            long workspaceBytes, int numThreads);

    @CriticalRegion
    public static native int arbor_cpu_policy_loss_fused_f32(PolicyLossParams cfg, @Cast("const float*") float[] logits,
            long rows, long vocab, long rowStride, long vocabLimit, @Cast("const void*") int[] labels, int labelDtype,
            @Cast("const float*") float[] oldLogprob, @Cast("const float*") float[] advantages,
            @Cast("const float*") float[] mask, @Cast("const float*") float[] weights,
            @Cast("const float*") float[] refLogprob, @Cast("const float*") float[] selectEntropy, float[] logprobOut,
            float[] entropyOut, float[] gradLogprobOut, float[] gradEntropyOut, @Cast("void*") float[] gradLogits,
            int gradDtype, long gradRowStride, double[] sums, @Cast("void*") long workspace, long workspaceBytes,
            int numThreads);

    @CriticalRegion
    public static native void arbor_ref_policy_loss(PolicyLossParams cfg, int aggMode, double aggNormalizer,
            @Cast("const double*") double[] logits, long rows, long vocab, long rowStride, long vocabLimit,
            @Cast("const int64_t*") long[] labels, @Cast("const double*") double[] oldLogprob,
            @Cast("const double*") double[] advantages, @Cast("const double*") double[] mask,
            @Cast("const double*") double[] refLogprob, @Cast("const int32_t*") int[] seqIds, long numSeqs,
            @Cast("const double*") double[] selectEntropy, double[] gradLogits, double[] sums, double[] counts);

    // ---- advantages ----------------------------------------------------------------------

    /** Token-level advantage modes and the stats length ({@code arbor/advantages.h}). */
    public static final int ADV_BROADCAST = 0, ADV_AEPO = 1, ADV_TAO = 2, ADV_NSTATS = 8;

    public static native int arbor_cpu_token_advantages(@Cast("const float*") long seqAdv, long nSeqs,
            @Cast("const void*") long seqIds, int seqIdDtype, long nTokens, long seqLen,
            @Cast("const uint8_t*") long lossMask, @Cast("const float*") long entropy,
            @Cast("const uint8_t*") long postTool, int mode, float coef, double topFraction,
            @Cast("float*") long advOut, @Cast("double*") long stats, int numThreads);

    @CriticalRegion
    public static native int arbor_cpu_token_advantages(@Cast("const float*") float[] seqAdv, long nSeqs,
            @Cast("const void*") int[] seqIds, int seqIdDtype, long nTokens, long seqLen,
            @Cast("const uint8_t*") byte[] lossMask, @Cast("const float*") float[] entropy,
            @Cast("const uint8_t*") byte[] postTool, int mode, float coef, double topFraction, float[] advOut,
            double[] stats, int numThreads);

    @CriticalRegion
    public static native int arbor_ref_token_advantages(@Cast("const double*") double[] seqAdv, long nSeqs,
            @Cast("const int64_t*") long[] seqIds, long nTokens, long seqLen, @Cast("const uint8_t*") byte[] lossMask,
            @Cast("const double*") double[] entropy, @Cast("const uint8_t*") byte[] postTool, int mode, double coef,
            double topFraction, double[] advOut, double[] stats);

    // ---- sampling ------------------------------------------------------------------------

    public static native int arbor_cpu_sample_f32(@Cast("const float*") long logits, long rows, long vocab,
            long rowStride, long vocabLimit, float temperature, @Cast("const float*") long temperatures, int topK,
            @Cast("const int32_t*") long topKs, float topP, @Cast("const float*") long topPs, float minP,
            @Cast("const float*") long minPs, @Cast("uint64_t") long seed, @Cast("const uint64_t*") long seeds,
            @Cast("const uint64_t*") long keys, @Cast("uint64_t") long step, @Cast("const uint64_t*") long steps,
            @Cast("const uint8_t*") long rowMask, @Cast("void*") long tokens, int tokenDtype,
            @Cast("float*") long logprobSampled, @Cast("float*") long logprob, @Cast("float*") long entropy,
            int numThreads);

    public static native int arbor_cpu_sample_bf16(@Cast("const uint16_t*") long logits, long rows, long vocab,
            long rowStride, long vocabLimit, float temperature, @Cast("const float*") long temperatures, int topK,
            @Cast("const int32_t*") long topKs, float topP, @Cast("const float*") long topPs, float minP,
            @Cast("const float*") long minPs, @Cast("uint64_t") long seed, @Cast("const uint64_t*") long seeds,
            @Cast("const uint64_t*") long keys, @Cast("uint64_t") long step, @Cast("const uint64_t*") long steps,
            @Cast("const uint8_t*") long rowMask, @Cast("void*") long tokens, int tokenDtype,
            @Cast("float*") long logprobSampled, @Cast("float*") long logprob, @Cast("float*") long entropy,
            int numThreads);

    public static native int arbor_cpu_sample_f16(@Cast("const uint16_t*") long logits, long rows, long vocab,
            long rowStride, long vocabLimit, float temperature, @Cast("const float*") long temperatures, int topK,
            @Cast("const int32_t*") long topKs, float topP, @Cast("const float*") long topPs, float minP,
            @Cast("const float*") long minPs, @Cast("uint64_t") long seed, @Cast("const uint64_t*") long seeds,
            @Cast("const uint64_t*") long keys, @Cast("uint64_t") long step, @Cast("const uint64_t*") long steps,
            @Cast("const uint8_t*") long rowMask, @Cast("void*") long tokens, int tokenDtype,
            @Cast("float*") long logprobSampled, @Cast("float*") long logprob, @Cast("float*") long entropy,
            int numThreads);

    @CriticalRegion
    public static native int arbor_cpu_sample_f32(@Cast("const float*") float[] logits, long rows, long vocab,
            long rowStride, long vocabLimit, float temperature, @Cast("const float*") float[] temperatures, int topK,
            @Cast("const int32_t*") int[] topKs, float topP, @Cast("const float*") float[] topPs, float minP,
            @Cast("const float*") float[] minPs, @Cast("uint64_t") long seed, @Cast("const uint64_t*") long[] seeds,
            @Cast("const uint64_t*") long[] keys, @Cast("uint64_t") long step, @Cast("const uint64_t*") long[] steps,
            @Cast("const uint8_t*") byte[] rowMask, @Cast("void*") int[] tokens, int tokenDtype,
            float[] logprobSampled, float[] logprob, float[] entropy, int numThreads);

    public static native void arbor_philox4x32_10(@Cast("const uint32_t*") int[] ctr, @Cast("const uint32_t*") int[] key,
            @Cast("uint32_t*") int[] out);

    public static native float arbor_sample_uniform(@Cast("uint64_t") long seed, @Cast("uint64_t") long key,
            @Cast("uint64_t") long step, long column);

    public static native float arbor_sample_gumbel(@Cast("uint64_t") long seed, @Cast("uint64_t") long key,
            @Cast("uint64_t") long step, long column);

    public static native double arbor_sample_draw_uniform(@Cast("uint64_t") long seed, @Cast("uint64_t") long key,
            @Cast("uint64_t") long step, int which);

    public static native void arbor_cpu_sample_noise(@Cast("uint64_t") long seed, @Cast("uint64_t") long key,
            @Cast("uint64_t") long step, long columns, float[] gumbel);

    public static native void arbor_cpu_sample_exp(@Cast("const float*") float[] d, long n, float[] out);

    public static native void arbor_cpu_sample_nucleus_paths(@Cast("int64_t*") long[] counts, int reset);

    public static native void arbor_cpu_sample_nucleus_widen(double factor);

    public static native double arbor_sample_gumbel_max_error();

    /** Scalar double-precision reference of the sampling distribution (native/src/reference.cpp). */
    @CriticalRegion
    public static native int arbor_ref_sample_probs(@Cast("const double*") double[] logits, long rows, long vocab,
            long rowStride, long vocabLimit, double temperature, @Cast("const double*") double[] temperatures,
            int topK, @Cast("const int32_t*") int[] topKs, double topP, @Cast("const double*") double[] topPs,
            double minP, @Cast("const double*") double[] minPs, @Cast("const uint8_t*") byte[] rowMask,
            double[] probs);

    // ---- fused linear + token stats + policy loss (arbor/fused_linear.h) --------------------------

    public static native long arbor_fused_linear_workspace_bytes(long rows, long vocabLimit, long rowChunk,
            long vocabChunk, int dtype);

    public static native int arbor_cpu_fused_linear_stats(@Cast("const void*") long hidden, long rows, long dim,
            long hiddenStride, @Cast("const void*") long weight, long vocab, long weightStride, long vocabLimit,
            int dtype, @Cast("const void*") long labels, int labelDtype, float temperature,
            @Cast("const uint8_t*") long rowMask, @Cast("float*") long logprob, @Cast("float*") long entropy,
            @Cast("float*") long lse, long rowChunk, long vocabChunk, @Cast("void*") long workspace,
            long workspaceBytes, @Cast("arbor_sgemm_fn") long sgemm, int numThreads);

    @CriticalRegion
    public static native int arbor_cpu_fused_linear_stats(@Cast("const void*") float[] hidden, long rows, long dim,
            long hiddenStride, @Cast("const void*") float[] weight, long vocab, long weightStride, long vocabLimit,
            int dtype, @Cast("const void*") int[] labels, int labelDtype, float temperature,
            @Cast("const uint8_t*") byte[] rowMask, float[] logprob, float[] entropy, float[] lse, long rowChunk,
            long vocabChunk, @Cast("void*") long workspace, long workspaceBytes, @Cast("arbor_sgemm_fn") long sgemm,
            int numThreads);

    public static native int arbor_cpu_fused_linear_policy_loss(PolicyLossParams cfg, @Cast("const void*") long hidden,
            long rows, long dim, long hiddenStride, @Cast("const void*") long weight, long vocab, long weightStride,
            long vocabLimit, int dtype, @Cast("const void*") long labels, int labelDtype,
            @Cast("const float*") long oldLogprob, @Cast("const float*") long advantages, @Cast("const float*") long mask,
            @Cast("const float*") long weights, @Cast("const float*") long refLogprob,
            @Cast("const float*") long selectEntropy, @Cast("float*") long logprobOut, @Cast("float*") long entropyOut,
            @Cast("float*") long gradHidden, long gradHiddenStride, @Cast("float*") long gradWeight,
            long gradWeightStride, int accumulateGradWeight, @Cast("double*") long sums, long rowChunk, long vocabChunk,
            @Cast("void*") long workspace, long workspaceBytes, @Cast("arbor_sgemm_fn") long sgemm, int numThreads);

    @CriticalRegion
    public static native int arbor_cpu_fused_linear_policy_loss(PolicyLossParams cfg,
            @Cast("const void*") float[] hidden, long rows, long dim, long hiddenStride,
            @Cast("const void*") float[] weight, long vocab, long weightStride, long vocabLimit, int dtype,
            @Cast("const void*") int[] labels, int labelDtype, @Cast("const float*") float[] oldLogprob,
            @Cast("const float*") float[] advantages, @Cast("const float*") float[] mask,
            @Cast("const float*") float[] weights, @Cast("const float*") float[] refLogprob,
            @Cast("const float*") float[] selectEntropy, float[] logprobOut, float[] entropyOut, float[] gradHidden,
            long gradHiddenStride, float[] gradWeight, long gradWeightStride, int accumulateGradWeight, double[] sums,
            long rowChunk, long vocabChunk, @Cast("void*") long workspace, long workspaceBytes,
            @Cast("arbor_sgemm_fn") long sgemm, int numThreads);

    // ---- scalar double-precision references ------------------------------------------------------

    @CriticalRegion
    public static native void arbor_ref_token_stats_fwd(@Cast("const double*") double[] logits, long rows, long vocab,
            long rowStride, long vocabLimit, @Cast("const int64_t*") long[] labels, double temperature,
            @Cast("const uint8_t*") byte[] rowMask, double[] logprob, double[] entropy, double[] lse);

    @CriticalRegion
    public static native void arbor_ref_token_stats_bwd(@Cast("const double*") double[] logits, long rows, long vocab,
            long rowStride, long vocabLimit, @Cast("const int64_t*") long[] labels, double temperature,
            @Cast("const uint8_t*") byte[] rowMask, @Cast("const double*") double[] gradLogprob,
            @Cast("const double*") double[] gradEntropy, double[] gradLogits);

    // ---- process exit ----------------------------------------------------------------------------

    public static native int arbor_exit_skip_destructors();

    // ---- half-precision conversions --------------------------------------------------------------

    public static native float arbor_bf16_to_f32(@Cast("uint16_t") short h);

    public static native @Cast("uint16_t") short arbor_f32_to_bf16(float f);

    public static native float arbor_f16_to_f32(@Cast("uint16_t") short h);

    public static native @Cast("uint16_t") short arbor_f32_to_f16(float f);
}
