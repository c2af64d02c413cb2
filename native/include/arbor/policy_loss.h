/*
 * Clipped policy-gradient losses (docs/algorithms.md §2), fused with token statistics (§1).
 * Included by arbor/arbor.h; the conventions stated there hold here (return codes, row strides,
 * vocab_limit, half types as uint16_t bits, num_threads / stream as the last argument, bitwise
 * identical results for every thread count).
 *
 * Per token t (a row of logits), with lp = logprob of the label, H = entropy, m = loss mask,
 * w = aggregation weight, A = advantage:
 *   δ = clamp(lp − old_lp, −20, 20),  r = e^δ,  lo = 1 − eps_low,  hi = 1 + eps_high
 *   PPO:        ℓ = max(−A r, −A clip(r, lo, hi))
 *   AEPO:       ℓ_PPO with the upper clip value hi·r/sg(r): same value; where A > 0 and r > hi
 *               and the token is selected (entropy >= aepo_entropy_threshold; -INFINITY selects
 *               every token) the gradient is −A·hi·∂lp instead of 0
 *   dual clip:  (PPO, AEPO; dual_clip_c = c > 1, 0 = off) ℓ = min(ℓ, −A c) where A < 0, gradient 0
 *               where the cap is active (verl compute_policy_loss_vanilla)
 *   CISPO:      ℓ = −sg(clip(r, lo, hi))·A·lp: gradient −clip(r)·A on every token (verl
 *               compute_policy_loss_cispo); "clipped" counts r > hi and r < lo whatever A's sign
 *   GSPO:       ℓ_PPO on the ratio e^δ with δ = min(lp − old, 10) (no lower clamp; gradient blocked
 *               above 10): old_logprob must be the per-sequence anchor sg(lp_t) − mean_{t∈i}(lp − old)
 *               of the sequence i of t (verl compute_policy_loss_gspo, token form; the Java API's
 *               PolicyLoss.gspoAnchor computes it)
 *   KL (κ = ref − lp): K1 = −κ;  K2 = κ²/2;  K3 = clamp(e^{κc} − κc − 1, −10, 10), κc = clamp(κ, ±20)
 *   loss = Σ_t w_t (ℓ_t + kl_coef·KL_t − entropy_coef·H_t)
 * Gradients follow torch's conventions at the clamps: a clamp passes the gradient at its bounds and
 * blocks it outside them (so ∂δ/∂lp = 1 for |lp − old| <= 20, else 0); a token is "clipped" when r
 * lies strictly outside [lo, hi] (on the side its advantage makes active), dual-clipped when
 * ℓ_PPO > −A c strictly.
 *
 * Aggregation weights (verl agg_loss), w_t = 0 where m_t = 0:
 *   TOKEN_MEAN               m_t / N          N = Σ_t m_t
 *   SEQ_MEAN_TOKEN_SUM       m_t / B          B = number of sequences with Σ m > 0
 *   SEQ_MEAN_TOKEN_MEAN      m_t / (B·len_i)  len_i = Σ m over the rows of t's sequence i
 *   SEQ_MEAN_TOKEN_SUM_NORM  m_t / F          F = the most rows any sequence has (padding rows,
 *                                             m = 0, included: the padded length of verl's [B, L])
 * N, B or F (the mode's normalizer) may be given by the caller (agg_normalizer > 0), e.g. global
 * counts in data-parallel training; else they are computed from this batch. Masks are in [0, 1]
 * (soft masks allowed); sequence lengths and N are accumulated in 32.32 fixed point, so they are
 * exact and independent of summation order on every device.
 *
 * Kernels (each has an arbor_cuda_* twin, see cuda-kernels/arbor_cuda.h):
 *   1. arbor_cpu_policy_loss_weights   O(T) pre-pass: mask, seq_ids → w_t and the counts.
 *   2a. arbor_cpu_policy_loss          O(T) loss over per-row logprob/entropy (the composable path:
 *                                       token stats forward → this → token stats backward with the
 *                                       per-row upstream gradients it writes).
 *   2b. arbor_cpu_policy_loss_fused_*  one pass per row: statistics → loss terms → dL/dlogits while
 *                                       the row is in cache (optionally in place over the logits).
 * Both 2a and 2b write the loss as ARBOR_PL_NUM_SUMS sums over the rows they were given (sums[],
 * below), reduced in a fixed order from per-row partials, so results are reproducible. Sums of calls
 * over disjoint row blocks add up to the sums of one call over all rows (same weights).
 * Derived values:  loss = S_PG + kl_coef·S_KL − entropy_coef·S_ENT;  metric X = S_X / S_MASK
 * (0 when S_MASK = 0).
 * --------------------------------------------------------------------------------------------- */
#ifndef ARBOR_POLICY_LOSS_H
#define ARBOR_POLICY_LOSS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* clip_mode */
#define ARBOR_CLIP_PPO 0
/* 1 was the dual-clip mode; dual clip is now dual_clip_c > 0 with PPO or AEPO */
#define ARBOR_CLIP_AEPO 2
#define ARBOR_CLIP_CISPO 3
#define ARBOR_CLIP_GSPO 4
/* kl_type */
#define ARBOR_KL_NONE 0
#define ARBOR_KL_K1 1
#define ARBOR_KL_K2 2
#define ARBOR_KL_K3 3
/* agg_mode */
#define ARBOR_AGG_TOKEN_MEAN 0
#define ARBOR_AGG_SEQ_MEAN_TOKEN_SUM 1
#define ARBOR_AGG_SEQ_MEAN_TOKEN_MEAN 2
#define ARBOR_AGG_SEQ_MEAN_TOKEN_SUM_NORM 3

/* Hyper-parameters of one loss call (a host struct, read when the call is made, also for CUDA). */
typedef struct arbor_policy_loss_config {
    int clip_mode;                /* ARBOR_CLIP_* */
    float eps_low;                /* in [0, 1]: lower clip 1 - eps_low */
    float eps_high;               /* >= 0, finite: upper clip 1 + eps_high */
    float dual_clip_c;            /* dual clip c > 1 finite (PPO, AEPO), or 0 = off (required for CISPO, GSPO) */
    float aepo_entropy_threshold; /* ARBOR_CLIP_AEPO: tokens with entropy >= this get the stop-gradient
                                     clip; -INFINITY = every token (released code); not NaN */
    int kl_type;                  /* ARBOR_KL_*; ref_logprob must be given unless NONE */
    float kl_coef;                /* beta >= 0, finite */
    float entropy_coef;           /* c_H, finite; entropy must be available unless 0 */
    float temperature;            /* > 0, finite: z = logits / temperature (fused kernels) */
} arbor_policy_loss_config;

/* Sums written by the loss kernels (double[ARBOR_PL_NUM_SUMS], device memory for CUDA). */
#define ARBOR_PL_S_PG 0        /* Σ w ℓ                                   = pg loss            */
#define ARBOR_PL_S_KL 1        /* Σ w KL  (0 for KL NONE)                 = kl loss (unscaled) */
#define ARBOR_PL_S_ENT 2       /* Σ w H                                   = aggregated entropy */
#define ARBOR_PL_S_MASK 3      /* Σ m                                     = valid tokens       */
#define ARBOR_PL_S_CLIP_HI 4   /* Σ m·1[A > 0, r > hi]  (CISPO: Σ m·1[r > hi])                  */
#define ARBOR_PL_S_CLIP_LO 5   /* Σ m·1[A < 0, r < lo]  (CISPO: Σ m·1[r < lo])                  */
#define ARBOR_PL_S_DUAL 6      /* Σ m·1[dual clip active]  (dual_clip_c > 0 only)              */
#define ARBOR_PL_S_NEG_DELTA 7 /* Σ m·(−δ)                                  approx KL = S/S_MASK */
#define ARBOR_PL_S_ENT_MASK 8  /* Σ m H                                     entropy mean        */
#define ARBOR_PL_NUM_SUMS 9

/* Counts written by the weights kernel (double[ARBOR_PL_NUM_COUNTS], device memory for CUDA). */
#define ARBOR_PL_C_TOKENS 0     /* N = Σ m over this batch                           */
#define ARBOR_PL_C_SEQS 1       /* B = sequences with Σ m > 0 (0 without seq_ids)    */
#define ARBOR_PL_C_MAX_ROWS 2   /* F = most rows of one sequence (0 without seq_ids) */
#define ARBOR_PL_C_NORMALIZER 3 /* the divisor used: given, else N / B / B / F       */
#define ARBOR_PL_NUM_COUNTS 4

/*
 * Bytes of scratch memory the policy-loss kernels need for `rows` rows and sequence ids in
 * [0, num_seqs): O(rows + num_seqs). The same workspace serves all three kernels (the weights kernel
 * uses its sequence part, the loss kernels its per-row part), so calls on one stream may share it.
 * CPU kernels accept NULL (they allocate internally); CUDA kernels require it (device memory).
 * Returns -1 for negative or overflowing sizes.
 */
int64_t arbor_policy_loss_workspace_bytes(int64_t rows, int64_t num_seqs);

/*
 * O(T) pre-pass: aggregation weights weights[r] (see the table above) and counts[ARBOR_PL_NUM_COUNTS].
 * mask: rows floats in [0, 1]. seq_ids: rows int32 sequence indices in [0, num_seqs) — required for
 * the SEQ_* modes, ignored (may be NULL, num_seqs 0) for TOKEN_MEAN; a row with m = 0 may have a
 * negative id (it is then ignored, also for F). agg_normalizer > 0 replaces the mode's N / B / F.
 * CPU: ARBOR_ERR_ARG for a mask value outside [0, 1] (or NaN) or a valid row's id outside
 * [0, num_seqs). CUDA (asynchronous): such input makes counts and every weight NaN.
 */
int arbor_cpu_policy_loss_weights(const float* mask, const int32_t* seq_ids, int64_t rows, int64_t num_seqs,
                                  int agg_mode, double agg_normalizer, float* weights, double* counts,
                                  void* workspace, int64_t workspace_bytes, int num_threads);

/*
 * Composable path, O(T): the loss over per-row values, writing the per-row upstream gradients for
 * arbor_cpu_token_stats_bwd (grad_logprob = dL/dlogprob, grad_entropy = dL/dentropy; either may be
 * NULL) and sums[ARBOR_PL_NUM_SUMS]. Rows with mask <= 0 contribute nothing and get 0 gradients; their
 * inputs are not read. entropy may be NULL when entropy_coef = 0 and no AEPO selection needs it (the
 * entropy sums are then NaN). ref_logprob: required unless kl_type = NONE. select_entropy: the values
 * the AEPO selection compares with the threshold (NULL = entropy). workspace: as above (per-row part).
 */
int arbor_cpu_policy_loss(const arbor_policy_loss_config* cfg, int64_t rows, const float* logprob,
                          const float* entropy, const float* old_logprob, const float* advantages, const float* mask,
                          const float* weights, const float* ref_logprob, const float* select_entropy,
                          float* grad_logprob, float* grad_entropy, double* sums, void* workspace,
                          int64_t workspace_bytes, int num_threads);

/*
 * Fused path: per row (z = logits / cfg->temperature, columns < vocab_limit), the token statistics,
 * the loss terms, and dL/dlogits written into grad_logits (grad_dtype ARBOR_F32 or the logits' own;
 * may alias the logits exactly to write in place) — one read of the row, then a re-read from cache
 * and one write. Masked rows (mask <= 0) are not read and get a 0 gradient row (labels unread). The
 * per-row logprob / entropy / upstream gradients are written where the pointers are non-NULL.
 * Extra memory: the workspace's per-row part (O(rows)); nothing of size [rows, vocab].
 * A valid row's label outside [0, vocab_limit) gives NaN for that row and ARBOR_ERR_LABEL; a row
 * without a distribution (NaN, +inf or no finite logit) gives NaN outputs and a NaN gradient row.
 */
int arbor_cpu_policy_loss_fused_f32(const arbor_policy_loss_config* cfg, const float* logits, int64_t rows,
                                    int64_t vocab, int64_t row_stride, int64_t vocab_limit, const void* labels,
                                    int label_dtype, const float* old_logprob, const float* advantages,
                                    const float* mask, const float* weights, const float* ref_logprob,
                                    const float* select_entropy, float* logprob_out, float* entropy_out,
                                    float* grad_logprob_out, float* grad_entropy_out, void* grad_logits,
                                    int grad_dtype, int64_t grad_row_stride, double* sums, void* workspace,
                                    int64_t workspace_bytes, int num_threads);
int arbor_cpu_policy_loss_fused_bf16(const arbor_policy_loss_config* cfg, const uint16_t* logits, int64_t rows,
                                     int64_t vocab, int64_t row_stride, int64_t vocab_limit, const void* labels,
                                     int label_dtype, const float* old_logprob, const float* advantages,
                                     const float* mask, const float* weights, const float* ref_logprob,
                                     const float* select_entropy, float* logprob_out, float* entropy_out,
                                     float* grad_logprob_out, float* grad_entropy_out, void* grad_logits,
                                     int grad_dtype, int64_t grad_row_stride, double* sums, void* workspace,
                                     int64_t workspace_bytes, int num_threads);
int arbor_cpu_policy_loss_fused_f16(const arbor_policy_loss_config* cfg, const uint16_t* logits, int64_t rows,
                                    int64_t vocab, int64_t row_stride, int64_t vocab_limit, const void* labels,
                                    int label_dtype, const float* old_logprob, const float* advantages,
                                    const float* mask, const float* weights, const float* ref_logprob,
                                    const float* select_entropy, float* logprob_out, float* entropy_out,
                                    float* grad_logprob_out, float* grad_entropy_out, void* grad_logits,
                                    int grad_dtype, int64_t grad_row_stride, double* sums, void* workspace,
                                    int64_t workspace_bytes, int num_threads);

/*
 * Scalar double-precision reference of the whole chain (native/src/reference_policy_loss.cpp): token
 * statistics, weights (plain double sums), loss, and dL/dlogits, written with straightforward loops.
 * Labels int64; seq_ids may be NULL for TOKEN_MEAN; ref_logprob NULL for KL NONE; select_entropy NULL
 * = the row's own entropy. grad_logits has the logits' layout (row_stride). sums as above; counts as
 * the weights kernel's (may be NULL).
 */
void arbor_ref_policy_loss(const arbor_policy_loss_config* cfg, int agg_mode, double agg_normalizer,
                           const double* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                           int64_t vocab_limit, const int64_t* labels, const double* old_logprob,
                           const double* advantages, const double* mask, const double* ref_logprob,
                           const int32_t* seq_ids, int64_t num_seqs, const double* select_entropy,
                           double* grad_logits, double* sums, double* counts);

#ifdef __cplusplus
}
#endif

#endif
