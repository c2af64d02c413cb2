/* Sampling: fused sample + logprob + entropy (docs/algorithms.md §10). Included by arbor/arbor.h.
 *
 * One call draws one token per row of a [rows, vocab] logits matrix and returns, per row,
 *   token            the sampled token id (int32 or int64, token_dtype = ARBOR_I32 | ARBOR_I64)
 *   logprob_sampled  log q(token): q is the *sampling* distribution — the tempered distribution
 *                    truncated by top-k / top-p / min-p and renormalized (0 for greedy rows)
 *   logprob          log p(token): p = softmax(logits / T) over [0, vocab_limit), untruncated.
 *                    This is the behaviour ("old") logprob a PPO/GRPO trainer stores; see
 *                    docs/sampling.md for why it, and not logprob_sampled, keeps ratios consistent.
 *   entropy          H(p) of the same untruncated tempered distribution.
 * logprob and entropy are exactly the token-statistics kernel's values for the same logits,
 * temperature and label = token (arbor_cpu_token_stats_fwd_*; the CUDA twin likewise matches
 * arbor_cuda_token_stats_fwd_*). For a greedy row (T = 0) they are taken at T = 1.
 *
 * Per-row parameters. Each parameter has a scalar value and an optional per-row array (NULL = use
 * the scalar for every row):
 *   temperature  finite, >= 0; 0 = greedy (argmax, the lowest index among equal maxima)
 *   top_k        keep the tokens whose tempered logit z is >= the k-th largest z (ties at the k-th
 *                value are all kept); <= 0 = off
 *   top_p        in (0, 1]: then keep the smallest prefix, in descending z, of the tokens left by
 *                top-k and min-p whose renormalized mass is >= top_p (ties at the boundary kept);
 *                1 = off
 *   min_p        in [0, 1]: keep tokens with p_j >= min_p * max_j p_j; 0 = off
 * The order is vLLM's: min-p and top-k (both prefixes of the descending order, so their order does
 * not matter), then top-p on the distribution renormalized over what they kept.
 *
 * Randomness: counter-based Philox-4x32-10 (Salmon et al., SC'11; Random123's reference vectors),
 * keyed per row by (seed, key, step): Philox key = seed, counter = (c0, step, key lo, key hi) where
 * column j uses c0 = (j >> 5) << 3 | (j & 7) and output word (j >> 3) & 3. A row's token therefore
 * depends only on its logits, its parameters and (seed, key, step) — not on its position in the
 * batch, the other rows, the thread count or the device. `keys` (uint64 per row) names the row's
 * random stream (e.g. a trajectory id); NULL = the row index. `step` must be in [0, 2^32).
 * The token is argmax_{j kept} (z_j + G_j) with G_j = -log(-log u_j) (Gumbel-max), u_j in (0, 1)
 * from 23 random bits; ties go to the lowest index. Every quantity that decides the token — z_j,
 * G_j (own log polynomial), thresholds, top-p masses (exact integer sums in units of 2^-40 of the
 * row's max probability) — is computed with the same IEEE fp32 operations on the CPU (scalar and
 * AVX2 paths) and on CUDA, so the token is bitwise identical across all of them. The exact
 * definitions are in docs/sampling.md.
 *
 * Errors: a valid row with NaN or +inf logits, or no finite logit in [0, vocab_limit), or whose
 * logits overflow when divided by the temperature, has no distribution: its token is -1, its
 * outputs NaN, and the call returns ARBOR_ERR_NAN after computing the other rows. A masked row
 * (row_mask[r] == 0) gets token -1 and 0 outputs. Any invalid size or parameter gives ARBOR_ERR_ARG
 * before anything is written.
 * Any of logprob_sampled / logprob / entropy may be NULL; tokens may not.
 * --------------------------------------------------------------------------------------------- */
#ifndef ARBOR_SAMPLING_H
#define ARBOR_SAMPLING_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int arbor_cpu_sample_f32(const float* logits, int64_t rows, int64_t vocab, int64_t row_stride, int64_t vocab_limit,
                         float temperature, const float* temperatures, int32_t top_k, const int32_t* top_ks,
                         float top_p, const float* top_ps, float min_p, const float* min_ps, uint64_t seed,
                         const uint64_t* seeds, const uint64_t* keys, uint64_t step, const uint64_t* steps,
                         const uint8_t* row_mask, void* tokens, int token_dtype, float* logprob_sampled,
                         float* logprob, float* entropy, int num_threads);
int arbor_cpu_sample_bf16(const uint16_t* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                          int64_t vocab_limit, float temperature, const float* temperatures, int32_t top_k,
                          const int32_t* top_ks, float top_p, const float* top_ps, float min_p, const float* min_ps,
                          uint64_t seed, const uint64_t* seeds, const uint64_t* keys, uint64_t step,
                          const uint64_t* steps, const uint8_t* row_mask, void* tokens, int token_dtype,
                          float* logprob_sampled, float* logprob, float* entropy, int num_threads);
int arbor_cpu_sample_f16(const uint16_t* logits, int64_t rows, int64_t vocab, int64_t row_stride, int64_t vocab_limit,
                         float temperature, const float* temperatures, int32_t top_k, const int32_t* top_ks,
                         float top_p, const float* top_ps, float min_p, const float* min_ps, uint64_t seed,
                         const uint64_t* seeds, const uint64_t* keys, uint64_t step, const uint64_t* steps,
                         const uint8_t* row_mask, void* tokens, int token_dtype, float* logprob_sampled,
                         float* logprob, float* entropy, int num_threads);

/* The generator itself, for tests and for reproducing the kernels' randomness elsewhere:
 * Philox-4x32-10 of counter ctr[4] under key key[2] into out[4] (Random123's philox4x32_R(10)). */
void arbor_philox4x32_10(const uint32_t* ctr, const uint32_t* key, uint32_t* out);
/* The uniform u in (0, 1) the kernels use for column `column` of a row keyed (seed, key, step), and
 * its Gumbel noise G = -log(-log u) exactly as the kernels compute it (fp32). */
float arbor_sample_uniform(uint64_t seed, uint64_t key, uint64_t step, int64_t column);
float arbor_sample_gumbel(uint64_t seed, uint64_t key, uint64_t step, int64_t column);
/* The two uniforms in (0, 1) (53 bits each) of an untruncated row's draw (T > 0, no min-p / top-k / top-p):
 * which = 0 picks the column chunk by its mass, which = 1 the column within it (docs/sampling.md). */
double arbor_sample_draw_uniform(uint64_t seed, uint64_t key, uint64_t step, int which);
/* Test hooks: the same values through the CPU kernels' dispatched (AVX2 or scalar) row code, which
 * must equal the functions above bit for bit: gumbel[j] = G of columns [0, columns) of the stream,
 * and out[i] = e^{d[i]} (d <= 0) as the top-p masses use it. */
void arbor_cpu_sample_noise(uint64_t seed, uint64_t key, uint64_t step, int64_t columns, float* gumbel);
void arbor_cpu_sample_exp(const float* d, int64_t n, float* out);
/* How the CPU kernels decided the threshold of the rows drawn with top-p and/or min-p and no cutting top-k since
 * the last reset: counts[0] from the candidates held by the statistics pass (with top-p alone, and the bound on
 * the rest's mass), counts[1] with an exact pass for the total (top-p alone: the bound was too wide), counts[2]
 * by the binned path (the candidates did not decide it). reset != 0 zeroes them. */
void arbor_cpu_sample_nucleus_paths(int64_t* counts, int reset);
/* Test hook: multiplies that bound on the rest's mass by factor (>= 1; 1 restores it), so that tests take the
 * exact-total and binned paths on rows that would not need them; +inf sends every such row (min-p ones too) to
 * the binned path. */
void arbor_cpu_sample_nucleus_widen(double factor);
/* max |G' - G| over all 2^23 possible uniforms: G' the kernels' fp32 noise, G = -log(-log u) in
 * double. The kernels skip columns that cannot win using a bound 10 times this (checked by a test). */
double arbor_sample_gumbel_max_error(void);

/* Scalar double-precision reference (native/src/reference.cpp): the exact sampling distribution
 * q of every row — the tempered softmax (z = logits / T in double) truncated by min-p, top-k and
 * top-p as defined above, from a full sort — into probs[r * vocab + j] (0 for j >= vocab_limit
 * and for excluded tokens; a greedy row is a point mass on its lowest-index argmax). Per-row
 * arrays as in the kernels (NULL = scalar). Returns 0, or ARBOR_ERR_NAN if some valid row has no
 * distribution (that row is all NaN). Masked rows are all 0. */
int arbor_ref_sample_probs(const double* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                           int64_t vocab_limit, double temperature, const double* temperatures, int32_t top_k,
                           const int32_t* top_ks, double top_p, const double* top_ps, double min_p,
                           const double* min_ps, const uint8_t* row_mask, double* probs);

#ifdef __cplusplus
}
#endif

#endif
