// Constants of the CPU kernels' vector exp (vec_avx2.inc, vec_avx512.inc):
//   n = rint(x log2 e),  r = (x - n ln2_hi) - n ln2_lo  (each step one fused rounding; the first is exact),
//   e^r = 1 + r (1 + r (C2 + r (C3 + r (C4 + r (C5 + r C6))))) on |r| <= ln2 / 2,
//   e^x = e^r 2^n.
// C2..C6 are a minimax fit of (e^r - 1 - r) / r^2 (relative error 2.0e-9 in double, 0.88 ulp evaluated
// in fp32 by FMA Horner); six FMAs instead of the Cephes form's eight operations. ln2_hi is the fp32
// nearest ln 2, ln2_lo = ln 2 - ln2_hi.
#ifndef ARBOR_EXP_POLY_H
#define ARBOR_EXP_POLY_H

#define ARBOR_EXP_LOG2E 1.44269504088896341f
#define ARBOR_EXP_LN2_HI 0.693147182464599609375f
#define ARBOR_EXP_LN2_LO (-1.904654299957768e-09f)
#define ARBOR_EXP_C2 4.9999994040e-01f
#define ARBOR_EXP_C3 1.6666430235e-01f
#define ARBOR_EXP_C4 4.1668005288e-02f
#define ARBOR_EXP_C5 8.3741955459e-03f
#define ARBOR_EXP_C6 1.3843607157e-03f

#endif
