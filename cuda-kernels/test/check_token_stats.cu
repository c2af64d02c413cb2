// GPU check of the token-statistics kernels (cuda-kernels/token_stats.cuh) against the scalar double
// reference (native/src/reference.cpp), then timing at the reference shapes of gpu-check.sh.
//
// Tolerances (the reference runs on exactly the values the kernel reads, so they hold for every dtype):
// forward |err| <= 4e-5 (1 + ln V) + 2e-6 max|z|; backward per element
// |err| <= (|g_lp| + |g_H| (1 + ln V)) (4e-5 + 2e-6 max|z|) / T — twice the CPU test's, for __expf.
#include "harness.h"

namespace harness {

namespace {

struct Case {
    int64_t rows, vocab, stride, limit;
    float temperature;
    bool masked, i64;
};

// Deterministic pseudo-random fill on the device (for inputs too large to generate on the host).
__global__ void fill_logits(uint16_t* bf16, float* f32, int64_t n, uint64_t seed, float scale) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ull + seed;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        float u1 = ((z >> 40) + 0.5f) / 16777216.0f, u2 = (((z >> 16) & 0xFFFFFF) + 0.5f) / 16777216.0f;
        float v = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2) * scale;
        if (bf16) bf16[i] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
        if (f32) f32[i] = v;
    }
}

__global__ void fill_labels(int64_t* labels, int64_t n, int64_t vocab) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        labels[i] = (i * 2654435761ll) % vocab;
}

int fwd(int dtype, const void* x, const Case& k, const void* labels, const uint8_t* mask, float* lp, float* h,
        float* lse) {
    int lt = k.i64 ? ARBOR_I64 : ARBOR_I32;
    if (dtype == ARBOR_F32)
        return arbor_cuda_token_stats_fwd_f32((const float*)x, k.rows, k.vocab, k.stride, k.limit, labels, lt,
                                              k.temperature, mask, lp, h, lse, nullptr);
    if (dtype == ARBOR_BF16)
        return arbor_cuda_token_stats_fwd_bf16((const uint16_t*)x, k.rows, k.vocab, k.stride, k.limit, labels, lt,
                                               k.temperature, mask, lp, h, lse, nullptr);
    return arbor_cuda_token_stats_fwd_f16((const uint16_t*)x, k.rows, k.vocab, k.stride, k.limit, labels, lt,
                                          k.temperature, mask, lp, h, lse, nullptr);
}

int bwd(int dtype, const void* x, const Case& k, const void* labels, const uint8_t* mask, const float* lse,
        const float* h, const float* glp, const float* gh, void* g, int gdtype) {
    int lt = k.i64 ? ARBOR_I64 : ARBOR_I32;
    if (dtype == ARBOR_F32)
        return arbor_cuda_token_stats_bwd_f32((const float*)x, k.rows, k.vocab, k.stride, k.limit, labels, lt,
                                              k.temperature, mask, lse, h, glp, gh, g, gdtype, k.stride, nullptr);
    if (dtype == ARBOR_BF16)
        return arbor_cuda_token_stats_bwd_bf16((const uint16_t*)x, k.rows, k.vocab, k.stride, k.limit, labels, lt,
                                               k.temperature, mask, lse, h, glp, gh, g, gdtype, k.stride, nullptr);
    return arbor_cuda_token_stats_bwd_f16((const uint16_t*)x, k.rows, k.vocab, k.stride, k.limit, labels, lt,
                                          k.temperature, mask, lse, h, glp, gh, g, gdtype, k.stride, nullptr);
}

void check_case(Ctx& c, const Case& k, int dtype) {
    std::mt19937_64& rng = c.rng;
    std::vector<float> x = random_logits(rng, k.rows, k.stride, k.limit, true);
    std::vector<double> seen = as_seen(x, dtype);
    std::vector<int64_t> labels64(k.rows);
    std::vector<int32_t> labels32(k.rows);
    std::vector<uint8_t> mask(k.rows, 1);
    for (int64_t r = 0; r < k.rows; ++r) {
        if (k.masked && rng() % 4 == 0) mask[r] = 0;
        labels64[r] = mask[r] ? (int64_t)(rng() % k.limit) : -100;
        labels32[r] = (int32_t)labels64[r];
    }
    std::vector<double> rlp(k.rows), rh(k.rows), rlse(k.rows);
    arbor_ref_token_stats_fwd(seen.data(), k.rows, k.vocab, k.stride, k.limit, labels64.data(), k.temperature,
                              mask.data(), rlp.data(), rh.data(), rlse.data());

    DevBuf<float> dx32(dtype == ARBOR_F32 ? x : std::vector<float>());
    DevBuf<uint16_t> dx16(dtype == ARBOR_F32 ? std::vector<uint16_t>() : to_half(x, dtype));
    const void* dx = dtype == ARBOR_F32 ? (const void*)dx32.p : (const void*)dx16.p;
    DevBuf<int64_t> dl64(labels64);
    DevBuf<int32_t> dl32(labels32);
    const void* dl = k.i64 ? (const void*)dl64.p : (const void*)dl32.p;
    DevBuf<uint8_t> dm(mask);
    DevBuf<float> dlp(k.rows), dh(k.rows), dlse(k.rows);
    int rc = fwd(dtype, dx, k, dl, dm.p, dlp.p, dh.p, dlse.p);
    CUDA_OK(cudaDeviceSynchronize());
    char what[160];
    snprintf(what, sizeof what, "rows=%lld V=%lld stride=%lld limit=%lld T=%.1f %s%s %s", (long long)k.rows,
             (long long)k.vocab, (long long)k.stride, (long long)k.limit, k.temperature, k.masked ? "masked " : "",
             k.i64 ? "i64" : "i32", dtype_name(dtype));
    if (rc != ARBOR_OK) {
        record_check(c, "token_stats_fwd", std::string(what) + " rc!=0", INFINITY);
        return;
    }
    std::vector<float> lp = dlp.download(), h = dh.download(), lse = dlse.download();
    double worst = 0;
    const double lnv = log((double)k.limit);
    std::vector<double> zmax(k.rows, 0.0);
    for (int64_t r = 0; r < k.rows; ++r) {
        for (int64_t j = 0; j < k.limit; ++j) {
            double v = seen[r * k.stride + j];
            if (std::isfinite(v)) zmax[r] = std::max(zmax[r], fabs(v / k.temperature));
        }
        double tol = 4e-5 * (1 + lnv) + 2e-6 * zmax[r];
        worst = std::max({worst, err_ratio(rlp[r], lp[r], tol), err_ratio(rh[r], h[r], tol), err_ratio(rlse[r], lse[r], tol)});
    }
    record_check(c, "token_stats_fwd", what, worst);

    // backward into fp32, from saved statistics, vs the reference gradient
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> glp(k.rows), gh(k.rows);
    for (int64_t r = 0; r < k.rows; ++r) {
        glp[r] = nd(rng);
        gh[r] = nd(rng);
    }
    std::vector<double> glpd(glp.begin(), glp.end()), ghd(gh.begin(), gh.end()), rg(k.rows * k.stride);
    arbor_ref_token_stats_bwd(seen.data(), k.rows, k.vocab, k.stride, k.limit, labels64.data(), k.temperature,
                              mask.data(), glpd.data(), ghd.data(), rg.data());
    DevBuf<float> dglp(glp), dgh(gh), dg(k.rows * k.stride);
    rc = bwd(dtype, dx, k, dl, dm.p, dlse.p, dh.p, dglp.p, dgh.p, dg.p, ARBOR_F32);
    CUDA_OK(cudaDeviceSynchronize());
    if (rc != ARBOR_OK) {
        record_check(c, "token_stats_bwd", std::string(what) + " rc!=0", INFINITY);
        return;
    }
    std::vector<float> g = dg.download();
    worst = 0;
    for (int64_t r = 0; r < k.rows; ++r) {
        double tol = (fabs(glp[r]) + fabs(gh[r]) * (1 + lnv)) * (4e-5 + 2e-6 * zmax[r]) / k.temperature + 1e-30;
        // a row without a distribution: the kernels (CPU and CUDA) NaN all `vocab` columns, the reference
        // only the first `limit`
        const bool dead = std::isnan(rg[r * k.stride]);
        for (int64_t j = 0; j < k.vocab; ++j) {
            const double e = dead && j >= k.limit ? NAN : rg[r * k.stride + j];
            worst = std::max(worst, err_ratio(e, g[r * k.stride + j], tol));
        }
    }
    record_check(c, "token_stats_bwd", what, worst);

    // recompute path (no saved stats) and, for half types, in place over the logits: the in-place
    // result must equal the out-of-place half-precision output exactly
    DevBuf<float> dg2(k.rows * k.stride);
    rc = bwd(dtype, dx, k, dl, dm.p, nullptr, nullptr, dglp.p, dgh.p, dg2.p, ARBOR_F32);
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<float> g2 = dg2.download();
    double diff = 0;
    for (int64_t r = 0; r < k.rows; ++r)
        for (int64_t j = 0; j < k.vocab; ++j) {
            double tol = (fabs(glp[r]) + fabs(gh[r]) * (1 + lnv)) * (4e-5 + 2e-6 * zmax[r]) / k.temperature + 1e-30;
            diff = std::max(diff, err_ratio(g[r * k.stride + j], g2[r * k.stride + j], tol));
        }
    record_check(c, "token_stats_bwd_recompute", what, rc == ARBOR_OK ? diff : INFINITY);

    // The same logits one element past a 16-byte boundary (a view into a larger tensor): the base pointer
    // is misaligned whatever the stride, so every load must take the scalar path; forward and
    // backward (recompute) must match the reference as above.
    {
        const size_t esz = dtype == ARBOR_F32 ? 4 : 2, bytes = (size_t)(k.rows * k.stride) * esz;
        DevBuf<uint8_t> shifted(bytes + 16);
        void* dxo = shifted.p + esz;
        CUDA_OK(cudaMemcpy(dxo, dx, bytes, cudaMemcpyDeviceToDevice));
        DevBuf<float> olp(k.rows), oh(k.rows), olse(k.rows), og(k.rows * k.stride);
        int rco = fwd(dtype, dxo, k, dl, dm.p, olp.p, oh.p, olse.p);
        rco |= bwd(dtype, dxo, k, dl, dm.p, nullptr, nullptr, dglp.p, dgh.p, og.p, ARBOR_F32);
        CUDA_OK(cudaDeviceSynchronize());
        std::vector<float> lpo = olp.download(), ho = oh.download(), lseo = olse.download(), go = og.download();
        double owe = 0;
        for (int64_t r = 0; r < k.rows; ++r) {
            const double ftol = 4e-5 * (1 + lnv) + 2e-6 * zmax[r];
            owe = std::max({owe, err_ratio(rlp[r], lpo[r], ftol), err_ratio(rh[r], ho[r], ftol),
                            err_ratio(rlse[r], lseo[r], ftol)});
            const double btol = (fabs(glp[r]) + fabs(gh[r]) * (1 + lnv)) * (4e-5 + 2e-6 * zmax[r]) / k.temperature + 1e-30;
            const bool dead = std::isnan(rg[r * k.stride]);
            for (int64_t j = 0; j < k.vocab; ++j)
                owe = std::max(owe, err_ratio(dead && j >= k.limit ? NAN : rg[r * k.stride + j], go[r * k.stride + j], btol));
        }
        record_check(c, "token_stats_misaligned_base", what, rco == ARBOR_OK ? owe : INFINITY);
    }
    if (dtype != ARBOR_F32) {
        DevBuf<uint16_t> dout(k.rows * k.stride);
        CUDA_OK(cudaMemset(dout.p, 0, dout.n * 2));
        int rc1 = bwd(dtype, dx, k, dl, dm.p, dlse.p, dh.p, dglp.p, dgh.p, dout.p, dtype);
        int rc2 = bwd(dtype, dx, k, dl, dm.p, dlse.p, dh.p, dglp.p, dgh.p, (void*)dx, dtype);
        CUDA_OK(cudaDeviceSynchronize());
        std::vector<uint16_t> a = dout.download(), b = dx16.download();
        int64_t mismatch = 0;
        for (int64_t r = 0; r < k.rows; ++r)
            for (int64_t j = 0; j < k.vocab; ++j) mismatch += a[r * k.stride + j] != b[r * k.stride + j];
        if (rc1 || rc2) record_check(c, "token_stats_bwd_inplace", std::string(what) + " rc!=0", INFINITY);
        else record_mismatches(c, "token_stats_bwd_inplace", what, (double)mismatch);
        // the half-precision output is the fp32 one (same kernel, same saved statistics) rounded once
        const double ulp = dtype == ARBOR_BF16 ? 0x1p-8 : 0x1p-11;  // twice the relative rounding bound
        double herr = 0;
        for (int64_t r = 0; r < k.rows; ++r)
            for (int64_t j = 0; j < k.vocab; ++j) {
                const double e = g[r * k.stride + j];
                herr = std::max(herr, err_ratio(e, from_half(a[r * k.stride + j], dtype), fabs(e) * ulp + 0x1p-24));
            }
        record_check(c, "token_stats_bwd_half_out", what, (rc1 || rc2) ? INFINITY : herr);
    }
}

// At the bf16 reference shape rows x vocab exceeds 2^31: check the first, middle and last rows (64-bit
// element offsets) of the forward and backward against the double reference, with nonzero upstream
// gradients (the timings ran with zero ones). The backward is written in the logits dtype, so its
// tolerance adds that dtype's rounding (as token_stats_bwd_half_out).
void check_reference_rows(Ctx& c, int dtype, const void* x, const Case& k, const int64_t* labels,
                          const std::string& shape) {
    const int64_t rows[] = {0, k.rows / 2, k.rows - 1};
    const size_t esz = dtype == ARBOR_F32 ? 4 : 2;
    const float glp_v = 0.75f, gh_v = -1.25f;
    DevBuf<float> lp(k.rows), h(k.rows), lse(k.rows), glp(std::vector<float>(k.rows, glp_v)),
        gh(std::vector<float>(k.rows, gh_v));
    DevBuf<uint8_t> g(size_t(k.rows * k.stride) * esz);
    int rc = fwd(dtype, x, k, labels, nullptr, lp.p, h.p, lse.p);
    rc |= bwd(dtype, x, k, labels, nullptr, lse.p, h.p, glp.p, gh.p, g.p, dtype);
    CUDA_OK(cudaDeviceSynchronize());
    const std::vector<float> lph = lp.download(), hh = h.download(), lseh = lse.download();
    const double lnv = log((double)k.limit), ulp = dtype == ARBOR_F32 ? 0.0 : dtype == ARBOR_BF16 ? 0x1p-8 : 0x1p-11;
    double fw = 0, bw = 0;
    for (int64_t r : rows) {
        std::vector<uint8_t> raw(k.vocab * esz), graw(k.vocab * esz);
        CUDA_OK(cudaMemcpy(raw.data(), (const uint8_t*)x + size_t(r * k.stride) * esz, raw.size(), cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(graw.data(), g.p + size_t(r * k.stride) * esz, graw.size(), cudaMemcpyDeviceToHost));
        int64_t y;
        CUDA_OK(cudaMemcpy(&y, labels + r, sizeof y, cudaMemcpyDeviceToHost));
        std::vector<double> seen(k.vocab), gseen(k.vocab), rg(k.vocab);
        double zmax = 0;
        for (int64_t j = 0; j < k.vocab; ++j) {
            if (dtype == ARBOR_F32) {
                seen[j] = ((const float*)raw.data())[j];
                gseen[j] = ((const float*)graw.data())[j];
            } else {
                seen[j] = from_half(((const uint16_t*)raw.data())[j], dtype);
                gseen[j] = from_half(((const uint16_t*)graw.data())[j], dtype);
            }
            zmax = std::max(zmax, fabs(seen[j] / k.temperature));
        }
        double rlp, rh, rlse;
        const double dglp = glp_v, dgh = gh_v;
        arbor_ref_token_stats_fwd(seen.data(), 1, k.vocab, k.vocab, k.limit, &y, k.temperature, nullptr, &rlp, &rh, &rlse);
        arbor_ref_token_stats_bwd(seen.data(), 1, k.vocab, k.vocab, k.limit, &y, k.temperature, nullptr, &dglp, &dgh,
                                  rg.data());
        const double ftol = 4e-5 * (1 + lnv) + 2e-6 * zmax;
        fw = std::max({fw, err_ratio(rlp, lph[r], ftol), err_ratio(rh, hh[r], ftol), err_ratio(rlse, lseh[r], ftol)});
        const double btol = (fabs(glp_v) + fabs(gh_v) * (1 + lnv)) * (4e-5 + 2e-6 * zmax) / k.temperature + 1e-30;
        for (int64_t j = 0; j < k.vocab; ++j) bw = std::max(bw, err_ratio(rg[j], gseen[j], btol + fabs(rg[j]) * ulp + 0x1p-24));
    }
    const std::string what = shape + " " + dtype_name(dtype) + " rows 0, T/2, T-1";
    record_check(c, "token_stats_fwd_large", what, rc == ARBOR_OK ? fw : INFINITY);
    record_check(c, "token_stats_bwd_large", what, rc == ARBOR_OK ? bw : INFINITY);
}

void time_reference_shapes(Ctx& c) {
    printf("timing (median of 20, CUDA events):\n");
    struct Shape { int64_t rows, vocab; int dtype; };
    for (Shape s : {Shape{16384, 151936, ARBOR_BF16}, Shape{4096, 32000, ARBOR_F32}}) {
        const int64_t n = s.rows * s.vocab;
        const int esz = s.dtype == ARBOR_F32 ? 4 : 2;
        DevBuf<uint16_t> x16(s.dtype == ARBOR_F32 ? 0 : n), g16(s.dtype == ARBOR_F32 ? 0 : n);
        DevBuf<float> x32(s.dtype == ARBOR_F32 ? n : 0), g32(s.dtype == ARBOR_F32 ? n : 0);
        fill_logits<<<4096, 256>>>(s.dtype == ARBOR_F32 ? nullptr : x16.p, s.dtype == ARBOR_F32 ? x32.p : nullptr, n,
                                   1234, 3.0f);
        DevBuf<int64_t> lab(s.rows);
        fill_labels<<<64, 256>>>(lab.p, s.rows, s.vocab);
        DevBuf<float> lp(s.rows), h(s.rows), lse(s.rows), glp(s.rows), gh(s.rows);
        CUDA_OK(cudaMemset(glp.p, 0, s.rows * 4));
        CUDA_OK(cudaMemset(gh.p, 0, s.rows * 4));
        CUDA_OK(cudaDeviceSynchronize());
        Case k{s.rows, s.vocab, s.vocab, s.vocab, 1.0f, false, true};
        const void* x = s.dtype == ARBOR_F32 ? (const void*)x32.p : (const void*)x16.p;
        void* g = s.dtype == ARBOR_F32 ? (void*)g32.p : (void*)g16.p;
        char shape[64];
        snprintf(shape, sizeof shape, "%lldx%lld", (long long)s.rows, (long long)s.vocab);
        double ms = time_ms([&] { fwd(s.dtype, x, k, lab.p, nullptr, lp.p, h.p, lse.p); });
        record_time(c, "token_stats_fwd", shape, dtype_name(s.dtype), ms, (double)n * esz);
        ms = time_ms([&] { bwd(s.dtype, x, k, lab.p, nullptr, lse.p, h.p, glp.p, gh.p, g, s.dtype); });
        record_time(c, "token_stats_bwd", shape, dtype_name(s.dtype), ms, 2.0 * n * esz);
        ms = time_ms([&] {
            fwd(s.dtype, x, k, lab.p, nullptr, lp.p, h.p, lse.p);
            bwd(s.dtype, x, k, lab.p, nullptr, lse.p, h.p, glp.p, gh.p, g, s.dtype);
        });
        record_time(c, "token_stats_fwd+bwd", shape, dtype_name(s.dtype), ms, 3.0 * n * esz);
        CUDA_OK(cudaGetLastError());
        check_reference_rows(c, s.dtype, x, k, lab.p, shape);
    }
}

}  // namespace

void check_token_stats(Ctx& c) {
    printf("token stats: correctness vs the double reference\n");
    const Case cases[] = {
        {1, 1, 1, 1, 1.0f, false, false},          {7, 3, 3, 3, 0.5f, true, true},
        {33, 17, 24, 15, 1.7f, true, false},       {64, 1000, 1000, 997, 1.0f, true, true},
        {257, 4099, 4100, 4099, 0.5f, false, false}, {5, 32000, 32008, 32000, 1.0f, true, true},
        {3, 151936, 151936, 151929, 1.7f, false, true}, {2, 151936, 151940, 151936, 1.0f, true, false},
        // more rows than row_grid()'s 2^20 blocks: some blocks take a second row (shared-memory reuse)
        {(1 << 20) + 7, 5, 8, 5, 1.0f, true, false},
    };
    for (int dtype : {ARBOR_F32, ARBOR_BF16, ARBOR_F16})
        for (const Case& k : cases) check_case(c, k, dtype);
    if (!c.quick) time_reference_shapes(c);
}

}  // namespace harness
