// Advantages and token-level shaping (docs/algorithms.md §3) — CPU kernel and its double reference.
// Contract: arbor/advantages.h.
//
// Three passes over the tokens, each split into fixed chunks of TOKEN_CHUNK tokens (the split does not
// depend on the thread count): (1) per-chunk partial counts and entropy sums, combined in chunk order;
// (2) per-chunk sums of squared deviations, combined likewise; (3) elementwise output, specialized on the
// id layout and the mode. A plain broadcast without stats runs pass 3 only. TAO-RL's
// threshold is an exact order statistic (nth_element over a copy of the candidates), so every step is
// deterministic and the result is bitwise identical for every thread count.
#include <math.h>
#include <string.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <vector>

#include "advantages_common.h"
#include "arbor/arbor.h"
#include "parallel.h"

namespace arbor {
namespace adv {

static const int64_t TOKEN_CHUNK = 1 << 14;

// x when keep, else +0.0 — by bit masking, so the compiler cannot turn a random mask into branches
// (x may be NaN or junk when !keep: masked tokens' entropies are never read into a sum).
static inline double keep_or_zero(double x, bool keep) {
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    b &= (uint64_t)0 - (uint64_t)keep;
    memcpy(&x, &b, sizeof b);
    return x;
}

struct ChunkSums {
    double sum = 0.0;  // Σ H over valid tokens with finite H (pass 1), Σ (H − μ)² (pass 2)
    int64_t valid = 0, post = 0, nonfinite = 0;
};

// Pass 1 over tokens [b, e): counts and Σ H. Four accumulators (token b + 4i + j goes to j, the tail to 0,
// combined as (s0 + s1) + (s2 + s3)) break the add latency chain and keep the order fixed. Branch-free
// selects: a masked token's entropy may be junk or NaN and is never added.
template <bool M, bool P, bool H>
static ChunkSums pass1(const uint8_t* mask, const float* h, const uint8_t* post, int64_t b, int64_t e) {
    double s[4] = {0.0, 0.0, 0.0, 0.0};
    int64_t valid = 0, npost = 0, nonfinite = 0;
    auto token = [&](int64_t t, double& acc) {
        const int v = !M || mask[t] != 0;
        valid += v;
        if (P) npost += v & (int)(post[t] != 0);
        if (H) {
            const float x = h[t];
            const int fin = isfinite(x);
            nonfinite += v & (fin ^ 1);
            acc += keep_or_zero((double)x, v & fin);
        }
    };
    int64_t t = b;
    for (; t + 4 <= e; t += 4) {
        token(t, s[0]);
        token(t + 1, s[1]);
        token(t + 2, s[2]);
        token(t + 3, s[3]);
    }
    for (; t < e; ++t) token(t, s[0]);
    ChunkSums r;
    r.sum = (s[0] + s[1]) + (s[2] + s[3]);
    r.valid = valid;
    r.post = npost;
    r.nonfinite = nonfinite;
    return r;
}

// Pass 2 over [b, e): Σ (H − μ)² over valid tokens, same accumulator scheme (two-pass: no cancellation).
template <bool M>
static double pass2(const uint8_t* mask, const float* h, double mean, int64_t b, int64_t e) {
    double s[4] = {0.0, 0.0, 0.0, 0.0};
    auto token = [&](int64_t t, double& acc) {
        const double d = (double)h[t] - mean;
        acc += keep_or_zero(d * d, !M || mask[t] != 0);
    };
    int64_t t = b;
    for (; t + 4 <= e; t += 4) {
        token(t, s[0]);
        token(t + 1, s[1]);
        token(t + 2, s[2]);
        token(t + 3, s[3]);
    }
    for (; t < e; ++t) token(t, s[0]);
    return (s[0] + s[1]) + (s[2] + s[3]);
}

static ChunkSums pass1_dispatch(const uint8_t* mask, const float* h, const uint8_t* post, int64_t b, int64_t e) {
    const int k = (mask != nullptr) * 4 + (post != nullptr) * 2 + (h != nullptr);
    switch (k) {
        case 0: return pass1<false, false, false>(mask, h, post, b, e);
        case 1: return pass1<false, false, true>(mask, h, post, b, e);
        case 2: return pass1<false, true, false>(mask, h, post, b, e);
        case 3: return pass1<false, true, true>(mask, h, post, b, e);
        case 4: return pass1<true, false, false>(mask, h, post, b, e);
        case 5: return pass1<true, false, true>(mask, h, post, b, e);
        case 6: return pass1<true, true, false>(mask, h, post, b, e);
        default: return pass1<true, true, true>(mask, h, post, b, e);
    }
}

// Where token t's sequence id comes from (hoisted out of the elementwise loop).
struct PaddedIds {
    int64_t seq_len;
    int64_t operator()(int64_t t) const { return t / seq_len; }
};
template <class I>
struct ArrayIds {
    const I* ids;
    int64_t operator()(int64_t t) const { return (int64_t)ids[t]; }
};

// Pass 3 over [b, e): the output. Returns the number of shaped tokens; sets bad_id on an out-of-range id.
template <int MODE, class Ids>
static int64_t apply(Ids ids, const float* seq_adv, int64_t n_seqs, const uint8_t* mask, const float* h,
                     const uint8_t* post, float coef, double mean, double scale, float tau, bool all_nan, float* out,
                     int64_t b, int64_t e, bool& bad_id) {
    int64_t shaped = 0;
    for (int64_t t = b; t < e; ++t) {
        if (mask != nullptr && !mask[t]) {
            out[t] = 0.0f;
            continue;
        }
        const int64_t s = ids(t);
        if (s < 0 || s >= n_seqs) {
            out[t] = NAN;
            bad_id = true;
            continue;
        }
        const float a = seq_adv[s];
        if (MODE == ARBOR_ADV_BROADCAST) {
            out[t] = a;
        } else if (all_nan) {
            out[t] = NAN;
        } else if (MODE == ARBOR_ADV_AEPO || (post != nullptr && post[t] && h[t] >= tau)) {
            // docs/algorithms.md §3: Ã = A · (1 + coef · Ĥ), Ĥ = (H − μ) / sqrt(var + eps)
            const double h_hat = ((double)h[t] - mean) * scale;
            out[t] = (float)((double)a * (1.0 + (double)coef * h_hat));
            shaped++;
        } else {
            out[t] = a;
        }
    }
    return shaped;
}

template <class Ids>
static int64_t apply_mode(int mode, Ids ids, const float* seq_adv, int64_t n_seqs, const uint8_t* mask, const float* h,
                          const uint8_t* post, float coef, double mean, double scale, float tau, bool all_nan,
                          float* out, int64_t b, int64_t e, bool& bad_id) {
    if (mode == ARBOR_ADV_AEPO)
        return apply<ARBOR_ADV_AEPO>(ids, seq_adv, n_seqs, mask, h, post, coef, mean, scale, tau, all_nan, out, b, e, bad_id);
    if (mode == ARBOR_ADV_TAO)
        return apply<ARBOR_ADV_TAO>(ids, seq_adv, n_seqs, mask, h, post, coef, mean, scale, tau, all_nan, out, b, e, bad_id);
    return apply<ARBOR_ADV_BROADCAST>(ids, seq_adv, n_seqs, mask, h, post, coef, mean, scale, tau, all_nan, out, b, e, bad_id);
}

static int token_advantages(const float* seq_adv, int64_t n_seqs, const void* seq_ids, int seq_id_dtype,
                            int64_t n_tokens, int64_t seq_len, const uint8_t* mask, const float* entropy,
                            const uint8_t* post_tool, int mode, float coef, double top_fraction, float* out,
                            double* stats, int num_threads) {
    if (bad_token_adv_args(seq_adv, n_seqs, seq_ids, seq_id_dtype, n_tokens, seq_len, entropy, mode, coef,
                           top_fraction, out, stats))
        return ARBOR_ERR_ARG;
    const int64_t nchunks = (n_tokens + TOKEN_CHUNK - 1) / TOKEN_CHUNK;
    auto chunk_end = [&](int64_t c) { return std::min(n_tokens, (c + 1) * TOKEN_CHUNK); };

    // Passes 1 and 2: batch statistics, per chunk, combined in chunk order (skipped for a plain broadcast
    // without stats).
    ChunkSums tot;
    std::vector<ChunkSums> part;
    double mean = NAN, var = NAN, scale = NAN;
    bool have_h = false;
    if (stats != nullptr || mode != ARBOR_ADV_BROADCAST) {
        part.resize(nchunks);
        parallel_for(nchunks, num_threads, TOKEN_CHUNK, [&](int64_t b, int64_t e) {
            for (int64_t c = b; c < e; ++c) part[c] = pass1_dispatch(mask, entropy, post_tool, c * TOKEN_CHUNK, chunk_end(c));
        });
        for (const ChunkSums& s : part) {
            tot.sum += s.sum;
            tot.valid += s.valid;
            tot.post += s.post;
            tot.nonfinite += s.nonfinite;
        }
        have_h = entropy != nullptr && tot.valid > 0 && tot.nonfinite == 0;
    }
    if (have_h) {
        mean = tot.sum / (double)tot.valid;
        std::vector<double> ss(nchunks, 0.0);
        parallel_for(nchunks, num_threads, TOKEN_CHUNK, [&](int64_t b, int64_t e) {
            for (int64_t c = b; c < e; ++c)
                ss[c] = mask != nullptr ? pass2<true>(mask, entropy, mean, c * TOKEN_CHUNK, chunk_end(c))
                                        : pass2<false>(mask, entropy, mean, c * TOKEN_CHUNK, chunk_end(c));
        });
        double sum_sq = 0.0;
        for (double s : ss) sum_sq += s;
        var = tot.valid >= 2 ? sum_sq / (double)(tot.valid - 1) : 0.0;
        scale = 1.0 / sqrt(var + ARBOR_ADV_VAR_EPS);
    }

    // TAO-RL threshold τ: the k-th largest candidate entropy (candidates gathered in chunk order).
    float tau = NAN;
    if (mode == ARBOR_ADV_TAO && have_h && tot.post > 0) {
        std::vector<float> cand(tot.post);
        std::vector<int64_t> offset(nchunks + 1, 0);
        for (int64_t c = 0; c < nchunks; ++c) offset[c + 1] = offset[c] + part[c].post;
        parallel_for(nchunks, num_threads, TOKEN_CHUNK, [&](int64_t b, int64_t e) {
            for (int64_t c = b; c < e; ++c) {
                int64_t o = offset[c];
                for (int64_t t = c * TOKEN_CHUNK; t < chunk_end(c); ++t)
                    if ((mask == nullptr || mask[t]) && post_tool[t]) cand[o++] = entropy[t];
            }
        });
        const int64_t k = top_fraction_count(top_fraction, tot.post);
        std::nth_element(cand.begin(), cand.begin() + (k - 1), cand.end(), std::greater<float>());
        tau = cand[k - 1];
    }

    // Pass 3: elementwise output (integer counts only, so their summation order does not matter).
    const bool shaping_nan = mode != ARBOR_ADV_BROADCAST && !have_h && tot.nonfinite > 0;
    std::atomic<int> bad_id{0};
    std::atomic<int64_t> shaped{0};
    // ~1-2 ns per token: a thread (tens of µs to start) pays off from ~32 Ki tokens on (parallel.h's unit)
    parallel_for(n_tokens, num_threads, 1, [&](int64_t b, int64_t e) {
        bool bad = false;
        int64_t n;
        if (seq_ids == nullptr)
            n = apply_mode(mode, PaddedIds{seq_len}, seq_adv, n_seqs, mask, entropy, post_tool, coef, mean, scale, tau,
                           shaping_nan, out, b, e, bad);
        else if (seq_id_dtype == ARBOR_I32)
            n = apply_mode(mode, ArrayIds<int32_t>{(const int32_t*)seq_ids}, seq_adv, n_seqs, mask, entropy, post_tool,
                           coef, mean, scale, tau, shaping_nan, out, b, e, bad);
        else
            n = apply_mode(mode, ArrayIds<int64_t>{(const int64_t*)seq_ids}, seq_adv, n_seqs, mask, entropy, post_tool,
                           coef, mean, scale, tau, shaping_nan, out, b, e, bad);
        shaped.fetch_add(n, std::memory_order_relaxed);
        if (bad) bad_id.store(1, std::memory_order_relaxed);
    });

    if (stats != nullptr) {
        stats[ARBOR_ADV_STAT_VALID] = (double)tot.valid;
        stats[ARBOR_ADV_STAT_POST] = post_tool != nullptr ? (double)tot.post : 0.0;
        stats[ARBOR_ADV_STAT_SHAPED] = (double)shaped.load();
        stats[ARBOR_ADV_STAT_MEAN] = mean;
        stats[ARBOR_ADV_STAT_STD] = have_h ? sqrt(var) : NAN;
        stats[ARBOR_ADV_STAT_THRESHOLD] = tau;
        stats[ARBOR_ADV_STAT_SCALE] = scale;
        stats[ARBOR_ADV_STAT_NONFINITE] = (double)tot.nonfinite;
    }
    if (bad_id.load()) return ARBOR_ERR_ARG;
    return shaping_nan ? ARBOR_ERR_NAN : ARBOR_OK;
}

}  // namespace adv
}  // namespace arbor

extern "C" int arbor_cpu_token_advantages(const float* seq_adv, int64_t n_seqs, const void* seq_ids,
                                          int seq_id_dtype, int64_t n_tokens, int64_t seq_len,
                                          const uint8_t* loss_mask, const float* entropy, const uint8_t* post_tool,
                                          int mode, float coef, double top_fraction, float* adv_out, double* stats,
                                          int num_threads) {
    try {
        return arbor::adv::token_advantages(seq_adv, n_seqs, seq_ids, seq_id_dtype, n_tokens, seq_len, loss_mask,
                                            entropy, post_tool, mode, coef, top_fraction, adv_out, stats, num_threads);
    } ARBOR_CATCH_ALL
}

// ---- scalar double-precision reference ----------------------------------------------------------------

extern "C" int arbor_ref_token_advantages(const double* seq_adv, int64_t n_seqs, const int64_t* seq_ids,
                                          int64_t n_tokens, int64_t seq_len, const uint8_t* loss_mask,
                                          const double* entropy, const uint8_t* post_tool, int mode, double coef,
                                          double top_fraction, double* adv_out, double* stats) {
    using namespace arbor;
    if (bad_token_adv_args(seq_adv, n_seqs, seq_ids, ARBOR_I64, n_tokens, seq_len, entropy, mode, coef,
                           top_fraction, adv_out, stats))
        return ARBOR_ERR_ARG;
    auto valid = [&](int64_t t) { return loss_mask == nullptr || loss_mask[t] != 0; };
    int64_t n = 0, n_post = 0, nonfinite = 0;
    double sum = 0.0;
    for (int64_t t = 0; t < n_tokens; ++t) {
        if (!valid(t)) continue;
        n++;
        if (post_tool && post_tool[t]) n_post++;
        if (entropy) {
            if (isfinite(entropy[t])) sum += entropy[t];
            else nonfinite++;
        }
    }
    const bool have_h = entropy != nullptr && n > 0 && nonfinite == 0;
    double mean = NAN, var = NAN, scale = NAN, tau = NAN;
    if (have_h) {
        mean = sum / n;
        double ss = 0.0;
        for (int64_t t = 0; t < n_tokens; ++t)
            if (valid(t)) ss += (entropy[t] - mean) * (entropy[t] - mean);
        var = n >= 2 ? ss / (n - 1) : 0.0;
        scale = 1.0 / sqrt(var + ARBOR_ADV_VAR_EPS);
    }
    if (mode == ARBOR_ADV_TAO && have_h && n_post > 0) {
        std::vector<double> cand;
        for (int64_t t = 0; t < n_tokens; ++t)
            if (valid(t) && post_tool[t]) cand.push_back(entropy[t]);
        std::sort(cand.begin(), cand.end(), std::greater<double>());
        tau = cand[top_fraction_count(top_fraction, n_post) - 1];
    }
    const bool shaping_nan = mode != ARBOR_ADV_BROADCAST && !have_h && nonfinite > 0;
    bool bad_id = false;
    int64_t shaped = 0;
    for (int64_t t = 0; t < n_tokens; ++t) {
        if (!valid(t)) {
            adv_out[t] = 0.0;
            continue;
        }
        const int64_t s = seq_ids ? seq_ids[t] : t / seq_len;
        if (s < 0 || s >= n_seqs) {
            adv_out[t] = NAN;
            bad_id = true;
            continue;
        }
        const double a = seq_adv[s];
        const bool shape = mode == ARBOR_ADV_AEPO || (mode == ARBOR_ADV_TAO && post_tool && post_tool[t] && entropy[t] >= tau);
        if (mode != ARBOR_ADV_BROADCAST && shaping_nan) {
            adv_out[t] = NAN;
        } else if (shape) {
            adv_out[t] = a * (1.0 + coef * (entropy[t] - mean) * scale);
            shaped++;
        } else {
            adv_out[t] = a;
        }
    }
    if (stats) {
        stats[ARBOR_ADV_STAT_VALID] = (double)n;
        stats[ARBOR_ADV_STAT_POST] = post_tool ? (double)n_post : 0.0;
        stats[ARBOR_ADV_STAT_SHAPED] = (double)shaped;
        stats[ARBOR_ADV_STAT_MEAN] = mean;
        stats[ARBOR_ADV_STAT_STD] = have_h ? sqrt(var) : NAN;
        stats[ARBOR_ADV_STAT_THRESHOLD] = tau;
        stats[ARBOR_ADV_STAT_SCALE] = scale;
        stats[ARBOR_ADV_STAT_NONFINITE] = (double)nonfinite;
    }
    if (bad_id) return ARBOR_ERR_ARG;
    return shaping_nan ? ARBOR_ERR_NAN : ARBOR_OK;
}
