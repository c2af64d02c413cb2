// GPU check of the token-level advantage kernel (cuda-kernels/advantages.cuh) against the scalar double
// reference (arbor_ref_token_advantages in native/src/advantages.cpp) and the CPU kernel, then timing.
//
// Tolerances: per token |err| <= 1e-6 · |A| · (1 + |coef · Ĥ|) (the kernel evaluates the reference's
// expression in double and rounds once to fp32; only the last bits of μ and the scale differ). The set
// of shaped tokens, every count and the TAO threshold τ must match exactly; μ and the std to 1e-9
// relative. Reruns must be bitwise identical (fixed-order reductions).
#include <cstring>

#include "harness.h"

namespace harness {

namespace {

struct AdvCase {
    int64_t n_seqs, max_len;
    bool padded, i64, masked;
    int mode;
    double q;
    int tie_levels;  // > 0: entropies drawn from this many distinct values (ties at τ)
    const char* note;
};

struct AdvData {
    int64_t n_tokens = 0, seq_len = 0;
    std::vector<float> seq_adv, entropy;
    std::vector<int32_t> ids32;
    std::vector<int64_t> ids64;
    std::vector<uint8_t> mask, post;
};

AdvData make_data(std::mt19937_64& rng, const AdvCase& k) {
    AdvData d;
    std::normal_distribution<float> nd(0.0f, 1.0f);
    d.seq_adv.resize(k.n_seqs);
    for (auto& a : d.seq_adv) a = nd(rng);
    std::vector<int64_t> len(k.n_seqs);
    for (auto& l : len) l = 1 + (int64_t)(rng() % k.max_len);
    if (k.padded) {
        d.seq_len = k.max_len;
        d.n_tokens = k.n_seqs * k.max_len;
        for (int64_t s = 0; s < k.n_seqs; ++s)
            for (int64_t j = 0; j < k.max_len; ++j) {
                d.ids64.push_back(s);
                d.mask.push_back(j < len[s] ? 1 : 0);
            }
    } else {  // flat, tokens of all sequences interleaved in random order
        for (int64_t s = 0; s < k.n_seqs; ++s)
            for (int64_t j = 0; j < len[s]; ++j) d.ids64.push_back(s);
        std::shuffle(d.ids64.begin(), d.ids64.end(), rng);
        d.n_tokens = (int64_t)d.ids64.size();
        d.mask.assign(d.n_tokens, 1);
        if (k.masked)  // e.g. tool observations inside a trajectory
            for (auto& m : d.mask) m = rng() % 5 == 0 ? 0 : 1;
    }
    for (int64_t v : d.ids64) d.ids32.push_back((int32_t)v);
    d.entropy.resize(d.n_tokens);
    d.post.resize(d.n_tokens);
    for (int64_t t = 0; t < d.n_tokens; ++t) {
        d.entropy[t] = k.tie_levels > 0 ? 0.25f * (float)(rng() % k.tie_levels) : fabsf(nd(rng)) * 2.0f;
        d.post[t] = rng() % 3 == 0 ? 1 : 0;
        if (!d.mask[t] && rng() % 3 == 0) d.entropy[t] = NAN;  // masked tokens are never read
    }
    return d;
}

struct AdvOut {
    std::vector<float> out;
    std::vector<double> stats;
    int rc;
};

AdvOut run_cuda(const AdvData& d, const AdvCase& k, float coef) {
    DevBuf<float> adv(d.seq_adv), ent(d.entropy), out(d.n_tokens);
    DevBuf<int32_t> i32(d.ids32);
    DevBuf<int64_t> i64(d.ids64);
    DevBuf<uint8_t> mask(d.mask), post(d.post);
    DevBuf<double> stats(ARBOR_ADV_NSTATS);
    const void* ids = k.padded ? nullptr : (k.i64 ? (const void*)i64.p : (const void*)i32.p);
    AdvOut r;
    r.rc = arbor_cuda_token_advantages(adv.p, k.n_seqs, ids, k.i64 ? ARBOR_I64 : ARBOR_I32, d.n_tokens, d.seq_len,
                                       mask.p, ent.p, post.p, k.mode, coef, k.q, out.p, stats.p, nullptr);
    CUDA_OK(cudaDeviceSynchronize());
    r.out = out.download();
    r.out.resize(d.n_tokens);
    r.stats = stats.download();
    return r;
}

void check_case(Ctx& c, const AdvCase& k) {
    const float coef = k.mode == ARBOR_ADV_TAO ? 0.01f : 0.2f;
    AdvData d = make_data(c.rng, k);
    std::vector<double> adv_d(d.seq_adv.begin(), d.seq_adv.end()), ent_d(d.entropy.begin(), d.entropy.end());
    std::vector<double> ref(d.n_tokens), rstats(ARBOR_ADV_NSTATS);
    int rrc = arbor_ref_token_advantages(adv_d.data(), k.n_seqs, k.padded ? nullptr : d.ids64.data(), d.n_tokens,
                                         d.seq_len, d.mask.data(), ent_d.data(), d.post.data(), k.mode, coef, k.q,
                                         ref.data(), rstats.data());
    std::vector<float> cpu(d.n_tokens);
    std::vector<double> cstats(ARBOR_ADV_NSTATS);
    const void* hids = k.padded ? nullptr : (k.i64 ? (const void*)d.ids64.data() : (const void*)d.ids32.data());
    int crc = arbor_cpu_token_advantages(d.seq_adv.data(), k.n_seqs, hids, k.i64 ? ARBOR_I64 : ARBOR_I32, d.n_tokens,
                                         d.seq_len, d.mask.data(), d.entropy.data(), d.post.data(), k.mode, coef, k.q,
                                         cpu.data(), cstats.data(), 0);
    AdvOut g = run_cuda(d, k, coef);
    AdvOut g2 = run_cuda(d, k, coef);

    char what[200];
    snprintf(what, sizeof what, "%s seqs=%lld T=%lld %s%s %s q=%.2f%s", k.mode == ARBOR_ADV_BROADCAST ? "broadcast"
             : k.mode == ARBOR_ADV_AEPO ? "aepo" : "tao", (long long)k.n_seqs, (long long)d.n_tokens,
             k.padded ? "padded" : (k.i64 ? "flat-i64" : "flat-i32"), k.masked ? " masked" : "", k.note, k.q,
             k.tie_levels ? " ties" : "");
    if (g.rc != ARBOR_OK || rrc != ARBOR_OK || crc != ARBOR_OK) {
        record_check(c, "token_advantages", std::string(what) + " rc!=0", INFINITY);
        return;
    }
    const double mean = rstats[ARBOR_ADV_STAT_MEAN], scale = rstats[ARBOR_ADV_STAT_SCALE];
    double worst = 0, worst_cpu = 0;
    for (int64_t t = 0; t < d.n_tokens; ++t) {
        const double a = fabs(adv_d[d.ids64[t]]);
        const double h_hat = std::isfinite(mean) && d.mask[t] ? fabs((ent_d[t] - mean) * scale) : 0.0;
        const double tol = 1e-6 * a * (1.0 + fabs((double)coef) * h_hat) + 1e-30;
        worst = std::max(worst, err_ratio(ref[t], g.out[t], tol));
        worst_cpu = std::max(worst_cpu, err_ratio(cpu[t], g.out[t], tol));
    }
    // counts and τ exactly; μ, std and scale to 1e-9 relative (the reference sums up to 10^6 terms in
    // index order: its own relative error reaches ~n · 2^-53)
    for (int i : {ARBOR_ADV_STAT_VALID, ARBOR_ADV_STAT_POST, ARBOR_ADV_STAT_SHAPED, ARBOR_ADV_STAT_NONFINITE,
                  ARBOR_ADV_STAT_THRESHOLD})
        worst = std::max(worst, err_ratio(rstats[i], g.stats[i], 1e-300));
    for (int i : {ARBOR_ADV_STAT_MEAN, ARBOR_ADV_STAT_STD, ARBOR_ADV_STAT_SCALE})
        worst = std::max(worst, err_ratio(rstats[i], g.stats[i], 1e-9 * std::max(1.0, fabs(rstats[i]))));
    record_check(c, "token_advantages", what, worst);
    record_check(c, "token_advantages_vs_cpu", what, worst_cpu);
    const bool same = g.out.size() == g2.out.size() &&
                      memcmp(g.out.data(), g2.out.data(), g.out.size() * sizeof(float)) == 0 &&
                      memcmp(g.stats.data(), g2.stats.data(), g.stats.size() * sizeof(double)) == 0;
    record_check(c, "token_advantages_rerun_bits", what, same ? 0.0 : INFINITY);
}

// Error paths the return code cannot report asynchronously: a NaN entropy, an out-of-range sequence id.
void check_bad_inputs(Ctx& c) {
    AdvCase k{7, 9, false, false, false, ARBOR_ADV_AEPO, 1.0, 0, "nan"};
    AdvData d = make_data(c.rng, k);
    d.entropy[d.n_tokens / 2] = NAN;
    AdvOut g = run_cuda(d, k, 0.2f);
    bool ok = g.rc == ARBOR_OK && g.stats[ARBOR_ADV_STAT_NONFINITE] == 1.0;
    for (float v : g.out) ok = ok && std::isnan(v);
    record_check(c, "token_advantages_nan_entropy", "every valid output NaN, counted in stats", ok ? 0.0 : INFINITY);

    AdvData e = make_data(c.rng, AdvCase{5, 6, false, true, false, ARBOR_ADV_BROADCAST, 1.0, 0, ""});
    e.ids64[0] = 5;  // == n_seqs
    e.ids64[1] = -1;
    AdvCase kb{5, 6, false, true, false, ARBOR_ADV_BROADCAST, 1.0, 0, "badid"};
    AdvOut b = run_cuda(e, kb, 0.0f);
    ok = b.rc == ARBOR_OK && std::isnan(b.out[0]) && std::isnan(b.out[1]);
    for (int64_t t = 2; t < e.n_tokens; ++t) ok = ok && b.out[t] == e.seq_adv[e.ids64[t]];
    record_check(c, "token_advantages_bad_seq_id", "NaN at the bad ids, others intact", ok ? 0.0 : INFINITY);

    int rc = arbor_cuda_token_advantages(nullptr, 0, nullptr, ARBOR_I32, 0, 1, nullptr, nullptr, nullptr,
                                         ARBOR_ADV_TAO, 0.01f, 0.0, nullptr, nullptr, nullptr);
    record_check(c, "token_advantages_arg_check", "TAO without stats / q = 0 rejected", rc == ARBOR_ERR_ARG ? 0.0 : INFINITY);
}

void time_shapes(Ctx& c) {
    printf("timing (median of 20, CUDA events; bytes = one pass: mask, seq id, entropy, post flag, output):\n");
    for (int64_t n : {int64_t(16384), int64_t(1) << 20, int64_t(1) << 23}) {
        const int64_t n_seqs = std::max<int64_t>(1, n / 2048);
        std::vector<float> adv(n_seqs), ent(n);
        std::vector<int32_t> ids(n);
        std::vector<uint8_t> mask(n), post(n);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (auto& a : adv) a = nd(c.rng);
        for (int64_t t = 0; t < n; ++t) {
            ids[t] = (int32_t)(t * n_seqs / n);
            ent[t] = fabsf(nd(c.rng)) * 2.0f;
            mask[t] = c.rng() % 8 != 0;
            post[t] = c.rng() % 4 == 0;
        }
        DevBuf<float> dadv(adv), dent(ent), dout(n);
        DevBuf<int32_t> dids(ids);
        DevBuf<uint8_t> dmask(mask), dpost(post);
        DevBuf<double> dstats(ARBOR_ADV_NSTATS);
        char shape[32];
        snprintf(shape, sizeof shape, "%lld", (long long)n);
        struct M { const char* name; int mode; double q; float coef; double bytes_per_token; };
        for (M m : {M{"token_adv_broadcast", ARBOR_ADV_BROADCAST, 1.0, 0.0f, 9.0}, M{"token_adv_aepo", ARBOR_ADV_AEPO, 1.0, 0.2f, 13.0},
                    M{"token_adv_tao", ARBOR_ADV_TAO, 0.2, 0.01f, 14.0}}) {
            double* st = m.mode == ARBOR_ADV_BROADCAST ? nullptr : dstats.p;
            double ms = time_ms([&] {
                arbor_cuda_token_advantages(dadv.p, n_seqs, dids.p, ARBOR_I32, n, 0, dmask.p, dent.p, dpost.p, m.mode,
                                            m.coef, m.q, dout.p, st, nullptr);
            });
            record_time(c, m.name, shape, "fp32", ms, m.bytes_per_token * n);
        }
        CUDA_OK(cudaGetLastError());
    }
}

}  // namespace

void check_advantages(Ctx& c) {
    printf("advantages: correctness vs the double reference and the CPU kernel\n");
    const AdvCase cases[] = {
        {1, 1, false, false, false, ARBOR_ADV_AEPO, 1.0, 0, "one token"},
        {3, 1, true, false, false, ARBOR_ADV_TAO, 1.0, 0, ""},
        {17, 33, false, false, true, ARBOR_ADV_BROADCAST, 1.0, 0, ""},
        {17, 33, true, false, false, ARBOR_ADV_AEPO, 1.0, 0, ""},
        {64, 300, false, true, true, ARBOR_ADV_AEPO, 1.0, 0, ""},
        {64, 300, false, false, true, ARBOR_ADV_TAO, 1.0, 0, "all post"},
        {64, 300, true, false, false, ARBOR_ADV_TAO, 0.2, 0, ""},
        {129, 517, false, true, true, ARBOR_ADV_TAO, 0.3, 7, ""},
        {100, 1000, false, false, true, ARBOR_ADV_TAO, 0.001, 0, "k=1ish"},
        {257, 4099, false, false, true, ARBOR_ADV_TAO, 0.25, 3, ""},
        {1024, 2048, true, false, false, ARBOR_ADV_AEPO, 1.0, 0, "2M tokens"},
        {512, 4096, false, true, true, ARBOR_ADV_TAO, 0.2, 0, "1M tokens"},
    };
    for (const AdvCase& k : cases) check_case(c, k);
    check_bad_inputs(c);
    if (!c.quick) time_shapes(c);
}

}  // namespace harness
