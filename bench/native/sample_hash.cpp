// Hashes the CPU sampler's tokens and sampled log-probs (FNV-1a over their bits) over 97,200 rows: 7 vocabularies
// (7 to 151936) x 3 spreads x 3 row kinds (plain, a quarter grid of ties, -inf columns with masked halves and the top
// late) x fp32/bf16 x 12 parameter sets (top-p alone at 0.3-0.999 and temperatures 0.5-1.3, top-k too large to cut,
// top-p with min-p, top-k 40 + top-p, min-p alone) x 3 steps, on 2 threads; and, in a hash of their own, 24,300 untruncated
// rows (the same rows at temperatures 1, 0.7, 1.6). A refactoring of the sampler that must not change any
// token compares the hash before and after (bench/sample-hash.sh); also prints how the rows with top-p alone decided
// their threshold (arbor_cpu_sample_nucleus_paths; zeros where the tree predates it).
#include "arbor_cpu.cpp"
#include <stdio.h>
#include <string.h>
#include <vector>
#include <random>
#include <cmath>
// (weak: absent from trees that predate it)
extern "C" __attribute__((weak)) void arbor_cpu_sample_nucleus_paths(int64_t* counts, int reset);
static void nucleus_paths(int64_t* c, int reset) {
  c[0] = c[1] = c[2] = 0;
  if (arbor_cpu_sample_nucleus_paths) arbor_cpu_sample_nucleus_paths(c, reset);
}
int main(int argc, char** argv) {
  const char* isa = argc > 1 ? argv[1] : "avx2";
  if (arbor_cpu_force_isa(isa) != ARBOR_OK) { fprintf(stderr, "this CPU has no %s path\n", isa); return 2; }
  uint64_t h = 1469598103934665603ull; long rowsAll = 0;
  auto mix = [&](uint32_t v){ h ^= v; h *= 1099511628211ull; };
  uint64_t hu = 1469598103934665603ull; long rowsU = 0;
  auto mixu = [&](uint32_t v){ hu ^= v; hu *= 1099511628211ull; };
  int64_t c[3]; nucleus_paths(c, 1);
  for (int64_t V : {7L, 64L, 1000L, 2049L, 5000L, 32000L, 151936L})
  for (float sigma : {0.5f, 3.f, 9.f})
  for (int kind = 0; kind < 3; kind++)
  for (int bf = 0; bf < 2; bf++) {
    int rows = V > 40000 ? 6 : 24;
    std::mt19937 r(V * 131 + (int)(sigma * 10) * 7 + kind * 3 + bf);
    std::normal_distribution<float> nd(0, sigma);
    std::vector<float> x(rows * V); std::vector<uint16_t> xb(rows * V);
    for (int rr = 0; rr < rows; rr++) for (int64_t j = 0; j < V; j++) {
      float v = nd(r);
      if (kind == 1) v = std::round(v * 4) / 4;                   // ties
      if (kind == 2 && (j % 5 == 0 || (rr % 3 == 0 && j < V / 2))) v = -INFINITY;  // -inf, masked halves
      if (kind == 2 && rr % 4 == 1 && j >= V - 50) v += 2 * sigma;  // the top late
      x[rr * V + j] = v; xb[rr * V + j] = arbor_f32_to_bf16(v);
    }
    struct P { float t; int k; float p; float mp; };
    // untruncated draws (temperatures alone) into their own hash, so the truncated hash stays comparable with the
    // figures recorded before they were added
    for (float t : {1.0f, 0.7f, 1.6f}) {
      std::vector<int> tok(rows); std::vector<float> lps(rows), lp(rows), ent(rows);
      for (int step = 0; step < 3; step++) {
        int rc = bf ? arbor_cpu_sample_bf16(xb.data(), rows, V, V, V, t, nullptr, 0, nullptr, 1, nullptr, 0, nullptr, 7 + step, nullptr, nullptr, step, nullptr, nullptr, tok.data(), ARBOR_I32, lps.data(), lp.data(), ent.data(), 2)
                    : arbor_cpu_sample_f32(x.data(), rows, V, V, V, t, nullptr, 0, nullptr, 1, nullptr, 0, nullptr, 7 + step, nullptr, nullptr, step, nullptr, nullptr, tok.data(), ARBOR_I32, lps.data(), lp.data(), ent.data(), 2);
        mixu(rc);
        for (int rr = 0; rr < rows; rr++) { uint32_t b; memcpy(&b, &lps[rr], 4); mixu(tok[rr]); mixu(b); }
        rowsU += rows;
      }
    }
    for (P p : {P{1, 0, 0.9f, 0}, P{0.7f, 0, 0.3f, 0}, P{1.3f, 0, 0.95f, 0}, P{1, 0, 0.99f, 0}, P{1, 0, 0.999f, 0},
                P{0.5f, 0, 0.6f, 0}, P{1, (int)V + 5, 0.8f, 0}, P{1, 0, 0.9f, 0.01f}, P{1, 40, 0.9f, 0},
                P{1, 0, 1, 0.05f}, P{0.8f, 0, 1, 0.001f}, P{1.2f, 0, 0.7f, 0.2f}}) {
      std::vector<int> tok(rows); std::vector<float> lps(rows), lp(rows), ent(rows);
      for (int step = 0; step < 3; step++) {
        int rc = bf ? arbor_cpu_sample_bf16(xb.data(), rows, V, V, V, p.t, nullptr, p.k, nullptr, p.p, nullptr, p.mp, nullptr, 99 + step, nullptr, nullptr, step, nullptr, nullptr, tok.data(), ARBOR_I32, lps.data(), lp.data(), ent.data(), 2)
                    : arbor_cpu_sample_f32(x.data(), rows, V, V, V, p.t, nullptr, p.k, nullptr, p.p, nullptr, p.mp, nullptr, 99 + step, nullptr, nullptr, step, nullptr, nullptr, tok.data(), ARBOR_I32, lps.data(), lp.data(), ent.data(), 2);
        mix(rc);
        for (int rr = 0; rr < rows; rr++) { uint32_t b; memcpy(&b, &lps[rr], 4); mix(tok[rr]); mix(b); }
        rowsAll += rows;
      }
    }
  }
  nucleus_paths(c, 0);
  printf("%s rows %ld hash %016llx nucleus paths %ld %ld %ld; untruncated rows %ld hash %016llx\n", isa, rowsAll,
         (unsigned long long)h, (long)c[0], (long)c[1], (long)c[2], rowsU, (unsigned long long)hu);
}
