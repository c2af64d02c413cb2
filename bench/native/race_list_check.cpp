// The AVX2 list race (SampleVec<8>::race_list, sampling_rows.inc) and, where the CPU has AVX-512, the sixteen-lane one
// (sampling.cpp, RaceList16) against the scalar one: token and key bits over 200,000 random lists (0-129 columns over
// spans of 64, 32000 and 2^24 columns, a quarter of the z values tied), then each timed on lists of 45 and 6,000 entries
// over 32000 and 151936 columns (bench/RESULTS.md, runs 11 and 14):
//   g++ -O2 -std=c++17 -Inative/include -Inative/src bench/native/race_list_check.cpp -o /tmp/race_list_check && /tmp/race_list_check
// Exits 1 when a list differs.
#include "arbor_cpu.cpp"
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <vector>
using namespace arbor;
int main() {
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    std::mt19937_64 g(7);
    long bad = 0, n = 0;
    for (int t = 0; t < 200000; t++) {
        int m = g() % 130;
        int span = (g() % 3 == 0) ? 64 : (g() % 2 ? 32000 : (1 << 24));
        std::set<int> cols; while ((int)cols.size() < m && (int)cols.size() < span) cols.insert(g() % span);
        std::vector<int32_t> idx(cols.begin(), cols.end()); m = idx.size();
        std::vector<float> z(m + 8);
        std::normal_distribution<float> nd(0, g() % 2 ? 0.5f : 4.f);
        for (int i = 0; i < m; i++) z[i] = (g() % 4 == 0) ? 1.0f : nd(g);  // ties of z too
        smath::Stream s = smath::make_stream(g(), g(), g());
        Drawn a = SampleScalarIsa::race_list(z.data(), idx.data(), m, s);
        Drawn b = SampleAvx2Isa::race_list(z.data(), idx.data(), m, s);
        n++;
        if (a.idx != b.idx || memcmp(&a.key, &b.key, 4) != 0) { if (bad++ < 5) printf("differ m=%d: %ld %.9g vs %ld %.9g\n", m, (long)a.idx, a.key, (long)b.idx, b.key); }
        if (avx512) {
            Drawn c = SampleAvx512Isa::race_list(z.data(), idx.data(), m, s);
            if (a.idx != c.idx || memcmp(&a.key, &c.key, 4) != 0) { if (bad++ < 5) printf("avx512 differs m=%d: %ld %.9g vs %ld %.9g\n", m, (long)a.idx, a.key, (long)c.idx, c.key); }
        }
    }
    printf("%ld lists, %ld differ\n", n, bad);
    if (bad) return 1;
    // time: lists of 45 and 6,000 entries over 32000 and 151936 columns
    for (int m : {45, 6000}) {
        const int span = m == 45 ? 32000 : 151936;
        std::vector<int32_t> idx; std::set<int> cols; while ((int)cols.size() < m) cols.insert(g() % span); idx.assign(cols.begin(), cols.end());
        std::vector<float> z(m + 16); std::normal_distribution<float> nd(0, 1); for (auto& v : z) v = nd(g);
        const int iters = m == 45 ? 200000 : 2000;
        for (int rep = 0; rep < 3; rep++) {
            double t[3] = {0, 0, 0}; long sink = 0;
            for (int k = 0; k < (avx512 ? 3 : 2); k++) {
                auto t0 = std::chrono::steady_clock::now();
                for (int it = 0; it < iters; it++) {
                    smath::Stream s = smath::make_stream(1, 2, it);
                    sink += k == 0 ? SampleScalarIsa::race_list(z.data(), idx.data(), m, s).idx
                          : k == 1 ? SampleAvx2Isa::race_list(z.data(), idx.data(), m, s).idx
                                   : SampleAvx512Isa::race_list(z.data(), idx.data(), m, s).idx;
                }
                t[k] = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / iters;
            }
            printf("%d entries: scalar %.0f ns, avx2 %.0f ns, avx512 %.0f ns (%ld)\n", m, t[0], t[1], t[2], sink);
        }
    }
}
