// The vector exps' table forms (exp_poly.h) emulated one instruction at a time in scalar code — fmaf for each
// VFMADD/VFNMADD (one rounding, as the instruction), the table entry picked by the low bits of t's encoding (VPERMPS
// and VPERMILPS read only those), and the 2^n step as the instructions do it — and compared with double exp over EVERY float of
// the range each form is called on:
//   - AVX-512 (vec_avx512.inc exp_core): x in [-104, 89], 2^floor(k/16) by VSCALEFPS = ldexpf (one rounding,
//     denormal results included), +inf above ln FLT_MAX. For machines without AVX-512, where CpuPathsTest cannot
//     run that path (there it checks the real instructions over every 997th bit pattern).
//   - AVX2 (vec_avx2.inc vexp_lo, the kernels' exp): x in [EXP_LO = ln FLT_MIN, 0], 2^floor(k/4) added to the
//     entry's exponent bits, then one FMA.
//   g++ -O2 -std=c++17 -Inative/src bench/native/exp_table_emulation.cpp -o /tmp/exp_emu && /tmp/exp_emu   (~3 min)
// Exits 1 if any result is off by more than 1 ulp (denormal results: 1 unit of 2^-149), if +inf is missing above
// ln FLT_MAX, or if a table entry is not the nearest float to 2^(j/N).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include "exp_poly.h"

static float from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
static uint32_t to_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

static const float EXP_LO = -87.3365447505531f;  // cpu_dispatch.h

static float exp16_form(float x) {
    const float t = std::fmaf(x, ARBOR_EXP_LOG2E, ARBOR_EXP16_MAGIC);   // rounds 16 x log2 e to an integer k
    const float kq = t - ARBOR_EXP16_MAGIC;                             // k / 16, exact
    float r = std::fmaf(-kq, ARBOR_EXP_LN2_HI, x);
    r = std::fmaf(-kq, ARBOR_EXP_LN2_LO, r);
    const float tj = from_bits(arbor_exp16_table_bits[to_bits(t) & 15]);
    const float a = std::fmaf(ARBOR_EXP16_E3, r, ARBOR_EXP16_E2);
    const float q = std::fmaf(a, r * r, r);
    return std::ldexp(std::fmaf(tj, q, tj), (int)std::floor(kq));
}

static float exp4_lo_form(float x) {
    const float t = std::fmaf(x, ARBOR_EXP_LOG2E, ARBOR_EXP4_MAGIC);    // rounds 4 x log2 e to an integer k
    const float kq = t - ARBOR_EXP4_MAGIC;                              // k / 4, exact
    float r = std::fmaf(-kq, ARBOR_EXP_LN2_HI, x);
    r = std::fmaf(-kq, ARBOR_EXP_LN2_LO, r);
    const uint32_t tb = to_bits(t);
    float a = std::fmaf(ARBOR_EXP4_E4, r, ARBOR_EXP4_E3);
    a = std::fmaf(a, r, ARBOR_EXP4_E2);
    const float q = std::fmaf(a, r * r, r);
    const float ts = from_bits(arbor_exp4_table_bits[tb & 3] + ((tb & ~3u) << 21));   // T 2^floor(k/4)
    return std::fmaf(ts, q, ts);
}

struct Worst {
    double normal = 0, denormal = 0;
    float at = 0, at_denormal = 0;
    long n = 0;
    bool bad = false;
    void add(float x, float y) {
        ++n;
        const double e = std::exp((double)x), flt_max = 3.4028234663852886e38, flt_min = 1.1754943508222875e-38;
        if (e > flt_max) {
            if (!std::isinf(y)) { std::printf("exp(%a) = %a, not +inf\n", x, y); bad = true; }
        } else if (e < flt_min) {
            const double err = std::fabs(y - e) / 1.401298464324817e-45;
            if (err > denormal) { denormal = err; at_denormal = x; }
        } else {
            int ex;
            std::frexp(e, &ex);
            const double err = std::fabs((double)y - e) / std::ldexp(1.0, ex - 24);
            if (err > normal) { normal = err; at = x; }
        }
    }
    bool report(const char* name, const char* range) {
        std::printf("%s: %ld floats in %s: worst %.4f ulp (at %a), denormal results worst %.4f units of 2^-149 (at %a)\n",
                    name, n, range, normal, at, denormal, at_denormal);
        return bad || normal > 1.0 || denormal > 1.0;
    }
};

static bool table_ok(const unsigned int* bits, int n) {
    bool ok = true;
    for (int j = 0; j < n; ++j)
        if (from_bits(bits[j]) != (float)std::exp2((double)j / n)) {
            std::printf("table entry %d of %d is not the nearest float to 2^(%d/%d)\n", j, n, j, n);
            ok = false;
        }
    return ok;
}

int main() {
    // the AVX2 table holds its 4 entries twice (one per 128-bit lane, for VPERMILPS)
    bool bad = !table_ok(arbor_exp16_table_bits, 16) || !table_ok(arbor_exp4_table_bits, 4) ||
               std::memcmp(arbor_exp4_table_bits, arbor_exp4_table_bits + 4, 4 * sizeof(unsigned int)) != 0;
    Worst w16, w4;
    for (uint64_t u = 0; u <= 0xffffffffull; ++u) {
        const float x = from_bits((uint32_t)u);
        if (x >= -104.0f && x <= 89.0f) w16.add(x, exp16_form(x));
        if (x >= EXP_LO && x <= 0.0f) w4.add(x, exp4_lo_form(x));
    }
    bad |= w16.report("AVX-512 exp_core", "[-104, 89]");
    bad |= w4.report("AVX2 vexp_lo", "[ln FLT_MIN, 0]");
    std::printf(bad ? "FAIL\n" : "PASS\n");
    return bad ? 1 : 0;
}
