// The sampling kernels' deciding arithmetic (docs/algorithms.md §10), written once for the host (CPU kernels,
// scalar path and vector tails) and the device (cuda-kernels/sampling.cuh). Everything that decides
// which token is drawn goes through these functions, so the CPU and CUDA kernels draw bitwise the
// same token:
//   - only IEEE fp32 +, −, ×, fma, exact conversions and integer operations; on the device through
//     the __f*_rn intrinsics, which nvcc never contracts or approximates; on the host under
//     fp-contract=off (GCC contracts a*b+c into an fma when FMA is enabled, even with -std=c++17);
//   - our own log and exp polynomials (Cephes-style, ~1 ulp) instead of libm / __logf / ex2.approx,
//     whose results differ between the platforms;
//   - order-independent reductions only (max with lowest-index ties, exact integer sums).
// The AVX2 versions in sampling_rows.inc mirror these operation by operation.
#ifndef ARBOR_SAMPLING_MATH_H
#define ARBOR_SAMPLING_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "checks.h"

#if defined(__CUDACC__)
#define ARBOR_SM __host__ __device__ __forceinline__
#else
#define ARBOR_SM static inline
#endif

// (nvcc: the device side uses the __f*_rn intrinsics; the CUDA library's host side never runs the
// deciding path, and nvcc's front end does not know this pragma.)
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif

namespace arbor {
namespace smath {

// ---- fp32 primitives: one IEEE round-to-nearest-even operation each, never fused ----------------

ARBOR_SM float f_mul(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
ARBOR_SM float f_add(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
ARBOR_SM float f_sub(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}
ARBOR_SM float f_fma(float a, float b, float c) {
#ifdef __CUDA_ARCH__
    return __fmaf_rn(a, b, c);
#else
    return __builtin_fmaf(a, b, c);
#endif
}
// Round to the nearest integer, ties to even (the default rounding mode on both sides).
ARBOR_SM float f_rint(float x) {
#ifdef __CUDA_ARCH__
    return rintf(x);
#else
    return __builtin_rintf(x);
#endif
}
ARBOR_SM float f_as_float(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}
ARBOR_SM uint32_t f_as_uint(float f) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
#endif
}
// Exact for |i| < 2^24 (all uses).
ARBOR_SM float i2f(int32_t i) {
#ifdef __CUDA_ARCH__
    return __int2float_rn(i);
#else
    return (float)i;
#endif
}
ARBOR_SM uint32_t mulhi32(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
    return __umulhi(a, b);
#else
    return (uint32_t)(((uint64_t)a * b) >> 32);
#endif
}

// ---- constants ----------------------------------------------------------------------------------

// Below this e^d underflows fp32's normal range and is taken as exactly 0 (ln FLT_MIN), as in the
// token-statistics kernels.
#define ARBOR_SM_EXP_LO (-87.3365447505531f)
// Upper bound of the Gumbel noise: u <= 1 - 2^-24 gives G <= 16.64. Columns whose z + this bound
// is below the best key so far cannot win and are skipped without drawing their noise (exact).
#define ARBOR_SM_GUMBEL_MAX 17.0f
// Bound on |G' - G| over all 2^23 uniforms, G' our fp32 Gumbel noise and G = -log(-log u) exactly:
// the measured maximum (arbor_sample_gumbel_max_error, asserted <= 1e-5 by SamplerTest) times 10.
#define ARBOR_SM_GUMBEL_EPS 1e-4
// Top-p masses are integers in units of 2^-40 of the row's largest probability.
#define ARBOR_SM_MASS_SCALE 1099511627776.0f

// ---- Philox-4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3",
// SC'11; constants and round structure of Random123's philox4x32_R) --------------------------------

#define ARBOR_PHILOX_M0 0xD2511F53u
#define ARBOR_PHILOX_M1 0xCD9E8D57u
#define ARBOR_PHILOX_W0 0x9E3779B9u
#define ARBOR_PHILOX_W1 0xBB67AE85u

ARBOR_SM void philox4x32_10(uint32_t c[4], uint32_t k0, uint32_t k1) {
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k0 += ARBOR_PHILOX_W0;
            k1 += ARBOR_PHILOX_W1;
        }
        const uint32_t hi0 = mulhi32(ARBOR_PHILOX_M0, c[0]), lo0 = ARBOR_PHILOX_M0 * c[0];
        const uint32_t hi1 = mulhi32(ARBOR_PHILOX_M1, c[2]), lo1 = ARBOR_PHILOX_M1 * c[2];
        const uint32_t n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
        c[0] = n0;
        c[1] = lo1;
        c[2] = n2;
        c[3] = lo0;
    }
}

// Counter word c0 of column j's Philox block, and which of the block's four outputs is column j's.
// A block serves the columns {32g + i, 32g + 8 + i, 32g + 16 + i, 32g + 24 + i} (i = j & 7), so one
// 8-lane evaluation covers 32 consecutive columns with each output word a contiguous run of 8.
ARBOR_SM uint32_t philox_block(int64_t j) { return ((uint32_t)(j >> 5) << 3) | (uint32_t)(j & 7); }
ARBOR_SM int philox_word(int64_t j) { return (int)((j >> 3) & 3); }

// The row's random stream: Philox key = seed, counter words 1..3 = (step, key lo, key hi).
struct Stream {
    uint32_t k0, k1, step, key_lo, key_hi;
};
ARBOR_SM Stream make_stream(uint64_t seed, uint64_t key, uint64_t step) {
    Stream s;
    s.k0 = (uint32_t)seed;
    s.k1 = (uint32_t)(seed >> 32);
    s.step = (uint32_t)step;
    s.key_lo = (uint32_t)key;
    s.key_hi = (uint32_t)(key >> 32);
    return s;
}
ARBOR_SM void stream_block(const Stream& s, uint32_t block, uint32_t out[4]) {
    out[0] = block;
    out[1] = s.step;
    out[2] = s.key_lo;
    out[3] = s.key_hi;
    philox4x32_10(out, s.k0, s.k1);
}

// u = (2k + 1) 2^-24 from the top 23 bits k of a random word: exactly representable, in
// [2^-24, 1 - 2^-24], so neither log below sees 0 or 1.
ARBOR_SM float uniform_of(uint32_t bits) { return f_mul(i2f((int32_t)(((bits >> 9) << 1) | 1u)), 5.9604644775390625e-8f); }

// The two uniforms of the untruncated (chunked inverse-CDF) draw: the row's Philox block with counter
// word c0 = 0xffffffff, which no column uses (columns use c0 < 2^29), as two 53-bit doubles in (0, 1):
// u = (a 2^26 + b + 1/2) 2^-53 with a the top 27 bits of one word and b the top 26 of the next.
ARBOR_SM void draw_uniforms(const Stream& s, double* u1, double* u2) {
    uint32_t w[4];
    stream_block(s, 0xffffffffu, w);
    *u1 = ((double)(w[0] >> 5) * 67108864.0 + (double)(w[1] >> 6) + 0.5) * 1.1102230246251565e-16;
    *u2 = ((double)(w[2] >> 5) * 67108864.0 + (double)(w[3] >> 6) + 0.5) * 1.1102230246251565e-16;
}

// ---- log and exp (Cephes logf / expf structure, explicit operations) ------------------------------

// Natural log of a finite x > 0. x = 2^e m with m in [sqrt(1/2), sqrt(2)); log(1 + f) by a
// degree-9 polynomial in f = m - 1; e ln 2 added in two parts.
ARBOR_SM float log_own(float x) {
    int32_t scale = 0;
    if (x < 1.17549435e-38f) {  // subnormal: scale into the normal range first (exact)
        x = f_mul(x, 8388608.0f);
        scale = 23;
    }
    const uint32_t b = f_as_uint(x);
    int32_t e = (int32_t)(b >> 23) - 126 - scale;
    float m = f_as_float((b & 0x007fffffu) | 0x3f000000u);  // in [0.5, 1)
    if (m < 0.70710678f) {
        e -= 1;
        m = f_sub(f_add(m, m), 1.0f);
    } else {
        m = f_sub(m, 1.0f);
    }
    const float z = f_mul(m, m);
    float y = 7.0376836292e-2f;
    y = f_fma(y, m, -1.1514610310e-1f);
    y = f_fma(y, m, 1.1676998740e-1f);
    y = f_fma(y, m, -1.2420140846e-1f);
    y = f_fma(y, m, 1.4249322787e-1f);
    y = f_fma(y, m, -1.6668057665e-1f);
    y = f_fma(y, m, 2.0000714765e-1f);
    y = f_fma(y, m, -2.4999993993e-1f);
    y = f_fma(y, m, 3.3333331174e-1f);
    y = f_mul(f_mul(y, m), z);
    const float fe = i2f(e);
    y = f_fma(fe, -2.12194440e-4f, y);
    y = f_fma(z, -0.5f, y);
    float r = f_add(m, y);
    r = f_fma(fe, 0.693359375f, r);
    return r;
}

// e^d for d <= 88.37; exactly 0 for d < ARBOR_SM_EXP_LO (and -inf). n = rint(d log2 e),
// r = d - n ln 2 (two-part ln 2), degree-6 polynomial, scaled by 2^n through the exponent bits.
ARBOR_SM float exp_own(float d) {
    if (!(d >= ARBOR_SM_EXP_LO)) return 0.0f;
    const float x = d < 88.3762626647949f ? d : 88.3762626647949f;
    const float n = f_rint(f_mul(x, 1.44269504088896341f));
    float r = f_fma(-n, 0.693359375f, x);
    r = f_fma(-n, -2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = f_fma(p, r, 1.3981999507e-3f);
    p = f_fma(p, r, 8.3334519073e-3f);
    p = f_fma(p, r, 4.1665795894e-2f);
    p = f_fma(p, r, 1.6666665459e-1f);
    p = f_fma(p, r, 5.0000001201e-1f);
    const float r2 = f_mul(r, r);
    const float y = f_fma(p, r2, f_add(r, 1.0f));
    return f_mul(y, f_as_float((uint32_t)((int32_t)n + 127) << 23));
}

// The term subtracted from z_j in the Gumbel-max key: log(E) with E = -log(u) ~ Exp(1), so that
// key = z - log(E) = z + G, G = -log(-log u) ~ Gumbel(0, 1).
ARBOR_SM float neg_gumbel_of(uint32_t bits) { return log_own(-log_own(uniform_of(bits))); }

// True when no column with z <= zmax whose random word is <= max_bits can reach a key above best, so
// its logs need not be taken. With u = (2k + 1) 2^-24 and m = 2^24 - 2k - 1 (so 1 - u = m 2^-24):
// -log(-log u) <= -log(1 - u) = (24 - log2 m) ln 2 <= (24 - floor(log2 m)) ln 2 — a bound from one
// count-leading-zeros. The computed noise is within ARBOR_SM_GUMBEL_EPS of the exact one and
// fl(z + G') exceeds z + G' by at most 2^-24 of its magnitude; the test keeps a margin for all of it,
// so skipping never changes the token. (Double precision, host or device; it only prunes, so it
// need not match across platforms.)
ARBOR_SM int floor_log2(uint32_t m) {
#ifdef __CUDA_ARCH__
    return 31 - __clz((int)m);
#else
    return 31 - __builtin_clz(m);
#endif
}
ARBOR_SM bool cannot_win(float zmax, uint32_t max_bits, float best) {
    if (best == -INFINITY) return false;
    const uint32_t m = (1u << 24) - (((max_bits >> 9) << 1) | 1u);  // >= 1
    const double gmax = (double)(24 - floor_log2(m)) * 0.69314718055994531;
    const double reach = (double)zmax + gmax + ARBOR_SM_GUMBEL_EPS;
    return reach + fabs(reach) * 1.2e-7 + 1e-30 < (double)best;
}

// Top-p mass of a column: e^{d} (d = z - z_max <= 0) in units of 2^-40, truncated to an integer.
ARBOR_SM int64_t mass_of(float d) {
#ifdef __CUDA_ARCH__
    return __float2ll_rz(f_mul(exp_own(d), ARBOR_SM_MASS_SCALE));
#else
    return (int64_t)f_mul(exp_own(d), ARBOR_SM_MASS_SCALE);
#endif
}

// Smallest integer >= p * total (p in (0, 1)), clamped to [1, total]: the mass top-p must reach.
ARBOR_SM int64_t top_p_target(float p, int64_t total) {
    const double t = ceil((double)p * (double)total);
    int64_t target = (int64_t)t;
    if (target > total) target = total;
    if (target < 1) target = 1;
    return target;
}

// ---- order-preserving keys of non-NaN floats (-0 and +0 map to the same key) ---------------------

ARBOR_SM uint32_t order_key(float f) {
    uint32_t u = f_as_uint(f);
    if (u == 0x80000000u) u = 0u;
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
ARBOR_SM float key_value(uint32_t k) { return f_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k); }

// One round of the MSB-first radix selection shared by both sides: `hist[d]` is the weight of the
// remaining candidates whose current 8-bit digit is d, `above` the weight of candidates already
// known to be larger. Picks the largest digit at which the weight from the top reaches `target`
// (so the final key is the largest value v with W(z >= v) >= target) and advances `above`.
ARBOR_SM int radix_pick(const int64_t* hist, int64_t target, int64_t* above) {
    int64_t cum = *above;
    for (int d = 255; d >= 0; --d) {
        if (cum + hist[d] >= target) {
            *above = cum;
            return d;
        }
        cum += hist[d];
    }
    return 0;  // unreachable when the total weight reaches target
}

// Whether column value z is kept by a threshold tau (-inf = everything finite).
ARBOR_SM bool kept(float z, float tau) { return z >= tau && z != -INFINITY; }

// ---- per-row parameters (arbor/sampling.h): a scalar each, optionally overridden per row ----------

struct SampleArgs {
    float temperature;
    const float* temperatures;
    int32_t top_k;
    const int32_t* top_ks;
    float top_p;
    const float* top_ps;
    float min_p;
    const float* min_ps;
    uint64_t seed;
    const uint64_t* seeds;
    const uint64_t* keys;  // NULL: the row index
    uint64_t step;
    const uint64_t* steps;
    const uint8_t* row_mask;
};

struct RowParams {
    float t, p, mp;
    int32_t k;
    uint64_t step;
    Stream stream;
};

ARBOR_SM RowParams row_params(const SampleArgs& a, int64_t r) {
    RowParams rp;
    rp.t = a.temperatures ? a.temperatures[r] : a.temperature;
    rp.k = a.top_ks ? a.top_ks[r] : a.top_k;
    rp.p = a.top_ps ? a.top_ps[r] : a.top_p;
    rp.mp = a.min_ps ? a.min_ps[r] : a.min_p;
    rp.step = a.steps ? a.steps[r] : a.step;
    rp.stream = make_stream(a.seeds ? a.seeds[r] : a.seed, a.keys ? a.keys[r] : (uint64_t)r, rp.step);
    return rp;
}

// A row's sampling parameters are invalid (temperature finite >= 0, top_p in (0, 1],
// min_p in [0, 1], step < 2^32; any top_k is valid, <= 0 meaning off).
ARBOR_SM bool bad_sample_params(float temperature, float top_p, float min_p, uint64_t step) {
    if (!(temperature >= 0.0f) || temperature == INFINITY) return true;
    if (!(top_p > 0.0f && top_p <= 1.0f)) return true;
    if (!(min_p >= 0.0f && min_p <= 1.0f)) return true;
    return step > 0xffffffffull;
}
ARBOR_SM bool bad_row_params(const RowParams& rp) { return bad_sample_params(rp.t, rp.p, rp.mp, rp.step); }

// Host-side checks shared by the CPU and CUDA entry points: sizes, pointers and the scalar
// parameters (per-row arrays are checked row by row: on the host by the CPU kernel before it
// starts, on the device by the CUDA kernel, which gives such a row token -1).
static inline bool bad_sample_call(const void* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                                   int64_t vocab_limit, const SampleArgs& a, const void* tokens, int token_dtype) {
    if (bad_matrix(logits, rows, vocab, row_stride, vocab_limit, 1.0f)) return true;
    if (vocab_limit > INT32_MAX) return true;  // columns are int32 tokens
    if (rows > 0 && tokens == nullptr) return true;
    if (token_dtype != ARBOR_I32 && token_dtype != ARBOR_I64) return true;
    return bad_sample_params(a.temperature, a.top_p, a.min_p, a.step);
}

}  // namespace smath
}  // namespace arbor

#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#pragma GCC pop_options
#endif

#endif
