// CPU token statistics: forward (logprob, entropy, log-sum-exp) and backward (dL/dlogits).
// Formulas: docs/algorithms.md §1. Per-row math lives in row_kernels.inc; this file validates arguments,
// splits rows over threads and handles masks, labels and output dtypes.
#include <atomic>
#include <math.h>

#include "arbor/arbor.h"
#include "checks.h"
#include "cpu_dispatch.h"
#include "parallel.h"

namespace arbor {

template <class Isa, class Tag>
static int token_stats_fwd(const typename Tag::T* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                           int64_t vocab_limit, const void* labels, int label_dtype, float temperature,
                           const uint8_t* row_mask, float* logprob, float* entropy, float* lse, int num_threads) {
    if (bad_matrix(logits, rows, vocab, row_stride, vocab_limit, temperature)) return ARBOR_ERR_ARG;
    if (logprob != nullptr && bad_labels(labels, label_dtype, rows)) return ARBOR_ERR_ARG;
    const float inv_t = 1.0f / temperature;
    std::atomic<int> bad_label{0};
    parallel_for(rows, num_threads, vocab_limit, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            if (row_mask != nullptr && !row_mask[r]) {
                if (logprob) logprob[r] = 0.0f;
                if (entropy) entropy[r] = 0.0f;
                if (lse) lse[r] = 0.0f;
                continue;
            }
            const typename Tag::T* row = logits + r * row_stride;
            const RowStats st = Isa::template stats<Tag>(row, vocab_limit, inv_t);
            if (lse) lse[r] = st.max + st.log_sum;
            if (entropy) entropy[r] = st.entropy;
            if (logprob) {
                const int64_t y = read_label(labels, label_dtype, r);
                if (y < 0 || y >= vocab_limit) {
                    logprob[r] = NAN;
                    bad_label.store(1, std::memory_order_relaxed);
                } else {
                    logprob[r] = (Tag::to_f32(row[y]) * inv_t - st.max) - st.log_sum;
                }
            }
        }
    });
    return bad_label.load() ? ARBOR_ERR_LABEL : ARBOR_OK;
}

template <class Isa, class Tag, class OTag>
static int token_stats_bwd_typed(const typename Tag::T* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                                 int64_t vocab_limit, const void* labels, int label_dtype, float temperature,
                                 const uint8_t* row_mask, const float* lse, const float* entropy,
                                 const float* grad_logprob, const float* grad_entropy, typename OTag::T* grad,
                                 int64_t grad_row_stride, int num_threads) {
    const float inv_t = 1.0f / temperature;
    const bool recompute = lse == nullptr || entropy == nullptr;
    const bool stream = stream_gradient(rows, grad_row_stride, sizeof(typename OTag::T));
    std::atomic<int> bad_label{0};
    parallel_for(rows, num_threads, vocab, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            typename OTag::T* out = grad + r * grad_row_stride;
            if (row_mask != nullptr && !row_mask[r]) {
                Isa::template fill<OTag>(out, vocab, 0.0f, stream);
                continue;
            }
            const typename Tag::T* row = logits + r * row_stride;
            const float g_lp = grad_logprob ? grad_logprob[r] : 0.0f;
            const float g_h = grad_entropy ? grad_entropy[r] : 0.0f;
            int64_t y = -1;
            if (grad_logprob != nullptr) {
                y = read_label(labels, label_dtype, r);
                if (y < 0 || y >= vocab_limit) {
                    bad_label.store(1, std::memory_order_relaxed);
                    Isa::template fill<OTag>(out, vocab, NAN, stream);
                    continue;
                }
            }
            float row_lse, row_h;
            if (recompute) {
                const RowStats st = Isa::template stats<Tag>(row, vocab_limit, inv_t);
                row_lse = st.max + st.log_sum;
                row_h = st.entropy;
            } else {
                row_lse = lse[r];
                row_h = entropy[r];
            }
            if (!(isfinite(row_lse) && isfinite(row_h))) {  // no distribution on this row
                Isa::template fill<OTag>(out, vocab, NAN, stream);
                continue;
            }
            Isa::template grad<Tag, OTag>(row, vocab_limit, vocab, inv_t, row_lse, row_h, g_lp, g_h, y, out, stream);
        }
    });
    return bad_label.load() ? ARBOR_ERR_LABEL : ARBOR_OK;
}

template <class Isa, class Tag>
static int token_stats_bwd(const typename Tag::T* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                           int64_t vocab_limit, const void* labels, int label_dtype, float temperature,
                           const uint8_t* row_mask, const float* lse, const float* entropy, const float* grad_logprob,
                           const float* grad_entropy, void* grad_logits, int grad_dtype, int64_t grad_row_stride,
                           int num_threads, int own_dtype) {
    if (bad_matrix(logits, rows, vocab, row_stride, vocab_limit, temperature)) return ARBOR_ERR_ARG;
    if (grad_logprob != nullptr && bad_labels(labels, label_dtype, rows)) return ARBOR_ERR_ARG;
    if (bad_grad(logits, row_stride, own_dtype, grad_logits, grad_dtype, rows, vocab, grad_row_stride))
        return ARBOR_ERR_ARG;
    if (grad_dtype == ARBOR_F32)
        return token_stats_bwd_typed<Isa, Tag, F32Tag>(logits, rows, vocab, row_stride, vocab_limit, labels, label_dtype,
                                                       temperature, row_mask, lse, entropy, grad_logprob, grad_entropy,
                                                       (float*)grad_logits, grad_row_stride, num_threads);
    return token_stats_bwd_typed<Isa, Tag, Tag>(logits, rows, vocab, row_stride, vocab_limit, labels, label_dtype,
                                                temperature, row_mask, lse, entropy, grad_logprob, grad_entropy,
                                                (typename Tag::T*)grad_logits, grad_row_stride, num_threads);
}

}  // namespace arbor

using namespace arbor;

#define ARBOR_TRY(expr) \
    try {                 \
        return (expr);    \
    } ARBOR_CATCH_ALL

#define ARBOR_FWD(NAME, TAG, CTYPE)                                                                           \
    extern "C" int NAME(const CTYPE* logits, int64_t rows, int64_t vocab, int64_t row_stride, int64_t vocab_limit, \
                        const void* labels, int label_dtype, float temperature, const uint8_t* row_mask,          \
                        float* logprob, float* entropy, float* lse, int num_threads) {                          \
        ARBOR_TRY(ARBOR_DISPATCH(token_stats_fwd, TAG)(logits, rows, vocab, row_stride, vocab_limit, labels,   \
                                                       label_dtype, temperature, row_mask, logprob, entropy, lse, \
                                                       num_threads))                                            \
    }
ARBOR_FWD(arbor_cpu_token_stats_fwd_f32, F32Tag, float)
ARBOR_FWD(arbor_cpu_token_stats_fwd_bf16, BF16Tag, uint16_t)
ARBOR_FWD(arbor_cpu_token_stats_fwd_f16, F16Tag, uint16_t)

#define ARBOR_BWD(NAME, TAG, CTYPE, OWN)                                                                        \
    extern "C" int NAME(const CTYPE* logits, int64_t rows, int64_t vocab, int64_t row_stride, int64_t vocab_limit, \
                        const void* labels, int label_dtype, float temperature, const uint8_t* row_mask,          \
                        const float* lse, const float* entropy, const float* grad_logprob,                       \
                        const float* grad_entropy, void* grad_logits, int grad_dtype, int64_t grad_row_stride,    \
                        int num_threads) {                                                                       \
        ARBOR_TRY(ARBOR_DISPATCH(token_stats_bwd, TAG)(logits, rows, vocab, row_stride, vocab_limit, labels,   \
                                                       label_dtype, temperature, row_mask, lse, entropy,          \
                                                       grad_logprob, grad_entropy, grad_logits, grad_dtype,       \
                                                       grad_row_stride, num_threads, OWN))                        \
    }
ARBOR_BWD(arbor_cpu_token_stats_bwd_f32, F32Tag, float, ARBOR_F32)
ARBOR_BWD(arbor_cpu_token_stats_bwd_bf16, BF16Tag, uint16_t, ARBOR_BF16)
ARBOR_BWD(arbor_cpu_token_stats_bwd_f16, F16Tag, uint16_t, ARBOR_F16)
