// Advantages and token-level shaping (docs/algorithms.md §3) — CUDA kernels, same ABI and
// semantics as native/src/advantages.cpp (contract: native/include/arbor/advantages.h).
//
// v2 (this file; v1 did the statistics in one block, which is latency-bound past ~10^5 tokens). Tokens
// are split into G = min(1024, ⌈n / 4096⌉) contiguous block ranges — G depends on n only. Launches on
// the stream, with a small workspace from cudaMallocAsync:
//   1. adv_pass1_kernel (G blocks): per block Σ H in double (strided per-thread sums, shuffle tree, warp
//      partials summed by one warp: a fixed order) into part_sum[block]; integer counts by atomics.
//   2. adv_pass2_kernel (G blocks): every block forms μ from part_sum in the same fixed order, then
//      Σ (H − μ)² into part_ss[block].
//   3. adv_finalize_kernel (1 block): μ, unbiased var, scale, counts → the caller's stats array.
//   4. TAO-RL only: τ = the k-th largest candidate entropy by a 4-level radix select over order-preserving
//      32-bit keys, 8-bit digits: per level adv_hist_kernel (G blocks, shared-memory histograms added
//      into a global one with integer atomics) and adv_select_kernel (one thread picks the digit). The
//      shaped count comes from the histograms: candidates above τ's digit at each level plus the ties.
//   5. adv_apply_kernel: grid-stride elementwise pass writing Ã with the CPU kernel's double expression
//      (explicitly rounded operations, no FMA contraction), reading μ, scale and τ from stats.
// Floating-point sums have a fixed order and everything else is integer, so a rerun is bitwise identical;
// CPU and CUDA differ only through the last bits of μ and the scale.
#ifndef ARBOR_CUDA_ADVANTAGES_CUH
#define ARBOR_CUDA_ADVANTAGES_CUH

#include "advantages_common.h"
#include "common.cuh"

namespace arbor_cuda {

static constexpr int ADV_THREADS = 256;
static constexpr int64_t ADV_TOKENS_PER_BLOCK = 4096;
static constexpr int64_t ADV_MAX_BLOCKS = 1024;

// Order-preserving key of a float (larger float → larger key); −0 is folded onto +0 so the key order
// agrees with float comparison, which the apply pass uses.
__device__ __forceinline__ uint32_t adv_float_key(float x) {
    if (x == 0.0f) x = 0.0f;
    const uint32_t u = __float_as_uint(x);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float adv_key_float(uint32_t k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// Block-wide sum with a fixed reduction order; every thread gets the result. `shm` holds 32 slots.
template <class T>
__device__ __forceinline__ T adv_block_sum(T v, T* shm) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    __syncthreads();  // shm may still be read by the previous call
    if (lane == 0) shm[warp] = v;
    __syncthreads();
    if (warp == 0) {
        T r = lane < nwarps ? shm[lane] : T(0);
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) r += __shfl_down_sync(0xffffffffu, r, off);
        if (lane == 0) shm[0] = r;
    }
    __syncthreads();
    return shm[0];
}

// Σ part[0..g) with an order fixed by g and blockDim alone: every block computing it gets the same bits.
__device__ __forceinline__ double adv_sum_partials(const double* part, int64_t g, double* shm) {
    double v = 0.0;
    for (int64_t i = threadIdx.x; i < g; i += blockDim.x) v += part[i];
    return adv_block_sum(v, shm);
}

// Device workspace of one call (zeroed first); the per-block partial sums follow it.
struct AdvWork {
    unsigned long long valid, post, nonfinite;  // integer atomics: the order does not matter
    unsigned long long krem, above;             // radix select: rank still to find; candidates known above τ
    unsigned int prefix, pmask;                 // key bits fixed so far
    int active;                                 // the TAO select has candidates and statistics
    unsigned int hist[256];
};
static constexpr size_t ADV_WORK_BYTES = (sizeof(AdvWork) + 15) / 16 * 16;

__device__ __forceinline__ void adv_block_range(int64_t n, int64_t chunk, int64_t& begin, int64_t& end) {
    begin = (int64_t)blockIdx.x * chunk;
    end = begin + chunk < n ? begin + chunk : n;
}

__global__ void __launch_bounds__(ADV_THREADS)
adv_pass1_kernel(const float* __restrict__ entropy, const uint8_t* __restrict__ mask, const uint8_t* __restrict__ post,
                 int64_t n, int64_t chunk, AdvWork* w, double* __restrict__ part_sum) {
    __shared__ double sd[32];
    __shared__ unsigned long long su[32];
    int64_t begin, end;
    adv_block_range(n, chunk, begin, end);
    double sum = 0.0;
    unsigned long long valid = 0, npost = 0, nonfinite = 0;
    for (int64_t t = begin + threadIdx.x; t < end; t += blockDim.x) {
        if (mask != nullptr && !mask[t]) continue;
        valid++;
        if (post != nullptr && post[t]) npost++;
        if (entropy != nullptr) {
            const float h = entropy[t];
            if (isfinite(h)) sum += (double)h;
            else nonfinite++;
        }
    }
    sum = adv_block_sum(sum, sd);
    valid = adv_block_sum(valid, su);
    npost = adv_block_sum(npost, su);
    nonfinite = adv_block_sum(nonfinite, su);
    if (threadIdx.x == 0) {
        part_sum[blockIdx.x] = sum;
        if (valid) atomicAdd(&w->valid, valid);
        if (npost) atomicAdd(&w->post, npost);
        if (nonfinite) atomicAdd(&w->nonfinite, nonfinite);
    }
}

__global__ void __launch_bounds__(ADV_THREADS)
adv_pass2_kernel(const float* __restrict__ entropy, const uint8_t* __restrict__ mask, int64_t n, int64_t chunk,
                 int64_t g, const AdvWork* w, const double* __restrict__ part_sum, double* __restrict__ part_ss) {
    __shared__ double sd[32];
    const unsigned long long valid = w->valid;
    if (valid == 0 || w->nonfinite != 0) {  // no statistics: uniform across the block
        if (threadIdx.x == 0) part_ss[blockIdx.x] = 0.0;
        return;
    }
    const double mean = adv_sum_partials(part_sum, g, sd) / (double)valid;
    int64_t begin, end;
    adv_block_range(n, chunk, begin, end);
    double ss = 0.0;
    for (int64_t t = begin + threadIdx.x; t < end; t += blockDim.x) {
        if (mask != nullptr && !mask[t]) continue;
        const double d = (double)entropy[t] - mean;
        ss += d * d;
    }
    ss = adv_block_sum(ss, sd);
    if (threadIdx.x == 0) part_ss[blockIdx.x] = ss;
}

__global__ void __launch_bounds__(ADV_THREADS)
adv_finalize_kernel(bool has_entropy, bool has_post, int mode, double top_fraction, int64_t g, AdvWork* w,
                    const double* __restrict__ part_sum, const double* __restrict__ part_ss, double* __restrict__ stats) {
    __shared__ double sd[32];
    const unsigned long long valid = w->valid, npost = w->post, nonfinite = w->nonfinite;
    const bool have_h = has_entropy && valid > 0 && nonfinite == 0;
    double mean = NAN, var = NAN, scale = NAN;
    if (have_h) {  // the same reduction as adv_pass2_kernel's, so the same μ
        mean = adv_sum_partials(part_sum, g, sd) / (double)valid;
        const double ss = adv_sum_partials(part_ss, g, sd);
        var = valid >= 2 ? ss / (double)(valid - 1) : 0.0;
        scale = 1.0 / sqrt(var + ARBOR_ADV_VAR_EPS);
    }
    if (threadIdx.x == 0) {
        stats[ARBOR_ADV_STAT_VALID] = (double)valid;
        stats[ARBOR_ADV_STAT_POST] = has_post ? (double)npost : 0.0;
        stats[ARBOR_ADV_STAT_SHAPED] = (mode == ARBOR_ADV_AEPO && have_h) ? (double)valid : 0.0;
        stats[ARBOR_ADV_STAT_MEAN] = mean;
        stats[ARBOR_ADV_STAT_STD] = have_h ? sqrt(var) : NAN;
        stats[ARBOR_ADV_STAT_THRESHOLD] = NAN;
        stats[ARBOR_ADV_STAT_SCALE] = scale;
        stats[ARBOR_ADV_STAT_NONFINITE] = (double)nonfinite;
        w->active = mode == ARBOR_ADV_TAO && have_h && npost > 0;
        w->krem = w->active ? (unsigned long long)arbor::top_fraction_count(top_fraction, (int64_t)npost) : 0ull;
        w->above = 0;
        w->prefix = 0;
        w->pmask = 0;
    }
}

// One radix level: histogram of the digit at `shift` of the candidates whose higher digits match the prefix.
__global__ void __launch_bounds__(ADV_THREADS)
adv_hist_kernel(const float* __restrict__ entropy, const uint8_t* __restrict__ mask, const uint8_t* __restrict__ post,
                int64_t n, int64_t chunk, int shift, AdvWork* w) {
    __shared__ unsigned int sh[256];
    if (!w->active) return;  // uniform
    for (int i = threadIdx.x; i < 256; i += blockDim.x) sh[i] = 0u;
    __syncthreads();
    const uint32_t prefix = w->prefix, pmask = w->pmask;
    int64_t begin, end;
    adv_block_range(n, chunk, begin, end);
    for (int64_t t = begin + threadIdx.x; t < end; t += blockDim.x) {
        if ((mask != nullptr && !mask[t]) || !post[t]) continue;
        const uint32_t key = adv_float_key(entropy[t]);
        if ((key & pmask) == prefix) atomicAdd(&sh[(key >> shift) & 255u], 1u);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < 256; i += blockDim.x)
        if (sh[i]) atomicAdd(&w->hist[i], sh[i]);
}

// One thread: the digit holding the krem-th largest candidate; at the last level, τ and the shaped count.
__global__ void adv_select_kernel(int shift, AdvWork* w, double* __restrict__ stats) {
    if (!w->active) return;
    const unsigned long long krem = w->krem;
    unsigned long long above = 0;
    int b = 255;
    for (; b > 0; --b) {  // b = 0 when every remaining candidate has digit 0
        if (above + w->hist[b] >= krem) break;
        above += w->hist[b];
    }
    const unsigned long long ties = w->hist[b];
    w->above += above;
    w->krem = krem - above;
    w->prefix |= (uint32_t)b << shift;
    w->pmask |= 0xFFu << shift;
    for (int i = 0; i < 256; ++i) w->hist[i] = 0u;  // for the next level
    if (shift == 0) {
        stats[ARBOR_ADV_STAT_THRESHOLD] = (double)adv_key_float(w->prefix);
        stats[ARBOR_ADV_STAT_SHAPED] = (double)(w->above + ties);  // H > τ, plus every tie at τ
    }
}

__global__ void adv_apply_kernel(const float* __restrict__ seq_adv, int64_t n_seqs, const void* __restrict__ seq_ids,
                                 int seq_id_dtype, int64_t seq_len, int64_t n, const uint8_t* __restrict__ mask,
                                 const float* __restrict__ entropy, const uint8_t* __restrict__ post, int mode,
                                 float coef, const double* __restrict__ stats, float* __restrict__ out) {
    double mean = 0.0, scale = 0.0;
    float tau = NAN;
    bool all_nan = false;
    if (mode != ARBOR_ADV_BROADCAST) {
        mean = stats[ARBOR_ADV_STAT_MEAN];
        scale = stats[ARBOR_ADV_STAT_SCALE];
        tau = (float)stats[ARBOR_ADV_STAT_THRESHOLD];
        all_nan = stats[ARBOR_ADV_STAT_NONFINITE] > 0.0;
    }
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < n; t += (int64_t)gridDim.x * blockDim.x) {
        if (mask != nullptr && !mask[t]) {
            out[t] = 0.0f;
            continue;
        }
        const int64_t s = arbor::token_seq(seq_ids, seq_id_dtype, seq_len, t);
        if (s < 0 || s >= n_seqs) {  // cannot be reported asynchronously: a NaN marks it
            out[t] = NAN;
            continue;
        }
        const float a = seq_adv[s];
        if (mode == ARBOR_ADV_BROADCAST) {
            out[t] = a;
        } else if (all_nan) {
            out[t] = NAN;
        } else if (mode == ARBOR_ADV_AEPO || (post != nullptr && post[t] && entropy[t] >= tau)) {
            // docs/algorithms.md §3: Ã = A · (1 + coef · Ĥ), Ĥ = (H − μ) · scale — the CPU kernel's expression
            const double h_hat = __dmul_rn(__dsub_rn((double)entropy[t], mean), scale);
            out[t] = (float)__dmul_rn((double)a, __dadd_rn(1.0, __dmul_rn((double)coef, h_hat)));
        } else {
            out[t] = a;
        }
    }
}

static int token_advantages(const float* seq_adv, int64_t n_seqs, const void* seq_ids, int seq_id_dtype,
                            int64_t n_tokens, int64_t seq_len, const uint8_t* loss_mask, const float* entropy,
                            const uint8_t* post_tool, int mode, float coef, double top_fraction, float* adv_out,
                            double* stats, void* stream) {
    if (arbor::bad_token_adv_args(seq_adv, n_seqs, seq_ids, seq_id_dtype, n_tokens, seq_len, entropy, mode, coef,
                                  top_fraction, adv_out, stats))
        return ARBOR_ERR_ARG;
    cudaStream_t s = (cudaStream_t)stream;
    if (stats != nullptr) {
        int64_t g = (n_tokens + ADV_TOKENS_PER_BLOCK - 1) / ADV_TOKENS_PER_BLOCK;
        g = g < 1 ? 1 : (g > ADV_MAX_BLOCKS ? ADV_MAX_BLOCKS : g);
        const int64_t chunk = (n_tokens + g - 1) / g;
        char* ws = nullptr;
        cudaError_t err = cudaMallocAsync((void**)&ws, ADV_WORK_BYTES + 2 * g * sizeof(double), s);
        if (err != cudaSuccess) return record_cuda_error(err);
        AdvWork* w = (AdvWork*)ws;
        double* part_sum = (double*)(ws + ADV_WORK_BYTES);
        double* part_ss = part_sum + g;
        err = cudaMemsetAsync(w, 0, sizeof(AdvWork), s);
        if (err != cudaSuccess) {
            cudaFreeAsync(ws, s);
            return record_cuda_error(err);
        }
        const unsigned grid = (unsigned)g;
        adv_pass1_kernel<<<grid, ADV_THREADS, 0, s>>>(entropy, loss_mask, post_tool, n_tokens, chunk, w, part_sum);
        if (entropy != nullptr)
            adv_pass2_kernel<<<grid, ADV_THREADS, 0, s>>>(entropy, loss_mask, n_tokens, chunk, g, w, part_sum, part_ss);
        adv_finalize_kernel<<<1, ADV_THREADS, 0, s>>>(entropy != nullptr, post_tool != nullptr, mode, top_fraction, g, w,
                                                      part_sum, part_ss, stats);
        if (mode == ARBOR_ADV_TAO && entropy != nullptr && post_tool != nullptr) {
            for (int shift = 24; shift >= 0; shift -= 8) {
                adv_hist_kernel<<<grid, ADV_THREADS, 0, s>>>(entropy, loss_mask, post_tool, n_tokens, chunk, shift, w);
                adv_select_kernel<<<1, 1, 0, s>>>(shift, w, stats);
            }
        }
        err = cudaFreeAsync(ws, s);  // stream-ordered: after the kernels above
        if (err != cudaSuccess) return record_cuda_error(err);
    }
    if (n_tokens > 0) {
        const int64_t blocks = (n_tokens + 255) / 256;
        adv_apply_kernel<<<(unsigned)(blocks < 65536 ? blocks : 65536), 256, 0, s>>>(
            seq_adv, n_seqs, seq_ids, seq_id_dtype, seq_len, n_tokens, loss_mask, entropy, post_tool, mode, coef,
            stats, adv_out);
    }
    return record_cuda_error(cudaGetLastError());
}

}  // namespace arbor_cuda

extern "C" int arbor_cuda_token_advantages(const float* seq_adv, int64_t n_seqs, const void* seq_ids,
                                           int seq_id_dtype, int64_t n_tokens, int64_t seq_len,
                                           const uint8_t* loss_mask, const float* entropy, const uint8_t* post_tool,
                                           int mode, float coef, double top_fraction, float* adv_out, double* stats,
                                           void* stream) {
    return arbor_cuda::token_advantages(seq_adv, n_seqs, seq_ids, seq_id_dtype, n_tokens, seq_len, loss_mask,
                                        entropy, post_tool, mode, coef, top_fraction, adv_out, stats, stream);
}

#endif
