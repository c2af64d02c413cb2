// Fused output projection + token statistics + policy loss — CPU kernels (ABI and the two passes:
// arbor/fused_linear.h). The per-row work is the token-stats row kernels (Isa::stats / Isa::grad of
// cpu_dispatch.h) on tile rows and the shared per-token loss (policy_loss_token.h); the products are
// the caller's cblas_sgemm. Included by arbor_cpu.cpp after policy_loss.cpp, whose workspace and sum
// helpers (arbor::pl) it uses.
#include <limits.h>
#include <math.h>

#include <atomic>
#include <memory>
#include <vector>

#include "arbor/arbor.h"
#include "checks.h"
#include "cpu_dispatch.h"
#include "fused_linear_layout.h"
#include "parallel.h"
#include "policy_loss_token.h"

namespace arbor {
namespace fl {

enum { kRowMajor = 101, kNoTrans = 111, kTrans = 112 };

// h [rows, dim] and W [vocab, dim] with their strides: every size the products and loops use.
static bool bad_linear(const void* hidden, int64_t rows, int64_t dim, int64_t hidden_stride, const void* weight,
                       int64_t vocab, int64_t weight_stride, int64_t vocab_limit, float temperature) {
    if (rows < 0 || dim < 1 || hidden_stride < dim || vocab < 1 || weight_stride < dim) return true;
    if (vocab_limit < 1 || vocab_limit > vocab) return true;
    if (dim > INT_MAX || hidden_stride > INT_MAX || weight_stride > INT_MAX) return true;
    if (!(temperature > 0.0f) || isinf(temperature)) return true;
    if (rows > 0 && (hidden == nullptr || weight == nullptr)) return true;
    if (rows > 0 && (rows - 1) > (INT64_MAX - dim) / hidden_stride) return true;
    if ((vocab - 1) > (INT64_MAX - dim) / weight_stride) return true;
    return false;
}

static bool bad_out_matrix(const float* out, int64_t n, int64_t dim, int64_t stride) {
    if (out == nullptr) return false;
    if (stride < dim || stride > INT_MAX) return true;
    return n > 0 && (n - 1) > (INT64_MAX - dim) / stride;
}

// The call's workspace (the caller's or an internal buffer) carved by arbor_fl::layout.
struct Scratch {
    std::unique_ptr<unsigned long long[]> own;  // uninitialised: every byte used is written first
    char* base = nullptr;
    arbor_fl::Layout l;
    bool init(void* workspace, int64_t bytes, int64_t rows, int64_t vocab_limit, int64_t row_chunk,
              int64_t vocab_chunk) {
        l = arbor_fl::layout(rows, vocab_limit, row_chunk, vocab_chunk, false);
        if (l.total < 0) return false;
        if (workspace != nullptr) {
            if (bytes < l.total || (uintptr_t)workspace % 8 != 0) return false;
            base = (char*)workspace;
        } else {
            own.reset(new unsigned long long[(size_t)(l.total / 8 + 1)]);
            base = (char*)own.get();
        }
        return true;
    }
    float* f(int64_t off) const { return (float*)(base + off); }
    double* d(int64_t off) const { return (double*)(base + off); }
};

// The products' operands h [rows, dim] and W [vocab, dim]. fp32 is read in place. bf16 and fp16 are widened to fp32
// (exactly: every half value is a float) a block at a time into buffers this call allocates: the tile's rows of h
// (row_chunk x dim) and its vocabulary block of W (vocab_chunk x dim, i.e. all of W's first vocab_limit rows with
// whole-vocabulary tiles, widened once); a block is widened again only when the loops move to another. The products,
// the tile and every gradient are then those of the fp32 kernel on the widened values.
struct Operands {
    const void* h;
    int64_t hs;
    const void* w;
    int64_t ws, dim;
    int dtype;  // ARBOR_F32, ARBOR_BF16 or ARBOR_F16
    int num_threads;
    std::unique_ptr<float[]> hbuf, wbuf;
    int64_t h_cap = 0, w_cap = 0;                     // rows the buffers have room for
    int64_t h_at = -1, h_n = 0, w_at = -1, w_n = 0;  // the blocks the buffers hold

    // rows [r0, r0 + n) of h; *ld its row stride in elements
    const float* h_rows(int64_t r0, int64_t n, int64_t* ld) { return block(h, hs, r0, n, hbuf, h_cap, h_at, h_n, ld); }
    // rows [v0, v0 + n) of W
    const float* w_rows(int64_t v0, int64_t n, int64_t* ld) { return block(w, ws, v0, n, wbuf, w_cap, w_at, w_n, ld); }

  private:
    const float* block(const void* src, int64_t stride, int64_t r0, int64_t n, std::unique_ptr<float[]>& buf,
                       int64_t& cap, int64_t& at, int64_t& held, int64_t* ld) {
        if (dtype == ARBOR_F32) {
            *ld = stride;
            return (const float*)src + r0 * stride;
        }
        *ld = dim;
        if (at == r0 && held == n) return buf.get();
        if (n > cap) {  // the first block is the largest (blocks shrink only at the end): allocated once
            buf.reset(new float[(size_t)(n * dim)]);
            cap = n;
        }
        const uint16_t* in = (const uint16_t*)src;
        float* out = buf.get();
        const int64_t d = dim;
        const bool bf16 = dtype == ARBOR_BF16;
        parallel_for(n, num_threads, d, [&](int64_t b, int64_t e) {
            for (int64_t r = b; r < e; ++r) {
                const uint16_t* x = in + (r0 + r) * stride;
                float* y = out + r * d;
                if (bf16)
                    for (int64_t k = 0; k < d; ++k) y[k] = bf16_to_f32(x[k]);
                else
                    for (int64_t k = 0; k < d; ++k) y[k] = f16_to_f32(x[k]);
            }
        });
        at = r0;
        held = n;
        return out;
    }
};

// Merges a tile segment's statistics (relative to its own max) into a row's running state
// (M, S = Σ e^{z-M}, U = Σ e^{z-M}(z-M)), in double as row_stats merges its chunks:
// S_c = e^{log_sum}, U_c = S_c (log_sum - H_c).
static inline void merge_segment(const RowStats& st, double& M, double& S, double& U) {
    const double cm = st.max, cs = exp((double)st.log_sum), cu = cs * ((double)st.log_sum - (double)st.entropy);
    if (M == -INFINITY) {
        M = cm; S = cs; U = cu;
    } else if (cm > M) {
        const double dm = M - cm, sc = exp(dm);
        U = sc * (U + dm * S) + cu;
        S = sc * S + cs;
        M = cm;
    } else {
        const double dm = cm - M, sc = exp(dm);
        U += sc * (cu + dm * cs);
        S += sc * cs;
    }
}

// pass 1: per row block, per vocabulary block, the tile's rows' statistics merged into (M, S, U) and
// the label's z picked up. Rows with valid[r] == false are skipped. Writes lse, entropy and the label's log-prob per
// row (NaN for a row without a distribution, or with a label outside [0, vocab_limit): bad_label set).
// Rows [rbeg, rend) (rbeg a multiple of the tile rows); with one vocabulary tile per row block (tv = vl) the tile
// holds the block's whole logits afterwards, which the policy loss's pass 2 then reuses.
template <class Isa, class Tag>
static void pass1(Operands& op, int64_t rbeg, int64_t rend, int64_t vl, const void* labels, int label_dtype, float inv_t, const uint8_t* valid, const Scratch& sc,
                  arbor_sgemm_fn sgemm, int num_threads, std::atomic<int>& bad_label) {
    const arbor_fl::Layout& l = sc.l;
    float* tile = sc.f(l.tile);
    float *lse = sc.f(l.lse), *ent = sc.f(l.ent), *lp = sc.f(l.lp);
    double *M = sc.d(l.m), *S = sc.d(l.s), *U = sc.d(l.u);
    for (int64_t r0 = rbeg; r0 < rend; r0 += l.tr) {
        const int64_t tr = rend - r0 < l.tr ? rend - r0 : l.tr;
        for (int64_t r = r0; r < r0 + tr; ++r) {
            M[r] = -INFINITY;
            S[r] = U[r] = 0.0;
            lp[r] = NAN;  // the label's z, then its log-prob: stays NaN (and poisons the row) when the label is out of range
        }
        int64_t hld, wld;
        const float* hb = op.h_rows(r0, tr, &hld);
        for (int64_t v0 = 0; v0 < vl; v0 += l.tv) {
            const int64_t tv = vl - v0 < l.tv ? vl - v0 : l.tv;
            const float* wb = op.w_rows(v0, tv, &wld);
            sgemm(kRowMajor, kNoTrans, kTrans, (int)tr, (int)tv, (int)op.dim, 1.0f, hb, (int)hld, wb, (int)wld, 0.0f,
                  tile, (int)tv);
            parallel_for(tr, num_threads, tv, [&](int64_t b, int64_t e) {
                for (int64_t i = b; i < e; ++i) {
                    const int64_t r = r0 + i;
                    if (!valid[r]) continue;
                    const float* row = tile + i * tv;
                    if (labels != nullptr) {
                        const int64_t y = read_label(labels, label_dtype, r);
                        if (y >= v0 && y < v0 + tv) lp[r] = row[y - v0] * inv_t;
                    }
                    if (isnan(M[r])) continue;  // already poisoned
                    const RowStats st = Isa::template stats<Tag>(row, tv, inv_t);
                    if (st.valid) {
                        merge_segment(st, M[r], S[r], U[r]);
                        continue;
                    }
                    // An all -inf segment contributes nothing (as in row_stats); NaN or +inf poisons the row.
                    bool all_neg_inf = true;
                    for (int64_t j = 0; j < tv; ++j) all_neg_inf &= row[j] == -INFINITY;
                    if (!all_neg_inf) M[r] = NAN;
                }
            });
        }
        for (int64_t r = r0; r < r0 + tr; ++r) {
            if (!valid[r]) {
                lse[r] = ent[r] = lp[r] = 0.0f;
                continue;
            }
            if (labels != nullptr) {
                const int64_t y = read_label(labels, label_dtype, r);
                if (y < 0 || y >= vl) bad_label.store(1, std::memory_order_relaxed);
            }
            if (isnan(M[r]) || M[r] == -INFINITY) {  // no distribution
                lse[r] = ent[r] = lp[r] = NAN;
                continue;
            }
            const double log_s = log(S[r]);
            lse[r] = (float)(M[r] + log_s);
            ent[r] = (float)(log_s - U[r] / S[r]);
            // the label's log-prob (z_y - max) - log S, as token stats forms it, in double: not z_y - lse, whose fp32 lse
            // carries up to half an ulp of its own magnitude (~5e-7 at lse ~ 10) into every log-prob
            lp[r] = (float)(((double)lp[r] - M[r]) - log_s);
        }
    }
}

template <class Isa, class Tag>
static int stats(Operands& op, int64_t rows, int64_t vl, const void* labels, int label_dtype, float temperature, const uint8_t* row_mask, float* logprob,
                 float* entropy, float* lse_out, const Scratch& sc, arbor_sgemm_fn sgemm, int num_threads) {
    std::vector<uint8_t> valid((size_t)rows);
    for (int64_t r = 0; r < rows; ++r) valid[r] = row_mask == nullptr || row_mask[r] != 0;
    std::atomic<int> bad_label{0};
    pass1<Isa, Tag>(op, 0, rows, vl, logprob != nullptr ? labels : nullptr, label_dtype,
                    1.0f / temperature, valid.data(), sc, sgemm, num_threads, bad_label);
    const float *lse = sc.f(sc.l.lse), *ent = sc.f(sc.l.ent), *lpr = sc.f(sc.l.lp);
    for (int64_t r = 0; r < rows; ++r) {
        if (logprob) logprob[r] = valid[r] ? lpr[r] : 0.0f;
        if (entropy) entropy[r] = ent[r];
        if (lse_out) lse_out[r] = lse[r];
    }
    return bad_label.load() ? ARBOR_ERR_LABEL : ARBOR_OK;
}

template <class Isa, class Tag>
static int policy_loss(const arbor_policy_loss_config& c, Operands& op, int64_t rows, int64_t vocab, int64_t vl,
                       const void* labels, int label_dtype,
                       const float* old_logprob, const float* advantages, const float* mask, const float* weights,
                       const float* ref_logprob, const float* select_entropy, float* logprob_out, float* entropy_out,
                       float* gh_out, int64_t ghs, float* gw_out, int64_t gws, bool accumulate, double* sums,
                       const Scratch& sc, arbor_sgemm_fn sgemm, int num_threads) {
    const arbor_fl::Layout& l = sc.l;
    const int64_t dim = op.dim;
    const float inv_t = 1.0f / c.temperature;
    std::vector<uint8_t> valid((size_t)rows);
    for (int64_t r = 0; r < rows; ++r) valid[r] = mask[r] > 0.0f;
    std::atomic<int> bad_label{0};
    // The per-token loss (O(rows)) of rows [rb, re), exactly as the fused policy loss computes it.
    float *lse = sc.f(l.lse), *ent = sc.f(l.ent), *lpr = sc.f(l.lp), *glp = sc.f(l.glp), *gh = sc.f(l.gh);
    const double *M = sc.d(l.m), *S = sc.d(l.s);  // pass 1's row statistics (the label column's exact lse)
    float* parts = arbor_pl::carve(sc.base, rows, 0).parts;
    auto token_losses = [&](int64_t rb, int64_t re) {
        for (int64_t r = rb; r < re; ++r) {
            if (!valid[r]) {
                glp[r] = gh[r] = 0.0f;
                pl::zero_parts(parts, rows, r);
                if (logprob_out) logprob_out[r] = 0.0f;
                if (entropy_out) entropy_out[r] = 0.0f;
                continue;
            }
            const float lp = lpr[r], H = ent[r];
            arbor_pl::Token t;
            if (isnan(lp) || isnan(H)) {
                arbor_pl::token_nan(t);
                lse[r] = NAN;  // pass 2 writes a NaN gradient row
            } else {
                const float ref = ref_logprob ? ref_logprob[r] : 0.0f;
                const float sel = select_entropy ? select_entropy[r] : H;
                arbor_pl::token_loss(c, lp, H, old_logprob[r], advantages[r], mask[r], weights[r], ref, sel, t);
            }
            glp[r] = t.g_lp;
            gh[r] = t.g_h;
            pl::store_parts(parts, rows, r, t);
            if (logprob_out) logprob_out[r] = lp;
            if (entropy_out) entropy_out[r] = H;
        }
    };
    const bool grads = gh_out != nullptr || gw_out != nullptr;
    if (gw_out != nullptr && !accumulate)  // padding rows of W get 0 (every row without rows); beta = 0 writes the others
        for (int64_t v = rows == 0 ? 0 : vl; v < vocab; ++v)
            for (int64_t k = 0; k < dim; ++k) gw_out[v * gws + k] = 0.0f;
    // pass 2 for the tile (v0, tv) x (r0, tr): dL/dlogits in place over the tile (computed again from h and W unless
    // `have` says the tile already holds those logits), then dh_b (+)= G W_v and dW_v (+)= Gᵀ h_b.
    float* tile = sc.f(l.tile);
    auto grad_tile = [&](int64_t v0, int64_t tv, int64_t r0, int64_t tr, bool have) {
        int64_t hld, wld;
        const float* hb = op.h_rows(r0, tr, &hld);
        const float* wb = op.w_rows(v0, tv, &wld);
        if (!have)
            sgemm(kRowMajor, kNoTrans, kTrans, (int)tr, (int)tv, (int)dim, 1.0f, hb, (int)hld, wb, (int)wld, 0.0f, tile,
                  (int)tv);
        parallel_for(tr, num_threads, tv, [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) {
                const int64_t r = r0 + i;
                float* row = tile + i * tv;
                if (!valid[r] || !(isfinite(lse[r]) && isfinite(ent[r]))) {
                    const float fill = valid[r] ? NAN : 0.0f;
                    for (int64_t j = 0; j < tv; ++j) row[j] = fill;
                    continue;
                }
                const int64_t y = read_label(labels, label_dtype, r);
                const int64_t yl = (y >= v0 && y < v0 + tv) ? y - v0 : -1;
                // the token-stats backward row, the label column's d_y against lse + what its fp32 value lost; the tile
                // stays in cache: no streaming stores
                const float lse_lo = yl >= 0 ? (float)((M[r] + log(S[r])) - (double)lse[r]) : 0.0f;
                Isa::template grad<Tag, Tag>(row, tv, tv, inv_t, lse[r], ent[r], glp[r], gh[r], yl, row, false, nullptr,
                                             lse_lo);
            }
        });
        if (gh_out != nullptr)  // dh_b (+)= G W_v
            sgemm(kRowMajor, kNoTrans, kNoTrans, (int)tr, (int)dim, (int)tv, 1.0f, tile, (int)tv, wb, (int)wld,
                  v0 == 0 ? 0.0f : 1.0f, gh_out + r0 * ghs, (int)ghs);
        if (gw_out != nullptr)  // dW_v (+)= Gᵀ h_b
            sgemm(kRowMajor, kTrans, kNoTrans, (int)tv, (int)dim, (int)tr, 1.0f, tile, (int)tv, hb, (int)hld,
                  (r0 == 0 && !accumulate) ? 0.0f : 1.0f, gw_out + v0 * gws, (int)gws);
    };
    if (grads && l.tv >= vl) {
        // One vocabulary tile per row block: row block by row block, pass 1, the block's losses and pass 2 on the
        // tile pass 1 left — three products instead of four (the tile holds tr x vocab logits). The same calls in
        // the same order per dh row block and per dW block as the general order below, so the same results.
        for (int64_t r0 = 0; r0 < rows; r0 += l.tr) {
            const int64_t tr = rows - r0 < l.tr ? rows - r0 : l.tr;
            pass1<Isa, Tag>(op, r0, r0 + tr, vl, labels, label_dtype, inv_t, valid.data(), sc, sgemm, num_threads,
                            bad_label);
            token_losses(r0, r0 + tr);
            grad_tile(0, vl, r0, tr, true);
        }
        pl::reduce_parts(parts, rows, sums);
        return bad_label.load() ? ARBOR_ERR_LABEL : ARBOR_OK;
    }
    pass1<Isa, Tag>(op, 0, rows, vl, labels, label_dtype, inv_t, valid.data(), sc, sgemm, num_threads, bad_label);
    token_losses(0, rows);
    pl::reduce_parts(parts, rows, sums);
    if (!grads) return bad_label.load() ? ARBOR_ERR_LABEL : ARBOR_OK;
    // pass 2: per vocabulary block (its dW rows stay in cache), per row block.
    for (int64_t v0 = 0; v0 < vl; v0 += l.tv) {
        const int64_t tv = vl - v0 < l.tv ? vl - v0 : l.tv;
        for (int64_t r0 = 0; r0 < rows; r0 += l.tr) grad_tile(v0, tv, r0, rows - r0 < l.tr ? rows - r0 : l.tr, false);
    }
    return bad_label.load() ? ARBOR_ERR_LABEL : ARBOR_OK;
}

}  // namespace fl
}  // namespace arbor

extern "C" int64_t arbor_fused_linear_workspace_bytes(int64_t rows, int64_t vocab_limit, int64_t row_chunk,
                                                      int64_t vocab_chunk, int dtype) {
    return arbor_fl::layout(rows, vocab_limit, row_chunk, vocab_chunk, dtype == ARBOR_BF16).total;
}

extern "C" int arbor_cpu_fused_linear_stats(const void* hidden, int64_t rows, int64_t dim, int64_t hidden_stride,
                                            const void* weight, int64_t vocab, int64_t weight_stride,
                                            int64_t vocab_limit, int dtype, const void* labels, int label_dtype,
                                            float temperature, const uint8_t* row_mask, float* logprob,
                                            float* entropy, float* lse, int64_t row_chunk, int64_t vocab_chunk,
                                            void* workspace, int64_t workspace_bytes, arbor_sgemm_fn sgemm,
                                            int num_threads) {
    using namespace arbor;
    try {
        if (fl::bad_linear(hidden, rows, dim, hidden_stride, weight, vocab, weight_stride, vocab_limit, temperature))
            return ARBOR_ERR_ARG;
        if (dtype != ARBOR_F32 && dtype != ARBOR_BF16 && dtype != ARBOR_F16) return ARBOR_ERR_UNSUPPORTED;
        if (sgemm == nullptr) return ARBOR_ERR_ARG;
        if (logprob != nullptr && bad_labels(labels, label_dtype, rows)) return ARBOR_ERR_ARG;
        fl::Scratch sc;
        if (!sc.init(workspace, workspace_bytes, rows, vocab_limit, row_chunk, vocab_chunk)) return ARBOR_ERR_ARG;
        if (rows == 0) return ARBOR_OK;
        fl::Operands op{hidden, hidden_stride, weight, weight_stride, dim, dtype, num_threads};
        return ARBOR_DISPATCH(fl::stats, F32Tag)(op, rows, vocab_limit, labels, label_dtype, temperature, row_mask,
                                                logprob, entropy, lse, sc, sgemm, num_threads);
    } ARBOR_CATCH_ALL
}

extern "C" int arbor_cpu_fused_linear_policy_loss(
    const arbor_policy_loss_config* cfg, const void* hidden, int64_t rows, int64_t dim, int64_t hidden_stride,
    const void* weight, int64_t vocab, int64_t weight_stride, int64_t vocab_limit, int dtype, const void* labels,
    int label_dtype, const float* old_logprob, const float* advantages, const float* mask, const float* weights,
    const float* ref_logprob, const float* select_entropy, float* logprob_out, float* entropy_out, float* grad_hidden,
    int64_t grad_hidden_stride, float* grad_weight, int64_t grad_weight_stride, int accumulate_grad_weight,
    double* sums, int64_t row_chunk, int64_t vocab_chunk, void* workspace, int64_t workspace_bytes,
    arbor_sgemm_fn sgemm, int num_threads) {
    using namespace arbor;
    try {
        if (pl::bad_loss_args(cfg, rows, old_logprob, advantages, mask, weights, ref_logprob, true, select_entropy,
                              sums))
            return ARBOR_ERR_ARG;
        if (fl::bad_linear(hidden, rows, dim, hidden_stride, weight, vocab, weight_stride, vocab_limit,
                           cfg->temperature))
            return ARBOR_ERR_ARG;
        if (bad_labels(labels, label_dtype, rows)) return ARBOR_ERR_ARG;
        if (fl::bad_out_matrix(grad_hidden, rows, dim, grad_hidden_stride) ||
            fl::bad_out_matrix(grad_weight, vocab, dim, grad_weight_stride))
            return ARBOR_ERR_ARG;
        if (dtype != ARBOR_F32 && dtype != ARBOR_BF16 && dtype != ARBOR_F16) return ARBOR_ERR_UNSUPPORTED;
        if (sgemm == nullptr) return ARBOR_ERR_ARG;
        fl::Scratch sc;
        if (!sc.init(workspace, workspace_bytes, rows, vocab_limit, row_chunk, vocab_chunk)) return ARBOR_ERR_ARG;
        fl::Operands op{hidden, hidden_stride, weight, weight_stride, dim, dtype, num_threads};
        return ARBOR_DISPATCH(fl::policy_loss, F32Tag)(
            *cfg, op, rows, vocab, vocab_limit, labels, label_dtype, old_logprob, advantages, mask, weights, ref_logprob,
            select_entropy, logprob_out, entropy_out, grad_hidden, grad_hidden_stride, grad_weight, grad_weight_stride,
            accumulate_grad_weight != 0, sums, sc, sgemm, num_threads);
    } ARBOR_CATCH_ALL
}
