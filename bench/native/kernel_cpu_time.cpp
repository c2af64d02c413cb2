// Single-threaded CPU time (thread CPU clock, min of N) of the token-statistics kernels and the
// memory-floor loops, 64 rows x {32000, 151936}, fp32 and bf16 — robust against other processes
// taking the cores, which wall-clock JMH figures on a shared machine are not. Compiled by
// bench/kernel-cpu-time.sh against the working tree (-DNEW: has the floor loops and arbor_cpu_force_isa)
// and against an older revision's native/ for a before/after comparison.
#include "arbor_cpu.cpp"
#include <stdio.h>
#include <vector>
#include <random>
#include <chrono>
#include <algorithm>
#include <time.h>
static double tnow(){ timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t); return t.tv_sec*1e3+t.tv_nsec*1e-6; }
// single-threaded: thread CPU time (ms), robust against other processes taking the cores
template<class F> double best(F f, int n){ double b=1e30; for(int i=0;i<n;i++){double t0=tnow(); f(); double t1=tnow(); b=std::min(b,t1-t0);} return b;}
#ifdef NEW
// The compute floor: the kernels' exp (vexp_lo, as row_stats calls it) from registers, no memory: 8
// independent vectors, n exps; returns G exp/s of thread CPU time.
template <class F> static double exp_rate(F body, int64_t n) {
  double t0 = tnow(); float s = body(n); double t1 = tnow();
  if (s == 12345.f) printf("-");  // keep the sum observable
  return n / ((t1 - t0) * 1e-3) * 1e-9;
}
__attribute__((target(ARBOR_AVX512_TARGET))) static float exp_loop_avx512(int64_t n) {
  using namespace arbor::avx512;
  V d[8], acc[8], step = vset(-1e-7f);
  for (int i = 0; i < 8; ++i) { d[i] = vset(-0.1f * i - 0.05f); acc[i] = vset(0.f); }
  for (int64_t t = 0; t < n; t += 8 * W)
    for (int i = 0; i < 8; ++i) { V dc; acc[i] = vadd(acc[i], vexp_lo(d[i], &dc)); d[i] = vadd(d[i], step); }
  V a = acc[0]; for (int i = 1; i < 8; ++i) a = vadd(a, acc[i]);
  return (float)hsum(a);
}
__attribute__((target("avx2,fma,f16c"))) static float exp_loop_avx2(int64_t n) {
  using namespace arbor::avx2;
  V d[8], acc[8], step = vset(-1e-7f);
  for (int i = 0; i < 8; ++i) { d[i] = vset(-0.1f * i - 0.05f); acc[i] = vset(0.f); }
  for (int64_t t = 0; t < n; t += 8 * W)
    for (int i = 0; i < 8; ++i) { V dc; acc[i] = vadd(acc[i], vexp_lo(d[i], &dc)); d[i] = vadd(d[i], step); }
  V a = acc[0]; for (int i = 1; i < 8; ++i) a = vadd(a, acc[i]);
  return (float)hsum(a);
}
#endif
int main(int argc,char**argv){
  const char* isa = argc>1?argv[1]:"best"; int N = argc>2?atoi(argv[2]):15;
#ifdef NEW
  if (strcmp(isa,"best")) arbor_cpu_force_isa(isa);
#endif
  int64_t rows=64;
#ifdef NEW
  if (!strcmp(isa, "exp")) {  // the compute floor: G exp/s per core (best of N runs of 4e8 exps)
    double r512 = 0, r2 = 0;
    for (int i = 0; i < N; ++i) {
      if (!strncmp(arbor_cpu_isa(), "avx512", 6)) r512 = std::max(r512, exp_rate(exp_loop_avx512, 400000000L));
      r2 = std::max(r2, exp_rate(exp_loop_avx2, 400000000L));
    }
    printf("exp from registers (vexp_lo + add): avx512 %.2f G exp/s, avx2 %.2f G exp/s per core (thread CPU time)\n", r512, r2);
    return 0;
  }
#endif
  for (int64_t V : {32000L, 151936L}) for (int bf=0; bf<2; bf++) {
    size_t n=rows*V; std::vector<float> x(n), g(n); std::vector<uint16_t> xb(n), gb(n);
    std::mt19937 r(1); std::normal_distribution<float> nd(0,3);
    for(size_t i=0;i<n;i++){x[i]=nd(r); xb[i]=arbor_f32_to_bf16(x[i]);}
    std::vector<int> lab(rows); for(auto&v:lab) v=r()%V;
    std::vector<float> lp(rows),h(rows),l(rows),glp(rows,-1.f),gh(rows,0.01f),sums(rows);
    double fr=0, fc=0;
#ifdef NEW
    int64_t cols = bf? V/2 : V;
    fr = best([&]{arbor_cpu_stream_read(x.data(),rows,cols,sums.data(),1);},N);
    fc = best([&]{arbor_cpu_stream_copy(x.data(),g.data(),rows,cols,1);},N);
#endif
    double f = best([&]{ if(bf) arbor_cpu_token_stats_fwd_bf16(xb.data(),rows,V,V,V,lab.data(),ARBOR_I32,1.f,nullptr,lp.data(),h.data(),l.data(),1);
                         else arbor_cpu_token_stats_fwd_f32(x.data(),rows,V,V,V,lab.data(),ARBOR_I32,1.f,nullptr,lp.data(),h.data(),l.data(),1);},N);
    double b = best([&]{ if(bf) arbor_cpu_token_stats_bwd_bf16(xb.data(),rows,V,V,V,lab.data(),ARBOR_I32,1.f,nullptr,l.data(),h.data(),glp.data(),gh.data(),gb.data(),ARBOR_BF16,V,1);
                         else arbor_cpu_token_stats_bwd_f32(x.data(),rows,V,V,V,lab.data(),ARBOR_I32,1.f,nullptr,l.data(),h.data(),glp.data(),gh.data(),g.data(),ARBOR_F32,V,1);},N);
    // the fused policy loss (PPO, token mean, every row valid), without and with an entropy bonus (c_H = 0.01)
    std::vector<float> old(rows), adv(rows), msk(rows, 1.f), w(rows);
    for (int i = 0; i < rows; i++) { old[i] = lp[i] - 0.3f * nd(r); adv[i] = nd(r) / 3; }
    double counts[4];
    arbor_cpu_policy_loss_weights(msk.data(), nullptr, rows, 0, ARBOR_AGG_TOKEN_MEAN, 0, w.data(), counts, nullptr, 0, 1);
    arbor_policy_loss_config c{}; c.clip_mode = ARBOR_CLIP_PPO; c.eps_low = 0.2f; c.eps_high = 0.2f; c.dual_clip_c = 0;
    c.aepo_entropy_threshold = -INFINITY; c.kl_type = ARBOR_KL_NONE; c.kl_coef = 0; c.entropy_coef = 0; c.temperature = 1;
    double s9[ARBOR_PL_NUM_SUMS];
    auto loss = [&] {
      if (bf) arbor_cpu_policy_loss_fused_bf16(&c,xb.data(),rows,V,V,V,lab.data(),ARBOR_I32,old.data(),adv.data(),msk.data(),w.data(),nullptr,nullptr,nullptr,nullptr,nullptr,nullptr,gb.data(),ARBOR_BF16,V,s9,nullptr,0,1);
      else arbor_cpu_policy_loss_fused_f32(&c,x.data(),rows,V,V,V,lab.data(),ARBOR_I32,old.data(),adv.data(),msk.data(),w.data(),nullptr,nullptr,nullptr,nullptr,nullptr,nullptr,g.data(),ARBOR_F32,V,s9,nullptr,0,1);
    };
    double pl = best(loss, N);
    c.entropy_coef = 0.01f;
    double plh = best(loss, N);
    // the sampler: T = 1 untruncated, and top-k 50 + top-p 0.9 (a new step each run: a fresh draw)
    std::vector<int> tok(rows);
    uint64_t step = 0;
    auto sample = [&](int k, float p, float mp = 0.f) {
      if (bf) arbor_cpu_sample_bf16(xb.data(),rows,V,V,V,1.f,nullptr,k,nullptr,p,nullptr,mp,nullptr,1234,nullptr,nullptr,step++,nullptr,nullptr,tok.data(),ARBOR_I32,lp.data(),h.data(),l.data(),1);
      else arbor_cpu_sample_f32(x.data(),rows,V,V,V,1.f,nullptr,k,nullptr,p,nullptr,mp,nullptr,1234,nullptr,nullptr,step++,nullptr,nullptr,tok.data(),ARBOR_I32,lp.data(),h.data(),l.data(),1);
    };
    double st = best([&]{ sample(0, 1.f); }, N);
    double sk = best([&]{ sample(50, 0.9f); }, N);
    double sp = best([&]{ sample(0, 0.9f); }, N);  // top-p alone (candidates held by the statistics pass)
    double sm = best([&]{ sample(0, 1.f, 0.05f); }, N);  // min-p 0.05 alone (the same, cut at the min-p threshold)
    printf("%-8s V=%-6ld %s read %6.2f copy %6.2f | fwd %6.2f bwd %6.2f | loss %6.2f loss+H %6.2f | sample T %6.2f (%.2fx fwd) top-k/p %6.2f (%.2fx fwd) top-p %6.2f (%.2fx fwd) min-p %6.2f (%.2fx fwd)\n",
           arbor_cpu_isa(), (long)V, bf?"bf16":"f32 ", fr, fc, f, b, pl, plh, st, st / f, sk, sk / f, sp, sp / f, sm, sm / f);
    fflush(stdout);
  }
}
