// Constants of the CPU kernels' vector exp: one table form per vector width, both
//   k = rint(N x log2 e),  r = (x - (k/N) ln2_hi) - (k/N) ln2_lo  (each step one fused rounding),
//   e^x = 2^floor(k/N) T[k mod N] e^r,  T[j] = 2^(j/N) rounded to nearest fp32,  |r| <= ln2 / (2N),
// with fma(x, log2 e, MAGIC) rounding N x log2 e to the integer k once: MAGIC = 1.5 2^23 / N has the unit 1/N,
// so t - MAGIC = k/N exactly and the low log2(N) bits of t's encoding are k mod N (in [0, N), for k < 0 too),
// which is the lane's table index. ln2_hi is the fp32 nearest ln 2, ln2_lo = ln 2 - ln2_hi. The scalar path
// uses libm's expf.
#ifndef ARBOR_EXP_POLY_H
#define ARBOR_EXP_POLY_H

#define ARBOR_EXP_LOG2E 1.44269504088896341f
#define ARBOR_EXP_LN2_HI 0.693147182464599609375f
#define ARBOR_EXP_LN2_LO (-1.904654299957768e-09f)

// AVX2 (vec_avx2.inc): N = 4, picked by VPERMILPS (within each 128-bit lane, from the low 2 bits of each index:
// the table is held twice); e^r - 1 = r + r^2 (E2 + r (E3 + r E4)) on |r| <= ln2/8, E2..E4 a minimax fit of the
// relative error of e^r (5.5e-9 = 0.05 ulp with these fp32 coefficients). Its entries are T16's entries 0, 4, 8, 12.
// N = 4 rather than 8: on Zen 3 a VPERMPS takes both FMA pipes for a cycle (two FMAs' worth) and a VPERMILPS one,
// and the FMA pipes are what bound the exp scans (bench/RESULTS.md, run 9).
#define ARBOR_EXP4_MAGIC 3145728.0f
#define ARBOR_EXP4_E2 5.0000017881e-01f
#define ARBOR_EXP4_E3 1.6672101617e-01f
#define ARBOR_EXP4_E4 4.1641749442e-02f
alignas(32) static const unsigned int arbor_exp4_table_bits[8] = {
    0x3f800000, 0x3f9837f0, 0x3fb504f3, 0x3fd744fd, 0x3f800000, 0x3f9837f0, 0x3fb504f3, 0x3fd744fd};

// AVX-512 (vec_avx512.inc): N = 16, e^r = 1 + r + r^2 (E2 + r E3) on |r| <= ln2/32, E2, E3 a minimax fit
// (relative error 1.6e-9 = 0.03 ulp; the Taylor 1/2, 1/6 give 9.4e-9); T[j] each within 0.46 ulp.
#define ARBOR_EXP16_MAGIC 786432.0f
#define ARBOR_EXP16_E2 5.0001615286e-01f
#define ARBOR_EXP16_E3 1.6666720808e-01f
alignas(64) static const unsigned int arbor_exp16_table_bits[16] = {
    0x3f800000, 0x3f85aac3, 0x3f8b95c2, 0x3f91c3d3, 0x3f9837f0, 0x3f9ef532, 0x3fa5fed7, 0x3fad583f, 0x3fb504f3,
        0x3fbd08a4, 0x3fc5672a, 0x3fce248c, 0x3fd744fd, 0x3fe0ccdf, 0x3feac0c7, 0x3ff5257d};

#endif
