// Pieces of the token-level advantage kernels (arbor/advantages.h) shared by the CPU kernel, its
// double reference and the CUDA kernel: argument checks and the top-q candidate count.
#ifndef ARBOR_ADVANTAGES_COMMON_H
#define ARBOR_ADVANTAGES_COMMON_H

#include <math.h>
#include <stdint.h>

#include "arbor/arbor.h"

// The small helpers below are also called from device code (cuda-kernels/advantages.cuh).
#ifdef __CUDACC__
#define ARBOR_ADV_HD __host__ __device__
#else
#define ARBOR_ADV_HD
#endif

namespace arbor {

// The arguments every token-advantage entry point re-checks (the Java layer checks first and throws).
static inline bool bad_token_adv_args(const void* seq_adv, int64_t n_seqs, const void* seq_ids, int seq_id_dtype,
                                      int64_t n_tokens, int64_t seq_len, const void* entropy, int mode, double coef,
                                      double top_fraction, const void* adv_out, const void* stats) {
    if (n_seqs < 0 || n_tokens < 0) return true;
    if (n_seqs > 0 && seq_adv == nullptr) return true;
    if (n_tokens > 0 && adv_out == nullptr) return true;
    if (seq_ids != nullptr) {
        if (seq_id_dtype != ARBOR_I32 && seq_id_dtype != ARBOR_I64) return true;
    } else {
        // padded [n_seqs, seq_len] layout: the product must be n_tokens, without overflow
        if (seq_len < 1) return true;
        if (n_seqs > INT64_MAX / seq_len || n_seqs * seq_len != n_tokens) return true;
    }
    if (mode != ARBOR_ADV_BROADCAST && mode != ARBOR_ADV_AEPO && mode != ARBOR_ADV_TAO) return true;
    if (mode != ARBOR_ADV_BROADCAST) {
        if (stats == nullptr) return true;
        if (n_tokens > 0 && entropy == nullptr) return true;
        if (!isfinite(coef)) return true;
    }
    if (mode == ARBOR_ADV_TAO && !(top_fraction > 0.0 && top_fraction <= 1.0)) return true;
    return false;
}

// k = ceil(q · n) for n >= 1, in [1, n]; a product within a relative 1e-6 of an integer counts as that
// integer, so q = 0.2, n = 10 gives 2 whatever the rounding of 0.2 — even a float 0.2f (relative error
// 3e-8) passed on as a double (docs/algorithms.md §3, TAO-RL top-q_H).
ARBOR_ADV_HD static inline int64_t top_fraction_count(double q, int64_t n) {
    if (n <= 0) return 0;
    const double x = q * (double)n;
    const double r = nearbyint(x);
    int64_t k = fabs(x - r) <= 1e-6 * (x > 1.0 ? x : 1.0) ? (int64_t)r : (int64_t)ceil(x);
    if (k < 1) k = 1;
    if (k > n) k = n;
    return k;
}

// Sequence id of token t (seq_ids of seq_id_dtype, or t / seq_len for the padded layout).
ARBOR_ADV_HD static inline int64_t token_seq(const void* seq_ids, int seq_id_dtype, int64_t seq_len, int64_t t) {
    if (seq_ids == nullptr) return t / seq_len;
    return seq_id_dtype == ARBOR_I32 ? (int64_t)((const int32_t*)seq_ids)[t] : ((const int64_t*)seq_ids)[t];
}

}  // namespace arbor

#endif
