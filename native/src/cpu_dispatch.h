// Compiles the per-row building blocks (row_kernels.inc) three times: portable (arbor::scalar), for
// AVX2+FMA+F16C (arbor::avx2) and for AVX-512 F/BW/DQ/VL (arbor::avx512), the last two under GCC
// target pragmas (never a global -march), and chooses one at load time from CPUID (ARBOR_CPU_ISA or
// arbor_cpu_force_isa can lower the choice, for tests and benchmarks). Kernels are templates over the
// ISA struct.
//
// No -ffast-math anywhere: the kernels rely on IEEE -inf and NaN semantics.
#ifndef ARBOR_CPU_DISPATCH_H
#define ARBOR_CPU_DISPATCH_H

#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include <type_traits>

#include "exp_poly.h"
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

// The column chunk of row_stats (L1-sized): its max and sum of e^{z - max}, recorded on request.
#define ARBOR_STATS_CHUNK 2048
struct ChunkMass {
    float max;   // m_c = max of z over the chunk (-inf: nothing finite)
    double sum;  // S_c = sum of e^{z - m_c} over the chunk (the kernels' fp32 exp, summed as in row_stats)
};

// Candidates for top-k collected during the statistics pass: every column whose z = fl(x inv_t) is >= thr is
// appended (z, column) in column order, chunk by chunk while the chunk is in L1; when more than `limit` are
// held, thr rises to a t with at least k held values >= t (a lower bound of the row's k-th largest, found by
// bisection) and the smaller ones go. thr starts at -FLT_MAX (no -inf column).
//
// The first chunk with a finite value also sets thr to a lower bound of the row's k-th largest from the maxima
// of its groups of 8 columns: any t with at least k group maxima >= t has k distinct columns >= t.
//
// Where more chunks follow, that first threshold is speculative: a t with about 2.5 k (len / rest) group maxima >= t,
// so that ~2.5 k columns of the whole row are expected >= it (rest: the columns from this chunk on), not k per chunk.
// It holds when at least k columns of the row turn out >= it (the collection then has every column of the row's top
// k); when fewer do (speculative and m < k after the pass), the caller collects the row again from `safe`, the
// threshold from the k-th group maximum (recollect_row).
struct CandidateSink {
    float thr;
    float* z;     // room for every column of the row and 16 more
    int32_t* idx;
    int64_t m, limit, k;
    float safe = -FLT_MAX;     // the non-speculative first threshold
    bool speculative = false;  // thr started above safe
};

// Candidates for top-p or min-p without a cutting top-k, collected during the statistics pass (docs/sampling.md,
// item 4): in each chunk's exp scan, every column whose raw value x reaches thr_x is appended (z = fl(x inv_t),
// column) in column order; the others are rejected, and the scan's own exps of them are summed into R, with D and
// Q to bound R's distance from their exact integer masses (sampling.cpp, nucleus_draw). R, D and Q are relative to
// e^{fm}, fm the running max. Every column not held has z < thr.
// thr starts at the first finite chunk's max - ln(n / (1 - p)) - 1, below which the whole row's columns hold less
// than (1 - p) / e of its mass; when more than `limit` are held it rises (nucleus_tighten) so that the rejected mass
// stays within half the row's (1 - p) share so far, and at most to the running max - ln(2 / (1 - p)). With min-p,
// thr is instead the running max + log(min-p), at or below the final max's min-p threshold, and only follows the
// running max (the rejected mass is not needed: top-p's total is over the min-p-kept columns, all held). The
// sampler checks at the end that the held columns decide the threshold exactly, and takes the binned path otherwise.
struct NucleusSink {
    float thr, thr_x;    // thr on z (columns not held are below it); thr_x the raw bound: x >= thr_x is held
    float p;             // the row's top-p
    float lmp;           // log(min-p) by smath::log_own, NaN without min-p: thr = (running max) + lmp, no raises by mass
    float* z;            // room for every column of the row and 2 W more
    int32_t* idx;
    int64_t m, limit;
    double fm;           // the frame of R, D, Q (the running max; -inf before the first finite chunk)
    double R, D, Q;      // sum of e^{d} over rejected columns; of e^{d} |d|; of e^{d} (fm - m_ref), d = z - m_ref
    int64_t seen;        // columns passed so far
    bool started;        // thr set (at the first chunk with a finite value)
};

// True while the path in use is avx512-bf16: the AVX-512 kernels store bf16 with VCVTNEPS2BF16
// (vec_avx512.inc bf16_bits). Set with the path (arbor_cpu.cpp), read by every bf16 store.
extern bool g_bf16_store;

// The end of a bf16 chunk's max from its raw words (vec_avx2.inc / vec_avx512.inc raw_max): the lanes' signed maxima
// mx[0:lanes] and minima mn[0:lanes] of p[0:j], then p[j:n] one at a time. The signed max is the largest non-negative
// value (+0 to +inf, or a NaN) when there is one, else the signed min is the largest negative one (the least magnitude).
static inline float raw_max_finish(const int16_t* mx, const int16_t* mn, int lanes, const uint16_t* p, int64_t j,
                                   int64_t n) {
    int M = -32768, m = 32767;
    for (int i = 0; i < lanes; ++i) {
        M = mx[i] > M ? mx[i] : M;
        m = mn[i] < m ? mn[i] : m;
    }
    for (; j < n; ++j) {
        const int v = (int16_t)p[j];
        M = v > M ? v : M;
        m = v < m ? v : m;
    }
    return bf16_to_f32((uint16_t)(M >= 0 ? M : m));
}

// Below this, e^d underflows fp32's normal range: treated as exactly 0 (ln FLT_MIN).
static const float EXP_LO = -87.3365447505531f;

namespace scalar {
#include "vec_scalar.inc"
#include "row_kernels.inc"

#include "policy_loss_rows.inc"

#include "sampling_rows.inc"
}  // namespace scalar

// AVX-512 F/BW/DQ/VL (Skylake-SP and later, Zen 4 and later), with the AVX2 set it implies.
#define ARBOR_AVX512_TARGET "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace avx2 {
#include "vec_avx2.inc"
#include "row_kernels.inc"

#include "policy_loss_rows.inc"

#include "sampling_rows.inc"
}  // namespace avx2
#pragma GCC pop_options

// The per-row statistics' AVX-512 build. The sampler's bins, masses and held lists stay eight lanes wide
// (sampling_rows.inc's SampleVec<8>, the bitwise contract with the CUDA kernel); its races have a sixteen-lane form
// of the same operations (sampling.cpp, Race16).
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")  // = ARBOR_AVX512_TARGET
namespace avx512 {
#include "vec_avx512.inc"
#include "row_kernels.inc"

#include "policy_loss_rows.inc"
}  // namespace avx512
#pragma GCC pop_options

// The ISA structs the kernels are instantiated with.
struct ScalarIsa {
    template <class Tag>
    static RowStats stats(const typename Tag::T* row, int64_t n, float inv_t) { return scalar::row_stats<Tag>(row, n, inv_t); }
    template <class Tag>
    static RowStats stats_chunks(const typename Tag::T* row, int64_t n, float inv_t, ChunkMass* chunks,
                                 CandidateSink* sink = nullptr) {
        return scalar::row_stats<Tag>(row, n, inv_t, chunks, sink);
    }
    // the top-k collection again from the sink's safe threshold (a speculative first threshold that did not hold)
    template <class Tag>
    static void recollect(CandidateSink* sink, const typename Tag::T* row, int64_t n, float inv_t) {
        scalar::recollect_row<Tag>(sink, row, n, inv_t);
    }
    // row_stats collecting the top-p candidates into ns (NucleusSink)
    template <class Tag>
    static RowStats stats_nucleus(const typename Tag::T* row, int64_t n, float inv_t, NucleusSink* ns) {
        return scalar::row_stats_nucleus<Tag>(row, n, inv_t, ns);
    }
    template <class Tag>
    static void exp_rel_row(const typename Tag::T* row, int64_t n, float inv_t, float m, float* out) {
        scalar::row_exp_rel<Tag>(row, n, inv_t, m, out);
    }
    // row_stats keeping its exps in keep[0:n + W] and its chunks' (m_c, S_c), for grad_kept (the fused policy loss)
    template <class Tag>
    static RowStats stats_keep(const typename Tag::T* row, int64_t n, float inv_t, ChunkMass* chunks, float* keep) {
        return scalar::row_stats<Tag>(row, n, inv_t, chunks, nullptr, keep);
    }
    template <class Tag, class OTag>
    static void grad_kept(const typename Tag::T* row, const float* keep, const ChunkMass* chunks, int64_t n,
                          int64_t ncols, float inv_t, float lse, float H, float g_lp, float g_H, int64_t label,
                          typename OTag::T* out, bool stream, const typename Tag::T* next = nullptr, float lse_lo = 0.0f) {
        scalar::row_grad_kept<Tag, OTag>(row, keep, chunks, n, ncols, inv_t, lse, H, g_lp, g_H, label, out, stream, next, lse_lo);
    }
    template <class Tag, class OTag>
    static void grad(const typename Tag::T* row, int64_t n, int64_t ncols, float inv_t, float lse, float H, float g_lp,
                     float g_H, int64_t label, typename OTag::T* out, bool stream,
                     const typename Tag::T* next = nullptr, float lse_lo = 0.0f) {
        scalar::row_grad<Tag, OTag>(row, n, ncols, inv_t, lse, H, g_lp, g_H, label, out, stream, next, lse_lo);
    }
    template <class OTag>
    static void fill(typename OTag::T* out, int64_t n, float v, bool stream) { scalar::row_fill<OTag>(out, n, v, stream); }
    static float read(const float* row, int64_t n) { return scalar::row_read(row, n); }
    static void copy(const float* src, float* dst, int64_t n) { scalar::row_copy(src, dst, n); }
    static void exp(const float* x, int64_t n, float* out) {
        int64_t j = 0;
        for (; j + scalar::W <= n; j += scalar::W) scalar::vstore(out + j, scalar::vexp(scalar::vload(x + j, F32Tag{})), F32Tag{});
        for (; j < n; ++j) out[j] = scalar::vexp(scalar::V{x[j]}).v;
    }
    static void to_bf16(const float* x, int64_t n, uint16_t* out) {
        int64_t j = 0;
        for (; j + scalar::W <= n; j += scalar::W) scalar::vstore(out + j, scalar::vload(x + j, F32Tag{}), BF16Tag{});
        for (; j < n; ++j) out[j] = f32_to_bf16(x[j]);
    }
    static void exp_lo(const float* x, int64_t n, float* out, float* dc) {
        for (int64_t j = 0; j < n; j += scalar::W) {
            const int64_t len = n - j < scalar::W ? n - j : scalar::W;
            scalar::V c, e = scalar::vexp_lo(scalar::load_tail<F32Tag>(x + j, len), &c);
            scalar::store_tail<F32Tag>(out + j, e, len);
            scalar::store_tail<F32Tag>(dc + j, c, len);
        }
    }
};
struct Avx2Isa {
    template <class Tag>
    __attribute__((target("avx2,fma,f16c")))
    static RowStats stats(const typename Tag::T* row, int64_t n, float inv_t) { return avx2::row_stats<Tag>(row, n, inv_t); }
    template <class Tag>
    __attribute__((target("avx2,fma,f16c")))
    static RowStats stats_chunks(const typename Tag::T* row, int64_t n, float inv_t, ChunkMass* chunks,
                                 CandidateSink* sink = nullptr) {
        return avx2::row_stats<Tag>(row, n, inv_t, chunks, sink);
    }
    // the top-k collection again from the sink's safe threshold (a speculative first threshold that did not hold)
    template <class Tag>
    __attribute__((target("avx2,fma,f16c")))
    static void recollect(CandidateSink* sink, const typename Tag::T* row, int64_t n, float inv_t) {
        avx2::recollect_row<Tag>(sink, row, n, inv_t);
    }
    // row_stats collecting the top-p candidates into ns (NucleusSink)
    template <class Tag>
    __attribute__((target("avx2,fma,f16c")))
    static RowStats stats_nucleus(const typename Tag::T* row, int64_t n, float inv_t, NucleusSink* ns) {
        return avx2::row_stats_nucleus<Tag>(row, n, inv_t, ns);
    }
    template <class Tag>
    __attribute__((target("avx2,fma,f16c")))
    static void exp_rel_row(const typename Tag::T* row, int64_t n, float inv_t, float m, float* out) {
        avx2::row_exp_rel<Tag>(row, n, inv_t, m, out);
    }
    // row_stats keeping its exps in keep[0:n + W] and its chunks' (m_c, S_c), for grad_kept (the fused policy loss)
    template <class Tag>
    __attribute__((target("avx2,fma,f16c")))
    static RowStats stats_keep(const typename Tag::T* row, int64_t n, float inv_t, ChunkMass* chunks, float* keep) {
        return avx2::row_stats<Tag>(row, n, inv_t, chunks, nullptr, keep);
    }
    template <class Tag, class OTag>
    __attribute__((target("avx2,fma,f16c")))
    static void grad_kept(const typename Tag::T* row, const float* keep, const ChunkMass* chunks, int64_t n,
                          int64_t ncols, float inv_t, float lse, float H, float g_lp, float g_H, int64_t label,
                          typename OTag::T* out, bool stream, const typename Tag::T* next = nullptr, float lse_lo = 0.0f) {
        avx2::row_grad_kept<Tag, OTag>(row, keep, chunks, n, ncols, inv_t, lse, H, g_lp, g_H, label, out, stream, next, lse_lo);
    }
    template <class Tag, class OTag>
    __attribute__((target("avx2,fma,f16c")))
    static void grad(const typename Tag::T* row, int64_t n, int64_t ncols, float inv_t, float lse, float H, float g_lp,
                     float g_H, int64_t label, typename OTag::T* out, bool stream,
                     const typename Tag::T* next = nullptr, float lse_lo = 0.0f) {
        avx2::row_grad<Tag, OTag>(row, n, ncols, inv_t, lse, H, g_lp, g_H, label, out, stream, next, lse_lo);
    }
    template <class OTag>
    __attribute__((target("avx2,fma,f16c")))
    static void fill(typename OTag::T* out, int64_t n, float v, bool stream) { avx2::row_fill<OTag>(out, n, v, stream); }
    __attribute__((target("avx2,fma,f16c")))
    static float read(const float* row, int64_t n) { return avx2::row_read(row, n); }
    __attribute__((target("avx2,fma,f16c")))
    static void copy(const float* src, float* dst, int64_t n) { avx2::row_copy(src, dst, n); }
    __attribute__((target("avx2,fma,f16c")))
    static void exp(const float* x, int64_t n, float* out) {
        int64_t j = 0;
        for (; j + avx2::W <= n; j += avx2::W) avx2::vstore(out + j, avx2::vexp(avx2::vload(x + j, F32Tag{})), F32Tag{});
        for (; j < n; ++j) out[j] = scalar::vexp(scalar::V{x[j]}).v;
    }
    __attribute__((target("avx2,fma,f16c")))
    static void to_bf16(const float* x, int64_t n, uint16_t* out) {
        int64_t j = 0;
        for (; j + avx2::W <= n; j += avx2::W) avx2::vstore(out + j, avx2::vload(x + j, F32Tag{}), BF16Tag{});
        for (; j < n; ++j) out[j] = f32_to_bf16(x[j]);
    }
    __attribute__((target("avx2,fma,f16c")))
    static void exp_lo(const float* x, int64_t n, float* out, float* dc) {
        for (int64_t j = 0; j < n; j += avx2::W) {
            const int64_t len = n - j < avx2::W ? n - j : avx2::W;
            avx2::V c, e = avx2::vexp_lo(avx2::load_tail<F32Tag>(x + j, len), &c);
            avx2::store_tail<F32Tag>(out + j, e, len);
            avx2::store_tail<F32Tag>(dc + j, c, len);
        }
    }
};
struct Avx512Isa {
    template <class Tag>
    __attribute__((target(ARBOR_AVX512_TARGET)))
    static RowStats stats(const typename Tag::T* row, int64_t n, float inv_t) { return avx512::row_stats<Tag>(row, n, inv_t); }
    template <class Tag>
    __attribute__((target(ARBOR_AVX512_TARGET)))
    static RowStats stats_chunks(const typename Tag::T* row, int64_t n, float inv_t, ChunkMass* chunks,
                                 CandidateSink* sink = nullptr) {
        return avx512::row_stats<Tag>(row, n, inv_t, chunks, sink);
    }
    // the top-k collection again from the sink's safe threshold (a speculative first threshold that did not hold)
    template <class Tag>
    __attribute__((target(ARBOR_AVX512_TARGET)))
    static void recollect(CandidateSink* sink, const typename Tag::T* row, int64_t n, float inv_t) {
        avx512::recollect_row<Tag>(sink, row, n, inv_t);
    }
    // row_stats collecting the top-p candidates into ns (NucleusSink)
    template <class Tag>
    __attribute__((target(ARBOR_AVX512_TARGET)))
    static RowStats stats_nucleus(const typename Tag::T* row, int64_t n, float inv_t, NucleusSink* ns) {
        return avx512::row_stats_nucleus<Tag>(row, n, inv_t, ns);
    }
    template <class Tag>
    __attribute__((target(ARBOR_AVX512_TARGET)))
    static void exp_rel_row(const typename Tag::T* row, int64_t n, float inv_t, float m, float* out) {
        avx512::row_exp_rel<Tag>(row, n, inv_t, m, out);
    }
    // row_stats keeping its exps in keep[0:n + W] and its chunks' (m_c, S_c), for grad_kept (the fused policy loss)
    template <class Tag>
    __attribute__((target(ARBOR_AVX512_TARGET)))
    static RowStats stats_keep(const typename Tag::T* row, int64_t n, float inv_t, ChunkMass* chunks, float* keep) {
        return avx512::row_stats<Tag>(row, n, inv_t, chunks, nullptr, keep);
    }
    template <class Tag, class OTag>
    __attribute__((target(ARBOR_AVX512_TARGET)))
    static void grad_kept(const typename Tag::T* row, const float* keep, const ChunkMass* chunks, int64_t n,
                          int64_t ncols, float inv_t, float lse, float H, float g_lp, float g_H, int64_t label,
                          typename OTag::T* out, bool stream, const typename Tag::T* next = nullptr, float lse_lo = 0.0f) {
        avx512::row_grad_kept<Tag, OTag>(row, keep, chunks, n, ncols, inv_t, lse, H, g_lp, g_H, label, out, stream, next, lse_lo);
    }
    template <class Tag, class OTag>
    __attribute__((target(ARBOR_AVX512_TARGET)))
    static void grad(const typename Tag::T* row, int64_t n, int64_t ncols, float inv_t, float lse, float H, float g_lp,
                     float g_H, int64_t label, typename OTag::T* out, bool stream,
                     const typename Tag::T* next = nullptr, float lse_lo = 0.0f) {
        avx512::row_grad<Tag, OTag>(row, n, ncols, inv_t, lse, H, g_lp, g_H, label, out, stream, next, lse_lo);
    }
    template <class OTag>
    __attribute__((target(ARBOR_AVX512_TARGET)))
    static void fill(typename OTag::T* out, int64_t n, float v, bool stream) { avx512::row_fill<OTag>(out, n, v, stream); }
    __attribute__((target(ARBOR_AVX512_TARGET)))
    static float read(const float* row, int64_t n) { return avx512::row_read(row, n); }
    __attribute__((target(ARBOR_AVX512_TARGET)))
    static void copy(const float* src, float* dst, int64_t n) { avx512::row_copy(src, dst, n); }
    __attribute__((target(ARBOR_AVX512_TARGET)))
    static void exp(const float* x, int64_t n, float* out) {
        int64_t j = 0;
        for (; j + avx512::W <= n; j += avx512::W) avx512::vstore(out + j, avx512::vexp(avx512::vload(x + j, F32Tag{})), F32Tag{});
        for (; j < n; ++j) out[j] = scalar::vexp(scalar::V{x[j]}).v;
    }
    __attribute__((target(ARBOR_AVX512_TARGET)))
    static void to_bf16(const float* x, int64_t n, uint16_t* out) {
        int64_t j = 0;
        for (; j + avx512::W <= n; j += avx512::W) avx512::vstore(out + j, avx512::vload(x + j, F32Tag{}), BF16Tag{});
        for (; j < n; ++j) out[j] = f32_to_bf16(x[j]);
    }
    __attribute__((target(ARBOR_AVX512_TARGET)))
    static void exp_lo(const float* x, int64_t n, float* out, float* dc) {
        for (int64_t j = 0; j < n; j += avx512::W) {
            const int64_t len = n - j < avx512::W ? n - j : avx512::W;
            avx512::V c, e = avx512::vexp_lo(avx512::load_tail<F32Tag>(x + j, len), &c);
            avx512::store_tail<F32Tag>(out + j, e, len);
            avx512::store_tail<F32Tag>(dc + j, c, len);
        }
    }
};

// The ISA levels, in the order of preference (arbor_cpu_isa names them).
// avx512-bf16 is the AVX-512 path with hardware bf16 stores (AVX512_BF16): the same kernels and the same
// bits (g_bf16_store).
enum CpuIsa { ISA_SCALAR = 0, ISA_AVX2 = 1, ISA_AVX512 = 2, ISA_AVX512_BF16 = 3 };

// The ISA in use: the best this CPU has, lowered by ARBOR_CPU_ISA (read once, at first use) or by
// arbor_cpu_force_isa / arbor_cpu_force_scalar.
int cpu_isa();

// Calls KERNEL<Isa, ...>(args) with the ISA chosen at load time.
#define ARBOR_DISPATCH(KERNEL, ...)                                                 \
    (::arbor::cpu_isa() >= ::arbor::ISA_AVX512 ? KERNEL<::arbor::Avx512Isa, __VA_ARGS__> \
     : ::arbor::cpu_isa() == ::arbor::ISA_AVX2 ? KERNEL<::arbor::Avx2Isa, __VA_ARGS__>   \
                                                : KERNEL<::arbor::ScalarIsa, __VA_ARGS__>)

// Whether a backward writes its [rows, stride] gradient with non-temporal stores: when it is much larger
// than the caches (it will not be read back from them), so the stores skip the read of each line.
static inline bool stream_gradient(int64_t rows, int64_t row_stride, size_t elem_bytes) {
    return (double)rows * (double)row_stride * (double)elem_bytes >= 16.0 * 1024 * 1024;
}

// Bytes of this core's L2 (sysconf; 512 KiB where unknown).
static inline int64_t l2_bytes() {
    static const int64_t b = [] {
        const long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
        return v > 0 ? (int64_t)v : (int64_t)512 * 1024;
    }();
    return b;
}

// Whether a kernel that reads each row twice (statistics, then gradient) prefetches the next row into L2 while
// it writes the current row's gradient: when the row takes at most 3/4 of L2 (the row being re-read and the one
// arriving share it; the consumed part of the first makes room for the second).
static inline bool prefetch_next_row(int64_t row_bytes) { return row_bytes * 4 <= l2_bytes() * 3; }

// Reads label r of an int32 / int64 label array.
static inline int64_t read_label(const void* labels, int label_dtype, int64_t r) {
    return label_dtype == 3 /* ARBOR_I32 */ ? (int64_t)((const int32_t*)labels)[r] : ((const int64_t*)labels)[r];
}

}  // namespace arbor

#endif
