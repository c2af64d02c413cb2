// Real allocation failures inside the CPU kernels, under an address-space limit (RLIMIT_AS), in a process of
// its own: the library is loaded with dlopen from the path given as argv[1] (the JNI library the JVM loaded,
// whose extern "C" kernels are plain C symbols). Run by the JUnit test NativeAllocationFailureTest, which
// compiles this file with g++ and asserts the lines it prints:
//
//   stats      <rc unlimited> <rc limited>             the fused-linear statistics allocating a tile it cannot
//                                                      have: the entry point's own std::bad_alloc -> ARBOR_ERR_ALLOC
//   sample     <rc unlimited> <rc limited>             top-k sampling on 2 threads where only the worker's row
//                                                      allocates: the bad_alloc crosses parallel_for's join
//   loss       <rc unlimited> <rc limited> <kept grad elements that differ from the composable path>
//              <limited grad elements that differ from the composable path> <sums that differ, limited vs unlimited>
//              <logprob/entropy elements that differ, limited vs unlimited>
//                                                      the fused policy loss whose kept-exps buffer cannot be
//                                                      allocated: the two-exp path, the composable path's bits
//   limit      <bytes of address space above the inputs for each limited call>
//
// Any crash (std::terminate from an exception escaping a thread or the C ABI) ends the process by a signal, which
// the test reports. The limit is lowered on the soft value only and raised again after each call; glibc's malloc
// is set to map every large block afresh (mallopt below), so each limited call needs new address space.
#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "arbor/arbor.h"

namespace {

void* lib = nullptr;

template <class F>
F sym(const char* name) {
    void* p = dlsym(lib, name);
    if (p == nullptr) {
        fprintf(stderr, "alloc_failure: symbol %s not found: %s\n", name, dlerror());
        exit(2);
    }
    return (F)p;
}

// Virtual memory of this process now (VmSize, bytes).
int64_t vm_size() {
    FILE* f = fopen("/proc/self/status", "r");
    if (f == nullptr) exit(3);
    char line[256];
    int64_t kb = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmSize:", 7) == 0) kb = atoll(line + 7);
    fclose(f);
    if (kb < 0) exit(3);
    return kb * 1024;
}

// Runs call() with the address space limited to what is mapped now plus `headroom` bytes.
template <class Call>
int limited(int64_t headroom, Call call) {
    struct rlimit old;
    if (getrlimit(RLIMIT_AS, &old) != 0) exit(4);
    struct rlimit lim = old;
    lim.rlim_cur = (rlim_t)(vm_size() + headroom);
    if (old.rlim_cur != RLIM_INFINITY && lim.rlim_cur > old.rlim_cur) lim.rlim_cur = old.rlim_cur;
    if (setrlimit(RLIMIT_AS, &lim) != 0) exit(4);
    int rc = call();
    if (setrlimit(RLIMIT_AS, &old) != 0) exit(4);
    return rc;
}

// C = alpha op(A) op(B) + beta C, CBLAS argument order (101 = row major, 111 = no transpose) — slow and plain:
// the fused-linear statistics need some product to run when unlimited.
void naive_sgemm(int layout, int ta, int tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
                 int ldb, float beta, float* c, int ldc) {
    const bool row = layout == 101;
    auto at = [&](int i, int p) {  // op(A)[i, p]
        const bool t = ta != 111;
        return row ? (t ? a[(int64_t)p * lda + i] : a[(int64_t)i * lda + p]) : (t ? a[(int64_t)i * lda + p] : a[(int64_t)p * lda + i]);
    };
    auto bt = [&](int p, int j) {  // op(B)[p, j]
        const bool t = tb != 111;
        return row ? (t ? b[(int64_t)j * ldb + p] : b[(int64_t)p * ldb + j]) : (t ? b[(int64_t)p * ldb + j] : b[(int64_t)j * ldb + p]);
    };
    for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
            float s = 0.0f;
            for (int p = 0; p < k; ++p) s += at(i, p) * bt(p, j);
            float& out = row ? c[(int64_t)i * ldc + j] : c[(int64_t)j * ldc + i];
            out = alpha * s + (beta == 0.0f ? 0.0f : beta * out);
        }
}

int64_t differ(const float* x, const float* y, int64_t n) {
    int64_t d = 0;
    for (int64_t i = 0; i < n; ++i) d += memcmp(&x[i], &y[i], sizeof(float)) != 0;
    return d;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: alloc_failure LIBRARY.so\n");
        return 2;
    }
    lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        fprintf(stderr, "alloc_failure: %s\n", dlerror());
        return 2;
    }
    // every large block a fresh mapping, unmapped when freed, and one arena: what a call allocates must fit under the
    // limit then (glibc would otherwise serve it from memory an earlier call freed, or a thread's reserved arena)
    mallopt(M_ARENA_MAX, 1);
    mallopt(M_MMAP_THRESHOLD, 128 << 10);
    mallopt(M_TRIM_THRESHOLD, 128 << 10);
    std::mt19937_64 rng(20261207);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    const int64_t headroom = 16 << 20;  // 16 MiB above what the inputs map: a thread's stack, never a row's scratch
    printf("limit %lld\n", (long long)headroom);

    // 1. fused-linear statistics, d = 1, tiles of 4096 x 4096 fp32 (64 MiB) that the kernel allocates itself
    {
        auto stats = sym<decltype(&arbor_cpu_fused_linear_stats)>("arbor_cpu_fused_linear_stats");
        const int64_t n = 4096;
        std::vector<float> h(n), w(n), ent(n);
        for (auto& v : h) v = normal(rng);
        for (auto& v : w) v = normal(rng);
        auto call = [&] {
            return stats(h.data(), n, 1, 1, w.data(), n, 1, n, ARBOR_F32, nullptr, ARBOR_I32, 1.0f, nullptr, nullptr,
                         ent.data(), nullptr, n, n, nullptr, 0, naive_sgemm, 1);
        };
        const int unlimited = call();
        const int lim = limited(headroom, call);
        printf("stats %d %d\n", unlimited, lim);
        fflush(stdout);
    }

    // 2. top-k sampling, 2 rows on 2 threads, vocabulary 2^21: row 0 (the calling thread's block) masked, row 1
    //    (the worker's) top-k 50, whose scratch is ~24 bytes a column (48 MiB)
    {
        auto sample = sym<decltype(&arbor_cpu_sample_f32)>("arbor_cpu_sample_f32");
        const int64_t v = (int64_t)1 << 21;
        std::vector<float> z(2 * v);
        for (auto& x : z) x = normal(rng);
        uint8_t mask[2] = {0, 1};
        int32_t tokens[2];
        float lp[2];
        auto call = [&] {
            return sample(z.data(), 2, v, v, v, 1.0f, nullptr, 50, nullptr, 1.0f, nullptr, 0.0f, nullptr, 7, nullptr,
                          nullptr, 0, nullptr, mask, tokens, ARBOR_I32, lp, nullptr, nullptr, 2);
        };
        const int unlimited = call();
        const int lim = limited(headroom, call);
        printf("sample %d %d\n", unlimited, lim);
        fflush(stdout);
    }

    // 3. fused policy loss, 3 rows (one masked) of 2^22 columns on 1 thread: the kept exps (16 MiB) cannot be had
    {
        auto fused = sym<decltype(&arbor_cpu_policy_loss_fused_f32)>("arbor_cpu_policy_loss_fused_f32");
        auto weights_fn = sym<decltype(&arbor_cpu_policy_loss_weights)>("arbor_cpu_policy_loss_weights");
        auto ws_bytes = sym<decltype(&arbor_policy_loss_workspace_bytes)>("arbor_policy_loss_workspace_bytes");
        auto fwd = sym<decltype(&arbor_cpu_token_stats_fwd_f32)>("arbor_cpu_token_stats_fwd_f32");
        auto loss = sym<decltype(&arbor_cpu_policy_loss)>("arbor_cpu_policy_loss");
        auto bwd = sym<decltype(&arbor_cpu_token_stats_bwd_f32)>("arbor_cpu_token_stats_bwd_f32");
        const int64_t rows = 3, v = (int64_t)1 << 22;
        std::vector<float> z(rows * v);
        for (auto& x : z) x = normal(rng);
        int32_t labels[rows] = {17, -100, (int32_t)(v - 5)};
        float old[rows] = {-14.0f, 0.0f, -16.5f}, adv[rows] = {0.8f, 0.0f, -1.3f}, mask[rows] = {1.0f, 0.0f, 1.0f};
        uint8_t row_mask[rows] = {1, 0, 1};
        float weights[rows];
        double counts[ARBOR_PL_NUM_COUNTS];
        const int64_t wsb = ws_bytes(rows, 0);
        std::vector<unsigned long long> ws((size_t)(wsb / 8 + 1));
        if (weights_fn(mask, nullptr, rows, 0, ARBOR_AGG_TOKEN_MEAN, 0.0, weights, counts, ws.data(), wsb, 1) != 0)
            return 5;
        arbor_policy_loss_config cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.clip_mode = ARBOR_CLIP_PPO;
        cfg.eps_low = 0.2f;
        cfg.eps_high = 0.28f;
        cfg.aepo_entropy_threshold = -INFINITY;
        cfg.kl_type = ARBOR_KL_NONE;
        cfg.entropy_coef = 0.01f;
        cfg.temperature = 1.0f;
        std::vector<float> g_kept(rows * v), g_lim(rows * v), g_comp(rows * v);
        float lp_k[rows], h_k[rows], lp_l[rows], h_l[rows];
        double s_k[ARBOR_PL_NUM_SUMS], s_l[ARBOR_PL_NUM_SUMS];
        auto call = [&](float* g, float* lp, float* h, double* s) {
            return fused(&cfg, z.data(), rows, v, v, v, labels, ARBOR_I32, old, adv, mask, weights, nullptr, nullptr,
                         lp, h, nullptr, nullptr, g, ARBOR_F32, v, s, ws.data(), wsb, 1);
        };
        const int unlimited = call(g_kept.data(), lp_k, h_k, s_k);
        const int lim = limited(headroom / 4, [&] { return call(g_lim.data(), lp_l, h_l, s_l); });
        // the composable path: statistics, the per-token loss, the statistics' backward
        float lp_c[rows], h_c[rows], lse_c[rows], glp[rows], gh[rows];
        double s_c[ARBOR_PL_NUM_SUMS];
        int rc = fwd(z.data(), rows, v, v, v, labels, ARBOR_I32, 1.0f, row_mask, lp_c, h_c, lse_c, 1);
        rc |= loss(&cfg, rows, lp_c, h_c, old, adv, mask, weights, nullptr, nullptr, glp, gh, s_c, ws.data(), wsb, 1);
        rc |= bwd(z.data(), rows, v, v, v, labels, ARBOR_I32, 1.0f, row_mask, lse_c, h_c, glp, gh, g_comp.data(),
                  ARBOR_F32, v, 1);
        if (rc != 0) return 6;
        int64_t sums_differ = 0;
        for (int i = 0; i < ARBOR_PL_NUM_SUMS; ++i)
            sums_differ += memcmp(&s_k[i], &s_l[i], sizeof(double)) != 0 && !(std::isnan(s_k[i]) && std::isnan(s_l[i]));
        printf("loss %d %d %lld %lld %lld %lld\n", unlimited, lim, (long long)differ(g_kept.data(), g_comp.data(), rows * v),
               (long long)differ(g_lim.data(), g_comp.data(), rows * v), (long long)sums_differ,
               (long long)(differ(lp_k, lp_l, rows) + differ(h_k, h_l, rows)));
        fflush(stdout);
    }
    return 0;
}
