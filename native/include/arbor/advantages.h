/* Advantages and token-level shaping (docs/algorithms.md §3). Included by arbor/arbor.h.
 *
 * Sequence-level estimators (GRPO, Dr.GRPO, Tree-GRPO) work on one reward per trajectory (B values)
 * and live in Java (ai.arbor.advantage.Advantages). This header is the token-level half: the
 * sequence advantage of every trajectory broadcast over its tokens, optionally shaped by token entropy
 * (AEPO, TAO-RL). The shaping needs batch-wide statistics (entropy mean/std, a top-q threshold), so a
 * call is one batch.
 *
 * Layout. n_tokens tokens, flat. Token t belongs to sequence
 *   seq_ids[t]          when seq_ids != NULL (int32 or int64 per seq_id_dtype; any order), or
 *   t / seq_len         when seq_ids == NULL (a padded [n_seqs, seq_len] batch, n_tokens = n_seqs * seq_len).
 * loss_mask[t] (uint8, 1 = trained; NULL = all) marks the valid tokens: only they are read (their
 * sequence id, entropy, post-tool flag) and only they enter the statistics; masked tokens get 0.
 *
 * Modes (Ĥ_t = (H_t − μ) / sqrt(var + ARBOR_ADV_VAR_EPS), μ and var = mean and unbiased (n−1) variance
 * of the entropy over the valid tokens of the call — verl's masked_whiten; var = 0 when n < 2):
 *   ARBOR_ADV_BROADCAST  Ã_t = A_s                                   (GRPO / Dr.GRPO / Tree-GRPO)
 *   ARBOR_ADV_AEPO       Ã_t = A_s · (1 + coef · Ĥ_t)                (AEPO entropy-aware advantage, coef = a)
 *   ARBOR_ADV_TAO        Ã_t = A_s · (1 + coef · Ĥ_t) on the selected post-tool tokens, A_s elsewhere
 *                        (TAO-RL, coef = α). Candidates: valid tokens with post_tool[t] = 1 (M_post,
 *                        n_post of them). k = ceil(top_fraction · n_post) (a product within a relative
 *                        1e-6 of an integer counts as that integer), τ = the k-th largest candidate entropy; the
 *                        selected tokens are the candidates with H_t >= τ (ties at τ are all selected, so
 *                        more than k may be). top_fraction = 1 selects every candidate.
 * Statistics are computed in double precision with fixed-order reductions, so results are bitwise
 * identical for every thread count (CPU) and every run (CUDA).
 *
 * stats (double[ARBOR_ADV_NSTATS], required unless mode is ARBOR_ADV_BROADCAST; may be NULL there)
 * receives the batch statistics, for metrics — the CUDA kernels also pass them from the reduction to
 * the elementwise pass through it. Entries (ARBOR_ADV_STAT_*): counts, μ, unbiased std, τ (NaN when no
 * candidate), the scale 1/sqrt(var + eps), and the number of valid tokens whose entropy is not finite.
 * Entropy statistics are NaN when entropy is NULL or there is no valid token.
 *
 * Errors: ARBOR_ERR_ARG for bad sizes/pointers/mode/top_fraction, and (CPU) for a valid token whose
 * sequence id is outside [0, n_seqs) — that token's output is NaN. ARBOR_ERR_NAN (CPU) when a valid
 * token's entropy is NaN or infinite in a shaping mode: every valid output is NaN. The CUDA twins cannot
 * report either through the return code: they write NaN to those outputs (and the count to stats).
 */
#ifndef ARBOR_ADVANTAGES_H
#define ARBOR_ADVANTAGES_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Token-level modes. */
#define ARBOR_ADV_BROADCAST 0
#define ARBOR_ADV_AEPO 1
#define ARBOR_ADV_TAO 2

/* Variance epsilon of the entropy standardization (verl masked_whiten). */
#define ARBOR_ADV_VAR_EPS 1e-8

/* Entries of the stats array. */
#define ARBOR_ADV_STAT_VALID 0     /* valid tokens (loss_mask = 1) */
#define ARBOR_ADV_STAT_POST 1      /* valid post-tool tokens (post_tool given), the TAO candidates */
#define ARBOR_ADV_STAT_SHAPED 2    /* tokens whose advantage was scaled (AEPO: valid; TAO: selected) */
#define ARBOR_ADV_STAT_MEAN 3      /* μ: mean entropy over valid tokens */
#define ARBOR_ADV_STAT_STD 4       /* unbiased std of the entropy over valid tokens (0 when < 2) */
#define ARBOR_ADV_STAT_THRESHOLD 5 /* τ: TAO entropy threshold (NaN when no candidate or other modes) */
#define ARBOR_ADV_STAT_SCALE 6     /* 1 / sqrt(var + ARBOR_ADV_VAR_EPS) */
#define ARBOR_ADV_STAT_NONFINITE 7 /* valid tokens whose entropy is NaN or ±inf */
#define ARBOR_ADV_NSTATS 8

/*
 * Token-level advantages (see above). seq_adv: n_seqs sequence advantages (fp32). entropy: n_tokens
 * fp32 token entropies (required for AEPO/TAO; optional for BROADCAST, where it only feeds stats).
 * post_tool: n_tokens uint8 M_post flags (TAO; NULL = no post-tool token). adv_out: n_tokens fp32.
 * coef: a (AEPO) or α (TAO), finite. top_fraction: (0, 1], read by TAO only.
 */
int arbor_cpu_token_advantages(const float* seq_adv, int64_t n_seqs, const void* seq_ids, int seq_id_dtype,
                               int64_t n_tokens, int64_t seq_len, const uint8_t* loss_mask, const float* entropy,
                               const uint8_t* post_tool, int mode, float coef, double top_fraction, float* adv_out,
                               double* stats, int num_threads);

/* Scalar double-precision reference of the above (native/src/advantages.cpp): sorts the candidates for
 * τ, sums in index order. Returns the same codes (NaN outputs where the kernel's would be NaN). */
int arbor_ref_token_advantages(const double* seq_adv, int64_t n_seqs, const int64_t* seq_ids, int64_t n_tokens,
                               int64_t seq_len, const uint8_t* loss_mask, const double* entropy,
                               const uint8_t* post_tool, int mode, double coef, double top_fraction,
                               double* adv_out, double* stats);

#ifdef __cplusplus
}
#endif

#endif
