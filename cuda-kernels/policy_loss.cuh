// Clipped policy-gradient losses (docs/algorithms.md §2) — CUDA kernels, same ABI as
// native/src/policy_loss.cpp (definitions: native/include/arbor/policy_loss.h). The per-token math and
// the workspace layout are shared with the CPU (native/src/policy_loss_token.h); the per-row
// statistics and gradient are the token-stats kernels' (block_row_stats, grad_elem).
//
// v1 (this file):
//  - weights: three tiny launches over T — per-row integer atomics into 32.32 fixed-point sequence
//    sums (integer addition is associative, so the result is independent of scheduling), one block
//    for the counts and the normalizer, then w_t per row.
//  - loss (composable): one thread per row; fused: one block per row (grid-stride) that computes the
//    row's statistics like token_stats_fwd, runs the per-token loss on every thread (identical
//    values, no broadcast needed), then writes dL/dlogits like token_stats_bwd, re-reading the row
//    (mostly from L2). Every element is read and written by the same thread after a block barrier,
//    and the label logit is staged in shared memory before any write, so in-place writing is safe.
//  - both write per-row partial sums into the workspace; one block then reduces them in a fixed
//    order (strided per-thread sums, fixed shuffle tree) in double: bitwise reproducible.
#ifndef ARBOR_CUDA_POLICY_LOSS_CUH
#define ARBOR_CUDA_POLICY_LOSS_CUH

#include "checks.h"
#include "common.cuh"
#include "policy_loss_token.h"
#include "token_stats.cuh"

namespace arbor_cuda {

// ---- weights -------------------------------------------------------------------------------------

__global__ void pl_seq_accum_kernel(const float* __restrict__ mask, const int32_t* __restrict__ seq_ids, int64_t rows,
                                    int64_t ns, arbor_pl::Workspace ws) {
    unsigned long long local = 0;
    unsigned int bad = 0;
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows; r += (int64_t)gridDim.x * blockDim.x) {
        const float m = mask[r];
        if (!arbor_pl::mask_ok(m)) {
            bad = 1;
            continue;
        }
        const unsigned long long f = arbor_pl::to_fixed(m);
        local += f;
        if (ns == 0) continue;
        const int32_t id = seq_ids[r];
        if (id < 0 || id >= ns) {
            if (m > 0.0f || id >= ns) bad = 1;
            continue;
        }
        atomicAdd(&ws.seq_sum[id], f);
        atomicAdd(&ws.seq_rows[id], 1u);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        local += __shfl_down_sync(0xffffffffu, local, off);
        bad |= __shfl_down_sync(0xffffffffu, bad, off);
    }
    if ((threadIdx.x & 31) == 0) {
        if (local) atomicAdd(ws.total, local);
        if (bad) atomicOr(ws.flag, 1u);
    }
}

__global__ void __launch_bounds__(1024)
pl_seq_finish_kernel(arbor_pl::Workspace ws, int64_t ns, int agg_mode, double given,
                     double* __restrict__ counts) {
    __shared__ unsigned long long sh_seqs[32];
    __shared__ unsigned int sh_max[32];
    unsigned long long seqs = 0;
    unsigned int max_rows = 0;
    for (int64_t s = threadIdx.x; s < ns; s += blockDim.x) {
        seqs += ws.seq_sum[s] > 0 ? 1 : 0;
        max_rows = max(max_rows, ws.seq_rows[s]);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        seqs += __shfl_down_sync(0xffffffffu, seqs, off);
        max_rows = max(max_rows, __shfl_down_sync(0xffffffffu, max_rows, off));
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    if (lane == 0) {
        sh_seqs[warp] = seqs;
        sh_max[warp] = max_rows;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int i = 1; i < nwarps; ++i) {
            seqs += sh_seqs[i];
            max_rows = max(max_rows, sh_max[i]);
        }
        const double tokens = arbor_pl::from_fixed(*ws.total);
        double norm = arbor_pl::normalizer(agg_mode, given, tokens, (double)seqs, (double)max_rows);
        double c[ARBOR_PL_NUM_COUNTS] = {tokens, (double)seqs, (double)max_rows, norm};
        if (*ws.flag) {  // invalid mask value or sequence id: poison everything (asynchronous API)
            for (int k = 0; k < ARBOR_PL_NUM_COUNTS; ++k) c[k] = NAN;
            norm = NAN;
        }
        *ws.norm = norm;
        for (int k = 0; k < ARBOR_PL_NUM_COUNTS; ++k) counts[k] = c[k];
    }
}

__global__ void pl_weights_kernel(const float* __restrict__ mask, const int32_t* __restrict__ seq_ids, int64_t rows,
                                  int64_t ns, int agg_mode, arbor_pl::Workspace ws, float* __restrict__ weights) {
    const double norm = *ws.norm;
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows; r += (int64_t)gridDim.x * blockDim.x) {
        const int32_t id = ns > 0 ? seq_ids[r] : -1;
        const unsigned long long sf = (id >= 0 && id < ns) ? ws.seq_sum[id] : 0ull;
        weights[r] = isnan(norm) ? NAN : arbor_pl::weight(agg_mode, mask[r], norm, sf);
    }
}

static inline unsigned small_grid(int64_t n, int threads) {
    const int64_t b = (n + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

static int pl_weights(const float* mask, const int32_t* seq_ids, int64_t rows, int64_t num_seqs, int agg_mode,
                      double agg_normalizer, float* weights, double* counts, void* workspace, int64_t workspace_bytes,
                      void* stream) {
    if (rows < 0 || num_seqs < 0 || counts == nullptr) return ARBOR_ERR_ARG;
    if (agg_mode < ARBOR_AGG_TOKEN_MEAN || agg_mode > ARBOR_AGG_SEQ_MEAN_TOKEN_SUM_NORM) return ARBOR_ERR_ARG;
    if (isnan(agg_normalizer) || isinf(agg_normalizer)) return ARBOR_ERR_ARG;
    if (rows > 0 && (mask == nullptr || weights == nullptr)) return ARBOR_ERR_ARG;
    if (agg_mode != ARBOR_AGG_TOKEN_MEAN && rows > 0 && (seq_ids == nullptr || num_seqs < 1)) return ARBOR_ERR_ARG;
    const int64_t ns = seq_ids != nullptr ? num_seqs : 0;
    const int64_t need = arbor_pl::workspace_bytes(rows, ns);
    if (need < 0 || workspace == nullptr || workspace_bytes < need || (uintptr_t)workspace % 8 != 0) return ARBOR_ERR_ARG;
    cudaStream_t s = (cudaStream_t)stream;
    const arbor_pl::Workspace ws = arbor_pl::carve(workspace, rows, ns);
    cudaError_t err = cudaMemsetAsync(ws.total, 0, 64 + 12 * ns, s);
    if (err != cudaSuccess) return record_cuda_error(err);
    if (rows > 0) pl_seq_accum_kernel<<<small_grid(rows, 256), 256, 0, s>>>(mask, seq_ids, rows, ns, ws);
    pl_seq_finish_kernel<<<1, 1024, 0, s>>>(ws, ns, agg_mode, agg_normalizer, counts);
    if (rows > 0) pl_weights_kernel<<<small_grid(rows, 256), 256, 0, s>>>(mask, seq_ids, rows, ns, agg_mode, ws, weights);
    return record_cuda_error(cudaGetLastError());
}

// ---- loss ----------------------------------------------------------------------------------------

__device__ __forceinline__ void pl_store_parts(float* parts, int64_t rows, int64_t r, const arbor_pl::Token& t) {
#pragma unroll
    for (int k = 0; k < ARBOR_PL_NUM_SUMS; ++k) parts[k * rows + r] = t.part[k];
}

// One block: sums[k] = Σ_r parts[k * rows + r] in double, in an order fixed by (rows, blockDim).
__global__ void __launch_bounds__(1024)
pl_reduce_kernel(const float* __restrict__ parts, int64_t rows, double* __restrict__ sums) {
    __shared__ double sh[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    for (int k = 0; k < ARBOR_PL_NUM_SUMS; ++k) {
        const float* p = parts + k * rows;
        double s = 0.0;
        for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) s += (double)p[r];
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
        if (lane == 0) sh[warp] = s;
        __syncthreads();
        if (warp == 0) {
            s = lane < nwarps ? sh[lane] : 0.0;
#pragma unroll
            for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
            if (lane == 0) sums[k] = s;
        }
        __syncthreads();
    }
}

__global__ void pl_rows_kernel(arbor_policy_loss_config c, int64_t rows, const float* __restrict__ logprob,
                               const float* __restrict__ entropy, const float* __restrict__ old_logprob,
                               const float* __restrict__ advantages, const float* __restrict__ mask,
                               const float* __restrict__ weights, const float* __restrict__ ref_logprob,
                               const float* __restrict__ select_entropy, float* __restrict__ grad_logprob,
                               float* __restrict__ grad_entropy, float* __restrict__ parts) {
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows; r += (int64_t)gridDim.x * blockDim.x) {
        const float m = mask[r];
        arbor_pl::Token t;
        if (!(m > 0.0f)) {
            t.g_lp = t.g_h = 0.0f;
#pragma unroll
            for (int k = 0; k < ARBOR_PL_NUM_SUMS; ++k) t.part[k] = 0.0f;
        } else {
            const float h = entropy ? entropy[r] : NAN;
            arbor_pl::token_loss(c, logprob[r], h, old_logprob[r], advantages[r], m, weights[r],
                                 ref_logprob ? ref_logprob[r] : 0.0f, select_entropy ? select_entropy[r] : h, t);
        }
        if (grad_logprob) grad_logprob[r] = t.g_lp;
        if (grad_entropy) grad_entropy[r] = t.g_h;
        pl_store_parts(parts, rows, r, t);
    }
}

template <class E, class O>
__global__ void __launch_bounds__(ARBOR_ROW_MAX_THREADS)
pl_fused_kernel(arbor_policy_loss_config c, const typename E::T* logits, int64_t rows, int64_t vocab,
                int64_t row_stride, int64_t vocab_limit, const void* __restrict__ labels, int label_dtype,
                const float* __restrict__ old_logprob, const float* __restrict__ advantages,
                const float* __restrict__ mask, const float* __restrict__ weights,
                const float* __restrict__ ref_logprob, const float* __restrict__ select_entropy,
                float* __restrict__ logprob_out, float* __restrict__ entropy_out,
                float* __restrict__ grad_logprob_out, float* __restrict__ grad_entropy_out,
                typename O::T* grad, int64_t grad_row_stride, float* __restrict__ parts, bool vec_ok) {
    constexpr int VEC = E::VEC;
    __shared__ float s_zy;
    const float inv_t = 1.0f / c.temperature;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        typename O::T* out = grad + r * grad_row_stride;
        const typename E::T* row = logits + r * row_stride;
        const float m = mask[r];
        if (!(m > 0.0f)) {  // masked: not read, zero gradient
            const typename O::T zero = O::from_f32(0.0f);
            for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) out[j] = zero;
            if (threadIdx.x == 0) {
                if (logprob_out) logprob_out[r] = 0.0f;
                if (entropy_out) entropy_out[r] = 0.0f;
                if (grad_logprob_out) grad_logprob_out[r] = 0.0f;
                if (grad_entropy_out) grad_entropy_out[r] = 0.0f;
                for (int k = 0; k < ARBOR_PL_NUM_SUMS; ++k) parts[k * rows + r] = 0.0f;
            }
            continue;
        }
        const int64_t y = read_label(labels, label_dtype, r);
        float lse = NAN, H = NAN, lp = NAN, lse_lo = 0.0f;
        arbor_pl::Token t;
        if (y < 0 || y >= vocab_limit) {
            arbor_pl::token_nan(t);
        } else {
            // Statistics exactly as token_stats_fwd_kernel computes them.
            bool nan;
            const SoftmaxState st = block_row_stats<E>(row, vocab_limit, inv_t, vec_ok, nan);
            if (threadIdx.x == 0) s_zy = __fmul_rn(E::to_f32(row[y]), inv_t);
            __syncthreads();  // the label logit is read before any thread writes the gradient
            const bool ok = !nan && st.m != -INFINITY && st.m != INFINITY;
            const float log_s = logf(st.s);
            if (ok) {
                lse = st.m + log_s;
                lse_lo = (float)(((double)st.m + (double)log_s) - (double)lse);  // what the fp32 lse lost (as the CPU)
                H = log_s - st.u / st.s;
                lp = (s_zy - st.m) - log_s;
            }
            arbor_pl::token_loss(c, lp, H, old_logprob[r], advantages[r], m, weights[r],
                                 ref_logprob ? ref_logprob[r] : 0.0f, select_entropy ? select_entropy[r] : H, t);
        }
        if (threadIdx.x == 0) {
            if (logprob_out) logprob_out[r] = lp;
            if (entropy_out) entropy_out[r] = H;
            if (grad_logprob_out) grad_logprob_out[r] = t.g_lp;
            if (grad_entropy_out) grad_entropy_out[r] = t.g_h;
            pl_store_parts(parts, rows, r, t);
        }
        if (!(isfinite(lse) && isfinite(H))) {  // no distribution or bad label: NaN row
            const typename O::T v = O::from_f32(NAN);
            for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) out[j] = v;
            continue;
        }
        // Gradient exactly as token_stats_bwd_kernel writes it, but the label column's d_y against lse + lse_lo
        // (as the CPU fused kernel's; token_stats_bwd has no statistics, so lse_lo = 0 there).
        const float g_lp = t.g_lp, g_h = t.g_h;
        const float a = -(g_lp + g_h * H) * inv_t, b = -g_h * inv_t;
        const int64_t nvec = vec_ok ? vocab_limit / VEC : 0;
        for (int64_t i = threadIdx.x; i < nvec; i += blockDim.x) {
            float x[VEC];
            load_vec<E, VEC>(row + i * VEC, x);
#pragma unroll
            for (int k = 0; k < VEC; ++k)
                x[k] = grad_elem(__fmul_rn(x[k], inv_t), lse, H, a, b, g_lp, g_h, inv_t, i * VEC + k == y, lse_lo);
            store_vec<O, VEC>(out + i * VEC, x);
        }
        for (int64_t j = nvec * VEC + threadIdx.x; j < vocab_limit; j += blockDim.x)
            out[j] = O::from_f32(grad_elem(__fmul_rn(E::to_f32(row[j]), inv_t), lse, H, a, b, g_lp, g_h, inv_t, j == y, lse_lo));
        for (int64_t j = vocab_limit + threadIdx.x; j < vocab; j += blockDim.x) out[j] = O::from_f32(0.0f);
    }
}

static bool pl_bad_loss_args(const arbor_policy_loss_config* cfg, int64_t rows, const float* old_logprob,
                             const float* advantages, const float* mask, const float* weights,
                             const float* ref_logprob, bool have_entropy, const float* select_entropy, double* sums,
                             void* workspace, int64_t workspace_bytes) {
    if (arbor_pl::bad_config(cfg) || rows < 0 || sums == nullptr) return true;
    if (rows > 0 && (old_logprob == nullptr || advantages == nullptr || mask == nullptr || weights == nullptr))
        return true;
    if (rows > 0 && cfg->kl_type != ARBOR_KL_NONE && ref_logprob == nullptr) return true;
    if (!have_entropy && cfg->entropy_coef != 0.0f) return true;
    const bool selects = cfg->clip_mode == ARBOR_CLIP_AEPO && cfg->aepo_entropy_threshold != -INFINITY;
    if (!have_entropy && selects && select_entropy == nullptr) return true;
    const int64_t need = arbor_pl::workspace_bytes(rows, 0);
    if (need < 0 || workspace == nullptr || workspace_bytes < need || (uintptr_t)workspace % 8 != 0) return true;
    return false;
}

static int pl_loss(const arbor_policy_loss_config* cfg, int64_t rows, const float* logprob, const float* entropy,
                   const float* old_logprob, const float* advantages, const float* mask, const float* weights,
                   const float* ref_logprob, const float* select_entropy, float* grad_logprob, float* grad_entropy,
                   double* sums, void* workspace, int64_t workspace_bytes, void* stream) {
    if (pl_bad_loss_args(cfg, rows, old_logprob, advantages, mask, weights, ref_logprob, entropy != nullptr,
                         select_entropy, sums, workspace, workspace_bytes))
        return ARBOR_ERR_ARG;
    if (rows > 0 && logprob == nullptr) return ARBOR_ERR_ARG;
    cudaStream_t s = (cudaStream_t)stream;
    float* parts = arbor_pl::carve(workspace, rows, 0).parts;
    if (rows > 0)
        pl_rows_kernel<<<small_grid(rows, 256), 256, 0, s>>>(*cfg, rows, logprob, entropy, old_logprob, advantages, mask,
                                                             weights, ref_logprob, select_entropy, grad_logprob,
                                                             grad_entropy, parts);
    pl_reduce_kernel<<<1, 1024, 0, s>>>(parts, rows, sums);
    return record_cuda_error(cudaGetLastError());
}

template <class E>
static int pl_fused(const arbor_policy_loss_config* cfg, const typename E::T* logits, int64_t rows, int64_t vocab,
                    int64_t row_stride, int64_t vocab_limit, const void* labels, int label_dtype,
                    const float* old_logprob, const float* advantages, const float* mask, const float* weights,
                    const float* ref_logprob, const float* select_entropy, float* logprob_out, float* entropy_out,
                    float* grad_logprob_out, float* grad_entropy_out, void* grad_logits, int grad_dtype,
                    int64_t grad_row_stride, double* sums, void* workspace, int64_t workspace_bytes, void* stream,
                    int own_dtype) {
    if (pl_bad_loss_args(cfg, rows, old_logprob, advantages, mask, weights, ref_logprob, true, select_entropy, sums,
                         workspace, workspace_bytes))
        return ARBOR_ERR_ARG;
    if (arbor::bad_matrix(logits, rows, vocab, row_stride, vocab_limit, cfg->temperature)) return ARBOR_ERR_ARG;
    if (arbor::bad_labels(labels, label_dtype, rows)) return ARBOR_ERR_ARG;
    if (arbor::bad_grad(logits, row_stride, own_dtype, grad_logits, grad_dtype, rows, vocab, grad_row_stride))
        return ARBOR_ERR_ARG;
    cudaStream_t s = (cudaStream_t)stream;
    float* parts = arbor_pl::carve(workspace, rows, 0).parts;
    if (rows > 0) {
        const int osize = grad_dtype == ARBOR_F32 ? 4 : 2;
        const bool vec_ok = aligned16(logits, row_stride * (int64_t)sizeof(typename E::T)) &&
                            aligned16(grad_logits, grad_row_stride * osize);
        const dim3 grid(row_grid(rows)), block(row_block_threads(vocab_limit));
        if (grad_dtype == ARBOR_F32)
            pl_fused_kernel<E, F32><<<grid, block, 0, s>>>(
                *cfg, logits, rows, vocab, row_stride, vocab_limit, labels, label_dtype, old_logprob, advantages, mask,
                weights, ref_logprob, select_entropy, logprob_out, entropy_out, grad_logprob_out, grad_entropy_out,
                (float*)grad_logits, grad_row_stride, parts, vec_ok);
        else
            pl_fused_kernel<E, E><<<grid, block, 0, s>>>(
                *cfg, logits, rows, vocab, row_stride, vocab_limit, labels, label_dtype, old_logprob, advantages, mask,
                weights, ref_logprob, select_entropy, logprob_out, entropy_out, grad_logprob_out, grad_entropy_out,
                (typename E::T*)grad_logits, grad_row_stride, parts, vec_ok);
    }
    pl_reduce_kernel<<<1, 1024, 0, s>>>(parts, rows, sums);
    return record_cuda_error(cudaGetLastError());
}

}  // namespace arbor_cuda

extern "C" int arbor_cuda_policy_loss_weights(const float* mask, const int32_t* seq_ids, int64_t rows,
                                              int64_t num_seqs, int agg_mode, double agg_normalizer, float* weights,
                                              double* counts, void* workspace, int64_t workspace_bytes, void* stream) {
    return arbor_cuda::pl_weights(mask, seq_ids, rows, num_seqs, agg_mode, agg_normalizer, weights, counts, workspace,
                                  workspace_bytes, stream);
}

extern "C" int arbor_cuda_policy_loss(const arbor_policy_loss_config* cfg, int64_t rows, const float* logprob,
                                      const float* entropy, const float* old_logprob, const float* advantages,
                                      const float* mask, const float* weights, const float* ref_logprob,
                                      const float* select_entropy, float* grad_logprob, float* grad_entropy,
                                      double* sums, void* workspace, int64_t workspace_bytes, void* stream) {
    return arbor_cuda::pl_loss(cfg, rows, logprob, entropy, old_logprob, advantages, mask, weights, ref_logprob,
                               select_entropy, grad_logprob, grad_entropy, sums, workspace, workspace_bytes, stream);
}

#define ARBOR_CUDA_PL_FUSED(NAME, E, CTYPE, OWN)                                                                   \
    extern "C" int NAME(const arbor_policy_loss_config* cfg, const CTYPE* logits, int64_t rows, int64_t vocab,      \
                        int64_t row_stride, int64_t vocab_limit, const void* labels, int label_dtype,               \
                        const float* old_logprob, const float* advantages, const float* mask, const float* weights, \
                        const float* ref_logprob, const float* select_entropy, float* logprob_out,                  \
                        float* entropy_out, float* grad_logprob_out, float* grad_entropy_out, void* grad_logits,    \
                        int grad_dtype, int64_t grad_row_stride, double* sums, void* workspace,                     \
                        int64_t workspace_bytes, void* stream) {                                                    \
        return arbor_cuda::pl_fused<arbor_cuda::E>(cfg, logits, rows, vocab, row_stride, vocab_limit, labels,       \
                                                   label_dtype, old_logprob, advantages, mask, weights, ref_logprob, \
                                                   select_entropy, logprob_out, entropy_out, grad_logprob_out,       \
                                                   grad_entropy_out, grad_logits, grad_dtype, grad_row_stride, sums, \
                                                   workspace, workspace_bytes, stream, OWN);                         \
    }
ARBOR_CUDA_PL_FUSED(arbor_cuda_policy_loss_fused_f32, F32, float, ARBOR_F32)
ARBOR_CUDA_PL_FUSED(arbor_cuda_policy_loss_fused_bf16, BF16, uint16_t, ARBOR_BF16)
ARBOR_CUDA_PL_FUSED(arbor_cuda_policy_loss_fused_f16, F16, uint16_t, ARBOR_F16)

#endif
