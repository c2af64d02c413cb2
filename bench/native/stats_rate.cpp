// The statistics forward's rate on one path, one thread, thread CPU time, best of 60 calls of 64 rows: bf16 at T 1 and
// 0.7 and fp32 at T 1, in G values/s for bf16 T 1, and a checksum of the bf16 T 1 log-probs and entropies (equal
// checksums before and after a change = the same bits). At V 2048 a row is one chunk from L1 (bench/RESULTS.md, run 14:
// the AVX-512 bf16 load and raw max; the table exp against the degree-6 one, built against e48bc37's native/ with its
// parent's vec_avx512.inc and degree-6 constants swapped in):
//   g++ -O2 -std=c++17 -Inative/include -Inative/src bench/native/stats_rate.cpp -o /tmp/stats_rate
//   /tmp/stats_rate avx512 2048
// or against a revision's native/ and this tree's, alternated: bench/stats-rate-ab.sh REV [ISA] [N] [V]
#include "arbor_cpu.cpp"
#include <cstdio>
#include <random>
#include <time.h>
#include <vector>
static double tnow() { timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec * 1e3 + t.tv_nsec * 1e-6; }
int main(int argc, char** argv) {
  const char* isa = argc > 1 ? argv[1] : "avx512";
  if (arbor_cpu_force_isa(isa) != ARBOR_OK) { fprintf(stderr, "this CPU has no %s path\n", isa); return 2; }
  const int64_t V = argc > 2 ? atol(argv[2]) : 151936, rows = 64;
  std::vector<float> x(rows * V); std::vector<uint16_t> xb(rows * V);
  std::mt19937 r(1); std::normal_distribution<float> nd(0, 3);
  for (size_t i = 0; i < x.size(); i++) { x[i] = nd(r); xb[i] = arbor_f32_to_bf16(x[i]); }
  std::vector<int> lab(rows, 3); std::vector<float> lp(rows), h(rows), l(rows);
  std::vector<float> lpb, hbv; double fb = 1e9, ff = 1e9, fb7 = 1e9;
  for (int it = 0; it < 60; it++) {
    double t0 = tnow(); arbor_cpu_token_stats_fwd_bf16(xb.data(), rows, V, V, V, lab.data(), ARBOR_I32, 1.f, nullptr, lp.data(), h.data(), l.data(), 1); fb = std::min(fb, tnow() - t0); lpb = lp; hbv = h;
    t0 = tnow(); arbor_cpu_token_stats_fwd_bf16(xb.data(), rows, V, V, V, lab.data(), ARBOR_I32, 0.7f, nullptr, lp.data(), h.data(), l.data(), 1); fb7 = std::min(fb7, tnow() - t0);
    t0 = tnow(); arbor_cpu_token_stats_fwd_f32(x.data(), rows, V, V, V, lab.data(), ARBOR_I32, 1.f, nullptr, lp.data(), h.data(), l.data(), 1); ff = std::min(ff, tnow() - t0);
  }
  uint32_t hb = 0; for (int i = 0; i < rows; i++) { uint32_t b; memcpy(&b, &lpb[i], 4); hb = hb * 31 + b; memcpy(&b, &hbv[i], 4); hb = hb * 31 + b; }
  printf("bf16 fwd %.3f ms (T 0.7: %.3f)  fp32 fwd %.3f ms  (%.2f G values/s bf16)  check %08x\n", fb, fb7, ff, rows * V / fb * 1e-6, hb);
}
