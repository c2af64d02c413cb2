// Clipped policy-gradient losses (docs/algorithms.md §2) — CPU kernels. The ABI and the exact
// definitions are in arbor/policy_loss.h; the per-token math (shared with CUDA) in
// policy_loss_token.h. The fused kernel composes the same per-row building blocks as the token-stats
// kernels (Isa::stats = row_stats, Isa::grad = row_grad of row_kernels.inc), so the composable path
// (token stats forward → arbor_cpu_policy_loss → token stats backward) and the fused one produce
// the same bits.
#include <math.h>

#include <atomic>
#include <memory>
#include <new>
#include <vector>

#include "arbor/arbor.h"
#include "checks.h"
#include "cpu_dispatch.h"
#include "parallel.h"
#include "policy_loss_token.h"

namespace arbor {
namespace pl {

// Workspace memory: the caller's, or an internal buffer (CPU only) when the caller passed NULL.
struct WorkspaceMem {
    std::vector<unsigned long long> own;
    void* base = nullptr;
    bool init(void* workspace, int64_t bytes, int64_t rows, int64_t num_seqs) {
        const int64_t need = arbor_pl::workspace_bytes(rows, num_seqs);
        if (need < 0) return false;
        if (workspace != nullptr) {
            if (bytes < need) return false;
            base = workspace;
        } else {
            own.assign((size_t)(need / 8 + 1), 0ull);
            base = own.data();
        }
        return true;
    }
};

// Sums of the per-row partials in a fixed order (row order, in double): the same bits for every
// thread count.
static void reduce_parts(const float* parts, int64_t rows, double* sums) {
    for (int k = 0; k < ARBOR_PL_NUM_SUMS; ++k) {
        const float* p = parts + k * rows;
        double s = 0.0;
        for (int64_t r = 0; r < rows; ++r) s += (double)p[r];
        sums[k] = s;
    }
}

static inline void store_parts(float* parts, int64_t rows, int64_t r, const arbor_pl::Token& t) {
    for (int k = 0; k < ARBOR_PL_NUM_SUMS; ++k) parts[k * rows + r] = t.part[k];
}

static inline void zero_parts(float* parts, int64_t rows, int64_t r) {
    for (int k = 0; k < ARBOR_PL_NUM_SUMS; ++k) parts[k * rows + r] = 0.0f;
}

static int weights(const float* mask, const int32_t* seq_ids, int64_t rows, int64_t num_seqs, int agg_mode,
                   double agg_normalizer, float* weights, double* counts, void* workspace, int64_t workspace_bytes) {
    if (rows < 0 || num_seqs < 0 || counts == nullptr) return ARBOR_ERR_ARG;
    if (agg_mode < ARBOR_AGG_TOKEN_MEAN || agg_mode > ARBOR_AGG_SEQ_MEAN_TOKEN_SUM_NORM) return ARBOR_ERR_ARG;
    if (isnan(agg_normalizer) || isinf(agg_normalizer)) return ARBOR_ERR_ARG;
    const bool seq_mode = agg_mode != ARBOR_AGG_TOKEN_MEAN;
    if (rows > 0 && (mask == nullptr || weights == nullptr)) return ARBOR_ERR_ARG;
    if (seq_mode && rows > 0 && (seq_ids == nullptr || num_seqs < 1)) return ARBOR_ERR_ARG;
    const int64_t ns = seq_ids != nullptr ? num_seqs : 0;
    WorkspaceMem mem;
    if (!mem.init(workspace, workspace_bytes, rows, ns)) return ARBOR_ERR_ARG;
    arbor_pl::Workspace ws = arbor_pl::carve(mem.base, rows, ns);
    for (int64_t s = 0; s < ns; ++s) {
        ws.seq_sum[s] = 0;
        ws.seq_rows[s] = 0;
    }
    // Pass 1: N, per-sequence mask sums and row counts (32.32 fixed point: exact, order-free).
    unsigned long long total = 0;
    for (int64_t r = 0; r < rows; ++r) {
        const float m = mask[r];
        if (!arbor_pl::mask_ok(m)) return ARBOR_ERR_ARG;
        const unsigned long long f = arbor_pl::to_fixed(m);
        total += f;
        if (ns == 0) continue;
        const int32_t id = seq_ids[r];
        if (id < 0 || id >= ns) {
            if (m > 0.0f) return ARBOR_ERR_ARG;  // a valid token must belong to a sequence
            if (id >= ns) return ARBOR_ERR_ARG;   // a non-negative id must be in range
            continue;                            // masked row with a negative id: ignored
        }
        ws.seq_sum[id] += f;
        ws.seq_rows[id] += 1;
    }
    double seqs = 0.0, max_rows = 0.0;
    for (int64_t s = 0; s < ns; ++s) {
        if (ws.seq_sum[s] > 0) seqs += 1.0;
        if ((double)ws.seq_rows[s] > max_rows) max_rows = (double)ws.seq_rows[s];
    }
    const double tokens = arbor_pl::from_fixed(total);
    const double norm = arbor_pl::normalizer(agg_mode, agg_normalizer, tokens, seqs, max_rows);
    *ws.total = total;
    *ws.flag = 0;
    *ws.norm = norm;
    counts[ARBOR_PL_C_TOKENS] = tokens;
    counts[ARBOR_PL_C_SEQS] = seqs;
    counts[ARBOR_PL_C_MAX_ROWS] = max_rows;
    counts[ARBOR_PL_C_NORMALIZER] = norm;
    // Pass 2: the weights.
    for (int64_t r = 0; r < rows; ++r) {
        const unsigned long long sf = (ns > 0 && seq_ids[r] >= 0) ? ws.seq_sum[seq_ids[r]] : 0ull;
        weights[r] = arbor_pl::weight(agg_mode, mask[r], norm, sf);
    }
    return ARBOR_OK;
}

// Checks shared by both loss kernels.
static bool bad_loss_args(const arbor_policy_loss_config* cfg, int64_t rows, const float* old_logprob,
                          const float* advantages, const float* mask, const float* weights, const float* ref_logprob,
                          bool have_entropy, const float* select_entropy, double* sums) {
    if (arbor_pl::bad_config(cfg) || rows < 0 || sums == nullptr) return true;
    if (rows > 0 && (old_logprob == nullptr || advantages == nullptr || mask == nullptr || weights == nullptr))
        return true;
    if (rows > 0 && cfg->kl_type != ARBOR_KL_NONE && ref_logprob == nullptr) return true;
    if (!have_entropy && cfg->entropy_coef != 0.0f) return true;
    const bool selects = cfg->clip_mode == ARBOR_CLIP_AEPO && cfg->aepo_entropy_threshold != -INFINITY;
    if (!have_entropy && selects && select_entropy == nullptr) return true;
    return false;
}

static int loss(const arbor_policy_loss_config* cfg, int64_t rows, const float* logprob, const float* entropy,
                const float* old_logprob, const float* advantages, const float* mask, const float* weights,
                const float* ref_logprob, const float* select_entropy, float* grad_logprob, float* grad_entropy,
                double* sums, void* workspace, int64_t workspace_bytes, int num_threads) {
    if (bad_loss_args(cfg, rows, old_logprob, advantages, mask, weights, ref_logprob, entropy != nullptr,
                      select_entropy, sums))
        return ARBOR_ERR_ARG;
    if (rows > 0 && logprob == nullptr) return ARBOR_ERR_ARG;
    WorkspaceMem mem;
    if (!mem.init(workspace, workspace_bytes, rows, 0)) return ARBOR_ERR_ARG;
    float* parts = arbor_pl::carve(mem.base, rows, 0).parts;
    const arbor_policy_loss_config c = *cfg;
    parallel_for(rows, num_threads, 64, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            const float m = mask[r];
            if (!(m > 0.0f)) {
                if (grad_logprob) grad_logprob[r] = 0.0f;
                if (grad_entropy) grad_entropy[r] = 0.0f;
                zero_parts(parts, rows, r);
                continue;
            }
            const float h = entropy ? entropy[r] : NAN;
            const float ref = ref_logprob ? ref_logprob[r] : 0.0f;
            const float sel = select_entropy ? select_entropy[r] : h;
            arbor_pl::Token t;
            arbor_pl::token_loss(c, logprob[r], h, old_logprob[r], advantages[r], m, weights[r], ref, sel, t);
            if (grad_logprob) grad_logprob[r] = t.g_lp;
            if (grad_entropy) grad_entropy[r] = t.g_h;
            store_parts(parts, rows, r, t);
        }
    });
    reduce_parts(parts, rows, sums);
    return ARBOR_OK;
}

template <class Isa, class Tag, class OTag>
static int fused_typed(const arbor_policy_loss_config& c, const typename Tag::T* logits, int64_t rows, int64_t vocab,
                       int64_t row_stride, int64_t vocab_limit, const void* labels, int label_dtype,
                       const float* old_logprob, const float* advantages, const float* mask, const float* weights,
                       const float* ref_logprob, const float* select_entropy, float* logprob_out,
                       float* entropy_out, float* grad_logprob_out, float* grad_entropy_out,
                       typename OTag::T* grad, int64_t grad_row_stride, float* parts, int num_threads) {
    const float inv_t = 1.0f / c.temperature;
    const bool stream = stream_gradient(rows, grad_row_stride, sizeof(typename OTag::T));
    const bool prefetch = stream && prefetch_next_row(vocab_limit * (int64_t)sizeof(typename Tag::T));
    std::atomic<int> bad_label{0};
    parallel_for(rows, num_threads, vocab, [&](int64_t begin, int64_t end) {
        // the statistics pass's exps of the row (64-byte aligned, room for a last vector stored whole) and its chunks'
        // (m_c, S_c), for the gradient (Isa::grad_kept): one exp per logit
        // (where they cannot be allocated, the two-exp path: row_stats, then row_grad, the same results)
        const int64_t nc = (vocab_limit + ARBOR_STATS_CHUNK - 1) / ARBOR_STATS_CHUNK;
        std::unique_ptr<float[]> keep_own(new (std::nothrow) float[(size_t)(vocab_limit + 32)]);
        std::unique_ptr<ChunkMass[]> chunks(new (std::nothrow) ChunkMass[(size_t)(nc > 0 ? nc : 1)]);
        float* keep = keep_own && chunks ? (float*)(((uintptr_t)keep_own.get() + 63) & ~(uintptr_t)63) : nullptr;
        for (int64_t r = begin; r < end; ++r) {
            typename OTag::T* out = grad + r * grad_row_stride;
            const float m = mask[r];
            if (!(m > 0.0f)) {  // masked: not read, zero gradient (as the token-stats row mask)
                Isa::template fill<OTag>(out, vocab, 0.0f, stream);
                if (logprob_out) logprob_out[r] = 0.0f;
                if (entropy_out) entropy_out[r] = 0.0f;
                if (grad_logprob_out) grad_logprob_out[r] = 0.0f;
                if (grad_entropy_out) grad_entropy_out[r] = 0.0f;
                zero_parts(parts, rows, r);
                continue;
            }
            const typename Tag::T* row = logits + r * row_stride;
            const int64_t y = read_label(labels, label_dtype, r);
            arbor_pl::Token t;
            float lp = NAN, h = NAN, lse = NAN, lse_lo = 0.0f;
            if (y < 0 || y >= vocab_limit) {
                bad_label.store(1, std::memory_order_relaxed);
                arbor_pl::token_nan(t);
            } else {
                // Statistics exactly as arbor_cpu_token_stats_fwd computes them (the same bits), the exps kept.
                const RowStats st = keep ? Isa::template stats_keep<Tag>(row, vocab_limit, inv_t, chunks.get(), keep)
                                         : Isa::template stats<Tag>(row, vocab_limit, inv_t);
                lse = st.max + st.log_sum;
                lse_lo = (float)(((double)st.max + (double)st.log_sum) - (double)lse);  // what the fp32 lse lost
                h = st.entropy;
                lp = (Tag::to_f32(row[y]) * inv_t - st.max) - st.log_sum;
                const float ref = ref_logprob ? ref_logprob[r] : 0.0f;
                const float sel = select_entropy ? select_entropy[r] : h;
                arbor_pl::token_loss(c, lp, h, old_logprob[r], advantages[r], m, weights[r], ref, sel, t);
            }
            if (logprob_out) logprob_out[r] = lp;
            if (entropy_out) entropy_out[r] = h;
            if (grad_logprob_out) grad_logprob_out[r] = t.g_lp;
            if (grad_entropy_out) grad_entropy_out[r] = t.g_h;
            store_parts(parts, rows, r, t);
            if (!(isfinite(lse) && isfinite(h))) {  // no distribution (or bad label): NaN row
                Isa::template fill<OTag>(out, vocab, NAN, stream);
                continue;
            }
            // The gradient of arbor_cpu_token_stats_bwd, its p_j formed from the kept exps (within ~2 ulp of that
            // backward's), the label column's d_y against lse + lse_lo; the next row this thread reads arrives in L2
            // meanwhile.
            const typename Tag::T* next = prefetch && r + 1 < end && mask[r + 1] > 0.0f ? row + row_stride : nullptr;
            if (keep)
                Isa::template grad_kept<Tag, OTag>(row, keep, chunks.get(), vocab_limit, vocab, inv_t, lse, h, t.g_lp,
                                                   t.g_h, y, out, stream, next, lse_lo);
            else
                Isa::template grad<Tag, OTag>(row, vocab_limit, vocab, inv_t, lse, h, t.g_lp, t.g_h, y, out, stream, next,
                                              lse_lo);
        }
    });
    return bad_label.load() ? ARBOR_ERR_LABEL : ARBOR_OK;
}

template <class Isa, class Tag>
static int fused(const arbor_policy_loss_config* cfg, const typename Tag::T* logits, int64_t rows, int64_t vocab,
                 int64_t row_stride, int64_t vocab_limit, const void* labels, int label_dtype, const float* old_logprob,
                 const float* advantages, const float* mask, const float* weights, const float* ref_logprob,
                 const float* select_entropy, float* logprob_out, float* entropy_out, float* grad_logprob_out,
                 float* grad_entropy_out, void* grad_logits, int grad_dtype, int64_t grad_row_stride, double* sums,
                 void* workspace, int64_t workspace_bytes, int num_threads, int own_dtype) {
    if (bad_loss_args(cfg, rows, old_logprob, advantages, mask, weights, ref_logprob, true, select_entropy, sums))
        return ARBOR_ERR_ARG;
    if (bad_matrix(logits, rows, vocab, row_stride, vocab_limit, cfg->temperature)) return ARBOR_ERR_ARG;
    if (bad_labels(labels, label_dtype, rows)) return ARBOR_ERR_ARG;
    if (bad_grad(logits, row_stride, own_dtype, grad_logits, grad_dtype, rows, vocab, grad_row_stride))
        return ARBOR_ERR_ARG;
    WorkspaceMem mem;
    if (!mem.init(workspace, workspace_bytes, rows, 0)) return ARBOR_ERR_ARG;
    float* parts = arbor_pl::carve(mem.base, rows, 0).parts;
    int rc;
    if (grad_dtype == ARBOR_F32)
        rc = fused_typed<Isa, Tag, F32Tag>(*cfg, logits, rows, vocab, row_stride, vocab_limit, labels, label_dtype,
                                           old_logprob, advantages, mask, weights, ref_logprob, select_entropy,
                                           logprob_out, entropy_out, grad_logprob_out, grad_entropy_out,
                                           (float*)grad_logits, grad_row_stride, parts, num_threads);
    else
        rc = fused_typed<Isa, Tag, Tag>(*cfg, logits, rows, vocab, row_stride, vocab_limit, labels, label_dtype,
                                        old_logprob, advantages, mask, weights, ref_logprob, select_entropy,
                                        logprob_out, entropy_out, grad_logprob_out, grad_entropy_out,
                                        (typename Tag::T*)grad_logits, grad_row_stride, parts, num_threads);
    reduce_parts(parts, rows, sums);
    return rc;
}

}  // namespace pl
}  // namespace arbor

extern "C" int64_t arbor_policy_loss_workspace_bytes(int64_t rows, int64_t num_seqs) {
    return arbor_pl::workspace_bytes(rows, num_seqs);
}

extern "C" int arbor_cpu_policy_loss_weights(const float* mask, const int32_t* seq_ids, int64_t rows,
                                             int64_t num_seqs, int agg_mode, double agg_normalizer, float* weights,
                                             double* counts, void* workspace, int64_t workspace_bytes,
                                             int num_threads) {
    (void)num_threads;  // O(T) and serial: the fixed-point sums need no parallelism at these sizes
    try {
        return arbor::pl::weights(mask, seq_ids, rows, num_seqs, agg_mode, agg_normalizer, weights, counts, workspace,
                                  workspace_bytes);
    } ARBOR_CATCH_ALL
}

extern "C" int arbor_cpu_policy_loss(const arbor_policy_loss_config* cfg, int64_t rows, const float* logprob,
                                     const float* entropy, const float* old_logprob, const float* advantages,
                                     const float* mask, const float* weights, const float* ref_logprob,
                                     const float* select_entropy, float* grad_logprob, float* grad_entropy,
                                     double* sums, void* workspace, int64_t workspace_bytes, int num_threads) {
    try {
        return arbor::pl::loss(cfg, rows, logprob, entropy, old_logprob, advantages, mask, weights, ref_logprob,
                               select_entropy, grad_logprob, grad_entropy, sums, workspace, workspace_bytes,
                               num_threads);
    } ARBOR_CATCH_ALL
}

#define ARBOR_PL_FUSED(NAME, TAG, CTYPE, OWN)                                                                      \
    extern "C" int NAME(const arbor_policy_loss_config* cfg, const CTYPE* logits, int64_t rows, int64_t vocab,      \
                        int64_t row_stride, int64_t vocab_limit, const void* labels, int label_dtype,               \
                        const float* old_logprob, const float* advantages, const float* mask, const float* weights, \
                        const float* ref_logprob, const float* select_entropy, float* logprob_out,                  \
                        float* entropy_out, float* grad_logprob_out, float* grad_entropy_out, void* grad_logits,    \
                        int grad_dtype, int64_t grad_row_stride, double* sums, void* workspace,                     \
                        int64_t workspace_bytes, int num_threads) {                                                 \
        try {                                                                                                       \
            return ARBOR_DISPATCH(arbor::pl::fused, arbor::TAG)(                                                    \
                cfg, logits, rows, vocab, row_stride, vocab_limit, labels, label_dtype, old_logprob, advantages,    \
                mask, weights, ref_logprob, select_entropy, logprob_out, entropy_out, grad_logprob_out,             \
                grad_entropy_out, grad_logits, grad_dtype, grad_row_stride, sums, workspace, workspace_bytes,       \
                num_threads, OWN);                                                                                  \
        } ARBOR_CATCH_ALL                                                                                           \
    }
ARBOR_PL_FUSED(arbor_cpu_policy_loss_fused_f32, F32Tag, float, ARBOR_F32)
ARBOR_PL_FUSED(arbor_cpu_policy_loss_fused_bf16, BF16Tag, uint16_t, ARBOR_BF16)
ARBOR_PL_FUSED(arbor_cpu_policy_loss_fused_f16, F16Tag, uint16_t, ARBOR_F16)

#include "reference_policy_loss.cpp"
