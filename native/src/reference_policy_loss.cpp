// Scalar double-precision reference of the policy losses (docs/algorithms.md §2; ABI in
// arbor/policy_loss.h): the ground truth for cuda-kernels/test/check_policy_loss.cu and a cross-check
// for the Java tests. Straight loops in double, built on the token-statistics reference
// (arbor_ref_token_stats_fwd/bwd): logits → logprob, entropy → loss → per-row upstream gradients →
// dL/dlogits by the chain rule. Weights use plain double sums (the kernels use fixed point).
#include <math.h>

#include <vector>

#include "arbor/arbor.h"

namespace {

double clampd(double x, double lo, double hi) { return x < lo ? lo : (x > hi ? hi : x); }

}  // namespace

extern "C" void arbor_ref_policy_loss(const arbor_policy_loss_config* cfg, int agg_mode, double agg_normalizer,
                                      const double* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                                      int64_t vocab_limit, const int64_t* labels, const double* old_logprob,
                                      const double* advantages, const double* mask, const double* ref_logprob,
                                      const int32_t* seq_ids, int64_t num_seqs, const double* select_entropy,
                                      double* grad_logits, double* sums, double* counts) {
    const arbor_policy_loss_config& c = *cfg;
    std::vector<uint8_t> valid(rows);
    for (int64_t r = 0; r < rows; ++r) valid[r] = mask[r] > 0.0 ? 1 : 0;
    std::vector<double> lp(rows), H(rows);
    arbor_ref_token_stats_fwd(logits, rows, vocab, row_stride, vocab_limit, labels, c.temperature, valid.data(),
                              lp.data(), H.data(), nullptr);

    // Aggregation weights (verl agg_loss).
    double tokens = 0.0;
    std::vector<double> seq_len(num_seqs > 0 ? num_seqs : 0, 0.0), seq_rows(num_seqs > 0 ? num_seqs : 0, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
        tokens += mask[r];
        if (seq_ids != nullptr && seq_ids[r] >= 0) {
            seq_len[seq_ids[r]] += mask[r];
            seq_rows[seq_ids[r]] += 1.0;
        }
    }
    double seqs = 0.0, max_rows = 0.0;
    for (int64_t s = 0; s < (int64_t)seq_len.size(); ++s) {
        if (seq_len[s] > 0.0) seqs += 1.0;
        if (seq_rows[s] > max_rows) max_rows = seq_rows[s];
    }
    double norm = agg_mode == ARBOR_AGG_TOKEN_MEAN ? tokens
                  : agg_mode == ARBOR_AGG_SEQ_MEAN_TOKEN_SUM_NORM ? max_rows
                                                                  : seqs;
    if (agg_normalizer > 0.0) norm = agg_normalizer;
    if (counts != nullptr) {
        counts[ARBOR_PL_C_TOKENS] = tokens;
        counts[ARBOR_PL_C_SEQS] = seqs;
        counts[ARBOR_PL_C_MAX_ROWS] = max_rows;
        counts[ARBOR_PL_C_NORMALIZER] = norm;
    }

    for (int k = 0; k < ARBOR_PL_NUM_SUMS; ++k) sums[k] = 0.0;
    std::vector<double> g_lp(rows, 0.0), g_h(rows, 0.0);
    const double lo = 1.0 - (double)c.eps_low, hi = 1.0 + (double)c.eps_high;
    for (int64_t r = 0; r < rows; ++r) {
        if (!valid[r]) continue;
        const double m = mask[r], A = advantages[r];
        double w = m / norm;
        if (agg_mode == ARBOR_AGG_SEQ_MEAN_TOKEN_MEAN) w = m / (norm * seq_len[seq_ids[r]]);
        // ratio, with the log-ratio clamped to ±20 (gradient passes inside and at the bounds); GSPO:
        // old is the sequence anchor, the log-ratio clamped to <= 10 only (verl compute_policy_loss_gspo)
        const bool gspo = c.clip_mode == ARBOR_CLIP_GSPO;
        const double d_raw = lp[r] - old_logprob[r];
        const bool d_in = gspo ? d_raw <= 10.0 : (d_raw >= -20.0 && d_raw <= 20.0);
        const double d = gspo ? fmin(d_raw, 10.0) : clampd(d_raw, -20.0, 20.0);
        const double ratio = exp(d);
        double loss, dloss;
        bool top, bottom;
        if (c.clip_mode == ARBOR_CLIP_CISPO) {
            // -sg(clip(ratio)) * A * logprob (verl compute_policy_loss_cispo)
            const double cr = clampd(ratio, lo, hi);
            loss = -cr * A * lp[r];
            dloss = -cr * A;
            top = ratio > hi;
            bottom = ratio < lo;
        } else {
            // clipped surrogate
            loss = fmax(-A * ratio, -A * clampd(ratio, lo, hi));
            top = A > 0 && ratio > hi;
            bottom = A < 0 && ratio < lo;
            dloss = (top || bottom || !d_in) ? 0.0 : -A * ratio;
            if (c.clip_mode == ARBOR_CLIP_AEPO && top) {
                const double sel = select_entropy ? select_entropy[r] : H[r];
                if (sel >= (double)c.aepo_entropy_threshold) dloss = d_in ? -A * hi : 0.0;
            }
        }
        bool dual = false;
        if (c.dual_clip_c > 0.0f && A < 0 && loss > -A * (double)c.dual_clip_c) {
            loss = -A * (double)c.dual_clip_c;
            dloss = 0.0;
            dual = true;
        }
        // KL to the reference, kappa = ref - logprob
        double kl = 0.0, dkl = 0.0;
        if (c.kl_type != ARBOR_KL_NONE) {
            const double kappa = ref_logprob[r] - lp[r];
            if (c.kl_type == ARBOR_KL_K1) {
                kl = -kappa;
                dkl = 1.0;
            } else if (c.kl_type == ARBOR_KL_K2) {
                kl = 0.5 * kappa * kappa;
                dkl = -kappa;
            } else {
                const double kc = clampd(kappa, -20.0, 20.0);
                const double raw = exp(kc) - kc - 1.0;
                kl = clampd(raw, -10.0, 10.0);
                const bool inside = kappa >= -20.0 && kappa <= 20.0 && raw >= -10.0 && raw <= 10.0;
                dkl = inside ? 1.0 - exp(kappa) : 0.0;
            }
        }
        const double beta = c.kl_type == ARBOR_KL_NONE ? 0.0 : (double)c.kl_coef;
        g_lp[r] = w * (dloss + beta * dkl);
        g_h[r] = -(double)c.entropy_coef * w;
        sums[ARBOR_PL_S_PG] += w * loss;
        sums[ARBOR_PL_S_KL] += w * kl;
        sums[ARBOR_PL_S_ENT] += w * H[r];
        sums[ARBOR_PL_S_MASK] += m;
        sums[ARBOR_PL_S_CLIP_HI] += top ? m : 0.0;
        sums[ARBOR_PL_S_CLIP_LO] += bottom ? m : 0.0;
        sums[ARBOR_PL_S_DUAL] += dual ? m : 0.0;
        sums[ARBOR_PL_S_NEG_DELTA] += -m * d;
        sums[ARBOR_PL_S_ENT_MASK] += m * H[r];
    }
    arbor_ref_token_stats_bwd(logits, rows, vocab, row_stride, vocab_limit, labels, c.temperature, valid.data(),
                              g_lp.data(), g_h.data(), grad_logits);
}
