// GPU check of the fused linear kernels (cuda-kernels/fused_linear.cuh, cuBLAS): against the double
// reference of the unfused chain — logits = h Wᵀ in double from the values the kernel reads (bf16-rounded
// for bf16), arbor_ref_policy_loss (native/src/reference_policy_loss.cpp) for the loss and dL/dlogits,
// then dh = G W and dW = Gᵀ h in double — and arbor_ref_token_stats_fwd for the statistics; then the
// time and peak extra memory against the unfused path (product → arbor_cuda_policy_loss_fused_* → two
// products) at T 16384, d 1024, V 151936 bf16. See harness.h.
//
// Tolerances: fp32 products (CUBLAS_COMPUTE_32F, no TF32) and __expf in the statistics: logprob / entropy
// 1e-4 (1 + |x|), loss sums 1e-4 relative, dh and dW 1e-4 of their largest element. bf16 inputs: the
// backward products read the bf16-rounded dL/dlogits (relative error 2⁻⁹ per element), so dh and dW get
// 1e-2 of their largest element; the forward reads exact bf16 values with fp32 accumulation (1e-4).
#include <dlfcn.h>

#include "harness.h"

namespace harness {

namespace {

struct FlCase {
    int64_t rows, dim, vocab, limit, row_chunk, vocab_chunk;
    int clip, kl, agg;
    float temperature;
    int dtype;
    bool accumulate;
    int64_t pad = 0;  // > 0: row strides above dim (h d + pad, W d + pad + 1, dh d + pad + 2, dW d + pad + 3)
};

arbor_policy_loss_config fl_cfg(const FlCase& k) {
    arbor_policy_loss_config c;
    c.clip_mode = k.clip;
    c.eps_low = 0.2f;
    c.eps_high = 0.28f;
    c.dual_clip_c = 3.0f;  // dual clip on in every case (it combines with PPO and AEPO clips)
    c.aepo_entropy_threshold = -INFINITY;
    c.kl_type = k.kl;
    c.kl_coef = 0.1f;
    c.entropy_coef = 0.01f;
    c.temperature = k.temperature;
    return c;
}

std::vector<double> seen_matrix(std::vector<float>& x, int dtype) {
    std::vector<double> d(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
        if (dtype == ARBOR_BF16) x[i] = arbor::bf16_to_f32(arbor::f32_to_bf16(x[i]));
        d[i] = x[i];
    }
    return d;
}

template <class T>
struct Upload {
    DevBuf<T> buf;
    explicit Upload(const std::vector<T>& h) : buf(h) {}
};

void check_case(Ctx& ctx, const FlCase& k) {
    std::normal_distribution<double> nd(0.0, 1.0);
    const int64_t T = k.rows, d = k.dim, V = k.vocab, VL = k.limit;
    const int64_t hs = d + k.pad, wst = k.pad ? d + k.pad + 1 : d, ghs = k.pad ? d + k.pad + 2 : d,
                  gws = k.pad ? d + k.pad + 3 : d;
    std::vector<float> h(T * d), w(V * d);
    const double scale = 3.0 / sqrt((double)d);
    for (float& v : h) v = (float)nd(ctx.rng);
    for (float& v : w) v = (float)(nd(ctx.rng) * scale);
    std::vector<double> hd = seen_matrix(h, k.dtype), wd = seen_matrix(w, k.dtype);
    std::vector<double> logits(T * V, 0.0);
    for (int64_t r = 0; r < T; ++r)
        for (int64_t v = 0; v < V; ++v) {
            double s = 0;
            for (int64_t q = 0; q < d; ++q) s += hd[r * d + q] * wd[v * d + q];
            logits[r * V + v] = s;
        }
    std::vector<int64_t> labels(T);
    std::vector<int32_t> seq(T);
    std::vector<float> old(T), adv(T), mask(T), ref(T), weights(T);
    std::vector<double> oldd(T), advd(T), maskd(T), refd(T);
    for (int64_t r = 0; r < T; ++r) {
        mask[r] = (r % 5 == 2) ? 0.0f : 1.0f;
        labels[r] = mask[r] > 0 ? (int64_t)(ctx.rng() % VL) : -100;
        old[r] = (float)(-log((double)VL) + nd(ctx.rng));
        adv[r] = (float)nd(ctx.rng);
        ref[r] = (float)(-log((double)VL) + nd(ctx.rng));
        seq[r] = (int32_t)(r * std::max<int64_t>(1, T / 4) / T);
        oldd[r] = old[r], advd[r] = adv[r], maskd[r] = mask[r], refd[r] = ref[r];
    }
    const int64_t ns = std::max<int64_t>(1, T / 4);
    const bool seq_mode = k.agg != ARBOR_AGG_TOKEN_MEAN;
    double counts[ARBOR_PL_NUM_COUNTS];
    if (arbor_cpu_policy_loss_weights(mask.data(), seq_mode ? seq.data() : nullptr, T, seq_mode ? ns : 0, k.agg, 0.0,
                                      weights.data(), counts, nullptr, 0, 1) != ARBOR_OK) {
        record_check(ctx, "fused_linear", "weights pre-pass", INFINITY);
        return;
    }
    const arbor_policy_loss_config c = fl_cfg(k);
    std::vector<double> g(T * V), rsums(ARBOR_PL_NUM_SUMS);
    arbor_ref_policy_loss(&c, k.agg, 0.0, logits.data(), T, V, V, VL, labels.data(), oldd.data(), advd.data(),
                          maskd.data(), k.kl != ARBOR_KL_NONE ? refd.data() : nullptr, seq_mode ? seq.data() : nullptr,
                          ns, nullptr, g.data(), rsums.data(), nullptr);
    std::vector<double> rdh(T * d, 0.0), rdw(V * d, 0.0);
    for (int64_t r = 0; r < T; ++r)
        for (int64_t v = 0; v < VL; ++v) {
            const double gv = g[r * V + v];
            if (gv == 0) continue;
            for (int64_t q = 0; q < d; ++q) {
                rdh[r * d + q] += gv * wd[v * d + q];
                rdw[v * d + q] += gv * hd[r * d + q];
            }
        }
    std::vector<uint8_t> valid(T);
    for (int64_t r = 0; r < T; ++r) valid[r] = mask[r] > 0;
    std::vector<double> rlp(T), rh(T), rlse(T);
    arbor_ref_token_stats_fwd(logits.data(), T, V, V, VL, labels.data(), k.temperature, valid.data(), rlp.data(),
                              rh.data(), rlse.data());
    // device inputs, at their row strides; the padding columns are NaN, which no product may read
    auto strided = [](const std::vector<float>& x, int64_t n, int64_t cols, int64_t stride) {
        std::vector<float> y(n * stride, NAN);
        for (int64_t i = 0; i < n; ++i) std::copy(x.begin() + i * cols, x.begin() + (i + 1) * cols, y.begin() + i * stride);
        return y;
    };
    h = strided(h, T, d, hs);
    w = strided(w, V, d, wst);
    std::fill(w.begin() + VL * wst, w.end(), NAN);  // W's rows >= vocab_limit (embedding padding) are never read either
    std::vector<uint16_t> h16 = to_half(h, ARBOR_BF16), w16 = to_half(w, ARBOR_BF16);
    DevBuf<float> dh32(k.dtype == ARBOR_F32 ? h : std::vector<float>()), dw32(k.dtype == ARBOR_F32 ? w : std::vector<float>());
    DevBuf<uint16_t> dh16(k.dtype == ARBOR_BF16 ? h16 : std::vector<uint16_t>()),
        dw16(k.dtype == ARBOR_BF16 ? w16 : std::vector<uint16_t>());
    const void* hp = k.dtype == ARBOR_F32 ? (const void*)dh32.p : (const void*)dh16.p;
    const void* wp = k.dtype == ARBOR_F32 ? (const void*)dw32.p : (const void*)dw16.p;
    DevBuf<int64_t> dlab(labels);
    DevBuf<float> dold(old), dadv(adv), dmask(mask), dref(ref), dwts(weights), lp(T), ent(T), lse(T);
    DevBuf<uint8_t> dvalid(valid);
    // every element must be written (NaN before) or kept (accumulate: 0.5); padding columns (7) must stay as they are
    const float kPad = 7.0f;
    std::vector<float> before(V * gws, k.accumulate ? 0.5f : NAN), gh_before(T * ghs, NAN);
    for (int64_t v = 0; v < V; ++v)
        for (int64_t q = d; q < gws; ++q) before[v * gws + q] = kPad;
    for (int64_t r = 0; r < T; ++r)
        for (int64_t q = d; q < ghs; ++q) gh_before[r * ghs + q] = kPad;
    DevBuf<float> gh(gh_before), gw(before);
    DevBuf<double> sums(ARBOR_PL_NUM_SUMS);
    const int64_t wsb = arbor_fused_linear_workspace_bytes(T, VL, k.row_chunk, k.vocab_chunk, k.dtype);
    DevBuf<unsigned char> ws(wsb + 8);  // + 8: the stats call below takes it 8 bytes past cudaMalloc's alignment
    char what[160];
    snprintf(what, sizeof what, "T %lld d %lld V %lld/%lld tile %lldx%lld clip %d kl %d agg %d %s%s%s", (long long)T,
             (long long)d, (long long)V, (long long)VL, (long long)k.row_chunk, (long long)k.vocab_chunk, k.clip, k.kl,
             k.agg, dtype_name(k.dtype), k.accumulate ? " acc" : "", k.pad ? " strided" : "");
    int rc = arbor_cuda_fused_linear_policy_loss(&c, hp, T, d, hs, wp, V, wst, VL, k.dtype, dlab.p, ARBOR_I64, dold.p,
                                                 dadv.p, dmask.p, dwts.p, k.kl != ARBOR_KL_NONE ? dref.p : nullptr,
                                                 nullptr, lp.p, ent.p, gh.p, ghs, gw.p, gws, k.accumulate ? 1 : 0,
                                                 sums.p, k.row_chunk, k.vocab_chunk, ws.p, wsb, nullptr, nullptr);
    CUDA_OK(cudaDeviceSynchronize());
    if (rc != ARBOR_OK) {
        printf("  fused_linear: return code %d (%s)\n", rc, arbor_cuda_last_error());
        record_check(ctx, "fused_linear", std::string(what) + " rc", INFINITY);
        return;
    }
    std::vector<double> s = sums.download();
    double e = 0;
    for (int q : {ARBOR_PL_S_PG, ARBOR_PL_S_KL, ARBOR_PL_S_ENT, ARBOR_PL_S_MASK, ARBOR_PL_S_NEG_DELTA, ARBOR_PL_S_ENT_MASK})
        e = std::max(e, err_ratio(rsums[q], s[q], 1e-4 * (1.0 + fabs(rsums[q]))));
    record_check(ctx, "fused_linear_loss", what, e);
    std::vector<float> glp = lp.download(), gent = ent.download();
    e = 0;
    for (int64_t r = 0; r < T; ++r) {
        if (!valid[r]) {  // masked rows: 0
            e = std::max(e, glp[r] == 0.0f && gent[r] == 0.0f ? 0.0 : INFINITY);
            continue;
        }
        e = std::max(e, err_ratio(rlp[r], glp[r], 1e-4 * (1.0 + fabs(rlp[r]))));
        e = std::max(e, err_ratio(rh[r], gent[r], 1e-4 * (1.0 + fabs(rh[r]))));
    }
    record_check(ctx, "fused_linear_logprob_entropy", what, e);
    const double gtol = k.dtype == ARBOR_BF16 ? 1e-2 : 1e-4;
    std::vector<float> ghh = gh.download(), gwh = gw.download();
    double mh = 0, mw = 0;
    for (double v : rdh) mh = std::max(mh, fabs(v));
    for (double v : rdw) mw = std::max(mw, fabs(v));
    e = 0;
    for (int64_t r = 0; r < T; ++r)
        for (int64_t q = 0; q < ghs; ++q)
            e = std::max(e, q < d ? err_ratio(rdh[r * d + q], ghh[r * ghs + q], gtol * mh + 1e-12)
                                  : (ghh[r * ghs + q] == kPad ? 0.0 : INFINITY));
    record_check(ctx, "fused_linear_grad_hidden", what, e);
    e = 0;
    for (int64_t v = 0; v < V; ++v)
        for (int64_t q = 0; q < gws; ++q) {
            if (q >= d) {
                e = std::max(e, gwh[v * gws + q] == kPad ? 0.0 : INFINITY);
                continue;
            }
            const double want = (k.accumulate ? 0.5 : 0.0) + (v >= VL ? 0.0 : rdw[v * d + q]);
            e = std::max(e, err_ratio(want, gwh[v * gws + q], gtol * mw + 1e-12));
        }
    record_check(ctx, "fused_linear_grad_weight", what, e);
    // token statistics without the logits; the outputs NaN first (lp and ent still hold the call above's values),
    // the workspace 8 bytes off a 16-byte boundary (the ABI asks for 8: the tile's rows must then take scalar loads)
    CUDA_OK(cudaMemset(lp.p, 0xff, T * sizeof(float)));
    CUDA_OK(cudaMemset(ent.p, 0xff, T * sizeof(float)));
    CUDA_OK(cudaMemset(lse.p, 0xff, T * sizeof(float)));
    rc = arbor_cuda_fused_linear_stats(hp, T, d, hs, wp, V, wst, VL, k.dtype, dlab.p, ARBOR_I64, k.temperature,
                                       dvalid.p, lp.p, ent.p, lse.p, k.row_chunk, k.vocab_chunk, ws.p + 8, wsb, nullptr,
                                       nullptr);
    CUDA_OK(cudaDeviceSynchronize());
    glp = lp.download();
    gent = ent.download();
    std::vector<float> glse = lse.download();
    e = rc == ARBOR_OK ? 0.0 : INFINITY;
    for (int64_t r = 0; r < T; ++r) {
        if (!valid[r]) {  // masked rows: 0
            e = std::max(e, glp[r] == 0.0f && gent[r] == 0.0f && glse[r] == 0.0f ? 0.0 : INFINITY);
            continue;
        }
        e = std::max(e, err_ratio(rlp[r], glp[r], 1e-4 * (1.0 + fabs(rlp[r]))));
        e = std::max(e, err_ratio(rh[r], gent[r], 1e-4 * (1.0 + fabs(rh[r]))));
        e = std::max(e, err_ratio(rlse[r], glse[r], 1e-4 * (1.0 + fabs(rlse[r]))));
    }
    record_check(ctx, "fused_linear_stats", what, e);
}

// A confident token's label column keeps its relative precision on the fused path too (check_policy_loss.cu's
// policy_loss_confident_label; PolicyLossTest.aConfidentTokensLabelGradientKeepsItsRelativePrecision's rows).
// h and W are built so that the logits are those rows and dh shows the label column's gradient exactly: d = 2 + rows,
// W_v = (1, n_v, [v = y_0], …, [v = y_5]) with n_v ~ U[0, 1) (0 at the label columns), h_r = (level_r, −T, 0, …,
// T (spread_r + ln(V/1000)) at 2 + r, …), so z_rv = level_r − T n_v + [v = y_r] T (spread_r + ln(V/1000)) and
// 1 − p_y ≈ 0.63·1000·e^-spread; distinct labels make dh_r[2 + r] = Σ_v G_rv W_v[2 + r] = G_{r,y_r}, the one non-zero
// term (exact). Token-mean PPO, A = 1, old = the reference log-prob, entropy coefficient 0, fp32: g_y = g_lp (1 − p_y)
// / T. Bound: |g_y − ref| ≤ 0.5 |ref| (ref: arbor_ref_policy_loss on the double logits h·Wᵀ), as the CPU test's.
// Why it can fail: fl_grad_kernel forms d_y = (z_y − lse) − lse_lo from pass 1's double M, S.
// - Tiles of 512 columns (spreads 20.7, 16, 13: 1 − p_y 6.4e-7 … 1.4e-3): without lse_lo, d_y is off by up to half an
//   ulp of the fp32 lse (9.5e-7 at ~20, 6.1e-5 at ~1430) against 1 − p_y = 6.4e-7: relative error ≥ 1 (a CPU
//   emulation of these kernels: 1.0; with lse_lo ≤ 16 %, from the label tile's fp32 s).
// - One-column tiles (V 64, spreads 24.25, 24.75, 25.25: 1 − p_y 1.9e-8, 1.1e-8, 6.8e-9): each tile's s is exactly 1,
//   so S is exact in double and −expm1f(d_y) keeps 1 − p_y to ~1e-4; 1 − expf(d_y) would give 0 there (expf rounds
//   to 1 below 3e-8), relative error 1, and so would a missing lse_lo.
void check_confident_label(Ctx& ctx) {
    std::uniform_real_distribution<double> ud(0.0, 1.0);
    struct Set { int64_t V, vocab_chunk; double spreads[3]; };
    const Set sets[] = {{1000, 512, {20.7, 16, 13}}, {5000, 512, {20.7, 16, 13}}, {64, 1, {24.25, 24.75, 25.25}}};
    const double levels[] = {20, 1000};
    const int64_t n = 6, d = 2 + n, row_chunk = 4;  // row r: levels[r / 3], spreads[r % 3]; two row blocks
    for (const Set& st : sets)
        for (float T : {1.0f, 0.7f}) {
            const int64_t V = st.V;
            std::vector<int64_t> labels(n);
            for (int64_t r = 0; r < n; ++r) {
                int64_t y;
                do y = (int64_t)(ctx.rng() % V);
                while (std::find(labels.begin(), labels.begin() + r, y) != labels.begin() + r);
                labels[r] = y;
            }
            std::vector<float> h(n * d, 0.0f), w(V * d, 0.0f);
            for (int64_t v = 0; v < V; ++v) {
                w[v * d] = 1.0f;
                w[v * d + 1] = std::find(labels.begin(), labels.end(), v) != labels.end() ? 0.0f : (float)ud(ctx.rng);
            }
            for (int64_t r = 0; r < n; ++r) {
                w[labels[r] * d + 2 + r] = 1.0f;
                h[r * d] = (float)(levels[r / 3] + ud(ctx.rng));
                h[r * d + 1] = -T;
                h[r * d + 2 + r] = (float)(T * (st.spreads[r % 3] + log(V / 1000.0)));
            }
            std::vector<double> logits(n * V);
            for (int64_t r = 0; r < n; ++r)
                for (int64_t v = 0; v < V; ++v) {
                    double z = 0;
                    for (int64_t q = 0; q < d; ++q) z += (double)h[r * d + q] * (double)w[v * d + q];
                    logits[r * V + v] = z;
                }
            std::vector<uint8_t> valid(n, 1);
            std::vector<double> lp(n), H(n);
            arbor_ref_token_stats_fwd(logits.data(), n, V, V, V, labels.data(), T, valid.data(), lp.data(), H.data(),
                                      nullptr);
            std::vector<float> old(n), adv(n, 1.0f), mask(n, 1.0f), weights(n);
            for (int64_t r = 0; r < n; ++r) old[r] = (float)lp[r];
            const std::vector<double> oldd(old.begin(), old.end()), advd(n, 1.0), maskd(n, 1.0);
            arbor_policy_loss_config c =
                fl_cfg(FlCase{n, d, V, V, row_chunk, st.vocab_chunk, ARBOR_CLIP_PPO, ARBOR_KL_NONE, ARBOR_AGG_TOKEN_MEAN,
                              T, ARBOR_F32, false});
            c.entropy_coef = 0.0f;
            std::vector<double> g(n * V), rsums(ARBOR_PL_NUM_SUMS);
            arbor_ref_policy_loss(&c, ARBOR_AGG_TOKEN_MEAN, 0.0, logits.data(), n, V, V, V, labels.data(), oldd.data(),
                                  advd.data(), maskd.data(), nullptr, nullptr, 0, nullptr, g.data(), rsums.data(), nullptr);
            double counts[ARBOR_PL_NUM_COUNTS];
            int rc = arbor_cpu_policy_loss_weights(mask.data(), nullptr, n, 0, ARBOR_AGG_TOKEN_MEAN, 0.0, weights.data(),
                                                   counts, nullptr, 0, 1);
            char what[120];
            snprintf(what, sizeof what, "V %lld tile %lldx%lld T %.1f spread %g/%g/%g fp32", (long long)V,
                     (long long)row_chunk, (long long)st.vocab_chunk, T, st.spreads[0], st.spreads[1], st.spreads[2]);
            DevBuf<float> dh(h), dw(w), dold(old), dadv(adv), dmask(mask), dwts(weights), gh(n * d);
            DevBuf<int64_t> dlab(labels);
            DevBuf<double> sums(ARBOR_PL_NUM_SUMS);
            const int64_t wsb = arbor_fused_linear_workspace_bytes(n, V, row_chunk, st.vocab_chunk, ARBOR_F32);
            DevBuf<unsigned char> ws(wsb);
            if (rc == ARBOR_OK)
                rc = arbor_cuda_fused_linear_policy_loss(&c, dh.p, n, d, d, dw.p, V, d, V, ARBOR_F32, dlab.p, ARBOR_I64,
                                                         dold.p, dadv.p, dmask.p, dwts.p, nullptr, nullptr, nullptr,
                                                         nullptr, gh.p, d, nullptr, d, 0, sums.p, row_chunk,
                                                         st.vocab_chunk, ws.p, wsb, nullptr, nullptr);
            CUDA_OK(cudaDeviceSynchronize());
            if (rc != ARBOR_OK) {
                printf("  fused_linear: return code %d (%s)\n", rc, arbor_cuda_last_error());
                record_check(ctx, "fused_linear_confident_label", std::string(what) + " rc", INFINITY);
                continue;
            }
            const std::vector<float> ghh = gh.download();
            record_confident_label(ctx, "fused_linear_confident_label", what, n,
                                   [&](int64_t r) { return g[r * V + labels[r]]; },
                                   [&](int64_t r) { return (double)ghh[r * d + 2 + r]; }, lp);
        }
}

// Row-major C[m, n] = A[m, k] Bᵀ (B [n, k]) through cuBLAS, for the unfused baseline (the library's
// own loader is internal; this is the same dlopen).
struct BaselineBlas {
    typedef int (*CreateFn)(void**);
    typedef int (*GemmExFn)(void*, int, int, int, int, int, const void*, const void*, int, int, const void*, int, int,
                            const void*, void*, int, int, int, int);
    void* handle = nullptr;
    GemmExFn gemm = nullptr;
    bool init() {
        const char* names[] = {getenv("ARBOR_CUBLAS"), "libcublas.so.13", "libcublas.so.12", "libcublas.so"};
        void* lib = nullptr;
        for (const char* n : names)
            if (n && *n && (lib = dlopen(n, RTLD_NOW | RTLD_LOCAL))) break;
        if (!lib) return false;
        CreateFn create = (CreateFn)dlsym(lib, "cublasCreate_v2");
        gemm = (GemmExFn)dlsym(lib, "cublasGemmEx");
        return create && gemm && create(&handle) == 0;
    }
    // column-major trick as in fused_linear.cuh; types CUDA_R_16BF inputs, C type ct
    void abt(int m, int n, int k, const void* a, const void* b, void* c, int ct, int at) {
        const float one = 1.0f, zero = 0.0f;
        gemm(handle, 1, 0, n, m, k, &one, b, at, k, a, at, k, &zero, c, ct, n, 68, -1);
    }
    void ab(int m, int n, int k, const void* a, const void* b, float* c, int at) {  // A [m,k], B [k,n]
        const float one = 1.0f, zero = 0.0f;
        gemm(handle, 0, 0, n, m, k, &one, b, at, n, a, at, k, &zero, c, CUDA_R_32F, n, 68, -1);
    }
    void atb(int m, int n, int k, const void* a, const void* b, float* c, int at) {  // A [k,m], B [k,n]
        const float one = 1.0f, zero = 0.0f;
        gemm(handle, 0, 1, n, m, k, &one, b, at, n, a, at, m, &zero, c, CUDA_R_32F, n, 68, -1);
    }
};

void time_reference_shape(Ctx& ctx) {
    const int64_t T = 16384, d = 1024, V = 151936;
    printf("fused linear: time and peak extra memory at T %lld, d %lld, V %lld bf16\n", (long long)T, (long long)d,
           (long long)V);
    BaselineBlas bl;
    if (!bl.init()) {
        printf("  cuBLAS not found (set ARBOR_CUBLAS): no timing\n");
        record_check(ctx, "fused_linear_timing", "cuBLAS", INFINITY);
        return;
    }
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<uint16_t> h(T * d), w(V * d);
    for (auto& v : h) v = arbor::f32_to_bf16(nd(ctx.rng));
    for (auto& v : w) v = arbor::f32_to_bf16(nd(ctx.rng) * 0.1f);
    std::vector<int64_t> labels(T);
    std::vector<float> old(T), adv(T), mask(T), weights(T);
    for (int64_t r = 0; r < T; ++r) {
        labels[r] = (int64_t)(ctx.rng() % V);
        old[r] = -12.0f + nd(ctx.rng);
        adv[r] = nd(ctx.rng);
        mask[r] = r % 10 == 9 ? 0.0f : 1.0f;
    }
    double counts[ARBOR_PL_NUM_COUNTS];
    arbor_cpu_policy_loss_weights(mask.data(), nullptr, T, 0, ARBOR_AGG_TOKEN_MEAN, 0.0, weights.data(), counts, nullptr, 0, 1);
    DevBuf<uint16_t> dh(h), dw(w);
    DevBuf<int64_t> dlab(labels);
    DevBuf<float> dold(old), dadv(adv), dmask(mask), dwts(weights), gh(T * d), gw(V * d);
    DevBuf<double> sums(ARBOR_PL_NUM_SUMS);
    arbor_policy_loss_config c = fl_cfg(FlCase{T, d, V, V, 0, 0, ARBOR_CLIP_PPO, ARBOR_KL_NONE, 0, 1.0f, ARBOR_BF16, false});
    c.entropy_coef = 0.0f;
    char shape[64];
    snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)T, (long long)d, (long long)V);
    const double flops_fused = 8.0 * T * V * d, flops_unfused = 6.0 * T * V * d;
    for (int64_t vc : {8192, 16384, 32768}) {
        const int64_t rc_rows = 4096;
        const int64_t wsb = arbor_fused_linear_workspace_bytes(T, V, rc_rows, vc, ARBOR_BF16);
        DevBuf<unsigned char> ws(wsb);
        int rc = ARBOR_OK;
        double ms = time_ms([&] {
            rc |= arbor_cuda_fused_linear_policy_loss(&c, dh.p, T, d, d, dw.p, V, d, V, ARBOR_BF16, dlab.p, ARBOR_I64,
                                                      dold.p, dadv.p, dmask.p, dwts.p, nullptr, nullptr, nullptr, nullptr,
                                                      gh.p, d, gw.p, d, 0, sums.p, rc_rows, vc, ws.p, wsb, nullptr,
                                                      nullptr);
        });
        char k[64];
        snprintf(k, sizeof k, "fused_linear_fwd+bwd_%lld", (long long)vc);
        record_time(ctx, "fused_linear_fwd+bwd", std::string(shape) + "/" + std::to_string(vc), "bf16", ms,
                    2.0 * (double)T * V * 2);  // nominal: the unfused path's logits write + read
        printf("  %-28s tile %lldx%lld: %.1f TFLOP/s, extra memory %.1f MiB (workspace)\n", k, (long long)rc_rows,
               (long long)vc, flops_fused / (ms * 1e-3) / 1e12, wsb / 1048576.0);
        record_check(ctx, "fused_linear_timed_rc", shape, rc == ARBOR_OK ? 0.0 : INFINITY);
    }
    // unfused: bf16 logits [T, V] (cuBLAS), the fused policy loss in place, dh = G W, dW = Gᵀ h
    const int64_t pwsb = arbor_policy_loss_workspace_bytes(T, 0);
    DevBuf<unsigned char> pws(pwsb);
    DevBuf<uint16_t> logits(T * V);
    double ms = time_ms([&] {
        bl.abt((int)T, (int)V, (int)d, dh.p, dw.p, logits.p, CUDA_R_16BF, CUDA_R_16BF);
        arbor_cuda_policy_loss_fused_bf16(&c, logits.p, T, V, V, V, dlab.p, ARBOR_I64, dold.p, dadv.p, dmask.p, dwts.p,
                                          nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, logits.p, ARBOR_BF16, V,
                                          sums.p, pws.p, pwsb, nullptr);
        bl.ab((int)T, (int)d, (int)V, logits.p, dw.p, gh.p, CUDA_R_16BF);
        bl.atb((int)V, (int)d, (int)T, logits.p, dh.p, gw.p, CUDA_R_16BF);
    });
    record_time(ctx, "fused_linear_unfused_fwd+bwd", shape, "bf16", ms, 2.0 * (double)T * V * 2);
    printf("  %-28s %.1f TFLOP/s, extra memory %.1f MiB (bf16 logits, gradient in place, + workspace)\n",
           "unfused", flops_unfused / (ms * 1e-3) / 1e12, (2.0 * T * V + pwsb) / 1048576.0);
    CUDA_OK(cudaGetLastError());
}

}  // namespace

void check_fused_linear(Ctx& c) {
    printf("fused linear (cuBLAS): correctness vs the double reference of the unfused chain\n");
    const FlCase cases[] = {
        {1, 1, 2, 2, 1, 1, ARBOR_CLIP_PPO, ARBOR_KL_NONE, ARBOR_AGG_TOKEN_MEAN, 1.0f, ARBOR_F32, false},
        {37, 19, 1001, 997, 8, 128, ARBOR_CLIP_AEPO, ARBOR_KL_K3, ARBOR_AGG_TOKEN_MEAN, 0.7f, ARBOR_F32, false},
        {37, 19, 1001, 997, 8, 128, ARBOR_CLIP_AEPO, ARBOR_KL_K3, ARBOR_AGG_TOKEN_MEAN, 0.7f, ARBOR_BF16, true},
        {300, 64, 5003, 5000, 64, 1024, ARBOR_CLIP_PPO, ARBOR_KL_K2, ARBOR_AGG_SEQ_MEAN_TOKEN_MEAN, 1.0f, ARBOR_F32, true},
        {300, 64, 5003, 5000, 4096, 16384, ARBOR_CLIP_AEPO, ARBOR_KL_NONE, ARBOR_AGG_SEQ_MEAN_TOKEN_SUM_NORM, 1.3f,
         ARBOR_BF16, false},
        {129, 128, 32000, 32000, 100, 5000, ARBOR_CLIP_PPO, ARBOR_KL_K1, ARBOR_AGG_SEQ_MEAN_TOKEN_SUM, 1.0f, ARBOR_BF16,
         false},
        // row strides above dim (the products' leading dimensions; padding columns NaN / untouched)
        {45, 33, 777, 770, 16, 256, ARBOR_CLIP_PPO, ARBOR_KL_K1, ARBOR_AGG_TOKEN_MEAN, 0.9f, ARBOR_F32, false, 5},
        {45, 33, 777, 770, 16, 256, ARBOR_CLIP_AEPO, ARBOR_KL_NONE, ARBOR_AGG_SEQ_MEAN_TOKEN_MEAN, 1.0f, ARBOR_BF16, true,
         3},
    };
    for (const FlCase& k : cases) check_case(c, k);
    check_confident_label(c);
    if (!c.quick) time_reference_shape(c);
}

}  // namespace harness
