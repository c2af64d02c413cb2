// Advantages and token-level shaping (ALGORITHMS.md §3) — CUDA kernels (issue #4), same ABI and
// semantics as native/src/advantages.cpp (contract: native/include/arbor/advantages.h).
//
// v1 (this file): two launches on the stream.
//   1. token_adv_stats_kernel — ONE block of 1024 threads walks all tokens: counts, Σ H (double),
//      then Σ (H − μ)² (double), then (TAO-RL) the k-th largest post-tool entropy by a 4-pass radix
//      select over order-preserving 32-bit keys (8-bit digits, shared-memory integer histograms), then
//      the count of selected tokens. Every reduction has a fixed order (per-thread strided sums,
//      shuffle trees, warp partials summed by one warp), so a run is bitwise reproducible. One block
//      is enough for RL batches (the token count of a step is 10^4–10^6 and the pass reads 6 bytes per
//      token); the statistics go to the caller's stats array, which is how they reach launch 2.
//   2. token_adv_apply_kernel — grid-stride elementwise pass writing Ã per token, with the same double
//      expression as the CPU kernel (explicitly rounded operations: no FMA contraction), so CPU and
//      CUDA differ only through the last bits of μ and the scale.
#ifndef ARBOR_CUDA_ADVANTAGES_CUH
#define ARBOR_CUDA_ADVANTAGES_CUH

#include "advantages_common.h"
#include "common.cuh"

namespace arbor_cuda {

static constexpr int ADV_STATS_THREADS = 1024;

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

__global__ void __launch_bounds__(ADV_STATS_THREADS)
token_adv_stats_kernel(const float* __restrict__ entropy, const uint8_t* __restrict__ mask,
                       const uint8_t* __restrict__ post, int64_t n, int mode, double top_fraction,
                       double* __restrict__ stats) {
    __shared__ double sd[32];
    __shared__ unsigned long long su[32];
    __shared__ unsigned int hist[256];
    __shared__ uint32_t s_prefix;
    __shared__ unsigned long long s_krem;
    const int tid = threadIdx.x, nt = blockDim.x;

    // counts and Σ H
    double sum = 0.0;
    unsigned long long valid = 0, npost = 0, nonfinite = 0;
    for (int64_t t = tid; t < n; t += nt) {
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
    const bool have_h = entropy != nullptr && valid > 0 && nonfinite == 0;

    double mean = NAN, var = NAN, scale = NAN;
    if (have_h) {  // uniform across the block: every thread holds the same sums
        mean = sum / (double)valid;
        double ss = 0.0;
        for (int64_t t = tid; t < n; t += nt) {
            if (mask != nullptr && !mask[t]) continue;
            const double d = (double)entropy[t] - mean;
            ss += d * d;
        }
        ss = adv_block_sum(ss, sd);
        var = valid >= 2 ? ss / (double)(valid - 1) : 0.0;
        scale = 1.0 / sqrt(var + ARBOR_ADV_VAR_EPS);
    }

    float tau = NAN;
    unsigned long long shaped = 0;
    if (mode == ARBOR_ADV_AEPO && have_h) shaped = valid;
    if (mode == ARBOR_ADV_TAO && have_h && npost > 0) {
        // radix select of the k-th largest key among the candidates, most significant digit first
        unsigned long long krem = (unsigned long long)arbor::top_fraction_count(top_fraction, (int64_t)npost);
        uint32_t prefix = 0, pmask = 0;
        for (int shift = 24; shift >= 0; shift -= 8) {
            for (int i = tid; i < 256; i += nt) hist[i] = 0u;
            __syncthreads();
            for (int64_t t = tid; t < n; t += nt) {
                if ((mask != nullptr && !mask[t]) || !post[t]) continue;
                const uint32_t key = adv_float_key(entropy[t]);
                if ((key & pmask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1u);
            }
            __syncthreads();
            if (tid == 0) {
                unsigned long long above = 0;
                int b = 255;
                for (; b > 0; --b) {  // the digit holding the krem-th largest (b = 0 if none above)
                    if (above + hist[b] >= krem) break;
                    above += hist[b];
                }
                s_prefix = prefix | ((uint32_t)b << shift);
                s_krem = krem - above;
            }
            __syncthreads();
            prefix = s_prefix;
            krem = s_krem;
            pmask |= 0xFFu << shift;
        }
        tau = adv_key_float(prefix);
        unsigned long long sel = 0;
        for (int64_t t = tid; t < n; t += nt)
            if ((mask == nullptr || mask[t]) && post[t] && entropy[t] >= tau) sel++;
        shaped = adv_block_sum(sel, su);
    }

    if (tid == 0) {
        stats[ARBOR_ADV_STAT_VALID] = (double)valid;
        stats[ARBOR_ADV_STAT_POST] = post != nullptr ? (double)npost : 0.0;
        stats[ARBOR_ADV_STAT_SHAPED] = (double)shaped;
        stats[ARBOR_ADV_STAT_MEAN] = mean;
        stats[ARBOR_ADV_STAT_STD] = have_h ? sqrt(var) : NAN;
        stats[ARBOR_ADV_STAT_THRESHOLD] = (double)tau;
        stats[ARBOR_ADV_STAT_SCALE] = scale;
        stats[ARBOR_ADV_STAT_NONFINITE] = (double)nonfinite;
    }
}

__global__ void token_adv_apply_kernel(const float* __restrict__ seq_adv, int64_t n_seqs, const void* __restrict__ seq_ids,
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
            // ALGORITHMS.md §3: Ã = A · (1 + coef · Ĥ), Ĥ = (H − μ) · scale — the CPU kernel's expression
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
    if (stats != nullptr)
        token_adv_stats_kernel<<<1, ADV_STATS_THREADS, 0, s>>>(entropy, loss_mask, post_tool, n_tokens, mode,
                                                                top_fraction, stats);
    if (n_tokens > 0) {
        const int64_t blocks = (n_tokens + 255) / 256;
        token_adv_apply_kernel<<<(unsigned)(blocks < 65536 ? blocks : 65536), 256, 0, s>>>(
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
