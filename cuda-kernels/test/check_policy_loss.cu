// GPU check of the policy-loss kernels (cuda-kernels/policy_loss.cuh) against the scalar double
// reference arbor_ref_policy_loss (native/src/reference_policy_loss.cpp) and the CPU kernels, then
// timing at the reference shapes of gpu-check.sh. See harness.h.
//
// Inputs are built like the Java tests' (PolicyLossTest): each valid token's log-ratio δ and
// reference gap κ are placed relative to the reference logprob, 0.01 away from every kink (clip
// bounds, dual-clip cap, ±20 clamp, k3's clamp), so fp32 round-off cannot flip a branch.
// Tolerances (twice the Java tests', for __expf in the statistics):
// Tolerances start from e_lp = 2e-5 (1 + ln V) + 2e-6 max|z|, the token-stats checks' bound on an
// fp32 logprob or entropy, propagated through each term:
//   weighted sums  |err| <= 2 Σ_t w_t (2 + |A| max(r, 1) + |κ| + e^{min(κ, 3)}) e_lp
//   Σ m·(−δ), Σ m·H |err| <= 2 Σ_t m_t e_lp;  mask and clip-indicator sums 1e-6 relative
//   gradient  |err| <= ((|g_lp| + |g_H| (1 + ln V)) (4e-5 + 2e-6 max|z|) + 2 w (|A| max(r, 1)
//                       + β (1 + e^{min(|κ|, 3)})) e_lp) / T   (the token-stats backward's bound plus
//                       the upstream gradient's error)
// Weights and counts must equal the CPU kernels' bit for bit (same fixed-point arithmetic).
#include <string.h>

#include "harness.h"

namespace harness {

namespace {

struct PlCase {
    int64_t rows, vocab, stride, limit;
    int clip, kl, agg;
    float temperature, entropy_coef;
    bool masked, i64;
};

// The cases' clip codes: the ABI's ARBOR_CLIP_* (AEPO with dual clip, as the released AEPO runs),
// and kPpoDual = PPO with dual clip (the code the ABI leaves free).
constexpr int kPpoDual = 1;

arbor_policy_loss_config make_cfg(const PlCase& k) {
    arbor_policy_loss_config c;
    c.clip_mode = k.clip == kPpoDual ? ARBOR_CLIP_PPO : k.clip;
    c.eps_low = 0.2f;
    c.eps_high = 0.28f;
    c.dual_clip_c = k.clip == kPpoDual || k.clip == ARBOR_CLIP_AEPO ? 3.0f : 0.0f;
    c.aepo_entropy_threshold = -INFINITY;
    c.kl_type = k.kl;
    c.kl_coef = 0.3f;
    c.entropy_coef = k.entropy_coef;
    c.temperature = k.temperature;
    return c;
}

bool near_kink(double d, double lo, double hi, double lc) {
    return fabs(d - lo) < 0.01 || fabs(d - hi) < 0.01 || fabs(d - lc) < 0.01 || fabs(fabs(d) - 20.0) < 0.01 ||
           fabs(d - 10.0) < 0.01;  // GSPO's clamp
}

// Everything one case needs on the host.
struct PlInputs {
    std::vector<float> x;             // [rows, stride] logits (fp32 values; rounded to the dtype on upload)
    std::vector<double> seen;         // what the kernel reads, as double
    std::vector<int64_t> labels64;
    std::vector<int32_t> labels32, seq_ids;
    std::vector<float> old, adv, mask, ref;
    std::vector<double> oldd, advd, maskd, refd;
    int64_t num_seqs = 0;
};

PlInputs make_inputs(std::mt19937_64& rng, const PlCase& k, const arbor_policy_loss_config& c, int dtype) {
    PlInputs in;
    std::normal_distribution<double> nd(0.0, 1.0);
    std::uniform_real_distribution<double> ud(0.0, 1.0);
    // N(0, 3²) logits, junk in the padding; a few rows with -inf entries and a point-mass row
    in.x = random_logits(rng, k.rows, k.stride, k.limit, false);
    for (int64_t r = 0; r < k.rows; ++r) {
        if (k.limit > 2 && r % 7 == 3)
            for (int64_t j = 1; j < k.limit; j += 5) in.x[r * k.stride + j] = -INFINITY;
        if (k.limit > 1 && r % 11 == 5)
            for (int64_t j = 0; j < k.limit; ++j)
                if (j != 0) in.x[r * k.stride + j] = -INFINITY;
    }
    in.seen = as_seen(in.x, dtype);
    const int64_t n = k.rows;
    in.labels64.resize(n);
    in.labels32.resize(n);
    in.seq_ids.resize(n);
    in.mask.resize(n);
    int32_t seq = 0;
    int left = 1 + (int)(rng() % 8);
    for (int64_t r = 0; r < n; ++r) {
        const double u = ud(rng);
        in.mask[r] = !k.masked || u < 0.75 ? 1.0f : (u < 0.88 ? 0.0f : (float)(0.1 + 0.9 * ud(rng)));
        if (left-- == 0) {
            ++seq;
            left = (int)(rng() % 8);
        }
        in.seq_ids[r] = in.mask[r] == 0.0f && rng() % 3 == 0 ? -1 : seq;
        int64_t y = -100;
        if (in.mask[r] > 0) {  // a label with a finite logit
            do y = (int64_t)(rng() % k.limit);
            while (!std::isfinite(in.seen[r * k.stride + y]));
        }
        in.labels64[r] = y;
        in.labels32[r] = (int32_t)y;
    }
    in.num_seqs = seq + 1;
    std::vector<uint8_t> valid(n);
    for (int64_t r = 0; r < n; ++r) valid[r] = in.mask[r] > 0;
    std::vector<double> lp(n), h(n);
    arbor_ref_token_stats_fwd(in.seen.data(), n, k.vocab, k.stride, k.limit, in.labels64.data(), k.temperature,
                              valid.data(), lp.data(), h.data(), nullptr);
    const double lo = log(1.0 - c.eps_low), hi = log(1.0 + c.eps_high), lc = c.dual_clip_c > 0 ? log(c.dual_clip_c) : 1e9;
    in.old.resize(n);
    in.adv.resize(n);
    in.ref.resize(n);
    for (int64_t r = 0; r < n; ++r) {
        if (!(in.mask[r] > 0)) {
            in.old[r] = in.adv[r] = in.ref[r] = NAN;  // never read
            continue;
        }
        double d;
        do {
            const double u = ud(rng), s = rng() % 2 ? 1.0 : -1.0;
            d = u < 0.72 ? 0.35 * nd(rng) : u < 0.87 ? s * (1.2 + 1.3 * ud(rng)) : u < 0.95 ? s * (20.5 + 4.5 * ud(rng)) : 0.0;
        } while (near_kink(d, lo, hi, lc));
        in.old[r] = (float)(lp[r] - d);
        in.adv[r] = rng() % 10 == 0 ? 0.0f : (float)nd(rng);
        double kap;
        do {
            const double u = ud(rng);
            kap = u < 0.8 ? 0.5 * nd(rng) : u < 0.9 ? 3 + 3 * ud(rng) : -12 - 3 * ud(rng);
        } while (fabs(kap - 2.528) < 0.05 || fabs(kap + 11.0) < 0.05);
        in.ref[r] = (float)(lp[r] + kap);
    }
    in.oldd.assign(in.old.begin(), in.old.end());
    in.advd.assign(in.adv.begin(), in.adv.end());
    in.maskd.assign(in.mask.begin(), in.mask.end());
    in.refd.assign(in.ref.begin(), in.ref.end());
    return in;
}

int fused(int dtype, const arbor_policy_loss_config& c, const void* x, const PlCase& k, const void* labels,
          const float* old, const float* adv, const float* mask, const float* w, const float* ref, float* lp, float* h,
          float* glp, float* gh, void* grad, int gdtype, double* sums, void* ws, int64_t wsb) {
    const int lt = k.i64 ? ARBOR_I64 : ARBOR_I32;
    if (dtype == ARBOR_F32)
        return arbor_cuda_policy_loss_fused_f32(&c, (const float*)x, k.rows, k.vocab, k.stride, k.limit, labels, lt, old,
                                                adv, mask, w, ref, nullptr, lp, h, glp, gh, grad, gdtype, k.stride, sums,
                                                ws, wsb, nullptr);
    if (dtype == ARBOR_BF16)
        return arbor_cuda_policy_loss_fused_bf16(&c, (const uint16_t*)x, k.rows, k.vocab, k.stride, k.limit, labels, lt,
                                                 old, adv, mask, w, ref, nullptr, lp, h, glp, gh, grad, gdtype, k.stride,
                                                 sums, ws, wsb, nullptr);
    return arbor_cuda_policy_loss_fused_f16(&c, (const uint16_t*)x, k.rows, k.vocab, k.stride, k.limit, labels, lt, old,
                                            adv, mask, w, ref, nullptr, lp, h, glp, gh, grad, gdtype, k.stride, sums, ws,
                                            wsb, nullptr);
}

int stats_fwd(int dtype, const void* x, const PlCase& k, const void* labels, const uint8_t* vmask, float* lp, float* h,
              float* lse) {
    const int lt = k.i64 ? ARBOR_I64 : ARBOR_I32;
    if (dtype == ARBOR_F32)
        return arbor_cuda_token_stats_fwd_f32((const float*)x, k.rows, k.vocab, k.stride, k.limit, labels, lt,
                                              k.temperature, vmask, lp, h, lse, nullptr);
    if (dtype == ARBOR_BF16)
        return arbor_cuda_token_stats_fwd_bf16((const uint16_t*)x, k.rows, k.vocab, k.stride, k.limit, labels, lt,
                                               k.temperature, vmask, lp, h, lse, nullptr);
    return arbor_cuda_token_stats_fwd_f16((const uint16_t*)x, k.rows, k.vocab, k.stride, k.limit, labels, lt,
                                          k.temperature, vmask, lp, h, lse, nullptr);
}

int stats_bwd(int dtype, const void* x, const PlCase& k, const void* labels, const uint8_t* vmask, const float* lse,
              const float* h, const float* glp, const float* gh, void* g) {
    const int lt = k.i64 ? ARBOR_I64 : ARBOR_I32;
    if (dtype == ARBOR_F32)
        return arbor_cuda_token_stats_bwd_f32((const float*)x, k.rows, k.vocab, k.stride, k.limit, labels, lt,
                                              k.temperature, vmask, lse, h, glp, gh, g, ARBOR_F32, k.stride, nullptr);
    if (dtype == ARBOR_BF16)
        return arbor_cuda_token_stats_bwd_bf16((const uint16_t*)x, k.rows, k.vocab, k.stride, k.limit, labels, lt,
                                               k.temperature, vmask, lse, h, glp, gh, g, ARBOR_F32, k.stride, nullptr);
    return arbor_cuda_token_stats_bwd_f16((const uint16_t*)x, k.rows, k.vocab, k.stride, k.limit, labels, lt,
                                          k.temperature, vmask, lse, h, glp, gh, g, ARBOR_F32, k.stride, nullptr);
}

const char* clip_name(int c) {
    return c == ARBOR_CLIP_PPO ? "ppo" : c == kPpoDual ? "ppo+dual" : c == ARBOR_CLIP_AEPO ? "aepo+dual"
           : c == ARBOR_CLIP_CISPO ? "cispo" : "gspo";
}
const char* agg_name(int a) {
    return a == ARBOR_AGG_TOKEN_MEAN ? "token-mean" : a == ARBOR_AGG_SEQ_MEAN_TOKEN_SUM ? "seq-sum"
           : a == ARBOR_AGG_SEQ_MEAN_TOKEN_MEAN ? "seq-mean" : "seq-sum-norm";
}

void check_case(Ctx& ctx, const PlCase& k, int dtype) {
    const arbor_policy_loss_config c = make_cfg(k);
    PlInputs in = make_inputs(ctx.rng, k, c, dtype);
    const int64_t n = k.rows;
    const bool seq = k.agg != ARBOR_AGG_TOKEN_MEAN;
    const int64_t ns = seq ? in.num_seqs : 0;
    char what[200];
    snprintf(what, sizeof what, "rows=%lld V=%lld stride=%lld limit=%lld T=%.1f %s kl%d %s cH=%.2f %s %s",
             (long long)n, (long long)k.vocab, (long long)k.stride, (long long)k.limit, k.temperature, clip_name(k.clip),
             k.kl, agg_name(k.agg), k.entropy_coef, k.i64 ? "i64" : "i32", dtype_name(dtype));

    // double reference of the whole chain
    std::vector<double> rgrad(n * k.stride), rsums(ARBOR_PL_NUM_SUMS), rcounts(ARBOR_PL_NUM_COUNTS);
    arbor_ref_policy_loss(&c, k.agg, 0.0, in.seen.data(), n, k.vocab, k.stride, k.limit, in.labels64.data(),
                          in.oldd.data(), in.advd.data(), in.maskd.data(), k.kl ? in.refd.data() : nullptr,
                          seq ? in.seq_ids.data() : nullptr, ns, nullptr, rgrad.data(), rsums.data(), rcounts.data());
    // CPU weights: the GPU's must be the same bits
    std::vector<float> cw(n);
    std::vector<double> ccounts(ARBOR_PL_NUM_COUNTS);
    int rc = arbor_cpu_policy_loss_weights(in.mask.data(), seq ? in.seq_ids.data() : nullptr, n, ns, k.agg, 0.0,
                                           cw.data(), ccounts.data(), nullptr, 0, 1);
    if (rc != ARBOR_OK) {
        record_check(ctx, "policy_loss_weights", std::string(what) + " cpu rc!=0", INFINITY);
        return;
    }

    DevBuf<float> dx32(dtype == ARBOR_F32 ? in.x : std::vector<float>());
    DevBuf<uint16_t> dx16(dtype == ARBOR_F32 ? std::vector<uint16_t>() : to_half(in.x, dtype));
    const void* dx = dtype == ARBOR_F32 ? (const void*)dx32.p : (const void*)dx16.p;
    DevBuf<int64_t> dl64(in.labels64);
    DevBuf<int32_t> dl32(in.labels32), dids(in.seq_ids);
    const void* dl = k.i64 ? (const void*)dl64.p : (const void*)dl32.p;
    DevBuf<float> dold(in.old), dadv(in.adv), dmask(in.mask), dref(in.ref), dw(n);
    DevBuf<double> dcounts(ARBOR_PL_NUM_COUNTS), dsums(ARBOR_PL_NUM_SUMS), dsums2(ARBOR_PL_NUM_SUMS);
    const int64_t wsb = arbor_policy_loss_workspace_bytes(n, ns);
    DevBuf<unsigned char> dws(wsb);

    rc = arbor_cuda_policy_loss_weights(dmask.p, seq ? dids.p : nullptr, n, ns, k.agg, 0.0, dw.p, dcounts.p, dws.p, wsb,
                                        nullptr);
    CUDA_OK(cudaDeviceSynchronize());
    if (rc != ARBOR_OK) {
        record_check(ctx, "policy_loss_weights", std::string(what) + " rc!=0", INFINITY);
        return;
    }
    std::vector<float> gw = dw.download();
    std::vector<double> gcounts = dcounts.download();
    int64_t mism = 0;
    for (int64_t r = 0; r < n; ++r) mism += memcmp(&gw[r], &cw[r], 4) != 0;
    for (int i = 0; i < ARBOR_PL_NUM_COUNTS; ++i) mism += gcounts[i] != ccounts[i];
    record_mismatches(ctx, "policy_loss_weights", what, (double)mism);

    // fused, fp32 gradient, per-row outputs
    DevBuf<float> dg(n * k.stride), dlp(n), dh(n), dglp(n), dgh(n);
    rc = fused(dtype, c, dx, k, dl, dold.p, dadv.p, dmask.p, dw.p, k.kl ? dref.p : nullptr, dlp.p, dh.p, dglp.p, dgh.p,
               dg.p, ARBOR_F32, dsums.p, dws.p, wsb);
    CUDA_OK(cudaDeviceSynchronize());
    if (rc != ARBOR_OK) {
        record_check(ctx, "policy_loss_fused", std::string(what) + " rc!=0", INFINITY);
        return;
    }
    std::vector<float> g = dg.download(), glp = dglp.download();
    std::vector<double> sums = dsums.download();
    // tolerances from the reference's per-row values: e_lp bounds the error of an fp32 logprob /
    // entropy (the token-stats checks' bound), and every term is propagated from it
    std::vector<uint8_t> valid(n);
    for (int64_t r = 0; r < n; ++r) valid[r] = in.mask[r] > 0;
    std::vector<double> lp(n), h(n);
    arbor_ref_token_stats_fwd(in.seen.data(), n, k.vocab, k.stride, k.limit, in.labels64.data(), k.temperature,
                              valid.data(), lp.data(), h.data(), nullptr);
    const double lnv = log((double)k.limit);
    double wtol = 0, mtol = 0;
    std::vector<double> row_tol(n, 0.0);
    for (int64_t r = 0; r < n; ++r) {
        if (!valid[r]) continue;
        double zmax = 0;
        for (int64_t j = 0; j < k.limit; ++j) {
            const double v = in.seen[r * k.stride + j];
            if (std::isfinite(v)) zmax = std::max(zmax, fabs(v / k.temperature));
        }
        const double e_lp = 2e-5 * (1 + lnv) + 2e-6 * zmax;
        const double w = cw[r], a = fabs(in.advd[r]);
        const double ratio = exp(std::max(-20.0, std::min(20.0, lp[r] - in.oldd[r])));
        const double kap = k.kl ? in.refd[r] - lp[r] : 0.0;
        wtol += 2 * w * (1 + a * std::max(ratio, 1.0) + fabs(kap) + exp(std::min(kap, 3.0)) + 1) * e_lp;
        mtol += 2 * in.mask[r] * e_lp;
        const double dglp = w * (a * std::max(ratio, 1.0) + 0.3 * (1 + exp(std::min(fabs(kap), 3.0)))) * 2 * e_lp;
        row_tol[r] = ((fabs(glp[r]) + fabs(k.entropy_coef * w) * (1 + lnv)) * (4e-5 + 2e-6 * zmax) + dglp) / k.temperature
                     + 1e-12;
    }
    double worst = 0;
    for (int s = 0; s < ARBOR_PL_NUM_SUMS; ++s) {
        double tol;
        if (s == ARBOR_PL_S_PG || s == ARBOR_PL_S_KL || s == ARBOR_PL_S_ENT) tol = wtol;
        else if (s == ARBOR_PL_S_NEG_DELTA || s == ARBOR_PL_S_ENT_MASK) tol = mtol;
        else tol = 1e-6 * (1 + fabs(rsums[s]));  // masks and clip indicators: exact up to summation
        worst = std::max(worst, err_ratio(rsums[s], sums[s], tol + 1e-9 * (1 + fabs(rsums[s]))));
    }
    record_check(ctx, "policy_loss_fused_sums", what, worst);
    worst = 0;
    for (int64_t r = 0; r < n; ++r)
        for (int64_t j = 0; j < k.vocab; ++j) {
            const double e = rgrad[r * k.stride + j], a = g[r * k.stride + j];
            worst = std::max(worst, valid[r] ? err_ratio(e, a, row_tol[r]) : (a == 0.0f ? 0.0 : INFINITY));
        }
    record_check(ctx, "policy_loss_fused_grad", what, worst);

    // composable: token stats forward → loss → token stats backward, vs the fused path
    DevBuf<uint8_t> dvalid(valid);
    DevBuf<float> clp(n), ch(n), clse(n), cglp(n), cgh(n), cg(n * k.stride);
    int rc1 = stats_fwd(dtype, dx, k, dl, dvalid.p, clp.p, ch.p, clse.p);
    int rc2 = arbor_cuda_policy_loss(&c, n, clp.p, ch.p, dold.p, dadv.p, dmask.p, dw.p, k.kl ? dref.p : nullptr, nullptr,
                                     cglp.p, cgh.p, dsums2.p, dws.p, wsb, nullptr);
    int rc3 = stats_bwd(dtype, dx, k, dl, dvalid.p, clse.p, ch.p, cglp.p, cgh.p, cg.p);
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<float> g2 = cg.download();
    std::vector<double> sums2 = dsums2.download();
    worst = (rc1 || rc2 || rc3) ? INFINITY : 0.0;
    // the same per-row code compiled into two kernels: equal up to FMA contraction and, in the label column, the
    // fused kernel's lse_lo (|lse_lo| <= 2^-24 |lse|, g_lp p_y lse_lo / T: under 0.05 row_tol for |lse| <= zmax + ln V)
    for (int s = 0; s < ARBOR_PL_NUM_SUMS; ++s) worst = std::max(worst, err_ratio(sums[s], sums2[s], 0.05 * (wtol + mtol) + 1e-12));
    for (int64_t r = 0; r < n; ++r)
        for (int64_t j = 0; j < k.vocab; ++j)
            worst = std::max(worst, err_ratio(g[r * k.stride + j], g2[r * k.stride + j], 0.05 * row_tol[r]));
    record_check(ctx, "policy_loss_composable", what, worst);

    // reproducible: a second fused run gives the same sums, bit for bit
    DevBuf<double> dsums3(ARBOR_PL_NUM_SUMS);
    rc = fused(dtype, c, dx, k, dl, dold.p, dadv.p, dmask.p, dw.p, k.kl ? dref.p : nullptr, nullptr, nullptr, nullptr,
               nullptr, dg.p, ARBOR_F32, dsums3.p, dws.p, wsb);
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<double> sums3 = dsums3.download();
    if (rc) record_check(ctx, "policy_loss_deterministic", std::string(what) + " rc!=0", INFINITY);
    else
        record_mismatches(ctx, "policy_loss_deterministic", what,
                          memcmp(sums.data(), sums3.data(), 8 * ARBOR_PL_NUM_SUMS) != 0);

    // half types: in place over the logits equals the out-of-place half output, bit for bit
    if (dtype != ARBOR_F32) {
        DevBuf<uint16_t> dout(n * k.stride);
        CUDA_OK(cudaMemset(dout.p, 0, dout.n * 2));
        int r1 = fused(dtype, c, dx, k, dl, dold.p, dadv.p, dmask.p, dw.p, k.kl ? dref.p : nullptr, nullptr, nullptr,
                       nullptr, nullptr, dout.p, dtype, dsums3.p, dws.p, wsb);
        int r2 = fused(dtype, c, dx, k, dl, dold.p, dadv.p, dmask.p, dw.p, k.kl ? dref.p : nullptr, nullptr, nullptr,
                       nullptr, nullptr, (void*)dx, dtype, dsums3.p, dws.p, wsb);
        CUDA_OK(cudaDeviceSynchronize());
        std::vector<uint16_t> a = dout.download(), b = dx16.download();
        int64_t m = 0;
        for (int64_t r = 0; r < n; ++r)
            for (int64_t j = 0; j < k.vocab; ++j) m += a[r * k.stride + j] != b[r * k.stride + j];
        if (r1 || r2) record_check(ctx, "policy_loss_fused_inplace", std::string(what) + " rc!=0", INFINITY);
        else record_mismatches(ctx, "policy_loss_fused_inplace", what, (double)m);
        // the half-precision output is the fp32 one of the first fused run rounded once
        const double ulp = dtype == ARBOR_BF16 ? 0x1p-8 : 0x1p-11;  // twice the relative rounding bound
        double herr = 0;
        for (int64_t r = 0; r < n; ++r)
            for (int64_t j = 0; j < k.vocab; ++j) {
                const double e = g[r * k.stride + j];
                herr = std::max(herr, err_ratio(e, from_half(a[r * k.stride + j], dtype),
                                                fabs(e) * ulp + 0x1p-24 + 0.05 * row_tol[r]));
            }
        record_check(ctx, "policy_loss_fused_half_out", what, (r1 || r2) ? INFINITY : herr);
    }
}

// A confident token's label column keeps its relative precision (PolicyLossTest's
// aConfidentTokensLabelGradientKeepsItsRelativePrecision, the same rows): logits around 20 and 1000, T 1 and 0.7,
// the label ahead of every other logit by spread + ln(V/1000) + U[0, 1), so 1 − p_y ≈ 0.63·1000·e^-spread: 6.4e-7,
// 7e-5, 1.4e-3. Token-mean PPO with A = 1, old = the reference log-prob (ratio 1), entropy coefficient 0:
// g_y = g_lp (1 − p_y) / T. Bound, as the CPU test's: |g_y − ref| ≤ 0.5 |ref| (ref: arbor_ref_policy_loss in double
// over x / T; the kernel's rounded products x·(1/T) move 1 − p_y by ≤ ~1e-4 of itself).
// Why it can fail: pl_fused_kernel forms d_y = (z_y − lse) − lse_lo. Without lse_lo (d_y against the fp32 lse alone,
// as token_stats_bwd has it), d_y is off by up to half an ulp of lse — 9.5e-7 at lse ~ 20, 6.1e-5 at ~1430 — against
// 1 − p_y = 6.4e-7 on the spread-20.7 rows: g_y becomes 0 or a multiple of itself, relative error ≥ 1 (a CPU
// emulation of this kernel's fp32 reductions: 1.0 on those rows; with lse_lo 6–10 %, from the fp32 S, whose
// merges round S − 1 to a multiple of 2^-23). (1 − expf(d_y) for −expm1f(d_y) is not visible here: with S that
// coarse, expf(d_y) is 1 − (S − 1) exactly; check_fused_linear.cu's one-column-tile rows, whose S is double, see it.)
void check_confident_label(Ctx& ctx) {
    std::uniform_real_distribution<double> ud(0.0, 1.0);
    const double levels[] = {20, 1000}, spreads[] = {20.7, 16, 13};
    const int64_t n = 6;  // row r: levels[r / 3], spreads[r % 3]
    for (int64_t V : {1000, 5000})
        for (float T : {1.0f, 0.7f}) {
            const PlCase k{n, V, V, V, ARBOR_CLIP_PPO, ARBOR_KL_NONE, ARBOR_AGG_TOKEN_MEAN, T, 0.0f, false, true};
            const arbor_policy_loss_config c = make_cfg(k);
            std::vector<float> x(n * V), old(n), adv(n, 1.0f), mask(n, 1.0f), w(n);
            std::vector<int64_t> labels(n);
            for (int64_t r = 0; r < n; ++r) {
                const int64_t y = 1 + (int64_t)(ctx.rng() % (V - 2));
                float* row = &x[r * V];
                labels[r] = y;
                row[y] = (float)(levels[r / 3] + ud(ctx.rng));
                for (int64_t j = 0; j < V; ++j)
                    if (j != y) row[j] = (float)(row[y] - T * (spreads[r % 3] + log(V / 1000.0) + ud(ctx.rng)));
            }
            const std::vector<double> seen(x.begin(), x.end());
            std::vector<uint8_t> valid(n, 1);
            std::vector<double> lp(n), H(n);
            arbor_ref_token_stats_fwd(seen.data(), n, V, V, V, labels.data(), T, valid.data(), lp.data(), H.data(),
                                      nullptr);
            for (int64_t r = 0; r < n; ++r) old[r] = (float)lp[r];
            const std::vector<double> oldd(old.begin(), old.end()), advd(n, 1.0), maskd(n, 1.0);
            std::vector<double> rgrad(n * V), rsums(ARBOR_PL_NUM_SUMS);
            arbor_ref_policy_loss(&c, ARBOR_AGG_TOKEN_MEAN, 0.0, seen.data(), n, V, V, V, labels.data(), oldd.data(),
                                  advd.data(), maskd.data(), nullptr, nullptr, 0, nullptr, rgrad.data(), rsums.data(),
                                  nullptr);
            double counts[ARBOR_PL_NUM_COUNTS];
            int rc = arbor_cpu_policy_loss_weights(mask.data(), nullptr, n, 0, ARBOR_AGG_TOKEN_MEAN, 0.0, w.data(), counts,
                                                   nullptr, 0, 1);
            char what[120];
            snprintf(what, sizeof what, "V=%lld T=%.1f x_y~20/1000 spread 20.7/16/13 fp32", (long long)V, T);
            DevBuf<float> dx(x), dold(old), dadv(adv), dmask(mask), dw(w), dg(n * V);
            DevBuf<int64_t> dl(labels);
            DevBuf<double> dsums(ARBOR_PL_NUM_SUMS);
            const int64_t wsb = arbor_policy_loss_workspace_bytes(n, 0);
            DevBuf<unsigned char> dws(wsb);
            if (rc == ARBOR_OK)
                rc = fused(ARBOR_F32, c, dx.p, k, dl.p, dold.p, dadv.p, dmask.p, dw.p, nullptr, nullptr, nullptr, nullptr,
                           nullptr, dg.p, ARBOR_F32, dsums.p, dws.p, wsb);
            CUDA_OK(cudaDeviceSynchronize());
            if (rc != ARBOR_OK) {
                record_check(ctx, "policy_loss_confident_label", std::string(what) + " rc!=0", INFINITY);
                continue;
            }
            const std::vector<float> g = dg.download();
            record_confident_label(ctx, "policy_loss_confident_label", what, n,
                                   [&](int64_t r) { return rgrad[r * V + labels[r]]; },
                                   [&](int64_t r) { return (double)g[r * V + labels[r]]; }, lp);
        }
}

// Deterministic pseudo-random N(0, scale²) logits on the device (inputs too large for the host).
__global__ void pl_fill_logits(uint16_t* bf16, float* f32, int64_t n, uint64_t seed, float scale) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ull + seed;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        const float u1 = ((z >> 40) + 0.5f) / 16777216.0f, u2 = (((z >> 16) & 0xFFFFFF) + 0.5f) / 16777216.0f;
        const float v = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2) * scale;
        if (bf16) bf16[i] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
        if (f32) f32[i] = v;
    }
}

// Forward + backward of the token-mean PPO loss (the policy-loss benchmark of bench/RESULTS.md), fused and composable.
void time_reference_shapes(Ctx& ctx) {
    printf("timing (median of 20, CUDA events), token-mean PPO forward+backward:\n");
    struct Shape { int64_t rows, vocab; int dtype; };
    for (Shape s : {Shape{16384, 151936, ARBOR_BF16}, Shape{4096, 32000, ARBOR_F32}}) {
        const int64_t n = s.rows * s.vocab;
        const int esz = s.dtype == ARBOR_F32 ? 4 : 2;
        const bool f32 = s.dtype == ARBOR_F32;
        DevBuf<uint16_t> x16(f32 ? 0 : n), g16(f32 ? 0 : n);
        DevBuf<float> x32(f32 ? n : 0), g32(f32 ? n : 0);
        pl_fill_logits<<<4096, 256>>>(f32 ? nullptr : x16.p, f32 ? x32.p : nullptr, n, 4321, 3.0f);
        std::vector<int64_t> lab(s.rows);
        std::vector<float> adv(s.rows), mask(s.rows, 1.0f);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (int64_t r = 0; r < s.rows; ++r) {
            lab[r] = (int64_t)(ctx.rng() % s.vocab);
            adv[r] = nd(ctx.rng);
            if (r % 10 == 9) mask[r] = 0.0f;  // some prompt / tool-output tokens
        }
        PlCase k{s.rows, s.vocab, s.vocab, s.vocab, ARBOR_CLIP_PPO, ARBOR_KL_NONE, ARBOR_AGG_TOKEN_MEAN, 1.0f, 0.0f,
                 false, true};
        const arbor_policy_loss_config c = make_cfg(k);
        const void* x = f32 ? (const void*)x32.p : (const void*)x16.p;
        void* g = f32 ? (void*)g32.p : (void*)g16.p;
        DevBuf<int64_t> dlab(lab);
        DevBuf<float> dadv(adv), dmask(mask), dw(s.rows), lp(s.rows), h(s.rows), lse(s.rows), glp(s.rows), gh(s.rows);
        // old log-probs near the current ones, so some tokens clip
        CUDA_OK(cudaDeviceSynchronize());
        stats_fwd(s.dtype, x, k, dlab.p, nullptr, lp.p, h.p, lse.p);
        std::vector<float> old = lp.download();
        for (float& o : old) o -= 0.3f * nd(ctx.rng);
        DevBuf<float> dold(old);
        std::vector<uint8_t> valid(s.rows);
        for (int64_t r = 0; r < s.rows; ++r) valid[r] = mask[r] > 0;
        DevBuf<uint8_t> dvalid(valid);
        DevBuf<double> counts(ARBOR_PL_NUM_COUNTS), sums(ARBOR_PL_NUM_SUMS);
        const int64_t wsb = arbor_policy_loss_workspace_bytes(s.rows, 0);
        DevBuf<unsigned char> ws(wsb);
        char shape[64];
        snprintf(shape, sizeof shape, "%lldx%lld", (long long)s.rows, (long long)s.vocab);
        // fused: weights pre-pass + one kernel per row, gradient in the logits' dtype (out of place)
        double ms = time_ms([&] {
            arbor_cuda_policy_loss_weights(dmask.p, nullptr, s.rows, 0, ARBOR_AGG_TOKEN_MEAN, 0.0, dw.p, counts.p, ws.p,
                                           wsb, nullptr);
            fused(s.dtype, c, x, k, dlab.p, dold.p, dadv.p, dmask.p, dw.p, nullptr, nullptr, nullptr, nullptr, nullptr, g,
                  s.dtype, sums.p, ws.p, wsb);
        });
        record_time(ctx, "policy_loss_fused_fwd+bwd", shape, dtype_name(s.dtype), ms, 3.0 * n * esz);
        // composable: token stats forward, O(T) loss, token stats backward
        ms = time_ms([&] {
            arbor_cuda_policy_loss_weights(dmask.p, nullptr, s.rows, 0, ARBOR_AGG_TOKEN_MEAN, 0.0, dw.p, counts.p, ws.p,
                                           wsb, nullptr);
            stats_fwd(s.dtype, x, k, dlab.p, dvalid.p, lp.p, h.p, lse.p);
            arbor_cuda_policy_loss(&c, s.rows, lp.p, h.p, dold.p, dadv.p, dmask.p, dw.p, nullptr, nullptr, glp.p, gh.p,
                                   sums.p, ws.p, wsb, nullptr);
            const int lt = ARBOR_I64;
            if (f32)
                arbor_cuda_token_stats_bwd_f32((const float*)x, k.rows, k.vocab, k.stride, k.limit, dlab.p, lt, 1.0f,
                                               dvalid.p, lse.p, h.p, glp.p, gh.p, g, s.dtype, k.stride, nullptr);
            else
                arbor_cuda_token_stats_bwd_bf16((const uint16_t*)x, k.rows, k.vocab, k.stride, k.limit, dlab.p, lt, 1.0f,
                                                dvalid.p, lse.p, h.p, glp.p, gh.p, g, s.dtype, k.stride, nullptr);
        });
        record_time(ctx, "policy_loss_composable_fwd+bwd", shape, dtype_name(s.dtype), ms, 3.0 * n * esz);
        // the sums of the timed runs must be finite (a cheap sanity check of the big shapes)
        std::vector<double> hs = sums.download();
        record_check(ctx, "policy_loss_timed_finite", shape, std::isfinite(hs[ARBOR_PL_S_PG]) ? 0.0 : INFINITY);
        CUDA_OK(cudaGetLastError());
    }
}

}  // namespace

void check_policy_loss(Ctx& c) {
    printf("policy loss: correctness vs the double reference\n");
    // every clip mode x KL type x aggregation at a small shape, then larger / odd shapes
    for (int clip = 0; clip < 5; ++clip)
        for (int kl = 0; kl < 4; ++kl)
            for (int agg = 0; agg < 4; ++agg) {
                PlCase k{37, 517, 520, 509, clip, kl, agg, (clip + kl) % 2 ? 0.7f : 1.0f, agg % 2 ? 0.01f : 0.0f,
                         true, (kl + agg) % 2 == 0};
                check_case(c, k, (clip + kl + agg) % 3 == 0 ? ARBOR_F32 : (clip + kl + agg) % 3 == 1 ? ARBOR_BF16 : ARBOR_F16);
            }
    const PlCase bigger[] = {
        {1, 1, 1, 1, ARBOR_CLIP_PPO, ARBOR_KL_NONE, ARBOR_AGG_TOKEN_MEAN, 1.0f, 0.0f, false, false},
        {257, 4099, 4100, 4099, kPpoDual, ARBOR_KL_K3, ARBOR_AGG_SEQ_MEAN_TOKEN_MEAN, 1.0f, 0.01f, true, true},
        {9, 32000, 32008, 32000, ARBOR_CLIP_AEPO, ARBOR_KL_K1, ARBOR_AGG_TOKEN_MEAN, 0.7f, 0.0f, true, false},
        {4, 151936, 151936, 151929, ARBOR_CLIP_PPO, ARBOR_KL_K2, ARBOR_AGG_SEQ_MEAN_TOKEN_SUM_NORM, 1.0f, 0.01f, true, true},
        {33, 4099, 4099, 4090, ARBOR_CLIP_CISPO, ARBOR_KL_K3, ARBOR_AGG_TOKEN_MEAN, 0.6f, 0.001f, true, false},
        {33, 4099, 4099, 4090, ARBOR_CLIP_GSPO, ARBOR_KL_NONE, ARBOR_AGG_SEQ_MEAN_TOKEN_MEAN, 1.0f, 0.0f, true, true},
    };
    for (int dtype : {ARBOR_F32, ARBOR_BF16, ARBOR_F16})
        for (const PlCase& k : bigger) check_case(c, k, dtype);
    // more rows than row_grid()'s 2^20 blocks: some blocks take a second row (shared-memory reuse)
    check_case(c, PlCase{(1 << 20) + 7, 8, 8, 7, ARBOR_CLIP_PPO, ARBOR_KL_K3, ARBOR_AGG_SEQ_MEAN_TOKEN_MEAN, 1.0f, 0.01f,
                         true, false},
               ARBOR_BF16);
    check_confident_label(c);
    if (!c.quick) time_reference_shapes(c);
}

}  // namespace harness
