// The top-k sampler's cost split on one thread (thread CPU time, best of N, 64 rows of N(0, 3^2) logits): the
// statistics pass alone (the forward's), the same pass with the top-k candidates' sink (its collection), and the
// whole sampler with top-k K + top-p 0.9 (the collection plus the draw), each as a multiple of the first; with the
// candidates held at the end of the pass per row. Used by bench/RESULTS.md (kernel run 16; bench/topk-share-ab.sh REV
// builds it against two trees and alternates them):
//   g++ -O2 -std=c++17 -Inative/include -Inative/src bench/native/topk_share.cpp -o /tmp/topk_share -lpthread
//   /tmp/topk_share [avx512|avx2] [V] [N] [K] [bf16 0|1]
#include "arbor_cpu.cpp"
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <vector>
static double cpu_ms() {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}
template <class SI, class Tag>
static void run(const typename Tag::T* x, int64_t V, int N, int k, bool bf) {
    using namespace arbor;
    const int64_t rows = 64;
    std::vector<float> z(V + 16);
    std::vector<int32_t> idx(V + 16);
    std::vector<int> tok(rows);
    std::vector<float> lp(rows), h(rows), l(rows);
    double best[3] = {1e30, 1e30, 1e30}, chk = 0;
    long held = 0;
    uint64_t step = 0;
    for (int it = 0; it < N; ++it)
        for (int mode = 0; mode < 3; ++mode) {
            const double t0 = cpu_ms();
            if (mode == 2) {
                const int rc = bf ? arbor_cpu_sample_bf16((const uint16_t*)x, rows, V, V, V, 1.f, nullptr, k, nullptr, 0.9f,
                                                          nullptr, 0.f, nullptr, 1234, nullptr, nullptr, step++, nullptr,
                                                          nullptr, tok.data(), ARBOR_I32, lp.data(), h.data(), l.data(), 1)
                                  : arbor_cpu_sample_f32((const float*)x, rows, V, V, V, 1.f, nullptr, k, nullptr, 0.9f,
                                                         nullptr, 0.f, nullptr, 1234, nullptr, nullptr, step++, nullptr,
                                                         nullptr, tok.data(), ARBOR_I32, lp.data(), h.data(), l.data(), 1);
                if (rc != ARBOR_OK) { std::printf("sample: error %d\n", rc); std::exit(1); }
            } else {
                for (int64_t r = 0; r < rows; ++r) {
                    const typename Tag::T* row = x + r * V;
                    if (mode == 0) {
                        chk += SI::template stats<Tag>(row, V, 1.0f).log_sum;
                    } else {  // as the sampler's top-k rows (sampling.cpp, sample_kernel)
                        CandidateSink tk{-FLT_MAX, z.data(), idx.data(), 0, 2 * (int64_t)k > 64 ? 2 * (int64_t)k : 64, k};
                        const RowStats st = SI::template stats_chunks<Tag>(row, V, 1.0f, nullptr, &tk);
                        if (st.valid && tk.speculative && tk.m < tk.k) SI::template recollect<Tag>(&tk, row, V, 1.0f);
                        chk += st.log_sum;
                        held += tk.m;
                    }
                }
            }
            const double t = cpu_ms() - t0;
            if (t < best[mode]) best[mode] = t;
        }
    std::printf("V %ld %s: statistics %.4f ms, with the top-k sink %.4f ms (x%.3f), sampler top-k %d + top-p 0.9 %.4f ms "
                "(x%.3f); held at the end %.1f per row (checksum %.6g)\n",
                (long)V, bf ? "bf16" : "fp32", best[0], best[1], best[1] / best[0], k, best[2], best[2] / best[0],
                held / (double)(N * rows), chk);
}
int main(int argc, char** argv) {
    const char* isa = argc > 1 ? argv[1] : "avx512";
    const int64_t V = argc > 2 ? std::atoll(argv[2]) : 32000;
    const int N = argc > 3 ? std::atoi(argv[3]) : 40, k = argc > 4 ? std::atoi(argv[4]) : 50;
    const bool bf = argc > 5 && std::atoi(argv[5]) != 0;
    if (arbor_cpu_force_isa(isa) != ARBOR_OK) { std::printf("no %s path here\n", isa); return 2; }
    std::mt19937 g(1);
    std::normal_distribution<float> nd(0, 3);
    std::vector<float> x(64 * V);
    std::vector<uint16_t> xb(64 * V);
    for (size_t i = 0; i < x.size(); ++i) { x[i] = nd(g); xb[i] = arbor_f32_to_bf16(x[i]); }
    const bool avx512 = !std::strncmp(isa, "avx512", 6);
    if (bf) avx512 ? run<arbor::Avx512Isa, arbor::BF16Tag>(xb.data(), V, N, k, true) : run<arbor::Avx2Isa, arbor::BF16Tag>(xb.data(), V, N, k, true);
    else avx512 ? run<arbor::Avx512Isa, arbor::F32Tag>(x.data(), V, N, k, false) : run<arbor::Avx2Isa, arbor::F32Tag>(x.data(), V, N, k, false);
}
