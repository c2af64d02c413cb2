// The statistics pass's exp scan from L1, one thread (thread CPU time, best of 9): the loop body of row_stats
// (four exps an iteration into four pairs of accumulators, S += e, U += e·d) over 2048 floats, with d = x − m
// by a subtraction (the temperature-1 loops) and by the fused x·1 − m (every other temperature). Built against a
// tree's native/ to compare exp forms without memory in the way; then row_stats itself (the kernels' statistics pass:
// max scan, exp scan, chunk merge) over the same 2048-value row in fp32 and in bf16, at temperature 1 and 0.7:
//   g++ -O2 -std=c++17 -Inative/include -Inative/src bench/native/exp_scan_l1.cpp -o /tmp/exp_scan_l1 && /tmp/exp_scan_l1
// (for an older revision: git archive REV native | tar -x -C /tmp/old, then -I/tmp/old/native/include
// -I/tmp/old/native/src). Cycles assume 3.1 GHz (this VM's clock under load; bench/native/fp_pipe_probe.cpp prints it).
#include "arbor_cpu.cpp"
#include <cstdio>
#include <random>
#include <time.h>
#include <vector>
static double tnow() { timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace arbor { namespace avx2 {
template <bool Sub>
static double scan(const float* p, int64_t n, float m) {
    const V vm = vset(m), one = vset(1.0f);
    V vs[4], vu[4];
    for (int i = 0; i < 4; i++) { vs[i] = vset(0); vu[i] = vset(0); }
    for (int64_t j = 0; j + 4 * W <= n; j += 4 * W)
        for (int i = 0; i < 4; i++) {
            const V x = vload(p + j + i * W, F32Tag{});
            V dc, e = vexp_lo(Sub ? vsub(x, vm) : vfmsub(x, one, vm), &dc);
            vs[i] = vadd(vs[i], e);
            vu[i] = vfmadd(e, dc, vu[i]);
        }
    V s = vs[0], u = vu[0];
    for (int i = 1; i < 4; i++) { s = vadd(s, vs[i]); u = vadd(u, vu[i]); }
    return hsum(s) + hsum(u);
}
}}  // namespace arbor::avx2
#pragma GCC pop_options
template <bool Sub> static void run(const char* name, const float* x, int64_t n) {
    double best = 1e30, s = 0;
    for (int k = 0; k < 9; k++) {
        const double t0 = tnow();
        for (int r = 0; r < 20000; r++) {
            const float* xp = x;
            asm volatile("" : "+r"(xp));  // a fresh scan each time
            s += arbor::avx2::scan<Sub>(xp, n, 6.0f);
        }
        best = std::min(best, (tnow() - t0) / (20000.0 * n / 8));
    }
    std::printf("%-22s %.2f ns per 8-float vector = %.1f cycles at 3.1 GHz (sum %.6g)\n", name, best, best * 3.1, s);
}
int main() {
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) { std::printf("needs AVX2 and FMA\n"); return 1; }
    std::mt19937 g(1);
    std::normal_distribution<float> nd(0, 3);
    const int64_t n = 2048;
    std::vector<float> x(n);
    for (auto& v : x) v = nd(g);
    for (int rep = 0; rep < 2; rep++) {
        run<true>("d = x - m (subtract)", x.data(), n);
        run<false>("d = fma(x, 1, -m)", x.data(), n);
    }
    std::vector<uint16_t> xb(n);
    for (int64_t i = 0; i < n; i++) xb[i] = arbor::f32_to_bf16(x[i]);
    for (int bf = 0; bf < 2; bf++)
        for (float inv_t : {1.0f, 1.0f / 0.7f}) {
            double best = 1e30, s = 0;
            for (int k = 0; k < 9; k++) {
                const double t0 = tnow();
                for (int r = 0; r < 20000; r++) {
                    const float* xp = x.data();
                    const uint16_t* bp = xb.data();
                    asm volatile("" : "+r"(xp), "+r"(bp));
                    s += bf ? arbor::avx2::row_stats<arbor::BF16Tag>(bp, n, inv_t).entropy
                            : arbor::avx2::row_stats<arbor::F32Tag>(xp, n, inv_t).entropy;
                }
                best = std::min(best, (tnow() - t0) / (20000.0 * n / 8));
            }
            std::printf("row_stats %s, T = %.1f %.2f ns per 8-value vector = %.1f cycles at 3.1 GHz (sum %.6g)\n",
                        bf ? "bf16" : "fp32", 1.0 / inv_t, best, best * 3.1, s);
        }
}
