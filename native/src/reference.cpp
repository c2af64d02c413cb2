// Scalar double-precision references of the kernels: the ground truth for the JUnit tests and for
// cuda-kernels/test. Written to be obviously correct, not fast: plain two-pass loops straight from
// ALGORITHMS.md, no online rescaling, no vectorization.
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
