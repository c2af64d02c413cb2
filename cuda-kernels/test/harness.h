// JVM-free GPU check harness: shared helpers for the per-kernel check files (check_<kernel>.cu).
// Each check compares a CUDA kernel with the scalar double-precision reference from native/ on fresh
// random inputs, then times it with CUDA events at the reference shapes listed in gpu-check.sh.
#ifndef ARBOR_GPU_HARNESS_H
#define ARBOR_GPU_HARNESS_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "arbor/arbor.h"
#include "arbor_cuda.h"
#include "half.h"

namespace harness {

#define CUDA_OK(expr)                                                                                      \
    do {                                                                                                   \
        cudaError_t e_ = (expr);                                                                           \
        if (e_ != cudaSuccess) {                                                                           \
            fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__, __LINE__,      \
                    cudaGetErrorString(e_));                                                               \
            exit(2);                                                                                       \
        }                                                                                                  \
    } while (0)

struct Ctx {
    std::string outdir;
    FILE* checks_csv = nullptr;  // kernel,case,max_err_over_tol,ok
    FILE* times_csv = nullptr;   // kernel,shape,dtype,ms,bytes,gbps,frac_copy
    double copy_gbps = 0;        // measured device-to-device copy bandwidth (read + write bytes / s)
    int failures = 0;
    bool quick = false;          // --quick: checks only, no timing
    std::mt19937_64 rng{20261129};
};

// RAII device buffer.
template <class T>
struct DevBuf {
    T* p = nullptr;
    size_t n = 0;
    explicit DevBuf(size_t count) : n(count) { CUDA_OK(cudaMalloc(&p, std::max<size_t>(1, n) * sizeof(T))); }
    DevBuf(const std::vector<T>& h) : DevBuf(h.size()) { upload(h); }
    ~DevBuf() { cudaFree(p); }
    DevBuf(const DevBuf&) = delete;
    DevBuf& operator=(const DevBuf&) = delete;
    // (empty vectors have data() == nullptr: no zero-byte cudaMemcpy with a null host pointer)
    void upload(const std::vector<T>& h) {
        if (!h.empty()) CUDA_OK(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    }
    std::vector<T> download() const {
        std::vector<T> h(n);
        if (n > 0) CUDA_OK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
        return h;
    }
};

// Median time in ms of fn() over `iters` runs after `warmup` runs, with CUDA events.
template <class Fn>
double time_ms(Fn&& fn, int warmup = 3, int iters = 20) {
    for (int i = 0; i < warmup; ++i) fn();
    CUDA_OK(cudaDeviceSynchronize());
    cudaEvent_t a, b;
    CUDA_OK(cudaEventCreate(&a));
    CUDA_OK(cudaEventCreate(&b));
    std::vector<float> t;
    for (int i = 0; i < iters; ++i) {
        CUDA_OK(cudaEventRecord(a));
        fn();
        CUDA_OK(cudaEventRecord(b));
        CUDA_OK(cudaEventSynchronize(b));
        float ms;
        CUDA_OK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

// Large device-to-device copy: the achievable HBM bandwidth every kernel is reported against.
inline double measure_copy_gbps() {
    const size_t bytes = size_t(4) << 30;  // 4 GiB, far larger than L2
    char *a, *b;
    CUDA_OK(cudaMalloc(&a, bytes));
    CUDA_OK(cudaMalloc(&b, bytes));
    CUDA_OK(cudaMemset(a, 1, bytes));
    double ms = time_ms([&] { CUDA_OK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); }, 2, 10);
    cudaFree(a);
    cudaFree(b);
    return 2.0 * bytes / (ms * 1e-3) / 1e9;
}

inline void record_check(Ctx& c, const char* kernel, const std::string& what, double err_over_tol) {
    bool ok = err_over_tol <= 1.0 && !std::isnan(err_over_tol);
    if (!ok) c.failures++;
    printf("  %-28s %-60s err/tol %8.4f %s\n", kernel, what.c_str(), err_over_tol, ok ? "ok" : "FAIL");
    if (c.checks_csv) {
        fprintf(c.checks_csv, "%s,\"%s\",%.6g,%d\n", kernel, what.c_str(), err_over_tol, ok ? 1 : 0);
        fflush(c.checks_csv);  // keep what was checked if a later kernel hangs or the run is killed
    }
}

// An exact-equality check: `mismatches` must be 0. (Not record_check(count): err/tol <= 1 would let a
// single mismatch pass.)
inline void record_mismatches(Ctx& c, const char* kernel, const std::string& what, double mismatches) {
    if (mismatches == 0.0) {
        record_check(c, kernel, what, 0.0);
    } else {
        char n[64];
        snprintf(n, sizeof n, " [%.0f mismatches]", mismatches);
        record_check(c, kernel, what + n, INFINITY);
    }
}

inline void record_time(Ctx& c, const char* kernel, const std::string& shape, const char* dtype, double ms,
                        double bytes) {
    double gbps = bytes / (ms * 1e-3) / 1e9;
    printf("  %-28s %-22s %-5s %9.3f ms %8.1f GB/s %6.1f%% of copy\n", kernel, shape.c_str(), dtype, ms, gbps,
           100.0 * gbps / c.copy_gbps);
    if (c.times_csv) {
        fprintf(c.times_csv, "%s,%s,%s,%.6f,%.0f,%.2f,%.4f\n", kernel, shape.c_str(), dtype, ms, bytes, gbps,
                gbps / c.copy_gbps);
        fflush(c.times_csv);
    }
}

// |a - b| / tol with NaN and infinities required to match exactly (returns 0 or +inf). Never NaN: the
// callers fold with std::max, which would silently drop a NaN ratio.
inline double err_ratio(double expected, double actual, double tol) {
    if (std::isnan(expected)) return std::isnan(actual) ? 0.0 : INFINITY;
    if (std::isinf(expected)) return expected == actual ? 0.0 : INFINITY;
    if (!std::isfinite(actual)) return INFINITY;
    return fabs(expected - actual) / tol;
}

// A confident token's label gradient (check_policy_loss, check_fused_linear): the worst relative error of got(r)
// against the double reference ref(r) over rows [0, n), bound 0.5 as PolicyLossTest's CPU check, printed with the
// rows' range of 1 - p_y (from their reference log-probs lp[r]) and recorded as `kernel`.
template <class Ref, class Got>
inline void record_confident_label(Ctx& c, const char* kernel, const std::string& what, int64_t n, Ref ref, Got got,
                                   const std::vector<double>& lp) {
    double worst = 0, qlo = 1, qhi = 0;
    for (int64_t r = 0; r < n; ++r) {
        const double want = ref(r);
        worst = std::max(worst, err_ratio(want, got(r), 0.5 * fabs(want)));
        qlo = std::min(qlo, -expm1(lp[r]));
        qhi = std::max(qhi, -expm1(lp[r]));
    }
    printf("  %-28s %-60s worst relative error of g_y %.3g (bound 0.5; 1 - p_y %.2g .. %.2g)\n", kernel, what.c_str(),
           0.5 * worst, qlo, qhi);
    record_check(c, kernel, what, worst);
}

// Random logits like the Java tests' Logits.random: N(0, 3²) rows, with ±1e4 rows, small rows, rows
// with some -inf, point-mass rows; junk (NaN, +inf) in padding columns the kernels must never read.
inline std::vector<float> random_logits(std::mt19937_64& rng, int64_t rows, int64_t stride, int64_t limit,
                                        bool specials) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(rows * stride);
    for (int64_t r = 0; r < rows; ++r) {
        int kind = specials ? (int)(rng() % 6) : 0;
        float scale = kind == 1 ? 1e4f : (kind == 2 ? 0.01f : 3.0f);
        for (int64_t j = 0; j < stride; ++j)
            x[r * stride + j] = j >= limit ? (j % 2 ? NAN : INFINITY) : nd(rng) * scale;
        if (kind == 3 && limit > 1) {
            for (int64_t k = 0; k < std::max<int64_t>(1, limit / 7); ++k) x[r * stride + 1 + rng() % (limit - 1)] = -INFINITY;
            x[r * stride] = 0.5f;
        }
        if (kind == 4 && limit > 1) {
            int64_t keep = rng() % limit;
            for (int64_t j = 0; j < limit; ++j)
                if (j != keep) x[r * stride + j] = -INFINITY;
        }
    }
    return x;
}

// Host copies of a float matrix in each logits dtype, and the values a kernel reading it sees.
inline std::vector<uint16_t> to_half(const std::vector<float>& x, int dtype) {
    std::vector<uint16_t> h(x.size());
    for (size_t i = 0; i < x.size(); ++i) h[i] = dtype == ARBOR_BF16 ? arbor::f32_to_bf16(x[i]) : arbor::f32_to_f16(x[i]);
    return h;
}
inline std::vector<double> as_seen(const std::vector<float>& x, int dtype) {
    std::vector<double> d(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
        float v = x[i];
        if (dtype == ARBOR_BF16) v = arbor::bf16_to_f32(arbor::f32_to_bf16(v));
        if (dtype == ARBOR_F16) v = arbor::f16_to_f32(arbor::f32_to_f16(v));
        d[i] = v;
    }
    return d;
}
inline float from_half(uint16_t h, int dtype) { return dtype == ARBOR_BF16 ? arbor::bf16_to_f32(h) : arbor::f16_to_f32(h); }
inline const char* dtype_name(int dtype) { return dtype == ARBOR_F32 ? "fp32" : dtype == ARBOR_BF16 ? "bf16" : "fp16"; }

// Check functions, one per kernel family (check_<kernel>.cu).
void check_token_stats(Ctx& c);
void check_policy_loss(Ctx& c);
void check_advantages(Ctx& c);
void check_sampling(Ctx& c);
void check_fused_linear(Ctx& c);

}  // namespace harness

#endif
