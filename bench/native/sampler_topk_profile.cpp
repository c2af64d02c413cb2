// A steady load for profiling the CPU sampler with top-k 50 + top-p 0.9 (where its time goes beside the statistics
// pass): 64 rows of 32000 N(0, 3^2) logits, 3000 calls on one thread, a fresh draw each call. Profile shares are what
// bench/RESULTS.md quotes (run 9, "Top-k candidates"); they hold up on a noisy machine where times do not:
//   g++ -O2 -g -std=c++17 -Inative/include -Inative/src bench/native/sampler_topk_profile.cpp -o /tmp/topk_profile
//   perf record -e cpu-clock -o /tmp/topk.data /tmp/topk_profile && perf report -i /tmp/topk.data --no-children --stdio
// Optional arguments: the CPU path, top-k (0: none), the vocabulary, the number of calls and top-p (1: none), e.g.
// top-p 0.9 alone at the Qwen vocabulary: /tmp/topk_profile avx512 0 151936 600
#include "arbor_cpu.cpp"
#include <cstdio>
#include <random>
#include <vector>
#include <cstdlib>
int main(int argc, char** argv) {
    if (argc > 1 && arbor_cpu_force_isa(argv[1]) != ARBOR_OK) { std::printf("no %s path here\n", argv[1]); return 2; }
    const int k = argc > 2 ? std::atoi(argv[2]) : 50;
    const int64_t V = argc > 3 ? std::atoll(argv[3]) : 32000, rows = 64;
    const int calls = argc > 4 ? std::atoi(argv[4]) : 3000;
    const float top_p = argc > 5 ? (float)std::atof(argv[5]) : 0.9f;
    std::mt19937 g(1);
    std::normal_distribution<float> nd(0, 3);
    std::vector<float> x(rows * V);
    for (auto& v : x) v = nd(g);
    std::vector<int> tok(rows);
    std::vector<float> lp(rows), h(rows), l(rows);
    uint64_t step = 0;
    for (int it = 0; it < calls; it++) {
        const int rc = arbor_cpu_sample_f32(x.data(), rows, V, V, V, 1.f, nullptr, k, nullptr, top_p, nullptr, 0.f, nullptr,
                                            1234, nullptr, nullptr, step++, nullptr, nullptr, tok.data(), ARBOR_I32,
                                            lp.data(), h.data(), l.data(), 1);
        if (rc != ARBOR_OK) { std::printf("sample: error %d\n", rc); return 1; }
    }
    std::printf("last token of row 0: %d\n", tok[0]);
    return 0;
}
