// The per-token policy loss (docs/algorithms.md §2) and the workspace layout, shared by the CPU kernels
// (policy_loss.cpp) and the CUDA kernels (cuda-kernels/policy_loss.cuh), so both run the same
// arithmetic. Plain scalar float code: the per-token work is O(T), next to O(T·V) for the rows.
#ifndef ARBOR_POLICY_LOSS_TOKEN_H
#define ARBOR_POLICY_LOSS_TOKEN_H

#include <math.h>
#include <stdint.h>

#include "arbor/arbor.h"

#ifdef __CUDACC__
#define ARBOR_PL_HD __host__ __device__
#define ARBOR_PL_NOINLINE
#else
#define ARBOR_PL_HD
// The composable and fused CPU paths call this from different ISA contexts; one out-of-line copy
// keeps their per-token arithmetic (FMA contraction included) bit-identical.
#define ARBOR_PL_NOINLINE __attribute__((noinline))
#endif

namespace arbor_pl {

// Outputs of one token: upstream gradients for the token-stats backward and its partial sums.
struct Token {
    float g_lp;                   // dL/dlogprob
    float g_h;                    // dL/dentropy
    float part[ARBOR_PL_NUM_SUMS];  // this token's terms of the sums (ARBOR_PL_S_*)
};

ARBOR_PL_HD inline float clampf(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }  // NaN stays NaN

// One valid token (m > 0). lp, H: its logprob and entropy (H may be NaN when not available);
// ref: reference logprob (ignored for KL NONE); sel: the value the AEPO selection compares.
// For GSPO, old is the per-sequence pre-pass's anchor sg(lp) - mean_seq δ, so lp - old is the
// sequence's mean log-ratio in value and has gradient 1 w.r.t. this token's lp (verl's token form).
ARBOR_PL_HD ARBOR_PL_NOINLINE inline void token_loss(const arbor_policy_loss_config& c, float lp, float H,
                                                     float old, float A, float m, float w, float ref, float sel,
                                                     Token& t) {
    // δ = clamp(lp - old, ±20) (GSPO: min(lp - old, 10), verl's clamp of the sequence log-ratio);
    // the clamp passes the gradient at its bounds, blocks it outside.
    const bool gspo = c.clip_mode == ARBOR_CLIP_GSPO;
    const float d_raw = lp - old;
    const bool d_out = gspo ? d_raw > 10.0f : (d_raw < -20.0f || d_raw > 20.0f);
    const float d = gspo ? (d_raw > 10.0f ? 10.0f : d_raw) : clampf(d_raw, -20.0f, 20.0f);
    const float r = expf(d);
    const float dr = d_out ? 0.0f : r;  // ∂r/∂lp
    const float lo = 1.0f - c.eps_low, hi = 1.0f + c.eps_high;
    float l, g;
    bool clip_hi, clip_lo;
    if (c.clip_mode == ARBOR_CLIP_CISPO) {
        // CISPO: ℓ = -sg(clip(r, lo, hi))·A·lp; every token keeps the gradient -clip(r)·A.
        const float cr = clampf(r, lo, hi);
        l = -cr * A * lp;
        g = -cr * A;
        clip_hi = r > hi;
        clip_lo = r < lo;
    } else {
        // PPO clip (GSPO: on the sequence ratio): ℓ = max(-A r, -A clip(r, lo, hi)); its gradient is
        // -A ∂r where the unclipped branch is active and 0 where r lies strictly outside [lo, hi] on
        // the side A makes active.
        const float l1 = -A * r, l2 = -A * clampf(r, lo, hi);
        l = l1 >= l2 ? l1 : l2;
        clip_hi = A > 0.0f && r > hi;
        clip_lo = A < 0.0f && r < lo;
        g = (clip_hi || clip_lo) ? 0.0f : -A * dr;
        // AEPO: the upper clip value hi·r/sg(r) keeps ℓ but has gradient -A·hi·∂lp (∂(r/sg r)/∂lp = 1).
        if (c.clip_mode == ARBOR_CLIP_AEPO && clip_hi && !(sel < c.aepo_entropy_threshold)) g = d_out ? 0.0f : -A * hi;
    }
    // Dual clip (verl compute_policy_loss_vanilla; PPO and AEPO, dual_clip_c > 0), A < 0:
    // ℓ = min(ℓ, -A c); where the cap is active the gradient is 0. Independent of AEPO's top side.
    bool dual = false;
    if (c.dual_clip_c > 0.0f && A < 0.0f) {
        const float l3 = -A * c.dual_clip_c;
        if (l > l3) {
            l = l3;
            g = 0.0f;
            dual = true;
        }
    }
    // KL to the reference, κ = ref - lp (docs/algorithms.md §2).
    float kl = 0.0f, gk = 0.0f;
    if (c.kl_type == ARBOR_KL_K1) {
        kl = lp - ref;
        gk = 1.0f;
    } else if (c.kl_type == ARBOR_KL_K2) {
        const float k = ref - lp;
        kl = 0.5f * k * k;
        gk = -k;
    } else if (c.kl_type == ARBOR_KL_K3) {
        const float k = ref - lp;
        const float kc = clampf(k, -20.0f, 20.0f);
        const float e = expf(kc);
        const float raw = e - kc - 1.0f;
        kl = clampf(raw, -10.0f, 10.0f);
        const bool blocked = k < -20.0f || k > 20.0f || raw < -10.0f || raw > 10.0f;
        gk = blocked ? 0.0f : 1.0f - e;
    }
    const float beta = c.kl_type == ARBOR_KL_NONE ? 0.0f : c.kl_coef;
    t.g_lp = w * (g + beta * gk);
    t.g_h = -c.entropy_coef * w;
    t.part[ARBOR_PL_S_PG] = w * l;
    t.part[ARBOR_PL_S_KL] = w * kl;
    t.part[ARBOR_PL_S_ENT] = w * H;
    t.part[ARBOR_PL_S_MASK] = m;
    t.part[ARBOR_PL_S_CLIP_HI] = clip_hi ? m : 0.0f;
    t.part[ARBOR_PL_S_CLIP_LO] = clip_lo ? m : 0.0f;
    t.part[ARBOR_PL_S_DUAL] = dual ? m : 0.0f;
    t.part[ARBOR_PL_S_NEG_DELTA] = -(m * d);
    t.part[ARBOR_PL_S_ENT_MASK] = m * H;
}

// A row that produced no distribution or had a bad label: NaN everywhere.
ARBOR_PL_HD inline void token_nan(Token& t) {
    t.g_lp = t.g_h = NAN;
    for (int k = 0; k < ARBOR_PL_NUM_SUMS; ++k) t.part[k] = NAN;
}

// --- workspace layout (arbor_policy_loss_workspace_bytes) -------------------------------------
// [0, P)        per-row partial sums: ARBOR_PL_NUM_SUMS arrays of `rows` floats (the loss kernels)
// [P, P + 64)   header: total mask (u64, 32.32 fixed point), error flag (u32), normalizer (f64)
// [.., +8 S)    per-sequence mask sums (u64, 32.32 fixed point)          (the weights kernel)
// [.., +4 S)    per-sequence row counts (u32)
// with P = 4·K·rows rounded up to 8. The per-row part starts at 0 whatever num_seqs is, so the loss
// kernels (which do not know num_seqs) and the weights kernel can share one workspace.
struct Workspace {
    float* parts;               // parts[k * rows + r]
    unsigned long long* total;  // Σ m (fixed point)
    unsigned int* flag;         // nonzero: a mask value or sequence id was invalid
    double* norm;               // the normalizer in use (N, B or F)
    unsigned long long* seq_sum;
    unsigned int* seq_rows;
};

ARBOR_PL_HD inline int64_t parts_bytes(int64_t rows) { return (4 * (int64_t)ARBOR_PL_NUM_SUMS * rows + 7) / 8 * 8; }

ARBOR_PL_HD inline int64_t workspace_bytes(int64_t rows, int64_t num_seqs) {
    if (rows < 0 || num_seqs < 0 || rows > ((int64_t)1 << 40) || num_seqs > ((int64_t)1 << 40)) return -1;
    return parts_bytes(rows) + 64 + 8 * num_seqs + 4 * num_seqs;
}

ARBOR_PL_HD inline Workspace carve(void* base, int64_t rows, int64_t num_seqs) {
    char* p = (char*)base;
    char* h = p + parts_bytes(rows);
    Workspace w;
    w.parts = (float*)p;
    w.total = (unsigned long long*)h;
    w.flag = (unsigned int*)(h + 8);
    w.norm = (double*)(h + 16);
    w.seq_sum = (unsigned long long*)(h + 64);
    w.seq_rows = (unsigned int*)(h + 64 + 8 * num_seqs);
    return w;
}

// 32.32 fixed point of a mask value in [0, 1]: exact for every value with at most 32 fractional bits
// (binary masks, halves, ...), and integer sums are independent of their order.
ARBOR_PL_HD inline unsigned long long to_fixed(float m) { return (unsigned long long)llrint((double)m * 4294967296.0); }
ARBOR_PL_HD inline double from_fixed(unsigned long long f) { return (double)f * (1.0 / 4294967296.0); }

ARBOR_PL_HD inline bool mask_ok(float m) { return m >= 0.0f && m <= 1.0f; }

// The normalizer of the aggregation mode from the batch counts, or the caller's (> 0).
ARBOR_PL_HD inline double normalizer(int agg_mode, double given, double tokens, double seqs, double max_rows) {
    if (given > 0.0) return given;
    switch (agg_mode) {
        case ARBOR_AGG_TOKEN_MEAN: return tokens;
        case ARBOR_AGG_SEQ_MEAN_TOKEN_SUM:
        case ARBOR_AGG_SEQ_MEAN_TOKEN_MEAN: return seqs;
        default: return max_rows;
    }
}

// w_t from the normalizer (and, for SEQ_MEAN_TOKEN_MEAN, the sequence's mask sum).
ARBOR_PL_HD inline float weight(int agg_mode, float m, double norm, unsigned long long seq_fixed) {
    if (!(m > 0.0f)) return 0.0f;
    double d = norm;
    if (agg_mode == ARBOR_AGG_SEQ_MEAN_TOKEN_MEAN) d *= from_fixed(seq_fixed);
    return d > 0.0 ? (float)((double)m / d) : 0.0f;
}

ARBOR_PL_HD inline bool bad_config(const arbor_policy_loss_config* c) {
    if (c == nullptr) return true;
    if (c->clip_mode != ARBOR_CLIP_PPO && c->clip_mode != ARBOR_CLIP_AEPO && c->clip_mode != ARBOR_CLIP_CISPO &&
        c->clip_mode != ARBOR_CLIP_GSPO)
        return true;
    if (c->kl_type < ARBOR_KL_NONE || c->kl_type > ARBOR_KL_K3) return true;
    if (!(c->eps_low >= 0.0f && c->eps_low <= 1.0f)) return true;
    if (!(c->eps_high >= 0.0f) || isinf(c->eps_high)) return true;
    // dual clip: 0 = off, else c > 1 finite; only PPO and AEPO have it (as in verl)
    if (c->dual_clip_c != 0.0f && (!(c->dual_clip_c > 1.0f) || isinf(c->dual_clip_c))) return true;
    if (c->dual_clip_c != 0.0f && (c->clip_mode == ARBOR_CLIP_CISPO || c->clip_mode == ARBOR_CLIP_GSPO)) return true;
    if (isnan(c->aepo_entropy_threshold)) return true;
    if (!(c->kl_coef >= 0.0f) || isinf(c->kl_coef)) return true;
    if (!isfinite(c->entropy_coef)) return true;
    if (!(c->temperature > 0.0f) || isinf(c->temperature)) return true;
    return false;
}

}  // namespace arbor_pl

#endif
