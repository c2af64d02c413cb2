// GPU check of the sampling kernels (cuda-kernels/sampling.cuh):
//   1. tokens: the CUDA kernel must return exactly the CPU kernel's tokens (arbor_cpu_sample_*, the
//      one the JUnit tests check against the exact distribution) on every row of many shapes,
//      dtypes, seeds and parameter sets — uniform and per-row, greedy, top-k, top-p, min-p, masked
//      rows, point-mass and -inf rows, padded vocabularies, NaN/inf junk in the padding;
//   2. logprob and entropy against the scalar double reference (arbor_ref_token_stats_fwd at the
//      row's temperature, label = token), with token-stats' GPU tolerances
//      4e-5 (1 + ln V) + 2e-6 max|z|; logprob_sampled against the CPU kernel's within the same;
//   3. timing at B = 256, V = 151936 (bf16 and fp32): pure temperature, top-k + top-p, greedy.
#include "harness.h"

namespace harness {

namespace {

struct SCase {
    int64_t rows, vocab, stride, limit;
    float t;
    int32_t k;
    float p, mp;
    bool per_row, masked, i64;
};

struct Outputs {
    std::vector<int64_t> tokens;
    std::vector<float> lps, lp, h;
};

struct RowArrays {
    std::vector<float> t, p, mp;
    std::vector<int32_t> k;
    std::vector<uint64_t> seeds, keys, steps;
    std::vector<uint8_t> mask;
};

int call(bool cuda, int dtype, const void* x, const SCase& c, uint64_t seed, uint64_t step, const float* t,
         const int32_t* k, const float* p, const float* mp, const uint64_t* seeds, const uint64_t* keys,
         const uint64_t* steps, const uint8_t* mask, void* tok, float* lps, float* lp, float* h) {
    const int td = c.i64 ? ARBOR_I64 : ARBOR_I32;
#define ARGS c.rows, c.vocab, c.stride, c.limit, c.t, t, c.k, k, c.p, p, c.mp, mp, seed, seeds, keys, step, steps, mask, tok, td, lps, lp, h
    if (cuda) {
        if (dtype == ARBOR_F32) return arbor_cuda_sample_f32((const float*)x, ARGS, nullptr);
        if (dtype == ARBOR_BF16) return arbor_cuda_sample_bf16((const uint16_t*)x, ARGS, nullptr);
        return arbor_cuda_sample_f16((const uint16_t*)x, ARGS, nullptr);
    }
    if (dtype == ARBOR_F32) return arbor_cpu_sample_f32((const float*)x, ARGS, 0);
    if (dtype == ARBOR_BF16) return arbor_cpu_sample_bf16((const uint16_t*)x, ARGS, 0);
    return arbor_cpu_sample_f16((const uint16_t*)x, ARGS, 0);
#undef ARGS
}

std::vector<int64_t> read_tokens(const void* tok, int64_t rows, bool i64) {
    std::vector<int64_t> t(rows);
    for (int64_t r = 0; r < rows; ++r) t[r] = i64 ? ((const int64_t*)tok)[r] : ((const int32_t*)tok)[r];
    return t;
}

RowArrays make_rows(std::mt19937_64& rng, const SCase& c) {
    RowArrays a;
    const float temps[] = {0.0f, 0.3f, 0.7f, 1.0f, 1.6f};
    const int32_t ks[] = {0, 1, 2, 7, 50, 1000};
    const float ps[] = {1.0f, 0.95f, 0.7f, 0.3f, 1e-6f};
    const float mps[] = {0.0f, 0.0f, 0.02f, 0.5f};
    for (int64_t r = 0; r < c.rows; ++r) {
        a.t.push_back(temps[rng() % 5]);
        a.k.push_back(ks[rng() % 6]);
        a.p.push_back(ps[rng() % 5]);
        a.mp.push_back(mps[rng() % 4]);
        a.seeds.push_back(rng());
        a.keys.push_back(rng());
        a.steps.push_back(rng() & 0xffffffffull);
        a.mask.push_back(c.masked && rng() % 5 == 0 ? 0 : 1);
    }
    return a;
}

void check_case(Ctx& ctx, const SCase& c, int dtype, uint64_t seed) {
    std::mt19937_64& rng = ctx.rng;
    std::vector<float> x = random_logits(rng, c.rows, c.stride, c.limit, true);
    std::vector<double> seen = as_seen(x, dtype);
    RowArrays a = make_rows(rng, c);
    const uint64_t step = rng() & 0xffffffffull;
    std::vector<uint16_t> xh = dtype == ARBOR_F32 ? std::vector<uint16_t>() : to_half(x, dtype);
    const void* hx = dtype == ARBOR_F32 ? (const void*)x.data() : (const void*)xh.data();

    // CPU kernel on host memory
    const bool pr = c.per_row;
    std::vector<int64_t> tok_cpu_raw(c.rows);
    std::vector<float> lps_c(c.rows), lp_c(c.rows), h_c(c.rows);
    int rc_cpu = call(false, dtype, hx, c, seed, step, pr ? a.t.data() : nullptr, pr ? a.k.data() : nullptr,
                      pr ? a.p.data() : nullptr, pr ? a.mp.data() : nullptr, pr ? a.seeds.data() : nullptr,
                      pr ? a.keys.data() : nullptr, pr ? a.steps.data() : nullptr, c.masked ? a.mask.data() : nullptr,
                      tok_cpu_raw.data(), lps_c.data(), lp_c.data(), h_c.data());

    // CUDA kernel on device copies
    DevBuf<float> dx32(dtype == ARBOR_F32 ? x : std::vector<float>());
    DevBuf<uint16_t> dx16(xh);
    const void* dx = dtype == ARBOR_F32 ? (const void*)dx32.p : (const void*)dx16.p;
    DevBuf<float> dt(a.t), dp(a.p), dmp(a.mp);
    DevBuf<int32_t> dk(a.k);
    DevBuf<uint64_t> dseeds(a.seeds), dkeys(a.keys), dsteps(a.steps);
    DevBuf<uint8_t> dmask(a.mask);
    DevBuf<int64_t> dtok(c.rows);
    DevBuf<float> dlps(c.rows), dlp(c.rows), dh(c.rows);
    int rc_gpu = call(true, dtype, dx, c, seed, step, pr ? dt.p : nullptr, pr ? dk.p : nullptr, pr ? dp.p : nullptr,
                      pr ? dmp.p : nullptr, pr ? dseeds.p : nullptr, pr ? dkeys.p : nullptr, pr ? dsteps.p : nullptr,
                      c.masked ? dmask.p : nullptr, dtok.p, dlps.p, dlp.p, dh.p);
    CUDA_OK(cudaDeviceSynchronize());

    char what[200];
    snprintf(what, sizeof what, "rows=%lld V=%lld stride=%lld limit=%lld %s T=%.1f k=%d p=%.2g mp=%.2g%s%s seed=%llu",
             (long long)c.rows, (long long)c.vocab, (long long)c.stride, (long long)c.limit, dtype_name(dtype), c.t,
             c.k, c.p, c.mp, pr ? " per-row" : "", c.masked ? " masked" : "", (unsigned long long)seed);
    // ARBOR_ERR_NAN: some row has no distribution (e.g. a 1e4-scale row overflowing fp16 to inf)
    if ((rc_cpu != ARBOR_OK && rc_cpu != ARBOR_ERR_NAN) || rc_gpu != ARBOR_OK) {
        record_check(ctx, "sample", std::string(what) + " rc!=0", INFINITY);
        return;
    }
    std::vector<int64_t> tc = read_tokens(tok_cpu_raw.data(), c.rows, c.i64);
    std::vector<int64_t> tg_raw = dtok.download();
    std::vector<int64_t> tg = read_tokens(tg_raw.data(), c.rows, c.i64);
    // An untruncated row (T > 0, no min-p / top-k / top-p) draws by the chunked inverse CDF on the CPU and by
    // the Gumbel race on CUDA (docs/sampling.md): the same distribution, different tokens. Every other row
    // must draw the CPU's token exactly.
    auto untruncated = [&](int64_t r) {
        const float t = pr ? a.t[r] : c.t, p = pr ? a.p[r] : c.p, mp = pr ? a.mp[r] : c.mp;
        const int32_t k = pr ? a.k[r] : c.k;
        return t > 0.0f && !(mp > 0.0f) && !(k > 0 && k < c.limit) && !(p < 1.0f);
    };
    int64_t mismatches = 0;
    for (int64_t r = 0; r < c.rows; ++r) mismatches += !untruncated(r) && tc[r] != tg[r];
    record_mismatches(ctx, "sample_tokens_eq_cpu", what, (double)mismatches);

    std::vector<float> lps = dlps.download(), lp = dlp.download(), h = dh.download();
    double worst = 0, worst_s = 0;
    const double lnv = log((double)c.limit);
    for (int64_t r = 0; r < c.rows; ++r) {
        const bool valid = !c.masked || a.mask[r];
        if (!valid) {
            if (tg[r] != -1 || lp[r] != 0.0f || h[r] != 0.0f) worst = INFINITY;
            continue;
        }
        const double t = pr ? a.t[r] : c.t;
        const double tt = t == 0.0 ? 1.0 : t;
        const int64_t label = tg[r] >= 0 && tg[r] < c.limit ? tg[r] : 0;
        double rlp, rh;
        arbor_ref_token_stats_fwd(seen.data() + r * c.stride, 1, c.vocab, c.stride, c.limit, &label, tt, nullptr, &rlp,
                                  &rh, nullptr);
        double zmax = 0;
        for (int64_t j = 0; j < c.limit; ++j) {
            const double v = seen[r * c.stride + j];
            if (std::isfinite(v)) zmax = std::max(zmax, fabs(v / tt));
        }
        if (tg[r] == -1) {  // only a row without a distribution may have no token
            if (!std::isnan(rlp) || !std::isnan(lp[r])) worst = INFINITY;
            continue;
        }
        const double tol = 4e-5 * (1 + lnv) + 2e-6 * zmax;
        worst = std::max({worst, err_ratio(rlp, lp[r], tol), err_ratio(rh, h[r], tol)});
        // untruncated: logprob_sampled = logprob of the GPU's own token; otherwise the CPU's (same token)
        worst_s = std::max(worst_s, untruncated(r) ? err_ratio(rlp, lps[r], tol) : err_ratio(lps_c[r], lps[r], 2 * tol));
    }
    record_check(ctx, "sample_logprob_entropy", what, worst);
    record_check(ctx, "sample_logprob_sampled", what, worst_s);
}

// A row whose every logit is NaN (GPU: token -1, NaN outputs; CPU: ARBOR_ERR_NAN and the same).
void check_nan_row(Ctx& ctx) {
    SCase c{3, 40, 40, 40, 1.0f, 0, 1.0f, 0.0f, false, false, false};
    std::vector<float> x = random_logits(ctx.rng, c.rows, c.stride, c.limit, false);
    x[1 * 40 + 17] = NAN;
    DevBuf<float> dx(x);
    DevBuf<int64_t> dtok(c.rows);
    DevBuf<float> dlp(c.rows);
    int rc = call(true, ARBOR_F32, dx.p, c, 5, 0, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                  dtok.p, nullptr, dlp.p, nullptr);
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<int64_t> raw = dtok.download();
    std::vector<int64_t> t = read_tokens(raw.data(), c.rows, false);
    std::vector<float> lp = dlp.download();
    bool ok = rc == ARBOR_OK && t[1] == -1 && std::isnan(lp[1]) && t[0] >= 0 && t[2] >= 0;
    record_check(ctx, "sample_nan_row", "row 1 has a NaN: token -1, NaN logprob, other rows sampled", ok ? 0.0 : INFINITY);
}

// Deterministic pseudo-random logits on the device (N(0, 3^2)-like) for the timing shapes.
__global__ void fill_sample_logits(uint16_t* bf16, float* f32, int64_t n, uint64_t seed) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ull + seed;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        const float u1 = ((z >> 40) + 0.5f) / 16777216.0f, u2 = (((z >> 16) & 0xFFFFFF) + 0.5f) / 16777216.0f;
        const float v = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2) * 3.0f;
        if (bf16) bf16[i] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
        if (f32) f32[i] = v;
    }
}

void time_reference_shape(Ctx& ctx) {
    printf("timing (median of 20, CUDA events):\n");
    const int64_t rows = 256, vocab = 151936;
    for (int dtype : {ARBOR_BF16, ARBOR_F32}) {
        const int64_t n = rows * vocab;
        const int esz = dtype == ARBOR_F32 ? 4 : 2;
        DevBuf<uint16_t> x16(dtype == ARBOR_F32 ? 0 : n);
        DevBuf<float> x32(dtype == ARBOR_F32 ? n : 0);
        fill_sample_logits<<<4096, 256>>>(dtype == ARBOR_F32 ? nullptr : x16.p, dtype == ARBOR_F32 ? x32.p : nullptr, n, 77);
        CUDA_OK(cudaDeviceSynchronize());
        const void* x = dtype == ARBOR_F32 ? (const void*)x32.p : (const void*)x16.p;
        DevBuf<int64_t> tok(rows);
        DevBuf<float> lps(rows), lp(rows), h(rows);
        char shape[64];
        snprintf(shape, sizeof shape, "%lldx%lld", (long long)rows, (long long)vocab);
        struct Mode {
            const char* name;
            float t;
            int32_t k;
            float p;
        };
        for (Mode m : {Mode{"sample", 1.0f, 0, 1.0f}, Mode{"sample_topk_topp", 1.0f, 50, 0.9f},
                       Mode{"sample_topp", 1.0f, 0, 0.9f}, Mode{"sample_greedy", 0.0f, 0, 1.0f}}) {
            SCase c{rows, vocab, vocab, vocab, m.t, m.k, m.p, 0.0f, false, false, true};
            uint64_t step = 0;
            double ms = time_ms([&] {
                call(true, dtype, x, c, 1234, step++, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                     nullptr, tok.p, lps.p, lp.p, h.p);
            });
            record_time(ctx, m.name, shape, dtype_name(dtype), ms, (double)n * esz);
        }
        CUDA_OK(cudaGetLastError());
    }
}

}  // namespace

void check_sampling(Ctx& c) {
    printf("sampling: CUDA tokens vs the CPU kernel, statistics vs the double reference\n");
    const SCase cases[] = {
            // rows, vocab, stride, limit, T, k, p, min_p, per_row, masked, i64
            {1, 1, 1, 1, 1.0f, 0, 1.0f, 0.0f, false, false, false},
            {64, 3, 3, 3, 0.7f, 0, 1.0f, 0.0f, false, true, true},
            {97, 17, 24, 15, 1.0f, 5, 1.0f, 0.0f, false, true, false},
            {128, 1000, 1000, 997, 1.0f, 0, 0.9f, 0.0f, false, false, true},
            {128, 1000, 1000, 1000, 0.8f, 40, 0.8f, 0.05f, false, true, false},
            {96, 4099, 4100, 4099, 1.3f, 0, 1.0f, 0.1f, false, false, true},
            {257, 4099, 4099, 4099, 0.0f, 0, 1.0f, 0.0f, false, true, false},
            {300, 2053, 2056, 2050, 1.0f, 0, 1.0f, 0.0f, true, true, true},
            {16, 32000, 32008, 32000, 1.0f, 50, 0.95f, 0.0f, false, false, false},
            {16, 32000, 32000, 32000, 1.0f, 0, 1.0f, 0.0f, true, true, true},
            {4, 151936, 151936, 151929, 1.0f, 0, 1.0f, 0.0f, false, false, true},
            {4, 151936, 151940, 151936, 0.6f, 20, 0.9f, 0.0f, false, false, false},
            {8, 151936, 151936, 151936, 1.0f, 0, 0.99f, 0.0f, true, true, true},
    };
    for (int dtype : {ARBOR_F32, ARBOR_BF16, ARBOR_F16})
        for (const SCase& k : cases)
            for (uint64_t seed : {0ull, 1ull, 0x9E3779B97F4A7C15ull}) check_case(c, k, dtype, seed);
    // more rows than row_grid()'s 2^20 blocks: some blocks take a second row (shared-memory reuse),
    // per-row parameters so those rows run the top-k / top-p selections too
    check_case(c, SCase{(1 << 20) + 7, 16, 16, 13, 1.0f, 0, 1.0f, 0.0f, true, true, false}, ARBOR_BF16, 7);
    check_nan_row(c);
    if (!c.quick) time_reference_shape(c);
}

}  // namespace harness
