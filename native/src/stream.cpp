// The CPU memory floor: a STREAM-like read and copy of a [rows, cols] fp32 matrix with the kernels'
// vector loads (row_read / row_copy of row_kernels.inc: non-temporal stores for the copy), their ISA
// and their row partitioning over threads (parallel_for) — what the kernels' times are reported
// against (bench/RESULTS.md). Also the kernels' vector exp over an array, for its tests.
#include "arbor/arbor.h"
#include "cpu_dispatch.h"
#include "parallel.h"

namespace arbor {

template <class Isa, class Unused>
static int stream_read(const float* src, int64_t rows, int64_t cols, float* sums, int num_threads) {
    if (rows < 0 || cols < 1 || (rows > 0 && (src == nullptr || sums == nullptr))) return ARBOR_ERR_ARG;
    if (rows > 0 && rows - 1 > INT64_MAX / cols) return ARBOR_ERR_ARG;
    parallel_for(rows, num_threads, cols, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) sums[r] = Isa::read(src + r * cols, cols);
    });
    return ARBOR_OK;
}

template <class Isa, class Unused>
static int stream_copy(const float* src, float* dst, int64_t rows, int64_t cols, int num_threads) {
    if (rows < 0 || cols < 1 || (rows > 0 && (src == nullptr || dst == nullptr))) return ARBOR_ERR_ARG;
    if (rows > 0 && rows - 1 > INT64_MAX / cols) return ARBOR_ERR_ARG;
    parallel_for(rows, num_threads, cols, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) Isa::copy(src + r * cols, dst + r * cols, cols);
    });
    return ARBOR_OK;
}

template <class Isa, class Unused>
static int exp_array(const float* x, int64_t n, float* out, float* dc) {
    if (n < 0 || (n > 0 && (x == nullptr || out == nullptr))) return ARBOR_ERR_ARG;
    if (dc == nullptr)
        Isa::exp(x, n, out);
    else
        Isa::exp_lo(x, n, out, dc);
    return ARBOR_OK;
}

template <class Isa, class R>
static int bf16_array(const float* x, int64_t n, uint16_t* out) {
    if (n < 0 || (n > 0 && (x == nullptr || out == nullptr))) return ARBOR_ERR_ARG;
    Isa::to_bf16(x, n, out);
    return ARBOR_OK;
}

}  // namespace arbor

extern "C" int arbor_cpu_stream_read(const float* src, int64_t rows, int64_t cols, float* sums, int num_threads) {
    try {
        return ARBOR_DISPATCH(arbor::stream_read, int)(src, rows, cols, sums, num_threads);
    } ARBOR_CATCH_ALL
}

extern "C" int arbor_cpu_stream_copy(const float* src, float* dst, int64_t rows, int64_t cols, int num_threads) {
    try {
        return ARBOR_DISPATCH(arbor::stream_copy, int)(src, dst, rows, cols, num_threads);
    } ARBOR_CATCH_ALL
}

extern "C" int arbor_cpu_exp(const float* x, int64_t n, float* out, float* dc) {
    return ARBOR_DISPATCH(arbor::exp_array, int)(x, n, out, dc);
}

extern "C" int arbor_cpu_to_bf16(const float* x, int64_t n, uint16_t* out) {
    return ARBOR_DISPATCH(arbor::bf16_array, int)(x, n, out);
}
