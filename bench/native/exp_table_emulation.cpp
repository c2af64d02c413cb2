// The AVX-512 exp's table form (vec_avx512.inc exp_core, constants in exp_poly.h) emulated one instruction at a
// time in scalar code — fmaf for each VFMADD/VFNMADD (one rounding, as the instruction), the table entry picked by
// the low 4 bits of t's encoding (VPERMPS reads only those), ldexpf(m, floor(k/16)) for VSCALEFPS (one rounding,
// denormal results included) — and compared with double exp over EVERY float in [-104, 89], the range the vector
// code is called on. For machines without AVX-512, where CpuPathsTest cannot run that path; there CpuPathsTest
// checks the real instructions over every 997th bit pattern.
//   g++ -O2 -std=c++17 -Inative/src bench/native/exp_table_emulation.cpp -o /tmp/exp16 && /tmp/exp16   (~90 s)
// Exits 1 if any result is off by more than 1 ulp (denormal results: 1 unit of 2^-149), if +inf is missing above
// ln FLT_MAX, or if a table entry is not the nearest float to 2^(j/16).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include "exp_poly.h"

static float from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
static uint32_t to_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

static float exp_table_form(float x) {
    const float t = std::fmaf(x, ARBOR_EXP_LOG2E, ARBOR_EXP16_MAGIC);   // rounds 16 x log2 e to an integer k
    const float kq = t - ARBOR_EXP16_MAGIC;                             // k / 16, exact
    float r = std::fmaf(-kq, ARBOR_EXP_LN2_HI, x);
    r = std::fmaf(-kq, ARBOR_EXP_LN2_LO, r);
    const float tj = from_bits(arbor_exp16_table_bits[to_bits(t) & 15]);
    const float a = std::fmaf(ARBOR_EXP16_E3, r, ARBOR_EXP16_E2);
    const float q = std::fmaf(a, r * r, r);
    return std::ldexp(std::fmaf(tj, q, tj), (int)std::floor(kq));
}

int main() {
    int bad = 0;
    for (int j = 0; j < 16; ++j) {
        const double exact = std::exp2(j / 16.0);
        const float entry = from_bits(arbor_exp16_table_bits[j]);
        if (entry != (float)exact) { std::printf("table entry %d is not the nearest float to 2^(%d/16)\n", j, j); bad = 1; }
    }
    const double flt_max = 3.4028234663852886e38, flt_min = 1.1754943508222875e-38, denorm_unit = 1.401298464324817e-45;
    double worst = 0, worst_denormal = 0;
    float at = 0, at_denormal = 0;
    long n = 0;
    for (uint64_t u = 0; u <= 0xffffffffull; ++u) {
        const float x = from_bits((uint32_t)u);
        if (!(x >= -104.0f && x <= 89.0f)) continue;
        ++n;
        const float y = exp_table_form(x);
        const double e = std::exp((double)x);
        if (e > flt_max) {
            if (!std::isinf(y)) { std::printf("exp(%a) = %a, not +inf\n", x, y); bad = 1; }
        } else if (e < flt_min) {
            const double err = std::fabs(y - e) / denorm_unit;
            if (err > worst_denormal) { worst_denormal = err; at_denormal = x; }
        } else {
            int ex;
            std::frexp(e, &ex);
            const double err = std::fabs((double)y - e) / std::ldexp(1.0, ex - 24);
            if (err > worst) { worst = err; at = x; }
        }
    }
    std::printf("%ld floats in [-104, 89]: worst %.4f ulp (at %a), denormal results worst %.4f units of 2^-149 (at %a)\n",
                n, worst, at, worst_denormal, at_denormal);
    if (worst > 1.0 || worst_denormal > 1.0) bad = 1;
    std::printf(bad ? "FAIL\n" : "PASS\n");
    return bad;
}
