// Scalar double-precision references of the kernels: the ground truth for the JUnit tests and for
// cuda-kernels/test. Written to be obviously correct, not fast: plain two-pass loops straight from
// docs/algorithms.md, no online rescaling, no vectorization.
#include <math.h>

#include "arbor/arbor.h"

namespace {

// Softmax statistics of row z[0:n] (already divided by the temperature): max, lse, sum p z.
struct RefStats {
    double lse, mean_z;
    bool ok;
};

RefStats ref_stats(const double* z, int64_t n) {
    double m = -INFINITY;
    bool nan = false;
    for (int64_t j = 0; j < n; ++j) {
        if (isnan(z[j])) nan = true;
        if (z[j] > m) m = z[j];
    }
    if (nan || !isfinite(m)) return RefStats{NAN, NAN, false};
    double s = 0.0, sz = 0.0;
    for (int64_t j = 0; j < n; ++j) {
        if (z[j] == -INFINITY) continue;  // p_j = 0 contributes nothing (no 0 * -inf)
        double e = exp(z[j] - m);
        s += e;
        sz += e * (z[j] - m);
    }
    return RefStats{m + log(s), m + sz / s, true};
}

}  // namespace

extern "C" void arbor_ref_token_stats_fwd(const double* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                                          int64_t vocab_limit, const int64_t* labels, double temperature,
                                          const uint8_t* row_mask, double* logprob, double* entropy, double* lse) {
    (void)vocab;
    double* z = new double[vocab_limit];
    for (int64_t r = 0; r < rows; ++r) {
        if (row_mask && !row_mask[r]) {
            if (logprob) logprob[r] = 0.0;
            if (entropy) entropy[r] = 0.0;
            if (lse) lse[r] = 0.0;
            continue;
        }
        for (int64_t j = 0; j < vocab_limit; ++j) z[j] = logits[r * row_stride + j] / temperature;
        RefStats st = ref_stats(z, vocab_limit);
        if (lse) lse[r] = st.lse;
        if (entropy) entropy[r] = st.lse - st.mean_z;  // H = LSE - sum p z
        if (logprob) {
            int64_t y = labels[r];
            logprob[r] = (y >= 0 && y < vocab_limit) ? z[y] - st.lse : NAN;
        }
    }
    delete[] z;
}

extern "C" void arbor_ref_token_stats_bwd(const double* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                                          int64_t vocab_limit, const int64_t* labels, double temperature,
                                          const uint8_t* row_mask, const double* grad_logprob,
                                          const double* grad_entropy, double* grad_logits) {
    double* z = new double[vocab_limit];
    for (int64_t r = 0; r < rows; ++r) {
        double* out = grad_logits + r * row_stride;
        for (int64_t j = 0; j < vocab; ++j) out[j] = 0.0;
        if (row_mask && !row_mask[r]) continue;
        for (int64_t j = 0; j < vocab_limit; ++j) z[j] = logits[r * row_stride + j] / temperature;
        RefStats st = ref_stats(z, vocab_limit);
        double g_lp = grad_logprob ? grad_logprob[r] : 0.0;
        double g_h = grad_entropy ? grad_entropy[r] : 0.0;
        int64_t y = grad_logprob ? labels[r] : -1;
        for (int64_t j = 0; j < vocab_limit; ++j) {
            if (!st.ok) { out[j] = NAN; continue; }
            double p = z[j] == -INFINITY ? 0.0 : exp(z[j] - st.lse);
            double centered = z[j] == -INFINITY ? 0.0 : z[j] - st.mean_z;  // p = 0 there anyway
            double dz = g_lp * ((j == y ? 1.0 : 0.0) - p) - g_h * p * centered;
            out[j] = dz / temperature;
        }
    }
    delete[] z;
}

// ================================================================================================
// Sampling (docs/algorithms.md §10): the exact sampling distribution of every row, from a full sort in double.
// Definitions as in arbor/sampling.h: z = x / T; min-p keeps z_j - z_max >= log(min_p); top-k keeps
// z_j >= the k-th largest z; top-p keeps the shortest descending prefix (of what min-p and top-k
// kept) whose renormalized mass reaches top_p, plus the ties of its last value. Greedy (T = 0) is a
// point mass on the lowest-index argmax.
// ================================================================================================
#include <algorithm>
#include <vector>

extern "C" int arbor_ref_sample_probs(const double* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                                      int64_t vocab_limit, double temperature, const double* temperatures,
                                      int32_t top_k, const int32_t* top_ks, double top_p, const double* top_ps,
                                      double min_p, const double* min_ps, const uint8_t* row_mask, double* probs) {
    int rc = 0;
    const int64_t n = vocab_limit;
    std::vector<double> z(n), w(n);
    std::vector<int64_t> order(n);
    std::vector<char> keep(n);
    for (int64_t r = 0; r < rows; ++r) {
        double* out = probs + r * vocab;
        for (int64_t j = 0; j < vocab; ++j) out[j] = 0.0;
        if (row_mask && !row_mask[r]) continue;
        const double* x = logits + r * row_stride;
        const double t = temperatures ? temperatures[r] : temperature;
        const int64_t k = top_ks ? top_ks[r] : top_k;
        const double p = top_ps ? top_ps[r] : top_p;
        const double mp = min_ps ? min_ps[r] : min_p;
        bool ok = false;
        for (int64_t j = 0; j < n; ++j) {
            if (isnan(x[j]) || x[j] == INFINITY) { ok = false; break; }
            if (x[j] != -INFINITY) ok = true;
        }
        if (!ok) {
            for (int64_t j = 0; j < n; ++j) out[j] = NAN;
            rc = ARBOR_ERR_NAN;
            continue;
        }
        if (t == 0.0) {  // greedy
            int64_t best = 0;
            for (int64_t j = 1; j < n; ++j)
                if (x[j] > x[best]) best = j;
            out[best] = 1.0;
            continue;
        }
        double zmax = -INFINITY;
        for (int64_t j = 0; j < n; ++j) {
            z[j] = x[j] / t;
            zmax = std::max(zmax, z[j]);
            keep[j] = z[j] != -INFINITY;
            order[j] = j;
        }
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return z[a] > z[b]; });
        if (mp > 0.0)
            for (int64_t j = 0; j < n; ++j) keep[j] = keep[j] && z[j] - zmax >= log(mp);
        int64_t kept = 0;
        for (int64_t j = 0; j < n; ++j) kept += keep[j];
        if (k > 0 && kept > k) {
            int64_t seen = 0;
            double kth = zmax;
            for (int64_t i = 0; i < n && seen < k; ++i)
                if (keep[order[i]]) {
                    kth = z[order[i]];
                    ++seen;
                }
            for (int64_t j = 0; j < n; ++j) keep[j] = keep[j] && z[j] >= kth;
        }
        double total = 0.0;
        for (int64_t j = 0; j < n; ++j) {
            w[j] = keep[j] ? exp(z[j] - zmax) : 0.0;
            total += w[j];
        }
        if (p < 1.0) {
            double cum = 0.0, boundary = zmax;
            for (int64_t i = 0; i < n; ++i) {
                const int64_t j = order[i];
                if (!keep[j]) continue;
                cum += w[j];
                boundary = z[j];
                if (cum >= p * total) break;
            }
            total = 0.0;
            for (int64_t j = 0; j < n; ++j) {
                keep[j] = keep[j] && z[j] >= boundary;
                if (!keep[j]) w[j] = 0.0;
                total += w[j];
            }
        }
        for (int64_t j = 0; j < n; ++j) out[j] = w[j] / total;
    }
    return rc;
}
