// A steady load for profiling the CPU sampler with top-k 50 + top-p 0.9 (where its time goes beside the statistics
// pass): 64 rows of 32000 N(0, 3^2) logits, 3000 calls on one thread, a fresh draw each call. Profile shares are what
// bench/RESULTS.md quotes (run 9, "Top-k candidates"); they hold up on a noisy machine where times do not:
//   g++ -O2 -g -std=c++17 -Inative/include -Inative/src bench/native/sampler_topk_profile.cpp -o /tmp/topk_profile
//   perf record -e cpu-clock -o /tmp/topk.data /tmp/topk_profile && perf report -i /tmp/topk.data --no-children --stdio
#include "arbor_cpu.cpp"
#include <cstdio>
#include <random>
#include <vector>
int main() {
    const int64_t V = 32000, rows = 64;
    std::mt19937 g(1);
    std::normal_distribution<float> nd(0, 3);
    std::vector<float> x(rows * V);
    for (auto& v : x) v = nd(g);
    std::vector<int> tok(rows);
    std::vector<float> lp(rows), h(rows), l(rows);
    uint64_t step = 0;
    for (int it = 0; it < 3000; it++) {
        const int rc = arbor_cpu_sample_f32(x.data(), rows, V, V, V, 1.f, nullptr, 50, nullptr, 0.9f, nullptr, 0.f, nullptr,
                                            1234, nullptr, nullptr, step++, nullptr, nullptr, tok.data(), ARBOR_I32,
                                            lp.data(), h.data(), l.data(), 1);
        if (rc != ARBOR_OK) { std::printf("sample: error %d\n", rc); return 1; }
    }
    std::printf("last token of row 0: %d\n", tok[0]);
    return 0;
}
