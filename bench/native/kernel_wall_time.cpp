// Wall-clock minima (ms) of the CPU row kernels and their native memory floor on 2 threads, 512 rows, the way
// KernelFloorBench runs them but without a JVM, for quick before/after comparisons on a noisy machine:
//   kernel_wall_time ISA N VOCAB BF16(0|1) [floor,fwd,bwd,loss,lossH,sampleT,topkp]
// (lossH: the loss with an entropy bonus; naming it runs loss too. sampleT: T = 1 untruncated; topkp: top-k 50 +
// top-p 0.9, as KernelFloorBench; each a fresh draw per call, and its ratio to the forward of the same run)
// (min and median of N calls each). Built by bench/kernel-wall-ab.sh against this tree and an older revision.
#include "arbor_cpu.cpp"
#include <stdio.h>
#include <vector>
#include <random>
#include <chrono>
#include <algorithm>
static double wnow(){ return std::chrono::duration<double,std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
template<class F> void stat(const char* name, F f, int n, double* out){ std::vector<double> t; for(int i=0;i<n;i++){double a=wnow(); f(); t.push_back(wnow()-a);} std::sort(t.begin(),t.end()); *out=t[0]; printf("%s min %.2f med %.2f  ", name, t[0], t[n/2]); }
int main(int argc,char**argv){
  const char* isa = argc>1?argv[1]:"avx512"; int N = argc>2?atoi(argv[2]):15; int64_t V = argc>3?atol(argv[3]):151936; int bf = argc>4?atoi(argv[4]):0; int TH=2; const char* only = argc>5?argv[5]:"all"; auto on=[&](const char* k){return !strcmp(only,"all")||strstr(only,k);};
  if (strcmp(isa, "best")) arbor_cpu_force_isa(isa);
  int64_t rows=512; size_t n=rows*V;
  std::vector<float> x(n), g(n), d(n); std::vector<uint16_t> xb(n), gb(n);
  std::mt19937 r(1); std::normal_distribution<float> nd(0,3);
  for(size_t i=0;i<n;i++){x[i]=nd(r); xb[i]=arbor_f32_to_bf16(x[i]);}
  std::vector<int> lab(rows); for(auto&v:lab) v=r()%V;
  std::vector<float> lp(rows),h(rows),l(rows),glp(rows,-1.f),gh(rows,0.01f),sums(rows),old(rows),adv(rows),mask(rows),w(rows);
  int64_t cols = bf? V/2 : V;
  double fr=1,fc=1,f=0,b=0,pl=0;
  // the saved statistics the backward reads and the logprobs the loss's old logprobs derive from, untimed
  if(bf) arbor_cpu_token_stats_fwd_bf16(xb.data(),rows,V,V,V,lab.data(),ARBOR_I32,1.f,nullptr,lp.data(),h.data(),l.data(),TH);
  else arbor_cpu_token_stats_fwd_f32(x.data(),rows,V,V,V,lab.data(),ARBOR_I32,1.f,nullptr,lp.data(),h.data(),l.data(),TH);
  if(on("floor")) stat("read",[&]{arbor_cpu_stream_read(x.data(),rows,cols,sums.data(),TH);},N,&fr);
  if(on("floor")) stat("copy",[&]{arbor_cpu_stream_copy(x.data(),d.data(),rows,cols,TH);},N,&fc);
  if(on("fwd")) stat("fwd",[&]{ if(bf) arbor_cpu_token_stats_fwd_bf16(xb.data(),rows,V,V,V,lab.data(),ARBOR_I32,1.f,nullptr,lp.data(),h.data(),l.data(),TH);
                  else arbor_cpu_token_stats_fwd_f32(x.data(),rows,V,V,V,lab.data(),ARBOR_I32,1.f,nullptr,lp.data(),h.data(),l.data(),TH);},N,&f);
  if(on("bwd")) stat("bwd",[&]{ if(bf) arbor_cpu_token_stats_bwd_bf16(xb.data(),rows,V,V,V,lab.data(),ARBOR_I32,1.f,nullptr,l.data(),h.data(),glp.data(),gh.data(),gb.data(),ARBOR_BF16,V,TH);
                  else arbor_cpu_token_stats_bwd_f32(x.data(),rows,V,V,V,lab.data(),ARBOR_I32,1.f,nullptr,l.data(),h.data(),glp.data(),gh.data(),g.data(),ARBOR_F32,V,TH);},N,&b);
  for(int i=0;i<rows;i++){old[i]=lp[i]-0.3f*nd(r); adv[i]=nd(r)/3; mask[i]= i%10==9?0.f:1.f;}
  double counts[4]; arbor_cpu_policy_loss_weights(mask.data(),nullptr,rows,0,ARBOR_AGG_TOKEN_MEAN,0,w.data(),counts,nullptr,0,1);
  arbor_policy_loss_config c{}; c.clip_mode=ARBOR_CLIP_PPO; c.eps_low=0.2f; c.eps_high=0.2f; c.dual_clip_c=0; c.aepo_entropy_threshold=-INFINITY; c.kl_type=ARBOR_KL_NONE; c.kl_coef=0; c.entropy_coef=0; c.temperature=1;
  double s9[ARBOR_PL_NUM_SUMS];
  if(on("loss")) stat("loss",[&]{ int rc = bf? arbor_cpu_policy_loss_fused_bf16(&c,xb.data(),rows,V,V,V,lab.data(),ARBOR_I32,old.data(),adv.data(),mask.data(),w.data(),nullptr,nullptr,nullptr,nullptr,nullptr,nullptr,gb.data(),ARBOR_BF16,V,s9,nullptr,0,TH)
                   : arbor_cpu_policy_loss_fused_f32(&c,x.data(),rows,V,V,V,lab.data(),ARBOR_I32,old.data(),adv.data(),mask.data(),w.data(),nullptr,nullptr,nullptr,nullptr,nullptr,nullptr,g.data(),ARBOR_F32,V,s9,nullptr,0,TH); if(rc) printf("rc %d\n",rc);},N,&pl);
  // the same with an entropy bonus (c_H = 0.01): the gradient's entropy term re-reads the row
  double plh=0; c.entropy_coef=0.01f;
  if(on("lossH")) stat("lossH",[&]{ int rc = bf? arbor_cpu_policy_loss_fused_bf16(&c,xb.data(),rows,V,V,V,lab.data(),ARBOR_I32,old.data(),adv.data(),mask.data(),w.data(),nullptr,nullptr,nullptr,nullptr,nullptr,nullptr,gb.data(),ARBOR_BF16,V,s9,nullptr,0,TH)
                   : arbor_cpu_policy_loss_fused_f32(&c,x.data(),rows,V,V,V,lab.data(),ARBOR_I32,old.data(),adv.data(),mask.data(),w.data(),nullptr,nullptr,nullptr,nullptr,nullptr,nullptr,g.data(),ARBOR_F32,V,s9,nullptr,0,TH); if(rc) printf("rc %d\n",rc);},N,&plh);
  // the sampler (a fresh step each call: new noise, the same logits)
  std::vector<int> tok(rows); double st=0, stk=0; uint64_t step=0;
  auto sample=[&](int k, float p){ int rc = bf? arbor_cpu_sample_bf16(xb.data(),rows,V,V,V,1.f,nullptr,k,nullptr,p,nullptr,0.f,nullptr,1234,nullptr,nullptr,step++,nullptr,nullptr,tok.data(),ARBOR_I32,lp.data(),h.data(),l.data(),TH)
                   : arbor_cpu_sample_f32(x.data(),rows,V,V,V,1.f,nullptr,k,nullptr,p,nullptr,0.f,nullptr,1234,nullptr,nullptr,step++,nullptr,nullptr,tok.data(),ARBOR_I32,lp.data(),h.data(),l.data(),TH); if(rc) printf("rc %d\n",rc);};
  if(on("sampleT")) stat("sampleT",[&]{sample(0,1.f);},N,&st);
  if(on("topkp")) stat("topkp",[&]{sample(50,0.9f);},N,&stk);
  if(st>0||stk>0) printf("\n%s V=%ld %s  sampleT/fwd %.2f  topkp/fwd %.2f", arbor_cpu_isa(), (long)V, bf?"bf16":"f32", st/f, stk/f);
  printf("\n%s V=%ld %s  fwd/read %.2f  bwd/copy %.2f  loss/copy %.2f  lossH/copy %.2f\n", arbor_cpu_isa(), (long)V, bf?"bf16":"f32", f/fr, b/fc, pl/fc, plh/fc);
}
