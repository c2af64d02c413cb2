// Argument checks shared by the CPU and CUDA entry points: native code re-checks every size it is
// given (the Java layer checks first and throws; these return ARBOR_ERR_ARG instead of crashing).
#ifndef ARBOR_CHECKS_H
#define ARBOR_CHECKS_H

#include <math.h>
#include <stdint.h>

#include "arbor/arbor.h"

namespace arbor {

// A [rows, vocab] matrix with row stride, real vocabulary vocab_limit, and a temperature.
static inline bool bad_matrix(const void* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                              int64_t vocab_limit, float temperature) {
    if (rows < 0 || vocab < 1 || row_stride < vocab || vocab_limit < 1 || vocab_limit > vocab) return true;
    if (!(temperature > 0.0f) || isinf(temperature)) return true;
    if (rows > 0 && logits == nullptr) return true;
    if (rows > 0 && (rows - 1) > (INT64_MAX - vocab) / row_stride) return true;  // last offset overflows
    return false;
}

static inline bool bad_labels(const void* labels, int label_dtype, int64_t rows) {
    return rows > 0 && (labels == nullptr || (label_dtype != ARBOR_I32 && label_dtype != ARBOR_I64));
}

// Output gradient matrix of a backward kernel over logits of dtype own_dtype.
static inline bool bad_grad(const void* logits, int64_t row_stride, int own_dtype, const void* grad, int grad_dtype,
                            int64_t rows, int64_t vocab, int64_t grad_row_stride) {
    if (grad_row_stride < vocab || (rows > 0 && grad == nullptr)) return true;
    if (rows > 0 && (rows - 1) > (INT64_MAX - vocab) / grad_row_stride) return true;
    if (grad_dtype != ARBOR_F32 && grad_dtype != own_dtype) return true;
    // In place is allowed only as an exact alias (each row is read before it is written).
    if (grad == logits && (grad_dtype != own_dtype || grad_row_stride != row_stride)) return true;
    return false;
}

}  // namespace arbor

#endif
