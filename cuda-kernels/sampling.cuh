// Sampling: fused sample + logprob + entropy (docs/algorithms.md §10) — CUDA kernels, same ABI as
// native/src/sampling.cpp (contract: native/include/arbor/sampling.h; definitions: docs/sampling.md).
//
// v1 (this file): one block per row, grid-stride over rows, mirroring the CPU kernel step by step:
//   1. softmax statistics of the tempered row with block_row_stats (common.cuh, as token stats):
//      logprob and entropy are computed from them exactly as token_stats_fwd_kernel does;
//   2. T = 0: block argmax (lowest index on ties). Otherwise the truncation threshold tau:
//      min-p  tau = z_max + log(min_p)                          (sampling_math.h's log)
//      top-k  / top-p: MSB-first radix selection over order-preserving keys of z, 4 rounds of 8-bit
//             digits; each round a warp takes 32 consecutive columns, aggregates equal digits with
//             ballots and exact integer butterfly sums into per-warp histograms (no atomics, so no
//             contention on the few hot digits of a logit row), and thread 0 picks the digit with
//             smath::radix_pick — the CPU's rounds on exact integers, hence the same threshold;
//   3. the Gumbel-max race over kept columns: each thread takes groups of 32 columns (one Philox
//      evaluation per 4 columns, all four outputs used), skipping groups that cannot beat its best
//      (on z alone, then on the group's largest uniform — smath::cannot_win — before any log);
//      the block reduces (key, column) with lowest-column ties.
// Every deciding value goes through sampling_math.h's __f*_rn-based functions: the token equals
// the CPU kernel's bit for bit. The truncated normalizer for logprob_sampled uses __expf.
#ifndef ARBOR_CUDA_SAMPLING_CUH
#define ARBOR_CUDA_SAMPLING_CUH

#include "checks.h"
#include "common.cuh"
#include "sampling_math.h"

namespace arbor_cuda {

namespace sm = arbor::smath;

#define ARBOR_SAMPLE_MAX_WARPS (ARBOR_ROW_MAX_THREADS / 32)  // row_block_threads()' largest block

// (key, column) with the larger key, or the lower column on equal keys; column INT64_MAX = none.
__device__ __forceinline__ bool sample_better(float k, int64_t i, float bk, int64_t bi) {
    return k > bk || (k == bk && i < bi);
}

// Block-wide (key, column) argmax; every thread gets the result.
__device__ __forceinline__ void block_argmax(float& key, int64_t& idx) {
    __shared__ float s_key[32];
    __shared__ int64_t s_idx[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float k = __shfl_xor_sync(0xffffffffu, key, off);
        const int64_t i = __shfl_xor_sync(0xffffffffu, idx, off);
        if (sample_better(k, i, key, idx)) {
            key = k;
            idx = i;
        }
    }
    __syncthreads();
    if (lane == 0) {
        s_key[warp] = key;
        s_idx[warp] = idx;
    }
    __syncthreads();
    key = lane < nwarps ? s_key[lane] : -INFINITY;
    idx = lane < nwarps ? s_idx[lane] : INT64_MAX;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        const float k = __shfl_xor_sync(0xffffffffu, key, off);
        const int64_t i = __shfl_xor_sync(0xffffffffu, idx, off);
        if (sample_better(k, i, key, idx)) {
            key = k;
            idx = i;
        }
    }
}

__device__ __forceinline__ float block_sum(float v) {
    __shared__ float s_part[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    __syncthreads();
    if (lane == 0) s_part[warp] = v;
    __syncthreads();
    v = lane < nwarps ? s_part[lane] : 0.0f;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// z = row[j0 : j0 + 32] * inv_t (rounded products, exactly the CPU's); absent columns -inf.
template <class E>
__device__ __forceinline__ void load_z32(const typename E::T* row, int64_t n, int64_t j0, float inv_t, bool vec_ok,
                                         float (&z)[32]) {
    constexpr int VEC = E::VEC;
    if (vec_ok && j0 + 32 <= n) {
#pragma unroll
        for (int v = 0; v < 32 / VEC; ++v) {
            float x[VEC];
            load_vec<E, VEC>(row + j0 + v * VEC, x);
#pragma unroll
            for (int k = 0; k < VEC; ++k) z[v * VEC + k] = sm::f_mul(x[k], inv_t);
        }
    } else {
#pragma unroll
        for (int i = 0; i < 32; ++i) z[i] = j0 + i < n ? sm::f_mul(E::to_f32(row[j0 + i]), inv_t) : -INFINITY;
    }
}

// Adds weight w at digit dig (-1 = nothing) of every lane into this warp's histogram h, exactly:
// lanes with equal digits are summed with a butterfly over the full warp, then lane 0 adds once.
// All 32 lanes must call it together.
__device__ __forceinline__ void warp_hist_add(int64_t* h, int dig, int64_t w) {
    unsigned pending = __ballot_sync(0xffffffffu, dig >= 0);
    while (pending) {
        const int ld = __shfl_sync(0xffffffffu, dig, __ffs(pending) - 1);
        const bool mine = dig == ld;
        int64_t s = mine ? w : 0;
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
        if ((threadIdx.x & 31) == 0) h[ld] += s;
        pending &= ~__ballot_sync(0xffffffffu, mine);
    }
}

// Shared memory of block_select, declared once in the kernel (both selections reuse it).
struct SelectShared {
    int64_t hist_w[ARBOR_SAMPLE_MAX_WARPS][256];  // per-warp histograms
    int64_t hist[256];
    int64_t above, target;
    uint32_t prefix;
    int skip;
};

// Radix selection over the kept columns (z >= tau, z > -inf): the largest value v with
// W(z >= v) >= target, W = count (MASS = false, target = k) or top-p mass (MASS = true, target =
// ceil(p * total)). Returns the new threshold, or tau itself when the selection cuts nothing
// (fewer than k+1 columns for top-k). Called by the whole block; the result is block-uniform.
template <class E, bool MASS>
__device__ float block_select(SelectShared& sh, const typename E::T* row, int64_t n, float inv_t, float zmax,
                              float tau, int32_t k, float p) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    uint32_t prefix = 0, mask = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
        int64_t* h = sh.hist_w[warp];
        for (int d = lane; d < 256; d += 32) h[d] = 0;
        __syncwarp();
        for (int64_t base = (int64_t)warp * 32; base < n; base += (int64_t)nwarps * 32) {  // warp-uniform
            const int64_t j = base + lane;
            const float z = j < n ? sm::f_mul(E::to_f32(row[j]), inv_t) : -INFINITY;
            const uint32_t key = sm::order_key(z);
            const bool in = sm::kept(z, tau) && (key & mask) == prefix;
            int64_t w = 0;
            if (in) w = MASS ? sm::mass_of(sm::f_sub(z, zmax)) : 1;
            warp_hist_add(h, in ? (int)((key >> shift) & 255u) : -1, w);
        }
        __syncthreads();
        for (int d = threadIdx.x; d < 256; d += blockDim.x) {
            int64_t s = 0;
            for (int w = 0; w < nwarps; ++w) s += sh.hist_w[w][d];
            sh.hist[d] = s;
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            if (shift == 24) {
                int64_t total = 0;
                for (int d = 0; d < 256; ++d) total += sh.hist[d];
                sh.skip = MASS ? 0 : (total <= (int64_t)k);
                sh.target = MASS ? sm::top_p_target(p, total) : (int64_t)k;
                sh.above = 0;
            }
            if (!sh.skip) {
                int64_t above = sh.above;
                const int d = sm::radix_pick(sh.hist, sh.target, &above);
                sh.above = above;
                sh.prefix = (shift == 24 ? 0u : sh.prefix) | ((uint32_t)d << shift);
            }
        }
        __syncthreads();
        if (sh.skip) return tau;
        prefix = sh.prefix;
        mask |= 255u << shift;
    }
    return sm::key_value(prefix);
}

template <class E>
__global__ void __launch_bounds__(ARBOR_ROW_MAX_THREADS)
sample_kernel(const typename E::T* __restrict__ logits, int64_t rows, int64_t row_stride, int64_t n,
              sm::SampleArgs a, void* __restrict__ tokens, int token_dtype,
              float* __restrict__ logprob_sampled, float* __restrict__ logprob,
              float* __restrict__ entropy, bool vec_ok) {
    __shared__ SelectShared sel;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const bool masked = a.row_mask != nullptr && !a.row_mask[r];
        const sm::RowParams rp = sm::row_params(a, r);
        float fill = 0.0f;
        bool dead = masked;
        if (!dead && sm::bad_row_params(rp)) {  // per-row arrays cannot be checked on the host
            dead = true;
            fill = NAN;
        }
        const typename E::T* row = logits + r * row_stride;
        const bool greedy = rp.t == 0.0f;
        const float inv_t = dead || greedy ? 1.0f : __fdiv_rn(1.0f, rp.t);  // the CPU's 1.0f / T
        SoftmaxState st;
        if (!dead) {
            bool nan;
            st = block_row_stats<E>(row, n, inv_t, vec_ok, nan);
            if (nan || st.m == -INFINITY || st.m == INFINITY) {
                dead = true;
                fill = NAN;
            }
        }
        if (dead) {
            if (threadIdx.x == 0) {
                if (token_dtype == ARBOR_I32) ((int32_t*)tokens)[r] = -1;
                else ((int64_t*)tokens)[r] = -1;
                if (logprob_sampled) logprob_sampled[r] = fill;
                if (logprob) logprob[r] = fill;
                if (entropy) entropy[r] = fill;
            }
            continue;
        }
        const float zmax = st.m;  // exact: the max of the rounded products x * inv_t
        float key = -INFINITY;
        int64_t y = INT64_MAX;
        bool truncated = false;
        float s_kept = 0.0f;
        if (greedy) {
            for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
                const float x = E::to_f32(row[j]);
                if (sample_better(x, j, key, y)) {
                    key = x;
                    y = j;
                }
            }
            block_argmax(key, y);
        } else {
            float tau = -INFINITY;
            if (rp.mp > 0.0f) tau = sm::f_add(zmax, sm::log_own(rp.mp));
            const bool topk = rp.k > 0 && rp.k < n, topp = rp.p < 1.0f;
            truncated = rp.mp > 0.0f || topk || topp;
            if (topk) tau = block_select<E, false>(sel, row, n, inv_t, zmax, tau, rp.k, 1.0f);
            if (topp) tau = block_select<E, true>(sel, row, n, inv_t, zmax, tau, 0, rp.p);
            float bound = -INFINITY;
            for (int64_t j0 = (int64_t)threadIdx.x * 32; j0 < n; j0 += (int64_t)blockDim.x * 32) {
                float z[32];
                load_z32<E>(row, n, j0, inv_t, vec_ok, z);
                float gm = -INFINITY;
#pragma unroll
                for (int i = 0; i < 32; ++i)
                    if (sm::kept(z[i], tau)) {
                        gm = fmaxf(gm, z[i]);
                        if (truncated) s_kept += __expf(z[i] - zmax);
                    }
                if (gm == -INFINITY || sm::f_add(gm, ARBOR_SM_GUMBEL_MAX) < bound) continue;
                const uint32_t g8 = (uint32_t)(j0 >> 5) << 3;
                if (bound != -INFINITY) {  // exact pruning on the group's largest uniform (logs skipped)
                    uint32_t mb = 0;
#pragma unroll 1
                    for (uint32_t i = 0; i < 8; ++i) {
                        uint32_t o[4];
                        sm::stream_block(rp.stream, g8 | i, o);
                        mb = max(mb, max(max(o[0], o[1]), max(o[2], o[3])));
                    }
                    if (sm::cannot_win(gm, mb, bound)) continue;
                }
#pragma unroll
                for (uint32_t i = 0; i < 8; ++i) {
                    uint32_t o[4];
                    sm::stream_block(rp.stream, g8 | i, o);
#pragma unroll
                    for (int w = 0; w < 4; ++w) {
                        const int c = 8 * w + (int)i;
                        if (!sm::kept(z[c], tau)) continue;
                        const float kc = sm::f_sub(z[c], sm::neg_gumbel_of(o[w]));
                        if (sample_better(kc, j0 + c, key, y)) {
                            key = kc;
                            y = j0 + c;
                        }
                    }
                }
                bound = key;
            }
            block_argmax(key, y);
            if (truncated) s_kept = block_sum(s_kept);
        }
        if (threadIdx.x == 0) {
            if (token_dtype == ARBOR_I32) ((int32_t*)tokens)[r] = (int32_t)y;
            else ((int64_t*)tokens)[r] = y;
            // exactly token_stats_fwd_kernel's expressions for label y
            const float log_s = logf(st.s);
            const float lp = (__fmul_rn(E::to_f32(row[y]), inv_t) - st.m) - log_s;
            if (logprob) logprob[r] = lp;
            if (entropy) entropy[r] = log_s - st.u / st.s;
            if (logprob_sampled)
                logprob_sampled[r] = greedy ? 0.0f : truncated ? (sm::f_mul(E::to_f32(row[y]), inv_t) - zmax) - logf(s_kept) : lp;
        }
        __syncthreads();  // shared reduction buffers are reused by the next row
    }
}

template <class E>
static int sample(const typename E::T* logits, int64_t rows, int64_t vocab, int64_t row_stride, int64_t vocab_limit,
                  const sm::SampleArgs& a, void* tokens, int token_dtype, float* logprob_sampled, float* logprob,
                  float* entropy, void* stream) {
    if (sm::bad_sample_call(logits, rows, vocab, row_stride, vocab_limit, a, tokens, token_dtype)) return ARBOR_ERR_ARG;
    if (rows == 0) return ARBOR_OK;
    const bool vec_ok = aligned16(logits, row_stride * (int64_t)sizeof(typename E::T));
    sample_kernel<E><<<row_grid(rows), row_block_threads(vocab_limit), 0, (cudaStream_t)stream>>>(
            logits, rows, row_stride, vocab_limit, a, tokens, token_dtype, logprob_sampled, logprob, entropy, vec_ok);
    return record_cuda_error(cudaGetLastError());
}

}  // namespace arbor_cuda

#define ARBOR_CUDA_SAMPLE(NAME, E, CTYPE)                                                                         \
    extern "C" int NAME(const CTYPE* logits, int64_t rows, int64_t vocab, int64_t row_stride, int64_t vocab_limit, \
                        float temperature, const float* temperatures, int32_t top_k, const int32_t* top_ks,       \
                        float top_p, const float* top_ps, float min_p, const float* min_ps, uint64_t seed,        \
                        const uint64_t* seeds, const uint64_t* keys, uint64_t step, const uint64_t* steps,        \
                        const uint8_t* row_mask, void* tokens, int token_dtype, float* logprob_sampled,           \
                        float* logprob, float* entropy, void* stream) {                                          \
        const arbor::smath::SampleArgs a{temperature, temperatures, top_k, top_ks, top_p, top_ps, min_p,        \
                                         min_ps,      seed,         seeds, keys,  step,  steps,  row_mask};      \
        return arbor_cuda::sample<arbor_cuda::E>(logits, rows, vocab, row_stride, vocab_limit, a, tokens,        \
                                                 token_dtype, logprob_sampled, logprob, entropy, stream);        \
    }
ARBOR_CUDA_SAMPLE(arbor_cuda_sample_f32, F32, float)
ARBOR_CUDA_SAMPLE(arbor_cuda_sample_bf16, BF16, uint16_t)
ARBOR_CUDA_SAMPLE(arbor_cuda_sample_f16, F16, uint16_t)

#endif
