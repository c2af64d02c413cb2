// The AVX2 list race (SampleVec<8>::race_list, sampling_rows.inc) and, where the CPU has AVX-512, the sixteen-lane one
// (sampling.cpp, Race16) against the scalar one: token and key bits over 200,000 random lists (0-129 columns over
// spans of 64, 32000 and 2^24 columns, a quarter of the z values tied), and the row race (gumbel_race; AVX-512:
// Race16::row_race) on 20,000 random rows; then each timed: the row race over 151936 columns, the list race on lists of
// 45 and 6,000 entries (bench/RESULTS.md, runs 11 and 14):
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
    // the row race (gumbel_race; AVX-512: Race16::row_race) on random rows: widths 1-5000, fp32 and bf16, thresholds
    // from none to most of the row, -inf columns, ties, temperatures 1 and 0.7
    long rbad = 0, rn = 0;
    for (int t = 0; t < 20000; t++) {
        const int64_t w = 1 + g() % (g() % 4 == 0 ? 5000 : 300);
        std::normal_distribution<float> nd(0, g() % 2 ? 0.5f : 4.f);
        std::vector<float> x(w); std::vector<uint16_t> xb(w);
        for (int64_t j = 0; j < w; j++) {
            x[j] = g() % 5 == 0 ? 1.0f : nd(g);
            if (g() % 7 == 0) x[j] = -INFINITY;
            xb[j] = arbor_f32_to_bf16(x[j]);
        }
        const float inv_t = g() % 2 ? 1.0f : 1.0f / 0.7f;
        const float tau = g() % 3 == 0 ? -INFINITY : (float)(g() % 9) * 0.5f - 3.0f;
        smath::Stream s = smath::make_stream(g(), g(), g());
        const bool bf = g() % 2;
        Drawn a = bf ? SampleScalarIsa::race<BF16Tag>(xb.data(), w, inv_t, tau, s) : SampleScalarIsa::race<F32Tag>(x.data(), w, inv_t, tau, s);
        Drawn b = bf ? SampleAvx2Isa::race<BF16Tag>(xb.data(), w, inv_t, tau, s) : SampleAvx2Isa::race<F32Tag>(x.data(), w, inv_t, tau, s);
        rn++;
        if (a.idx != b.idx || memcmp(&a.key, &b.key, 4) != 0) { if (rbad++ < 5) printf("row race differs w=%ld: %ld %.9g vs %ld %.9g\n", (long)w, (long)a.idx, a.key, (long)b.idx, b.key); }
        if (avx512) {
            Drawn c = bf ? SampleAvx512Isa::race<BF16Tag>(xb.data(), w, inv_t, tau, s) : SampleAvx512Isa::race<F32Tag>(x.data(), w, inv_t, tau, s);
            if (a.idx != c.idx || memcmp(&a.key, &c.key, 4) != 0) { if (rbad++ < 5) printf("avx512 row race differs w=%ld: %ld %.9g vs %ld %.9g\n", (long)w, (long)a.idx, a.key, (long)c.idx, c.key); }
        }
    }
    printf("%ld rows, %ld differ\n", rn, rbad);
    if (bad || rbad) return 1;
    // time the row race: 151936 columns of N(0, 1), all kept, and of N(0, 3^2) kept from 3 up
    for (float sigma : {1.0f, 3.0f}) {
        const int64_t w = 151936;
        std::vector<float> x(w); std::normal_distribution<float> nd(0, sigma); for (auto& v : x) v = nd(g);
        const float tau = sigma == 1.0f ? -INFINITY : 3.0f;
        for (int rep = 0; rep < 3; rep++) {
            double t[3] = {0, 0, 0}; long sink = 0;
            for (int k = 0; k < (avx512 ? 3 : 2); k++) {
                auto t0 = std::chrono::steady_clock::now();
                for (int it = 0; it < 100; it++) {
                    smath::Stream s = smath::make_stream(1, 2, it);
                    sink += k == 0 ? SampleScalarIsa::race<F32Tag>(x.data(), w, 1.0f, tau, s).idx
                          : k == 1 ? SampleAvx2Isa::race<F32Tag>(x.data(), w, 1.0f, tau, s).idx
                                   : SampleAvx512Isa::race<F32Tag>(x.data(), w, 1.0f, tau, s).idx;
                }
                t[k] = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 100;
            }
            printf("row race, 151936 columns of N(0, %g), tau %g: scalar %.0f us, avx2 %.0f us, avx512 %.0f us (%ld)\n",
                   sigma, tau, t[0], t[1], t[2], sink);
        }
    }
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
