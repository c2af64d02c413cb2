// Thread CPU time of the CPU sampler's truncations without a cutting top-k (bench/truncation-time.sh), one thread,
// 64 rows of N(0, sigma^2) logits at sigma 3 (a nucleus of ~4 % of the columns at top-p 0.9) and 9 (a few columns),
// V 32000 and 151936, fp32, best of N: the statistics forward, then top-p 0.9 / 0.95 / 0.99 alone, min-p 0.05 and
// 0.001 alone, top-p 0.9 + min-p 0.01 (ms and x the forward), and how the top-p / min-p rows decided their
// threshold (arbor_cpu_sample_nucleus_paths: held candidates, exact total, binned path; zeros where the tree
// predates it).
#include "arbor_cpu.cpp"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <algorithm>
#include <random>
#include <vector>

extern "C" __attribute__((weak)) void arbor_cpu_sample_nucleus_paths(int64_t* counts, int reset);

static double now_ms() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

int main(int argc, char** argv) {
  const int N = argc > 1 ? atoi(argv[1]) : 7, rows = 64;
  arbor_cpu_force_isa(argc > 2 ? argv[2] : "avx2");
  struct P { float p, mp; const char* name; };
  const P ps[] = {{0.9f, 0, "top-p 0.9"}, {0.95f, 0, "top-p 0.95"}, {0.99f, 0, "top-p 0.99"}, {1, 0.05f, "min-p 0.05"},
                  {1, 0.001f, "min-p 0.001"}, {0.9f, 0.01f, "top-p 0.9 + min-p 0.01"}};
  for (float sigma : {3.0f, 9.0f})
    for (int64_t V : {32000L, 151936L}) {
      std::vector<float> x(rows * V), lp(rows), h(rows), l(rows);
      std::mt19937 r(1);
      std::normal_distribution<float> nd(0, sigma);
      for (auto& v : x) v = nd(r);
      std::vector<int> lab(rows), tok(rows);
      double f = 1e18;
      for (int s = 0; s < N; s++) {
        double t0 = now_ms();
        arbor_cpu_token_stats_fwd_f32(x.data(), rows, V, V, V, lab.data(), ARBOR_I32, 1.f, nullptr, lp.data(), h.data(), l.data(), 1);
        f = std::min(f, now_ms() - t0);
      }
      printf("sigma %.0f V=%-6ld fwd %6.2f ms\n", sigma, (long)V, f);
      for (const P& p : ps) {
        int64_t c[3] = {0, 0, 0};
        if (arbor_cpu_sample_nucleus_paths) arbor_cpu_sample_nucleus_paths(c, 1);
        double b = 1e18;
        for (int s = 0; s < N; s++) {
          double t0 = now_ms();
          arbor_cpu_sample_f32(x.data(), rows, V, V, V, 1.f, nullptr, 0, nullptr, p.p, nullptr, p.mp, nullptr, 1234, nullptr,
                               nullptr, s, nullptr, nullptr, tok.data(), ARBOR_I32, lp.data(), h.data(), l.data(), 1);
          b = std::min(b, now_ms() - t0);
        }
        if (arbor_cpu_sample_nucleus_paths) arbor_cpu_sample_nucleus_paths(c, 1);
        printf("  %-24s %7.2f ms %5.2fx fwd  paths %ld %ld %ld\n", p.name, b, b / f, (long)c[0], (long)c[1], (long)c[2]);
      }
      fflush(stdout);
    }
}
