// Sampling: fused sample + logprob + entropy (docs/algorithms.md §10) — CPU kernels. Contract: arbor/sampling.h;
// definitions and the reasons behind them: docs/sampling.md.
//
// Per row:
//   1. softmax statistics of the tempered row (row_stats, shared with token stats: one read);
//      logprob and entropy come from them exactly as in token_stats.cpp;
//   2. T = 0: greedy argmax. Otherwise the truncation threshold tau on z = x * (1/T):
//      min-p  tau = z_max + log(min_p);
//      top-k  the k-th largest kept z (radix selection on order-preserving keys, unit weights);
//      top-p  the largest kept z at which the integer mass from the top reaches ceil(p * total);
//      a binned pre-pass bounds where these thresholds lie, so only the columns of the top bins are
//      gathered (in column order) and the exact selections run on short lists;
//   3. the token is the Gumbel-max race over kept columns: over the gathered list when it is short,
//      else over the whole row (vectorized noise; groups that cannot win skipped before their logs).
// Every deciding value comes from sampling_math.h (see there), so the token equals the CUDA
// kernel's; the statistics (logprob, entropy, the truncated normalizer) use the fast paths.
#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <float.h>
#include <math.h>
#include <vector>

#include "arbor/arbor.h"
#include "checks.h"
#include "cpu_dispatch.h"
#include "parallel.h"
#include "sampling_math.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif

namespace arbor {

// smath as the template parameter of sampling_rows.inc's per-ISA code.
struct SampleMath {
    typedef smath::Stream Stream;
    static constexpr uint32_t PHILOX_M0 = ARBOR_PHILOX_M0, PHILOX_M1 = ARBOR_PHILOX_M1;
    static constexpr uint32_t PHILOX_W0 = ARBOR_PHILOX_W0, PHILOX_W1 = ARBOR_PHILOX_W1;
    static constexpr float EXP_LO = ARBOR_SM_EXP_LO, GUMBEL_MAX = ARBOR_SM_GUMBEL_MAX;
    static constexpr float MASS_SCALE = ARBOR_SM_MASS_SCALE;
    static float f_add(float a, float b) { return smath::f_add(a, b); }
    static float f_mul(float a, float b) { return smath::f_mul(a, b); }
    static float f_sub(float a, float b) { return smath::f_sub(a, b); }
    static float exp_own(float d) { return smath::exp_own(d); }
    static float neg_gumbel_of(uint32_t bits) { return smath::neg_gumbel_of(bits); }
    static bool kept(float z, float tau) { return smath::kept(z, tau); }
    static void stream_block(const Stream& s, uint32_t block, uint32_t out[4]) { smath::stream_block(s, block, out); }
    static uint32_t philox_block(int64_t j) { return smath::philox_block(j); }
    static int philox_word(int64_t j) { return smath::philox_word(j); }
    static bool cannot_win(float zmax, uint32_t max_bits, float best) { return smath::cannot_win(zmax, max_bits, best); }
};

// Rows drawn by nucleus_draw, by how its threshold was decided: 0 from the held candidates and the bound, 1 with the
// exact total, 2 by the binned path (arbor_cpu_sample_nucleus_paths; tests and benchmarks read them).
static std::atomic<int64_t> g_nucleus_count[3];
// A factor on nucleus_draw's bound (1; tests widen it to take the exact-total and binned paths on every row).
static std::atomic<double> g_nucleus_widen{1.0};

struct Drawn {
    float key;
    int64_t idx;
};

// The per-ISA entry points of the sampling kernels. The row statistics are token stats' own ISA
// entry points (cpu_dispatch.h), called — not re-instantiated under this file's fp-contract=off — so
// logprob and entropy are bitwise token_stats_fwd's.
struct SampleScalarIsa {
    typedef ScalarIsa Stats;
    template <class Tag>
    static Drawn race(const typename Tag::T* row, int64_t n, float inv_t, float tau, const smath::Stream& s) {
        scalar::SampleBest b = scalar::gumbel_race<SampleMath, Tag>(row, n, inv_t, tau, s);
        return Drawn{b.key, b.idx};
    }
    template <class Tag>
    static int64_t argmax(const typename Tag::T* row, int64_t n) { return scalar::argmax_row<Tag>(row, n); }
    template <class Tag>
    static void bin(const typename Tag::T* row, int64_t n, float inv_t, float tau, float zmax, int64_t* count,
                    int64_t* mass) {
        scalar::bin_row<SampleMath, Tag>(row, n, inv_t, tau, zmax, count, mass);
    }
    template <class Tag>
    static int64_t collect(const typename Tag::T* row, int64_t n, float inv_t, float tau, float zmax, int bmax,
                           float* z, int32_t* idx) {
        return scalar::collect_bins<SampleMath, Tag>(row, n, inv_t, tau, zmax, bmax, z, idx);
    }
    static void exp_rel(const float* z, int64_t n, float zmax, float* e) {
        scalar::SampleVec<1, SampleMath>::exp_rel(z, n, zmax, e);
    }
    static int64_t held(const float* z, int64_t n, float zmax, int64_t* w, uint16_t* bin) {
        return scalar::SampleVec<1, SampleMath>::held(z, n, zmax, w, bin);
    }
    template <class Tag>
    static int64_t mass_total(const typename Tag::T* row, int64_t n, float inv_t, float zmax) {
        return scalar::mass_total<SampleMath, Tag>(row, n, inv_t, zmax);
    }
    static void neg_gumbel32(const smath::Stream& s, int64_t g, float* L) {
        uint32_t words[32];
        scalar::SampleVec<1, SampleMath>::philox32(s, g, words);
        scalar::SampleVec<1, SampleMath>::neg_gumbel32(words, L);
    }
    static Drawn race_list(const float* z, const int32_t* idx, int64_t m, const smath::Stream& s) {
        scalar::SampleBest b = scalar::race_list<SampleMath>(z, idx, m, s);
        return Drawn{b.key, b.idx};
    }
};

struct SampleAvx2Isa {
    typedef Avx2Isa Stats;
    template <class Tag>
    __attribute__((target("avx2,fma,f16c")))
    static Drawn race(const typename Tag::T* row, int64_t n, float inv_t, float tau, const smath::Stream& s) {
        avx2::SampleBest b = avx2::gumbel_race<SampleMath, Tag>(row, n, inv_t, tau, s);
        return Drawn{b.key, b.idx};
    }
    template <class Tag>
    __attribute__((target("avx2,fma,f16c")))
    static int64_t argmax(const typename Tag::T* row, int64_t n) { return avx2::argmax_row<Tag>(row, n); }
    template <class Tag>
    __attribute__((target("avx2,fma,f16c")))
    static void bin(const typename Tag::T* row, int64_t n, float inv_t, float tau, float zmax, int64_t* count,
                    int64_t* mass) {
        avx2::bin_row<SampleMath, Tag>(row, n, inv_t, tau, zmax, count, mass);
    }
    template <class Tag>
    __attribute__((target("avx2,fma,f16c")))
    static int64_t collect(const typename Tag::T* row, int64_t n, float inv_t, float tau, float zmax, int bmax,
                           float* z, int32_t* idx) {
        return avx2::collect_bins<SampleMath, Tag>(row, n, inv_t, tau, zmax, bmax, z, idx);
    }
    __attribute__((target("avx2,fma,f16c")))
    static void exp_rel(const float* z, int64_t n, float zmax, float* e) {
        avx2::SampleVec<8, SampleMath>::exp_rel(z, n, zmax, e);
    }
    __attribute__((target("avx2,fma,f16c")))
    static int64_t held(const float* z, int64_t n, float zmax, int64_t* w, uint16_t* bin) {
        return avx2::SampleVec<8, SampleMath>::held(z, n, zmax, w, bin);
    }
    template <class Tag>
    __attribute__((target("avx2,fma,f16c")))
    static int64_t mass_total(const typename Tag::T* row, int64_t n, float inv_t, float zmax) {
        return avx2::mass_total<SampleMath, Tag>(row, n, inv_t, zmax);
    }
    __attribute__((target("avx2,fma,f16c")))
    static void neg_gumbel32(const smath::Stream& s, int64_t g, float* L) {
        alignas(32) uint32_t words[32];
        avx2::SampleVec<8, SampleMath>::philox32(s, g, words);
        avx2::SampleVec<8, SampleMath>::neg_gumbel32(words, L);
    }
    __attribute__((target("avx2,fma,f16c")))
    static Drawn race_list(const float* z, const int32_t* idx, int64_t m, const smath::Stream& s) {
        avx2::SampleBest b = avx2::race_list<SampleMath>(z, idx, m, s);
        return Drawn{b.key, b.idx};
    }
};

// The races sixteen lanes at a time on AVX-512. The list race: SampleVec<8>::race_list (sampling_rows.inc) operation by
// operation on twice the lanes — the same Philox words, noise and keys per entry, the best per lane by strict > (the
// lowest column of a lane on ties, the list being in column order) and across lanes by key, then lowest column — so the
// same token as the eight-lane and scalar races (bench/native/race_list_check.cpp); the last m mod 16 entries in a
// masked vector rather than one at a time. The row race: gumbel_race over groups of 64 columns (row_race, below). On
// Zen 4, which runs 512-bit operations in two halves, the Philox rounds still take ~0.73x the time of the eight-lane
// ones (half the instructions); the list race of 6,000 entries 0.6x, the row race 0.67x (bench/RESULTS.md, run 14).
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")  // = ARBOR_AVX512_TARGET
namespace avx512 {
template <class M>
struct Race16 {
    static inline __m512 set(float x) { return _mm512_set1_ps(x); }
    static inline __m512 fmadd(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
    static inline __m512i mulhilo(__m512i a, uint32_t m, __m512i* lo) {
        const __m512i mv = _mm512_set1_epi32((int)m);
        const __m512i ev = _mm512_mul_epu32(a, mv);                         // lanes 0, 2, ...
        const __m512i od = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), mv);  // lanes 1, 3, ...
        *lo = _mm512_mask_blend_epi32(0xAAAA, ev, _mm512_slli_epi64(od, 32));
        return _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(ev, 32), od);
    }
    static inline void philox16(__m512i c[4], uint32_t k0, uint32_t k1) {
        for (int round = 0; round < 10; ++round) {
            if (round > 0) {
                k0 += M::PHILOX_W0;
                k1 += M::PHILOX_W1;
            }
            __m512i lo0, lo1;
            const __m512i hi0 = mulhilo(c[0], M::PHILOX_M0, &lo0);
            const __m512i hi1 = mulhilo(c[2], M::PHILOX_M1, &lo1);
            const __m512i n0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c[1]), _mm512_set1_epi32((int)k0));
            const __m512i n2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c[3]), _mm512_set1_epi32((int)k1));
            c[0] = n0;
            c[1] = lo1;
            c[2] = n2;
            c[3] = lo0;
        }
    }
    // SampleVec<8>::log_v (smath::log_own for normal x > 0)
    static inline __m512 log_v(__m512 x) {
        const __m512i b = _mm512_castps_si512(x);
        __m512i e = _mm512_sub_epi32(_mm512_srli_epi32(b, 23), _mm512_set1_epi32(126));
        __m512 m = _mm512_castsi512_ps(
                _mm512_or_si512(_mm512_and_si512(b, _mm512_set1_epi32(0x007fffff)), _mm512_set1_epi32(0x3f000000)));
        const __mmask16 lt = _mm512_cmp_ps_mask(m, set(0.70710678f), _CMP_LT_OQ);
        e = _mm512_mask_sub_epi32(e, lt, e, _mm512_set1_epi32(1));
        m = _mm512_sub_ps(_mm512_mask_add_ps(m, lt, m, m), set(1.0f));
        const __m512 z = _mm512_mul_ps(m, m);
        __m512 y = set(7.0376836292e-2f);
        y = fmadd(y, m, set(-1.1514610310e-1f));
        y = fmadd(y, m, set(1.1676998740e-1f));
        y = fmadd(y, m, set(-1.2420140846e-1f));
        y = fmadd(y, m, set(1.4249322787e-1f));
        y = fmadd(y, m, set(-1.6668057665e-1f));
        y = fmadd(y, m, set(2.0000714765e-1f));
        y = fmadd(y, m, set(-2.4999993993e-1f));
        y = fmadd(y, m, set(3.3333331174e-1f));
        y = _mm512_mul_ps(_mm512_mul_ps(y, m), z);
        const __m512 fe = _mm512_cvtepi32_ps(e);
        y = fmadd(fe, set(-2.12194440e-4f), y);
        y = fmadd(z, set(-0.5f), y);
        const __m512 r = _mm512_add_ps(m, y);
        return fmadd(fe, set(0.693359375f), r);
    }
    // SampleVec<8>::neg_gumbel8
    static inline __m512 neg_gumbel16(__m512i bits) {
        const __m512i k = _mm512_or_si512(_mm512_slli_epi32(_mm512_srli_epi32(bits, 9), 1), _mm512_set1_epi32(1));
        const __m512 u = _mm512_mul_ps(_mm512_cvtepi32_ps(k), set(5.9604644775390625e-8f));
        return log_v(_mm512_xor_ps(log_v(u), set(-0.0f)));
    }
    static avx2::SampleBest race_list(const float* z, const int32_t* idx, int64_t m, const typename M::Stream& s) {
        __m512 bkey = set(-INFINITY);
        __m512i bidx = _mm512_set1_epi32(-1);
        for (int64_t i = 0; i < m; i += 16) {
            // the last m mod 16 entries in a masked vector: its absent lanes' keys -inf never win (strict >)
            const __mmask16 in = m - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (m - i)) - 1);
            const __m512i col = _mm512_maskz_loadu_epi32(in, idx + i);
            __m512i c[4];
            c[0] = _mm512_or_si512(_mm512_slli_epi32(_mm512_srli_epi32(col, 5), 3), _mm512_and_si512(col, _mm512_set1_epi32(7)));
            c[1] = _mm512_set1_epi32((int)s.step);
            c[2] = _mm512_set1_epi32((int)s.key_lo);
            c[3] = _mm512_set1_epi32((int)s.key_hi);
            philox16(c, s.k0, s.k1);
            const __m512i w = _mm512_and_si512(_mm512_srli_epi32(col, 3), _mm512_set1_epi32(3));
            __m512i bits = c[0];
            bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(w, _mm512_set1_epi32(1)), c[1]);
            bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(w, _mm512_set1_epi32(2)), c[2]);
            bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(w, _mm512_set1_epi32(3)), c[3]);
            const __m512 key = _mm512_sub_ps(_mm512_mask_loadu_ps(set(-INFINITY), in, z + i), neg_gumbel16(bits));
            const __mmask16 gt = _mm512_cmp_ps_mask(key, bkey, _CMP_GT_OQ);
            bkey = _mm512_mask_mov_ps(bkey, gt, key);
            bidx = _mm512_mask_mov_epi32(bidx, gt, col);
        }
        return best_of(bkey, bidx);
    }

    // The lanes' best (key, column) reduced as SampleVec<8>::best_of does: the largest key, the lowest column on ties.
    static avx2::SampleBest best_of(__m512 bkey, __m512i bidx) {
        alignas(64) float k[16];
        alignas(64) int32_t ix[16];
        _mm512_store_ps(k, bkey);
        _mm512_store_si512((void*)ix, bidx);
        avx2::SampleBest r{-INFINITY, -1};
        for (int l = 0; l < 16; ++l)
            if (ix[l] >= 0 && (k[l] > r.key || (k[l] == r.key && (r.idx < 0 || ix[l] < r.idx)))) {
                r.key = k[l];
                r.idx = ix[l];
            }
        return r;
    }

    // gumbel_race (sampling_rows.inc) over groups of 64 columns, 16 Philox blocks at once: lanes 0-7 of the block vector
    // are the first 32 columns' blocks, lanes 8-15 the next 32's, so the four words' vectors, regrouped by 128-bit
    // quarters, give each run of 16 columns its words in column order. A group is skipped before its Philox rounds or its
    // logs by the same exact tests on its 64 columns (the largest kept z, the largest word), so the same token.
    template <class Tag>
    static avx2::SampleBest row_race(const typename Tag::T* row, int64_t n, float inv_t, float tau,
                                     const typename M::Stream& s) {
        const __m512 vinv = set(inv_t), vt = set(tau), ninf = set(-INFINITY);
        __m512 bkey = ninf;
        __m512i bidx = _mm512_set1_epi32(-1);
        float bound = -INFINITY;
        const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        for (int64_t j0 = 0; j0 < n; j0 += 64) {
            __m512 z[4];
            __mmask16 kept[4];
            __m512 km = ninf;
            for (int v = 0; v < 4; ++v) {  // z = x * inv_t (rounded products; absent columns -inf)
                const int64_t avail = n - (j0 + 16 * v);
                const V x = avail >= 16 ? load<Tag>(row + j0 + 16 * v) : load_tail<Tag>(row + j0 + 16 * v, avail > 0 ? avail : 0);
                z[v] = _mm512_mul_ps(x.v, vinv);
                kept[v] = _mm512_cmp_ps_mask(z[v], vt, _CMP_GE_OQ) & _mm512_cmp_ps_mask(z[v], ninf, _CMP_NEQ_OQ);
                km = _mm512_max_ps(km, _mm512_mask_mov_ps(ninf, kept[v], z[v]));
            }
            const float gm = _mm512_reduce_max_ps(km);
            if (gm == -INFINITY || M::f_add(gm, M::GUMBEL_MAX) < bound) continue;
            __m512i c[4];
            c[0] = _mm512_add_epi32(_mm512_set1_epi32((int)((uint32_t)(j0 >> 5) << 3)), lane);
            c[1] = _mm512_set1_epi32((int)s.step);
            c[2] = _mm512_set1_epi32((int)s.key_lo);
            c[3] = _mm512_set1_epi32((int)s.key_hi);
            philox16(c, s.k0, s.k1);
            const __m512i mb = _mm512_max_epu32(_mm512_max_epu32(c[0], c[1]), _mm512_max_epu32(c[2], c[3]));
            if (M::cannot_win(gm, _mm512_reduce_max_epu32(mb), bound)) continue;
            // columns j0 + 16 v + l: v 0 = words 0, 1 of blocks 0-7; v 1 = words 2, 3 of blocks 0-7; v 2, 3 = the same of
            // blocks 8-15
            const __m512i bits[4] = {_mm512_shuffle_i64x2(c[0], c[1], 0x44), _mm512_shuffle_i64x2(c[2], c[3], 0x44),
                                     _mm512_shuffle_i64x2(c[0], c[1], 0xEE), _mm512_shuffle_i64x2(c[2], c[3], 0xEE)};
            for (int v = 0; v < 4; ++v) {
                const __m512 key = _mm512_mask_mov_ps(ninf, kept[v], _mm512_sub_ps(z[v], neg_gumbel16(bits[v])));
                const __mmask16 gt = _mm512_cmp_ps_mask(key, bkey, _CMP_GT_OQ);
                bkey = _mm512_mask_mov_ps(bkey, gt, key);
                bidx = _mm512_mask_mov_epi32(bidx, gt, _mm512_add_epi32(_mm512_set1_epi32((int)(j0 + 16 * v)), lane));
            }
            bound = best_of(bkey, bidx).key;
        }
        return best_of(bkey, bidx);
    }
};
}  // namespace avx512
#pragma GCC pop_options

// AVX-512 statistics and races; the bins, masses and lists on the eight-lane AVX2 code (the same tokens on every path).
struct SampleAvx512Isa : SampleAvx2Isa {
    typedef Avx512Isa Stats;
    template <class Tag>
    __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")))
    static Drawn race(const typename Tag::T* row, int64_t n, float inv_t, float tau, const smath::Stream& s) {
        avx2::SampleBest b = avx512::Race16<SampleMath>::row_race<Tag>(row, n, inv_t, tau, s);
        return Drawn{b.key, b.idx};
    }
    __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")))
    static Drawn race_list(const float* z, const int32_t* idx, int64_t m, const smath::Stream& s) {
        avx2::SampleBest b = avx512::Race16<SampleMath>::race_list(z, idx, m, s);
        return Drawn{b.key, b.idx};
    }
};

// Largest key v with W(keys >= v) >= target (weights w, or 1 each when w is null), by MSB-first
// radix selection over 8-bit digits; keys[0:n] and w are reordered. Same rounds and digit choice
// (smath::radix_pick) as the CUDA kernel; exact, so the result does not depend on the order (nor on the
// method: a short list is sorted instead).
static uint32_t radix_select(uint32_t* keys, int64_t* w, int64_t n, int64_t target) {
    if (n <= 256 && !w) {  // short count-only lists: the target-th largest by selection (the same value)
        uint32_t t[256];
        for (int64_t i = 0; i < n; ++i) t[i] = keys[i];
        const int64_t r = target < 1 ? 0 : target > n ? n - 1 : target - 1;
        std::nth_element(t, t + r, t + n, std::greater<uint32_t>());
        return n > 0 ? t[r] : 0;
    }
    if (n <= 256) {  // short weighted lists: sorted, the same value (the definition is exact), without 4 x 256-bin rounds
        uint64_t t[256];  // key above, position below: plain integers sort faster than (key, weight) records
        for (int64_t i = 0; i < n; ++i) t[i] = (uint64_t)keys[i] << 32 | (uint64_t)i;
        std::sort(t, t + n, std::greater<uint64_t>());
        int64_t cum = 0;
        for (int64_t i = 0; i < n; ++i)
            if ((cum += w[t[i] & 0xffffffffu]) >= target) return (uint32_t)(t[i] >> 32);
        return n > 0 ? (uint32_t)(t[n - 1] >> 32) : 0;  // unreachable when the total weight reaches target
    }
    int64_t above = 0;
    uint32_t prefix = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
        int64_t hist[256] = {0};
        for (int64_t i = 0; i < n; ++i) hist[(keys[i] >> shift) & 255u] += w ? w[i] : 1;
        const uint32_t d = (uint32_t)smath::radix_pick(hist, target, &above);
        prefix |= d << shift;
        int64_t m = 0;
        for (int64_t i = 0; i < n; ++i)
            if (((keys[i] >> shift) & 255u) == d) {
                keys[m] = keys[i];
                if (w) w[m] = w[i];
                ++m;
            }
        n = m;
    }
    return prefix;
}

// Keeps the gathered columns with z >= tau (column order preserved); returns the new count.
static int64_t keep_from(float* z, int32_t* idx, int64_t m, float tau) {
    int64_t k = 0;
    for (int64_t i = 0; i < m; ++i) {  // without a branch per value (k <= i: nothing unread is overwritten)
        const float zi = z[i];
        const int32_t ci = idx[i];
        z[k] = zi;
        idx[k] = ci;
        k += zi >= tau;
    }
    return k;
}

// Per-thread scratch for the truncated path and the chunked draw (grown on first use, reused across rows).
// An uninitialized growable array: a row-sized scratch is allocated per call and mostly left untouched
// (std::vector would zero it: page faults and a memset of the whole row per call).
template <class T>
struct Buf {
    std::unique_ptr<T[]> p;
    int64_t n = 0;
    int64_t size() const { return n; }
    void resize(int64_t m) {
        if (m <= n) return;
        p.reset(new T[m]);
        n = m;
    }
    T* data() { return p.get(); }
    T& operator[](int64_t i) { return p[i]; }
};

struct SampleScratch {
    Buf<float> z, e;
    Buf<int32_t> idx;
    Buf<uint32_t> keys;
    Buf<int64_t> w, w2;
    Buf<uint64_t> order;
    Buf<uint16_t> bins;
    Buf<ChunkMass> chunks;
    Buf<double> chunk_w;  // chunked_draw's chunk weights
    void ensure_chunks(int64_t n) {
        const int64_t nc = (n + ARBOR_STATS_CHUNK - 1) / ARBOR_STATS_CHUNK;
        if ((int64_t)chunks.size() < nc) {
            chunks.resize(nc);
            chunk_w.resize(nc);
        }
    }
    void ensure(int64_t n) {
        if ((int64_t)z.size() >= n) return;
        z.resize(n);
        e.resize(n);
        idx.resize(n);
        keys.resize(n);
        w.resize(n);
    }
    // the held columns' bins and the selection's sort (nucleus_draw, minp_draw): only where those paths run
    void ensure_held(int64_t m) {
        w2.resize(m);
        order.resize(m);
        bins.resize(m);
    }
};

using smath::RowParams;
using smath::SampleArgs;
using smath::row_params;

// Every size, pointer and (unmasked) per-row parameter is valid.
static bool bad_sample_args(const void* logits, int64_t rows, int64_t vocab, int64_t row_stride, int64_t vocab_limit,
                            const SampleArgs& a, const void* tokens, int token_dtype) {
    if (bad_sample_call(logits, rows, vocab, row_stride, vocab_limit, a, tokens, token_dtype)) return true;
    if (a.temperatures || a.top_ps || a.min_ps || a.steps)
        for (int64_t r = 0; r < rows; ++r)
            if (!(a.row_mask && !a.row_mask[r]) && smath::bad_row_params(row_params(a, r))) return true;
    return false;
}

static inline void write_token(void* tokens, int token_dtype, int64_t r, int64_t y) {
    if (token_dtype == ARBOR_I32)
        ((int32_t*)tokens)[r] = (int32_t)y;
    else
        ((int64_t*)tokens)[r] = y;
}

// The exps e^{z - zmax} of the listed values z[0:m] into sc.e (z may be sc.e itself) and their top-p masses into sc.w
// (smath::mass_of's integers); returns the masses' sum.
template <class SI>
static int64_t list_masses(const float* z, int64_t m, float zmax, SampleScratch& sc) {
    SI::exp_rel(z, m, zmax, sc.e.data());
    int64_t listed = 0;
    for (int64_t i = 0; i < m; ++i) listed += sc.w[i] = (int64_t)smath::f_mul(sc.e[i], ARBOR_SM_MASS_SCALE);
    return listed;
}

// Top-p on the kept list z[0:m] (columns idx): keeps the values from the top whose mass reaches p of
// `total`, or of the list's own mass when total < 0; sets *tau to the threshold. Returns the new length.
template <class SI>
static int64_t top_p_cut(float* z, int32_t* idx, int64_t m, float zmax, float p, int64_t total, SampleScratch& sc,
                         float* tau) {
    const int64_t listed = list_masses<SI>(z, m, zmax, sc);
    for (int64_t i = 0; i < m; ++i) sc.keys[i] = smath::order_key(z[i]);
    *tau = smath::key_value(radix_select(sc.keys.data(), sc.w.data(), m, smath::top_p_target(p, total < 0 ? listed : total)));
    return keep_from(z, idx, m, *tau);
}

// The race over the final kept list z[0:m] (threshold tau), and log q(y) over that list. A long list is
// cheaper to race over the row (vectorized noise) — same token.
template <class SI, class Tag>
static int64_t race_kept(const typename Tag::T* row, int64_t n, float inv_t, float tau, float zmax,
                         const RowParams& rp, SampleScratch& sc, int64_t m, double* lp_sampled) {
    float* z = sc.z.data();
    int32_t* idx = sc.idx.data();
    const int64_t y = m * 8 >= n ? SI::template race<Tag>(row, n, inv_t, tau, rp.stream).idx
                                 : SI::race_list(z, idx, m, rp.stream).idx;
    SI::exp_rel(z, m, zmax, sc.e.data());
    double s = 0.0;
    for (int64_t i = 0; i < m; ++i) s += sc.e[i];
    *lp_sampled = ((double)(Tag::to_f32(row[y]) * inv_t) - zmax) - log(s);
    return y;
}

// The truncated draw (min-p / top-k / top-p active). A coarse pre-pass bins the kept columns by
// 1/8-logit steps below z_max (counts, and exact masses when top-p needs them), which bounds where
// the top-k / top-p threshold can lie; only those columns are gathered for the exact radix
// selections (on the same integers as the CUDA kernel, so the same thresholds). Writes log q(y).
template <class SI, class Tag>
static int64_t truncated_draw(const typename Tag::T* row, int64_t n, float inv_t, float tau, float zmax,
                              const RowParams& rp, SampleScratch& sc, double* lp_sampled) {
    const bool topk = rp.k > 0 && rp.k < n, topp = rp.p < 1.0f;
    int64_t count[257] = {0}, mass[257] = {0};
    // masses are needed for top-p's total without top-k, and for min-p's normalizer when top-k may
    // not cut (with a cutting top-k, top-p's total and the normalizer come from the top-k list)
    const bool need_mass = !topk || rp.mp > 0.0f;
    // counts are needed for top-k's bound, and for the race over the row when only min-p cuts (kept below)
    const bool need_count = topk || !topp;
    SI::template bin<Tag>(row, n, inv_t, tau, zmax, need_count ? count : nullptr, need_mass ? mass : nullptr);
    int64_t kept = 0, total = 0;
    for (int b = 0; b < 256; ++b) {
        kept += count[b];
        total += mass[b];
    }
    const bool cut_k = topk && kept > rp.k;
    int bmax = 255;
    int64_t cum = 0;
    if (cut_k) {
        for (bmax = 0; bmax < 255 && (cum += count[bmax]) < rp.k; ++bmax) {}
    } else if (topp && need_mass) {
        const int64_t target = smath::top_p_target(rp.p, total);
        for (bmax = 0; bmax < 255 && (cum += mass[bmax]) < target; ++bmax) {}
    } else if (!topp && kept * 8 >= n) {  // only min-p cuts (or nothing), keeping many columns
        const int64_t y = SI::template race<Tag>(row, n, inv_t, tau, rp.stream).idx;
        *lp_sampled = tau == -INFINITY ? NAN  // nothing truncated: q = p
                      : ((double)(Tag::to_f32(row[y]) * inv_t) - zmax) - log((double)total / ARBOR_SM_MASS_SCALE);
        return y;
    }
    sc.ensure(n);
    float* z = sc.z.data();
    int32_t* idx = sc.idx.data();
    int64_t m = SI::template collect<Tag>(row, n, inv_t, tau, zmax, bmax, z, idx);
    if (cut_k) {
        for (int64_t i = 0; i < m; ++i) sc.keys[i] = smath::order_key(z[i]);
        tau = smath::key_value(radix_select(sc.keys.data(), nullptr, m, rp.k));
        m = keep_from(z, idx, m, tau);
    }
    if (topp) {  // on the gathered prefix: its mass from the top reaches the target
        // the whole kept set was gathered unless bmax came from the masses (then total is theirs)
        m = top_p_cut<SI>(z, idx, m, zmax, rp.p, cut_k || !need_mass ? -1 : total, sc, &tau);
    }
    return race_kept<SI, Tag>(row, n, inv_t, tau, zmax, rp, sc, m, lp_sampled);
}

// The untruncated draw (T > 0, no min-p / top-k / top-p): inverse CDF in two levels, exact in distribution.
// The statistics pass recorded each chunk c of ARBOR_STATS_CHUNK columns as (m_c, S_c); the chunk is drawn
// with probability w_c / sum w, w_c = S_c e^{m_c - M} (uniform u1), then the column within it with
// probability e_j / E_c, e_j = e^{z_j - m_c} the statistics pass's own exps (uniform u2), so
// P(j) = w_c / W * e_j / E_c = p_j up to the fp32 rounding of the exps (E_c = S_c up to summation order).
// Beyond the statistics pass it takes one exp per chunk and re-reads one chunk (usually from cache) with
// the statistics' exp: O(chunk) per row.
// Sums are in double in a fixed order; a target beyond a rounded total falls to the last nonzero column.
template <class SI, class Tag>
static int64_t chunked_draw(const typename Tag::T* row, int64_t n, float inv_t, const ChunkMass* ch,
                            const smath::Stream& s, SampleScratch& sc) {
    const int64_t C = ARBOR_STATS_CHUNK, nc = (n + C - 1) / C;
    float M = -INFINITY;
    for (int64_t c = 0; c < nc; ++c) M = ch[c].max > M ? ch[c].max : M;
    double u1, u2;
    smath::draw_uniforms(s, &u1, &u2);
    // each chunk's weight once (S_c e^{m_c - M}; 0 for a chunk with nothing finite), summed in chunk order
    double* wc = sc.chunk_w.data();  // (ensure_chunks sized it with the chunks)
    double total = 0.0;
    for (int64_t c = 0; c < nc; ++c) {
        wc[c] = ch[c].max == -INFINITY ? 0.0 : ch[c].sum * (double)smath::exp_own(smath::f_sub(ch[c].max, M));
        total += wc[c];  // (+0 for a chunk with nothing finite: the same total)
    }
    const double t1 = u1 * total;
    int64_t pick = -1;
    double cum = 0.0;
    for (int64_t c = 0; c < nc; ++c) {
        const double w = wc[c];
        if (!(w > 0.0)) continue;
        pick = c;
        if (cum + w > t1) break;
        cum += w;
    }
    // pick >= 0: the row is valid, so the chunk holding its max has w = S_c e^0 >= 1 (guarded all the same)
    for (int64_t c = 0; pick < 0 && c < nc; ++c)
        if (ch[c].max == M) pick = c;
    const int64_t c0 = pick * C, len = n - c0 < C ? n - c0 : C;
    sc.ensure(len);
    float* e = sc.e.data();
    SI::Stats::template exp_rel_row<Tag>(row + c0, len, inv_t, ch[pick].max, e);
    // blocks of 16 columns: their sums (each in column order, eight blocks' chains interleaved so they do not wait on
    // each other: a single chain of 2048 dependent adds cost a quarter of a 32000-column row's statistics pass), then
    // the block, then the column
    const int64_t B = 16, nb = (len + B - 1) / B, nfull = len / B;
    double blocks[ARBOR_STATS_CHUNK / 16];
    int64_t b = 0;
    for (; b + 8 <= nfull; b += 8) {
        const float* eb = e + b * B;
        double t0 = 0.0, t1 = 0.0, t2 = 0.0, t3 = 0.0, t4 = 0.0, t5 = 0.0, t6 = 0.0, t7 = 0.0;  // (registers)
        for (int64_t j = 0; j < B; ++j) {
            t0 += eb[j];
            t1 += eb[B + j];
            t2 += eb[2 * B + j];
            t3 += eb[3 * B + j];
            t4 += eb[4 * B + j];
            t5 += eb[5 * B + j];
            t6 += eb[6 * B + j];
            t7 += eb[7 * B + j];
        }
        blocks[b] = t0, blocks[b + 1] = t1, blocks[b + 2] = t2, blocks[b + 3] = t3;
        blocks[b + 4] = t4, blocks[b + 5] = t5, blocks[b + 6] = t6, blocks[b + 7] = t7;
    }
    for (; b < nb; ++b) {
        double t = 0.0;
        for (int64_t j = b * B; j < (b + 1) * B && j < len; ++j) t += e[j];
        blocks[b] = t;
    }
    double chunk_total = 0.0;
    for (b = 0; b < nb; ++b) chunk_total += blocks[b];
    const double t2 = u2 * chunk_total;
    int64_t y = -1;
    cum = 0.0;
    for (int64_t b = 0; b < nb; ++b) {
        if (!(cum + blocks[b] > t2)) {
            cum += blocks[b];
            continue;
        }
        for (int64_t j = b * B; j < (b + 1) * B && j < len; ++j) {
            if (!(e[j] > 0.0f)) continue;
            y = j;
            cum += e[j];
            if (cum > t2) break;
        }
        break;
    }
    if (y < 0)  // t2 beyond the rounded total: the last nonzero column
        for (int64_t j = len - 1; j >= 0 && y < 0; --j)
            if (e[j] > 0.0f) y = j;
    if (y < 0) y = 0;  // unreachable: the chunk's max column has e = 1
    return c0 + y;  // y >= 0: the chunk's max column has e = 1
}

// The top-k draw (top-k cutting, with or without min-p / top-p) from the candidates the statistics pass
// collected (z[0:m], columns idx, in column order: every kept column of the row's top k, ties included, and
// perhaps more). The same exact selections as truncated_draw on the same integers, so the same thresholds
// and tokens (and the CUDA kernel's); no further pass over the row unless the final list is long.
template <class SI, class Tag>
static int64_t topk_draw(const typename Tag::T* row, int64_t n, float inv_t, float tau, float zmax,
                         const RowParams& rp, SampleScratch& sc, int64_t m, double* lp_sampled) {
    float* z = sc.z.data();
    int32_t* idx = sc.idx.data();
    if (tau != -INFINITY) m = keep_from(z, idx, m, tau);  // min-p
    if (rp.p < 1.0f && m >= 1 && m <= 256) {
        // top-k then top-p from one sort of the short list, (key, position) descending: the k-th key (radix_select's
        // count-only value) keeps a prefix with its ties; on that prefix the first key where the masses from the top
        // reach top-p's target is radix_select's weighted value (top_p_cut's) — the same thresholds, without the
        // selection, the compaction and the second sort between them (bench/RESULTS.md, kernel run 16)
        uint64_t t[256];  // key above, position below
        for (int64_t i = 0; i < m; ++i) t[i] = (uint64_t)smath::order_key(z[i]) << 32 | (uint64_t)i;
        std::sort(t, t + m, std::greater<uint64_t>());
        int64_t mk = m;  // the top-k kept: a prefix of the sorted list (ties of the k-th kept)
        if (m > rp.k) {
            const uint64_t kth = t[rp.k - 1] >> 32;
            while (mk > rp.k && (t[mk - 1] >> 32) < kth) --mk;
        }
        float* zs = sc.e.data();  // the prefix's values in sorted order, then (in place) their exps
        for (int64_t i = 0; i < mk; ++i) zs[i] = z[t[i] & 0xffffffffu];
        const int64_t target = smath::top_p_target(rp.p, list_masses<SI>(zs, mk, zmax, sc));
        int64_t cum = 0, j = 0;
        while (j < mk - 1 && (cum += sc.w[j]) < target) ++j;
        tau = smath::key_value((uint32_t)(t[j] >> 32));
        m = keep_from(z, idx, m, tau);
        return race_kept<SI, Tag>(row, n, inv_t, tau, zmax, rp, sc, m, lp_sampled);
    }
    if (m > rp.k) {  // top-k cuts: the k-th largest kept value, ties kept
        for (int64_t i = 0; i < m; ++i) sc.keys[i] = smath::order_key(z[i]);
        tau = smath::key_value(radix_select(sc.keys.data(), nullptr, m, rp.k));
        m = keep_from(z, idx, m, tau);
    } else {  // the list is the kept set: its least value is the threshold (for a race over the row)
        float least = INFINITY;  // (every listed value is >= tau already)
        for (int64_t i = 0; i < m; ++i) least = z[i] < least ? z[i] : least;
        if (m > 0) tau = least;
    }
    if (rp.p < 1.0f) {  // top-p on what top-k kept: its mass from the top reaches the target
        m = top_p_cut<SI>(z, idx, m, zmax, rp.p, -1, sc, &tau);
    }
    return race_kept<SI, Tag>(row, n, inv_t, tau, zmax, rp, sc, m, lp_sampled);
}

// The largest held value v with (sum of w over held z >= v) >= target, for two targets lo <= hi at once (tau[0],
// tau[1]; -inf where the held mass falls short): the held columns' masses w summed by their bins (SampleVec::held:
// 1/64-logit steps below zmax, monotone in z, so a bin is a range of the descending order), then the values of the
// bin where a target falls sorted (one sort where both fall in one bin). The same value as radix_select on the
// same keys and weights (its definition, not its method).
static void top_p_select(const float* z, const int64_t* w, const uint16_t* bin, int64_t m, const int64_t target[2],
                         SampleScratch& sc, float tau[2]) {
    const int NB = 2048;
    int64_t hist[NB] = {0};
    for (int64_t i = 0; i < m; ++i) hist[bin[i]] += w[i];
    uint64_t* order = sc.order.data();
    int sorted_bin = -1;
    int64_t k = 0;
    for (int t = 0; t < 2; ++t) {
        tau[t] = -INFINITY;
        int64_t above = 0;
        int b = 0;
        for (; b < NB && above + hist[b] < target[t]; ++b) above += hist[b];
        if (b == NB) continue;
        if (b != sorted_bin) {  // the bin's (key, position) pairs, sorted by key descending
            k = 0;
            for (int64_t i = 0; i < m; ++i)
                if (bin[i] == b) {
                    sc.w2[k] = w[i];
                    order[k] = (uint64_t)smath::order_key(z[i]) << 32 | (uint64_t)k;
                    ++k;
                }
            std::sort(order, order + k, std::greater<uint64_t>());
            sorted_bin = b;
        }
        for (int64_t i = 0; i < k; ++i)
            if ((above += sc.w2[order[i] & 0xffffffffu]) >= target[t]) {
                tau[t] = smath::key_value((uint32_t)(order[i] >> 32));
                break;
            }
    }
}

// Bounds on the relative error of the statistics pass's exp (every CPU path's vexp_lo; the AVX2 one measured at most
// 9.9e-8 over every float in [EXP_LO, 0], the scalar 6.0e-8) and of smath::exp_own (1.2e-7; 2.5e-7 asserted by
// SamplerTest), with room.
#define ARBOR_NUCLEUS_EXP_ERR 4e-7
#define ARBOR_NUCLEUS_OWN_ERR 2.5e-7

// Top-p alone (T > 0, no cutting top-k, no min-p) from the candidates the statistics pass held (ns: every column not
// held has z < ns.thr) and its estimate R of the rejected columns' mass. The held columns' exact masses (the integers
// of smath::mass_of) sum to W; the rejected columns' exact masses sum to within [R - eps, R + eps] (in units of
// e^{zmax}, less one unit of 2^-40 per column for the truncation), eps bounding the exps' errors and the roundings of
// their arguments: per column |d_ref - d| <= u (|d_ref| + |d| + |z| at T != 1: room for a fused x inv_t - m, though the
// statistics pass now rounds the product first), |d| <= |d_ref| + (zmax - m_ref),
// so eps <= R (E_fast + E_own) + u (2 D + Q + [inv_t != 1] (|zmax| + 88) R), R's own summation within 7 u,
// all with 1 % of room. So the total lies in [W + R_lo, W + R_hi] and the target in [ceil(p T_lo), ceil(p T_hi)].
// Where both targets pick the same held value tau >= ns.thr, that is the exact threshold (held and row agree from
// ns.thr up); where they differ, the exact total is taken by a pass over the row (mass_total); where the held mass or
// values fall short, the binned path decides (truncated_draw). Then the race over the kept list, as the other paths.
template <class SI, class Tag>
static int64_t nucleus_draw(const typename Tag::T* row, int64_t n, float inv_t, float zmax, const RowParams& rp,
                            SampleScratch& sc, const NucleusSink& ns, double* lp_sampled, int* path) {
    const int64_t m = ns.m;
    float* z = sc.z.data();
    int32_t* idx = sc.idx.data();
    int64_t* w = sc.w.data();
    sc.ensure_held(m);
    uint16_t* bin = sc.bins.data();
    const int64_t held = SI::held(z, m, zmax, w, bin);
    const double u = 5.9604644775390625e-8;
    const double R = ns.R * (1.0 + 8.0 * u);
    double eps = R * (ARBOR_NUCLEUS_EXP_ERR + ARBOR_NUCLEUS_OWN_ERR + 8.0 * u) +
                 u * (2.0 * ns.D * 1.001 + ns.Q + (inv_t == 1.0f ? 0.0 : (fabs((double)zmax) + 88.0) * R));
    eps = (eps * 1.01 + 1e-20) * g_nucleus_widen.load(std::memory_order_relaxed);
    const double scale = (double)ARBOR_SM_MASS_SCALE;
    const double hi = ceil((R + eps) * scale * (1.0 + 1e-15)) + 1.0;
    const double lo = floor((ns.R * (1.0 - 8.0 * u) - eps) * scale * (1.0 - 1e-15)) - (double)(n - m) - 1.0;
    const double cap = 4611686018427387904.0;  // 2^62: past any total (a widened bound saturates there)
    const int64_t r_hi = hi < cap ? (int64_t)hi : (int64_t)cap, r_lo = lo <= 0.0 ? 0 : lo < cap ? (int64_t)lo : (int64_t)cap;
    int64_t target[2] = {smath::top_p_target(rp.p, held + r_lo), smath::top_p_target(rp.p, held + r_hi)};
    float tau[2] = {-INFINITY, -INFINITY};
    if (held >= target[1]) top_p_select(z, w, bin, m, target, sc, tau);
    *path = 0;
    if (held >= target[1] && tau[0] != tau[1]) {  // the bound straddles a step of the held mass: the exact total
        *path = 1;
        const int64_t total = SI::template mass_total<Tag>(row, n, inv_t, zmax);
        target[0] = target[1] = smath::top_p_target(rp.p, total);
        if (held >= target[0]) top_p_select(z, w, bin, m, target, sc, tau);
        else tau[0] = -INFINITY;
    }
    if (tau[0] == -INFINITY || !(tau[0] >= ns.thr)) {  // the held columns do not decide it
        *path = 2;
        return truncated_draw<SI, Tag>(row, n, inv_t, -INFINITY, zmax, rp, sc, lp_sampled);
    }
    const int64_t k = keep_from(z, idx, m, tau[0]);
    return race_kept<SI, Tag>(row, n, inv_t, tau[0], zmax, rp, sc, k, lp_sampled);
}

// Min-p (with or without top-p; no cutting top-k) from the candidates the statistics pass held: every column with
// z >= tau = fl(z_max + log(min-p)) is held (ns.thr <= tau), so the kept list is the held one cut at tau, top-p's total
// its exact masses' sum and the threshold its selection — exactly truncated_draw's (the same integers), including its
// log q(y) where min-p alone keeps an eighth of the row or more (from the integer total, the race over the row).
template <class SI, class Tag>
static int64_t minp_draw(const typename Tag::T* row, int64_t n, float inv_t, float tau, float zmax, const RowParams& rp,
                         SampleScratch& sc, const NucleusSink& ns, double* lp_sampled, int* path) {
    *path = 0;
    // (by construction tau >= ns.thr; a bound widened to +inf sends the row to the binned path, for tests)
    if (!(tau >= ns.thr) || g_nucleus_widen.load(std::memory_order_relaxed) == INFINITY) {
        *path = 2;
        return truncated_draw<SI, Tag>(row, n, inv_t, tau, zmax, rp, sc, lp_sampled);
    }
    float* z = sc.z.data();
    int32_t* idx = sc.idx.data();
    int64_t k = keep_from(z, idx, ns.m, tau);
    if (rp.p < 1.0f || k * 8 >= n) {
        sc.ensure_held(k);
        const int64_t total = SI::held(z, k, zmax, sc.w.data(), sc.bins.data());
        if (rp.p >= 1.0f) {  // min-p alone keeping many columns: truncated_draw's race over the row and its log q(y)
            const int64_t y = SI::template race<Tag>(row, n, inv_t, tau, rp.stream).idx;
            *lp_sampled = ((double)(Tag::to_f32(row[y]) * inv_t) - zmax) - log((double)total / ARBOR_SM_MASS_SCALE);
            return y;
        }
        const int64_t target[2] = {smath::top_p_target(rp.p, total), smath::top_p_target(rp.p, total)};
        float t2[2];
        top_p_select(z, sc.w.data(), sc.bins.data(), k, target, sc, t2);
        tau = t2[0];
        k = keep_from(z, idx, k, tau);
    }
    return race_kept<SI, Tag>(row, n, inv_t, tau, zmax, rp, sc, k, lp_sampled);
}

template <class SI, class Tag>
static int sample_kernel(const typename Tag::T* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                         int64_t vocab_limit, const SampleArgs& a, void* tokens, int token_dtype,
                         float* logprob_sampled, float* logprob, float* entropy, int num_threads) {
    if (bad_sample_args(logits, rows, vocab, row_stride, vocab_limit, a, tokens, token_dtype)) return ARBOR_ERR_ARG;
    const int64_t n = vocab_limit;
    std::atomic<int> no_distribution{0};
    parallel_for(rows, num_threads, n, [&](int64_t begin, int64_t end) {
        SampleScratch sc;
        for (int64_t r = begin; r < end; ++r) {
            if (a.row_mask != nullptr && !a.row_mask[r]) {
                write_token(tokens, token_dtype, r, -1);
                if (logprob_sampled) logprob_sampled[r] = 0.0f;
                if (logprob) logprob[r] = 0.0f;
                if (entropy) entropy[r] = 0.0f;
                continue;
            }
            const typename Tag::T* row = logits + r * row_stride;
            const RowParams rp = row_params(a, r);
            const bool greedy = rp.t == 0.0f;
            const float inv_t = greedy ? 1.0f : 1.0f / rp.t;  // greedy rows report T = 1 statistics
            // untruncated temperature sampling draws from the statistics pass's chunk masses
            const bool untruncated =
                    !greedy && !(rp.mp > 0.0f) && !(rp.k > 0 && rp.k < n) && !(rp.p < 1.0f);
            // a cutting top-k collects its candidates during the statistics pass; so does top-p without it or min-p
            const bool topk_row = !greedy && rp.k > 0 && rp.k < n;
            const bool topp_row = !greedy && !topk_row && (rp.p < 1.0f || rp.mp > 0.0f);
            CandidateSink tk;
            NucleusSink nk;
            if (untruncated) sc.ensure_chunks(n);
            if (topk_row) {
                sc.ensure(n + 16);  // the candidates never outnumber the columns (+ padding of the last vector)
                tk = CandidateSink{-FLT_MAX, sc.z.data(), sc.idx.data(), 0,
                                   2 * (int64_t)rp.k > 64 ? 2 * (int64_t)rp.k : 64, rp.k};
            }
            if (topp_row) {
                sc.ensure(n + 16);
                const bool mp = rp.mp > 0.0f;
                nk = NucleusSink{-FLT_MAX, -FLT_MAX, rp.p, mp ? smath::log_own(rp.mp) : NAN, sc.z.data(), sc.idx.data(), 0,
                                 mp ? INT64_MAX : 1024, -INFINITY, 0.0, 0.0, 0.0, 0, false};
            }
            const RowStats st =
                    untruncated ? SI::Stats::template stats_chunks<Tag>(row, n, inv_t, sc.chunks.data())
                    : topk_row  ? SI::Stats::template stats_chunks<Tag>(row, n, inv_t, nullptr, &tk)
                    : topp_row  ? SI::Stats::template stats_nucleus<Tag>(row, n, inv_t, &nk)
                                : SI::Stats::template stats<Tag>(row, n, inv_t);
            // a speculative first threshold that fewer than k columns reached: collect from the safe one
            if (topk_row && st.valid && tk.speculative && tk.m < tk.k)
                SI::Stats::template recollect<Tag>(&tk, row, n, inv_t);
            if (!st.valid) {  // NaN, +inf (possibly from dividing by T) or nothing finite
                write_token(tokens, token_dtype, r, -1);
                if (logprob_sampled) logprob_sampled[r] = NAN;
                if (logprob) logprob[r] = NAN;
                if (entropy) entropy[r] = NAN;
                no_distribution.store(1, std::memory_order_relaxed);
                continue;
            }
            const float zmax = st.max;  // exact: max of the rounded products x * inv_t
            int64_t y;
            double lp_sampled;  // NAN = same as the untruncated logprob
            if (greedy) {
                y = SI::template argmax<Tag>(row, n);
                lp_sampled = 0.0;
            } else {
                float tau = -INFINITY;
                if (rp.mp > 0.0f) tau = smath::f_add(zmax, smath::log_own(rp.mp));
                if (untruncated) {
                    y = chunked_draw<SI, Tag>(row, n, inv_t, sc.chunks.data(), rp.stream, sc);
                    lp_sampled = NAN;
                } else if (topk_row) {
                    y = topk_draw<SI, Tag>(row, n, inv_t, tau, zmax, rp, sc, tk.m, &lp_sampled);
                } else if (topp_row) {
                    int path;
                    y = rp.mp > 0.0f ? minp_draw<SI, Tag>(row, n, inv_t, tau, zmax, rp, sc, nk, &lp_sampled, &path)
                                     : nucleus_draw<SI, Tag>(row, n, inv_t, zmax, rp, sc, nk, &lp_sampled, &path);
                    g_nucleus_count[path].fetch_add(1, std::memory_order_relaxed);
                } else {
                    y = truncated_draw<SI, Tag>(row, n, inv_t, tau, zmax, rp, sc, &lp_sampled);
                }
            }
            write_token(tokens, token_dtype, r, y);
            // exactly token_stats_fwd's logprob for label y
            const float lp = (Tag::to_f32(row[y]) * inv_t - st.max) - st.log_sum;
            if (logprob) logprob[r] = lp;
            if (entropy) entropy[r] = st.entropy;
            if (logprob_sampled) logprob_sampled[r] = isnan(lp_sampled) ? lp : (float)lp_sampled;
        }
    });
    return no_distribution.load() ? ARBOR_ERR_NAN : ARBOR_OK;
}

}  // namespace arbor

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

#define ARBOR_SAMPLE(NAME, TAG, CTYPE)                                                                            \
    extern "C" int NAME(const CTYPE* logits, int64_t rows, int64_t vocab, int64_t row_stride, int64_t vocab_limit, \
                        float temperature, const float* temperatures, int32_t top_k, const int32_t* top_ks,       \
                        float top_p, const float* top_ps, float min_p, const float* min_ps, uint64_t seed,        \
                        const uint64_t* seeds, const uint64_t* keys, uint64_t step, const uint64_t* steps,        \
                        const uint8_t* row_mask, void* tokens, int token_dtype, float* logprob_sampled,           \
                        float* logprob, float* entropy, int num_threads) {                                       \
        const arbor::smath::SampleArgs a{temperature, temperatures, top_k, top_ks, top_p, top_ps, min_p,               \
                                  min_ps,      seed,         seeds, keys,  step,  steps,  row_mask};             \
        try {                                                                                                    \
            switch (arbor::cpu_isa()) {                                                                          \
                case arbor::ISA_AVX512_BF16:                                                                     \
                case arbor::ISA_AVX512:                                                                          \
                    return arbor::sample_kernel<arbor::SampleAvx512Isa, arbor::TAG>(                             \
                            logits, rows, vocab, row_stride, vocab_limit, a, tokens, token_dtype, logprob_sampled, \
                            logprob, entropy, num_threads);                                                      \
                case arbor::ISA_AVX2:                                                                            \
                    return arbor::sample_kernel<arbor::SampleAvx2Isa, arbor::TAG>(                               \
                            logits, rows, vocab, row_stride, vocab_limit, a, tokens, token_dtype, logprob_sampled, \
                            logprob, entropy, num_threads);                                                      \
                default:                                                                                         \
                    return arbor::sample_kernel<arbor::SampleScalarIsa, arbor::TAG>(                             \
                            logits, rows, vocab, row_stride, vocab_limit, a, tokens, token_dtype, logprob_sampled, \
                            logprob, entropy, num_threads);                                                      \
            }                                                                                                    \
        } ARBOR_CATCH_ALL                                                                                        \
    }
ARBOR_SAMPLE(arbor_cpu_sample_f32, F32Tag, float)
ARBOR_SAMPLE(arbor_cpu_sample_bf16, BF16Tag, uint16_t)
ARBOR_SAMPLE(arbor_cpu_sample_f16, F16Tag, uint16_t)

extern "C" void arbor_cpu_sample_nucleus_paths(int64_t* counts, int reset) {
    for (int i = 0; i < 3; ++i) counts[i] = reset ? arbor::g_nucleus_count[i].exchange(0) : arbor::g_nucleus_count[i].load();
}

extern "C" void arbor_cpu_sample_nucleus_widen(double factor) {
    arbor::g_nucleus_widen.store(factor >= 1.0 ? factor : 1.0);  // (NaN: 1)
}

extern "C" void arbor_philox4x32_10(const uint32_t* ctr, const uint32_t* key, uint32_t* out) {
    for (int i = 0; i < 4; ++i) out[i] = ctr[i];
    arbor::smath::philox4x32_10(out, key[0], key[1]);
}

static uint32_t sample_bits(uint64_t seed, uint64_t key, uint64_t step, int64_t column) {
    uint32_t out[4];
    arbor::smath::stream_block(arbor::smath::make_stream(seed, key, step), arbor::smath::philox_block(column), out);
    return out[arbor::smath::philox_word(column)];
}

extern "C" float arbor_sample_uniform(uint64_t seed, uint64_t key, uint64_t step, int64_t column) {
    return arbor::smath::uniform_of(sample_bits(seed, key, step, column));
}

extern "C" double arbor_sample_draw_uniform(uint64_t seed, uint64_t key, uint64_t step, int which) {
    double u1, u2;
    arbor::smath::draw_uniforms(arbor::smath::make_stream(seed, key, step), &u1, &u2);
    return which == 0 ? u1 : u2;
}

extern "C" float arbor_sample_gumbel(uint64_t seed, uint64_t key, uint64_t step, int64_t column) {
    return -arbor::smath::neg_gumbel_of(sample_bits(seed, key, step, column));
}

template <class SI>
static void sample_noise(uint64_t seed, uint64_t key, uint64_t step, int64_t columns, float* gumbel) {
    const arbor::smath::Stream s = arbor::smath::make_stream(seed, key, step);
    float L[32];
    for (int64_t j0 = 0; j0 < columns; j0 += 32) {
        SI::neg_gumbel32(s, j0 >> 5, L);
        for (int64_t i = 0; i < 32 && j0 + i < columns; ++i) gumbel[j0 + i] = -L[i];
    }
}

extern "C" void arbor_cpu_sample_noise(uint64_t seed, uint64_t key, uint64_t step, int64_t columns, float* gumbel) {
    if (arbor::cpu_isa() >= arbor::ISA_AVX2)
        sample_noise<arbor::SampleAvx2Isa>(seed, key, step, columns, gumbel);
    else
        sample_noise<arbor::SampleScalarIsa>(seed, key, step, columns, gumbel);
}

extern "C" void arbor_cpu_sample_exp(const float* d, int64_t n, float* out) {
    if (arbor::cpu_isa() >= arbor::ISA_AVX2)
        arbor::SampleAvx2Isa::exp_rel(d, n, 0.0f, out);
    else
        arbor::SampleScalarIsa::exp_rel(d, n, 0.0f, out);
}

extern "C" double arbor_sample_gumbel_max_error(void) {
    double worst = 0.0;
    for (uint32_t k = 0; k < (1u << 23); ++k) {
        const uint32_t bits = k << 9;
        const double u = (double)arbor::smath::uniform_of(bits);
        const double g = -log(-log(u));
        const double e = fabs(-(double)arbor::smath::neg_gumbel_of(bits) - g);
        if (e > worst) worst = e;
    }
    return worst;
}
