package ai.arbor.bindings;

import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.javacpp.annotation.Cast;
import org.bytedeco.javacpp.annotation.Platform;

/**
 * JavaCPP binding of the CUDA half of Arbor's C ABI ({@code cuda-kernels/arbor_cuda.h}).
 *
 * <p>Its JNI library exists only when the build ran where nvcc exists (Maven profile {@code cuda});
 * it links cudart statically, so it loads on machines without a GPU, where
 * {@link #arbor_cuda_device_count()} returns a negative value. All pointers are device addresses and
 * {@code stream} is a {@code cudaStream_t} (0 = default stream). Declarations only: callers go
 * through {@code ai.arbor.kernels}, which validates every size first.
 */
@Platform(compiler = "cpp17", include = {"arbor_cuda.h", "arbor_cuda.cu"})
public final class ArborCuda {
    static {
        Loader.load();
    }

    private ArborCuda() {}

    public static native int arbor_cuda_device_count();

    public static native @Cast("const char*") BytePointer arbor_cuda_last_error();

    public static native int arbor_cuda_get_device(int[] device);

    public static native int arbor_cuda_set_device(int device);

    public static native int arbor_cuda_malloc(@Cast("void**") long[] ptr, @Cast("size_t") long bytes);

    public static native int arbor_cuda_free(@Cast("void*") long ptr);

    public static native int arbor_cuda_memcpy_htod(@Cast("void*") long dst, @Cast("const void*") long src,
            @Cast("size_t") long bytes);

    public static native int arbor_cuda_memcpy_dtoh(@Cast("void*") long dst, @Cast("const void*") long src,
            @Cast("size_t") long bytes);

    public static native int arbor_cuda_stream_synchronize(@Cast("void*") long stream);

    // ---- token stats forward -------------------------------------------------------------------

    public static native int arbor_cuda_token_stats_fwd_f32(@Cast("const float*") long logits, long rows, long vocab,
            long rowStride, long vocabLimit, @Cast("const void*") long labels, int labelDtype, float temperature,
            @Cast("const uint8_t*") long rowMask, @Cast("float*") long logprob, @Cast("float*") long entropy,
            @Cast("float*") long lse, @Cast("void*") long stream);

    public static native int arbor_cuda_token_stats_fwd_bf16(@Cast("const uint16_t*") long logits, long rows,
            long vocab, long rowStride, long vocabLimit, @Cast("const void*") long labels, int labelDtype,
            float temperature, @Cast("const uint8_t*") long rowMask, @Cast("float*") long logprob,
            @Cast("float*") long entropy, @Cast("float*") long lse, @Cast("void*") long stream);

    public static native int arbor_cuda_token_stats_fwd_f16(@Cast("const uint16_t*") long logits, long rows,
            long vocab, long rowStride, long vocabLimit, @Cast("const void*") long labels, int labelDtype,
            float temperature, @Cast("const uint8_t*") long rowMask, @Cast("float*") long logprob,
            @Cast("float*") long entropy, @Cast("float*") long lse, @Cast("void*") long stream);

    // ---- token stats backward ------------------------------------------------------------------

    public static native int arbor_cuda_token_stats_bwd_f32(@Cast("const float*") long logits, long rows, long vocab,
            long rowStride, long vocabLimit, @Cast("const void*") long labels, int labelDtype, float temperature,
            @Cast("const uint8_t*") long rowMask, @Cast("const float*") long lse, @Cast("const float*") long entropy,
            @Cast("const float*") long gradLogprob, @Cast("const float*") long gradEntropy,
            @Cast("void*") long gradLogits, int gradDtype, long gradRowStride, @Cast("void*") long stream);

    public static native int arbor_cuda_token_stats_bwd_bf16(@Cast("const uint16_t*") long logits, long rows,
            long vocab, long rowStride, long vocabLimit, @Cast("const void*") long labels, int labelDtype,
            float temperature, @Cast("const uint8_t*") long rowMask, @Cast("const float*") long lse,
            @Cast("const float*") long entropy, @Cast("const float*") long gradLogprob,
            @Cast("const float*") long gradEntropy, @Cast("void*") long gradLogits, int gradDtype,
            long gradRowStride, @Cast("void*") long stream);

    public static native int arbor_cuda_token_stats_bwd_f16(@Cast("const uint16_t*") long logits, long rows,
            long vocab, long rowStride, long vocabLimit, @Cast("const void*") long labels, int labelDtype,
            float temperature, @Cast("const uint8_t*") long rowMask, @Cast("const float*") long lse,
            @Cast("const float*") long entropy, @Cast("const float*") long gradLogprob,
            @Cast("const float*") long gradEntropy, @Cast("void*") long gradLogits, int gradDtype,
            long gradRowStride, @Cast("void*") long stream);

    // ---- policy loss ---------------------------------------------------------------------

    public static native int arbor_cuda_policy_loss_weights(@Cast("const float*") long mask,
            @Cast("const int32_t*") long seqIds, long rows, long numSeqs, int aggMode, double aggNormalizer,
            @Cast("float*") long weights, @Cast("double*") long counts, @Cast("void*") long workspace,
            long workspaceBytes, @Cast("void*") long stream);

    public static native int arbor_cuda_policy_loss(ArborCpu.PolicyLossParams cfg, long rows,
            @Cast("const float*") long logprob, @Cast("const float*") long entropy,
            @Cast("const float*") long oldLogprob, @Cast("const float*") long advantages,
            @Cast("const float*") long mask, @Cast("const float*") long weights, @Cast("const float*") long refLogprob,
            @Cast("const float*") long selectEntropy, @Cast("float*") long gradLogprob,
            @Cast("float*") long gradEntropy, @Cast("double*") long sums, @Cast("void*") long workspace,
            long workspaceBytes, @Cast("void*") long stream);

    public static native int arbor_cuda_policy_loss_fused_f32(ArborCpu.PolicyLossParams cfg,
            @Cast("const float*") long logits, long rows, long vocab, long rowStride, long vocabLimit,
            @Cast("const void*") long labels, int labelDtype, @Cast("const float*") long oldLogprob,
            @Cast("const float*") long advantages, @Cast("const float*") long mask, @Cast("const float*") long weights,
            @Cast("const float*") long refLogprob, @Cast("const float*") long selectEntropy,
            @Cast("float*") long logprobOut, @Cast("float*") long entropyOut, @Cast("float*") long gradLogprobOut,
            @Cast("float*") long gradEntropyOut, @Cast("void*") long gradLogits, int gradDtype, long gradRowStride,
            @Cast("double*") long sums, @Cast("void*") long workspace, long workspaceBytes, @Cast("void*") long stream);

    public static native int arbor_cuda_policy_loss_fused_bf16(ArborCpu.PolicyLossParams cfg,
            @Cast("const uint16_t*") long logits, long rows, long vocab, long rowStride, long vocabLimit,
            @Cast("const void*") long labels, int labelDtype, @Cast("const float*") long oldLogprob,
            @Cast("const float*") long advantages, @Cast("const float*") long mask, @Cast("const float*") long weights,
            @Cast("const float*") long refLogprob, @Cast("const float*") long selectEntropy,
            @Cast("float*") long logprobOut, @Cast("float*") long entropyOut, @Cast("float*") long gradLogprobOut,
            @Cast("float*") long gradEntropyOut, @Cast("void*") long gradLogits, int gradDtype, long gradRowStride,
            @Cast("double*") long sums, @Cast("void*") long workspace, long workspaceBytes, @Cast("void*") long stream);

    public static native int arbor_cuda_policy_loss_fused_f16(ArborCpu.PolicyLossParams cfg,
            @Cast("const uint16_t*") long logits, long rows, long vocab, long rowStride, long vocabLimit,
            @Cast("const void*") long labels, int labelDtype, @Cast("const float*") long oldLogprob,
            @Cast("const float*") long advantages, @Cast("const float*") long mask, @Cast("const float*") long weights,
            @Cast("const float*") long refLogprob, @Cast("const float*") long selectEntropy,
            @Cast("float*") long logprobOut, @Cast("float*") long entropyOut, @Cast("float*") long gradLogprobOut,
            @Cast("float*") long gradEntropyOut, @Cast("void*") long gradLogits, int gradDtype, long gradRowStride,
            @Cast("double*") long sums, @Cast("void*") long workspace, long workspaceBytes, @Cast("void*") long stream);

    // ---- advantages ----------------------------------------------------------------------

    public static native int arbor_cuda_token_advantages(@Cast("const float*") long seqAdv, long nSeqs,
            @Cast("const void*") long seqIds, int seqIdDtype, long nTokens, long seqLen,
            @Cast("const uint8_t*") long lossMask, @Cast("const float*") long entropy,
            @Cast("const uint8_t*") long postTool, int mode, float coef, double topFraction,
            @Cast("float*") long advOut, @Cast("double*") long stats, @Cast("void*") long stream);

    // ---- sampling ------------------------------------------------------------------------

    public static native int arbor_cuda_sample_f32(@Cast("const float*") long logits, long rows, long vocab,
            long rowStride, long vocabLimit, float temperature, @Cast("const float*") long temperatures, int topK,
            @Cast("const int32_t*") long topKs, float topP, @Cast("const float*") long topPs, float minP,
            @Cast("const float*") long minPs, @Cast("uint64_t") long seed, @Cast("const uint64_t*") long seeds,
            @Cast("const uint64_t*") long keys, @Cast("uint64_t") long step, @Cast("const uint64_t*") long steps,
            @Cast("const uint8_t*") long rowMask, @Cast("void*") long tokens, int tokenDtype,
            @Cast("float*") long logprobSampled, @Cast("float*") long logprob, @Cast("float*") long entropy,
            @Cast("void*") long stream);

    public static native int arbor_cuda_sample_bf16(@Cast("const uint16_t*") long logits, long rows, long vocab,
            long rowStride, long vocabLimit, float temperature, @Cast("const float*") long temperatures, int topK,
            @Cast("const int32_t*") long topKs, float topP, @Cast("const float*") long topPs, float minP,
            @Cast("const float*") long minPs, @Cast("uint64_t") long seed, @Cast("const uint64_t*") long seeds,
            @Cast("const uint64_t*") long keys, @Cast("uint64_t") long step, @Cast("const uint64_t*") long steps,
            @Cast("const uint8_t*") long rowMask, @Cast("void*") long tokens, int tokenDtype,
            @Cast("float*") long logprobSampled, @Cast("float*") long logprob, @Cast("float*") long entropy,
            @Cast("void*") long stream);

    public static native int arbor_cuda_sample_f16(@Cast("const uint16_t*") long logits, long rows, long vocab,
            long rowStride, long vocabLimit, float temperature, @Cast("const float*") long temperatures, int topK,
            @Cast("const int32_t*") long topKs, float topP, @Cast("const float*") long topPs, float minP,
            @Cast("const float*") long minPs, @Cast("uint64_t") long seed, @Cast("const uint64_t*") long seeds,
            @Cast("const uint64_t*") long keys, @Cast("uint64_t") long step, @Cast("const uint64_t*") long steps,
            @Cast("const uint8_t*") long rowMask, @Cast("void*") long tokens, int tokenDtype,
            @Cast("float*") long logprobSampled, @Cast("float*") long logprob, @Cast("float*") long entropy,
            @Cast("void*") long stream);

    // ---- fused linear + token stats + policy loss (arbor/fused_linear.h; cuBLAS) -----------------

    public static native int arbor_cuda_fused_linear_stats(@Cast("const void*") long hidden, long rows, long dim,
            long hiddenStride, @Cast("const void*") long weight, long vocab, long weightStride, long vocabLimit,
            int dtype, @Cast("const void*") long labels, int labelDtype, float temperature,
            @Cast("const uint8_t*") long rowMask, @Cast("float*") long logprob, @Cast("float*") long entropy,
            @Cast("float*") long lse, long rowChunk, long vocabChunk, @Cast("void*") long workspace,
            long workspaceBytes, @Cast("arbor_sgemm_fn") long sgemm, @Cast("void*") long stream);

    public static native int arbor_cuda_fused_linear_policy_loss(ArborCpu.PolicyLossParams cfg,
            @Cast("const void*") long hidden, long rows, long dim, long hiddenStride, @Cast("const void*") long weight,
            long vocab, long weightStride, long vocabLimit, int dtype, @Cast("const void*") long labels,
            int labelDtype, @Cast("const float*") long oldLogprob, @Cast("const float*") long advantages,
            @Cast("const float*") long mask, @Cast("const float*") long weights, @Cast("const float*") long refLogprob,
            @Cast("const float*") long selectEntropy, @Cast("float*") long logprobOut, @Cast("float*") long entropyOut,
            @Cast("float*") long gradHidden, long gradHiddenStride, @Cast("float*") long gradWeight,
            long gradWeightStride, int accumulateGradWeight, @Cast("double*") long sums, long rowChunk, long vocabChunk,
            @Cast("void*") long workspace, long workspaceBytes, @Cast("arbor_sgemm_fn") long sgemm,
            @Cast("void*") long stream);
}
