// Compiles the per-row building blocks (row_kernels.inc) twice: once portable (arbor::scalar) and
// once for AVX2+FMA+F16C (arbor::avx2, under a GCC target pragma, never a global -march), and
// chooses between them once at load time from CPUID. Kernels are templates over the ISA struct.
//
// No -ffast-math anywhere: the kernels rely on IEEE -inf and NaN semantics.
#ifndef ARBOR_CPU_DISPATCH_H
#define ARBOR_CPU_DISPATCH_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#include "half.h"

namespace arbor {

struct F32Tag {
    typedef float T;
    static inline float to_f32(float x) { return x; }
    static inline float from_f32(float x) { return x; }
};
struct BF16Tag {
    typedef uint16_t T;
    static inline float to_f32(uint16_t x) { return bf16_to_f32(x); }
    static inline uint16_t from_f32(float x) { return f32_to_bf16(x); }
};
struct F16Tag {
    typedef uint16_t T;
    static inline float to_f32(uint16_t x) { return f16_to_f32(x); }
    static inline uint16_t from_f32(float x) { return f32_to_f16(x); }
};

// Softmax statistics of one row, relative to its max: lse = max + log_sum.
struct RowStats {
    float max;      // max_j z_j
    float log_sum;  // log sum_j e^{z_j - max}
    float entropy;  // H = log_sum - sum_j e^{z_j-max}(z_j-max) / sum_j e^{z_j-max}
    bool valid;     // false when the row has NaN, +inf or no finite entry (all fields NaN)
};

// Below this, e^d underflows fp32's normal range: treated as exactly 0 (ln FLT_MIN).
static const float EXP_LO = -87.3365447505531f;

namespace scalar {
#include "vec_scalar.inc"
#include "row_kernels.inc"

#include "policy_loss_rows.inc"

#include "sampling_rows.inc"
}  // namespace scalar

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace avx2 {
#include "vec_avx2.inc"
#include "row_kernels.inc"

#include "policy_loss_rows.inc"

#include "sampling_rows.inc"
}  // namespace avx2
#pragma GCC pop_options

// The ISA structs the kernels are instantiated with.
struct ScalarIsa {
    template <class Tag>
    static RowStats stats(const typename Tag::T* row, int64_t n, float inv_t) { return scalar::row_stats<Tag>(row, n, inv_t); }
    template <class Tag, class OTag>
    static void grad(const typename Tag::T* row, int64_t n, int64_t ncols, float inv_t, float lse, float H, float g_lp,
                     float g_H, int64_t label, typename OTag::T* out) {
        scalar::row_grad<Tag, OTag>(row, n, ncols, inv_t, lse, H, g_lp, g_H, label, out);
    }
};
struct Avx2Isa {
    template <class Tag>
    __attribute__((target("avx2,fma,f16c")))
    static RowStats stats(const typename Tag::T* row, int64_t n, float inv_t) { return avx2::row_stats<Tag>(row, n, inv_t); }
    template <class Tag, class OTag>
    __attribute__((target("avx2,fma,f16c")))
    static void grad(const typename Tag::T* row, int64_t n, int64_t ncols, float inv_t, float lse, float H, float g_lp,
                     float g_H, int64_t label, typename OTag::T* out) {
        avx2::row_grad<Tag, OTag>(row, n, ncols, inv_t, lse, H, g_lp, g_H, label, out);
    }
};

// 1 when the AVX2 path is in use (decided once; arbor_cpu_force_scalar can override for tests).
int cpu_use_avx2();

// Calls KERNEL<Isa, ...>(args) with the ISA chosen at load time.
#define ARBOR_DISPATCH(KERNEL, ...) \
    (::arbor::cpu_use_avx2() ? KERNEL<::arbor::Avx2Isa, __VA_ARGS__> : KERNEL<::arbor::ScalarIsa, __VA_ARGS__>)

// Reads label r of an int32 / int64 label array.
static inline int64_t read_label(const void* labels, int label_dtype, int64_t r) {
    return label_dtype == 3 /* ARBOR_I32 */ ? (int64_t)((const int32_t*)labels)[r] : ((const int64_t*)labels)[r];
}

}  // namespace arbor

#endif
