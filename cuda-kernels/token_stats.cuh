// CUDA token statistics (docs/algorithms.md §1), same ABI as native/src/token_stats.cpp.
//
// v1 (this file): one block per row, grid-stride over rows. Each thread keeps an online softmax
// state over 16-byte vectors of the row (one rescale per vector), the block merges the states
// (warp shuffles, then shared memory). Forward reads the row once; backward reads it once more and
// writes the gradient with the same vector width, computing the label column inline, so in-place
// writing is safe (every element is read and written by the same thread).
#ifndef ARBOR_CUDA_TOKEN_STATS_CUH
#define ARBOR_CUDA_TOKEN_STATS_CUH

#include "checks.h"
#include "common.cuh"

namespace arbor_cuda {

// __launch_bounds__: without it ptxas may use > 128 registers per thread, and a 512-thread launch fails.
template <class E>
__global__ void __launch_bounds__(ARBOR_ROW_MAX_THREADS)
token_stats_fwd_kernel(const typename E::T* __restrict__ logits, int64_t rows, int64_t row_stride,
                       int64_t vocab_limit, const void* __restrict__ labels, int label_dtype,
                       float inv_t, const uint8_t* __restrict__ row_mask, float* __restrict__ logprob,
                       float* __restrict__ entropy, float* __restrict__ lse, bool vec_ok) {
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        if (row_mask != nullptr && !row_mask[r]) {
            if (threadIdx.x == 0) {
                if (logprob) logprob[r] = 0.0f;
                if (entropy) entropy[r] = 0.0f;
                if (lse) lse[r] = 0.0f;
            }
            continue;
        }
        const typename E::T* row = logits + r * row_stride;
        bool nan;
        const SoftmaxState st = block_row_stats<E>(row, vocab_limit, inv_t, vec_ok, nan);
        if (threadIdx.x == 0) {
            const bool ok = !nan && st.m != -INFINITY && st.m != INFINITY;
            const float log_s = logf(st.s);
            if (lse) lse[r] = ok ? st.m + log_s : NAN;
            if (entropy) entropy[r] = ok ? log_s - st.u / st.s : NAN;
            if (logprob) {
                const int64_t y = read_label(labels, label_dtype, r);
                logprob[r] = (ok && y >= 0 && y < vocab_limit) ? (__fmul_rn(E::to_f32(row[y]), inv_t) - st.m) - log_s : NAN;
            }
        }
    }
}

// g_j = p_j (a + b d_j), d_j = z_j - lse, a = -(g_lp + g_H H)/T, b = -g_H/T; label column
// g_y = (g_lp (1 - p_y) - g_H p_y (d_y + H)) / T, 1 - p_y as -expm1(d_y) (a confident token's keeps its relative
// precision; the CPU kernels' finish_grad_row does the same). Where the caller has the statistics themselves (the
// fused policy loss, the fused linear kernels) the label's d_y = (z_y - lse) - lse_lo, lse_lo what the fp32 lse lost
// (finish_grad_row's); 0 elsewhere, which leaves every result as it was (d - 0 = d).
__device__ __forceinline__ float grad_elem(float z, float lse, float H, float a, float b, float g_lp, float g_h,
                                           float inv_t, bool is_label, float lse_lo = 0.0f) {
    const float d = z - lse, dc = fmaxf(d, ARBOR_EXP_LO);
    const float p = d >= ARBOR_EXP_LO ? __expf(dc) : 0.0f;
    if (!is_label) return p * fmaf(b, dc, a);
    const float dy = d - lse_lo, dyc = fmaxf(dy, ARBOR_EXP_LO);
    const float q = dy >= ARBOR_EXP_LO ? -expm1f(dy) : 1.0f;  // 1 - p
    return (g_lp * q - g_h * p * (dyc + H)) * inv_t;
}

template <class E, class O>
__global__ void __launch_bounds__(ARBOR_ROW_MAX_THREADS)
token_stats_bwd_kernel(const typename E::T* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                       int64_t vocab_limit, const void* __restrict__ labels, int label_dtype,
                       float inv_t, const uint8_t* __restrict__ row_mask,
                       const float* __restrict__ lse_in, const float* __restrict__ ent_in,
                       const float* __restrict__ grad_logprob, const float* __restrict__ grad_entropy,
                       typename O::T* grad, int64_t grad_row_stride, bool vec_ok) {
    constexpr int VEC = E::VEC;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        typename O::T* out = grad + r * grad_row_stride;
        const typename E::T* row = logits + r * row_stride;
        bool dead = row_mask != nullptr && !row_mask[r];
        float fill = 0.0f;
        float lse = 0.0f, H = 0.0f;
        int64_t y = -1;
        const float g_lp = grad_logprob ? grad_logprob[r] : 0.0f;
        const float g_h = grad_entropy ? grad_entropy[r] : 0.0f;
        if (!dead) {
            if (grad_logprob) {
                y = read_label(labels, label_dtype, r);
                if (y < 0 || y >= vocab_limit) { dead = true; fill = NAN; }
            }
        }
        if (!dead) {
            if (lse_in != nullptr && ent_in != nullptr) {
                lse = lse_in[r];
                H = ent_in[r];
            } else {
                bool nan;
                const SoftmaxState st = block_row_stats<E>(row, vocab_limit, inv_t, vec_ok, nan);
                const float log_s = logf(st.s);
                lse = st.m + log_s;
                H = log_s - st.u / st.s;
                if (nan) lse = NAN;
            }
            if (!(isfinite(lse) && isfinite(H))) { dead = true; fill = NAN; }
        }
        if (dead) {
            const typename O::T v = O::from_f32(fill);
            for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) out[j] = v;
            continue;
        }
        const float a = -(g_lp + g_h * H) * inv_t, b = -g_h * inv_t;
        const int64_t nvec = vec_ok ? vocab_limit / VEC : 0;
        for (int64_t i = threadIdx.x; i < nvec; i += blockDim.x) {
            float x[VEC];
            load_vec<E, VEC>(row + i * VEC, x);
#pragma unroll
            for (int k = 0; k < VEC; ++k)
                x[k] = grad_elem(__fmul_rn(x[k], inv_t), lse, H, a, b, g_lp, g_h, inv_t, i * VEC + k == y);
            store_vec<O, VEC>(out + i * VEC, x);
        }
        for (int64_t j = nvec * VEC + threadIdx.x; j < vocab_limit; j += blockDim.x)
            out[j] = O::from_f32(grad_elem(__fmul_rn(E::to_f32(row[j]), inv_t), lse, H, a, b, g_lp, g_h, inv_t, j == y));
        for (int64_t j = vocab_limit + threadIdx.x; j < vocab; j += blockDim.x) out[j] = O::from_f32(0.0f);
    }
}

template <class E>
static int token_stats_fwd(const typename E::T* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                           int64_t vocab_limit, const void* labels, int label_dtype, float temperature,
                           const uint8_t* row_mask, float* logprob, float* entropy, float* lse, void* stream) {
    if (arbor::bad_matrix(logits, rows, vocab, row_stride, vocab_limit, temperature)) return ARBOR_ERR_ARG;
    if (logprob != nullptr && arbor::bad_labels(labels, label_dtype, rows)) return ARBOR_ERR_ARG;
    if (rows == 0) return ARBOR_OK;
    const bool vec_ok = aligned16(logits, row_stride * (int64_t)sizeof(typename E::T));
    token_stats_fwd_kernel<E><<<row_grid(rows), row_block_threads(vocab_limit), 0, (cudaStream_t)stream>>>(
        logits, rows, row_stride, vocab_limit, labels, label_dtype, 1.0f / temperature, row_mask, logprob, entropy,
        lse, vec_ok);
    return record_cuda_error(cudaGetLastError());
}

template <class E>
static int token_stats_bwd(const typename E::T* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                           int64_t vocab_limit, const void* labels, int label_dtype, float temperature,
                           const uint8_t* row_mask, const float* lse, const float* entropy, const float* grad_logprob,
                           const float* grad_entropy, void* grad_logits, int grad_dtype, int64_t grad_row_stride,
                           void* stream, int own_dtype) {
    if (arbor::bad_matrix(logits, rows, vocab, row_stride, vocab_limit, temperature)) return ARBOR_ERR_ARG;
    if (grad_logprob != nullptr && arbor::bad_labels(labels, label_dtype, rows)) return ARBOR_ERR_ARG;
    if (arbor::bad_grad(logits, row_stride, own_dtype, grad_logits, grad_dtype, rows, vocab, grad_row_stride))
        return ARBOR_ERR_ARG;
    if (rows == 0) return ARBOR_OK;
    const int osize = grad_dtype == ARBOR_F32 ? 4 : 2;
    const bool vec_ok = aligned16(logits, row_stride * (int64_t)sizeof(typename E::T)) &&
                        aligned16(grad_logits, grad_row_stride * osize);
    const dim3 grid(row_grid(rows)), block(row_block_threads(vocab_limit));
    cudaStream_t s = (cudaStream_t)stream;
    const float inv_t = 1.0f / temperature;
    if (grad_dtype == ARBOR_F32)
        token_stats_bwd_kernel<E, F32><<<grid, block, 0, s>>>(logits, rows, vocab, row_stride, vocab_limit, labels,
                                                              label_dtype, inv_t, row_mask, lse, entropy, grad_logprob,
                                                              grad_entropy, (float*)grad_logits, grad_row_stride, vec_ok);
    else
        token_stats_bwd_kernel<E, E><<<grid, block, 0, s>>>(logits, rows, vocab, row_stride, vocab_limit, labels,
                                                            label_dtype, inv_t, row_mask, lse, entropy, grad_logprob,
                                                            grad_entropy, (typename E::T*)grad_logits, grad_row_stride,
                                                            vec_ok);
    return record_cuda_error(cudaGetLastError());
}

}  // namespace arbor_cuda

#define ARBOR_CUDA_FWD(NAME, E, CTYPE)                                                                          \
    extern "C" int NAME(const CTYPE* logits, int64_t rows, int64_t vocab, int64_t row_stride, int64_t vocab_limit, \
                        const void* labels, int label_dtype, float temperature, const uint8_t* row_mask,          \
                        float* logprob, float* entropy, float* lse, void* stream) {                             \
        return arbor_cuda::token_stats_fwd<arbor_cuda::E>(logits, rows, vocab, row_stride, vocab_limit, labels,  \
                                                          label_dtype, temperature, row_mask, logprob, entropy,  \
                                                          lse, stream);                                          \
    }
ARBOR_CUDA_FWD(arbor_cuda_token_stats_fwd_f32, F32, float)
ARBOR_CUDA_FWD(arbor_cuda_token_stats_fwd_bf16, BF16, uint16_t)
ARBOR_CUDA_FWD(arbor_cuda_token_stats_fwd_f16, F16, uint16_t)

#define ARBOR_CUDA_BWD(NAME, E, CTYPE, OWN)                                                                     \
    extern "C" int NAME(const CTYPE* logits, int64_t rows, int64_t vocab, int64_t row_stride, int64_t vocab_limit, \
                        const void* labels, int label_dtype, float temperature, const uint8_t* row_mask,          \
                        const float* lse, const float* entropy, const float* grad_logprob,                       \
                        const float* grad_entropy, void* grad_logits, int grad_dtype, int64_t grad_row_stride,    \
                        void* stream) {                                                                          \
        return arbor_cuda::token_stats_bwd<arbor_cuda::E>(logits, rows, vocab, row_stride, vocab_limit, labels,  \
                                                          label_dtype, temperature, row_mask, lse, entropy,      \
                                                          grad_logprob, grad_entropy, grad_logits, grad_dtype,   \
                                                          grad_row_stride, stream, OWN);                         \
    }
ARBOR_CUDA_BWD(arbor_cuda_token_stats_bwd_f32, F32, float, ARBOR_F32)
ARBOR_CUDA_BWD(arbor_cuda_token_stats_bwd_bf16, BF16, uint16_t, ARBOR_BF16)
ARBOR_CUDA_BWD(arbor_cuda_token_stats_bwd_f16, F16, uint16_t, ARBOR_F16)

#endif
