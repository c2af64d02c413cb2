// Which vector operations compete with FMAs for the FMA pipes (the question behind the AVX2 exp's form,
// docs/kernels.md): ten independent FMA chains (FMA-throughput bound: 5 cycles an iteration on two FMA pipes) plus
// four or eight independent operations of one kind; an operation that runs on other pipes leaves the time at ~5
// cycles, one that takes an FMA-pipe slot adds 2 cycles per 4. Cycles assume the clock printed first (a chain of
// dependent integer adds, 1 cycle each).
//   g++ -O2 bench/native/fp_pipe_probe.cpp -o /tmp/fp_pipe_probe && /tmp/fp_pipe_probe
// x86-64 with AVX2 and FMA only. On a shared VM, run it twice: a neighbour's burst shows as a row far off the rest.
#include <chrono>
#include <cstdio>
#define N 100000000L
#define F10 "vfmadd231ps %%ymm14,%%ymm15,%%ymm0\n vfmadd231ps %%ymm14,%%ymm15,%%ymm1\n vfmadd231ps %%ymm14,%%ymm15,%%ymm2\n" \
            "vfmadd231ps %%ymm14,%%ymm15,%%ymm3\n vfmadd231ps %%ymm14,%%ymm15,%%ymm4\n vfmadd231ps %%ymm14,%%ymm15,%%ymm5\n" \
            "vfmadd231ps %%ymm14,%%ymm15,%%ymm6\n vfmadd231ps %%ymm14,%%ymm15,%%ymm7\n vfmadd231ps %%ymm14,%%ymm15,%%ymm8\n" \
            "vfmadd231ps %%ymm14,%%ymm15,%%ymm9\n"
#define I4(op) op " %%ymm14,%%ymm15,%%ymm10\n " op " %%ymm14,%%ymm15,%%ymm11\n " op " %%ymm14,%%ymm15,%%ymm12\n " op " %%ymm14,%%ymm15,%%ymm13\n"
static double ghz;
#define RUN(name, body) {                                                                                              \
    auto t0 = std::chrono::steady_clock::now();                                                                        \
    for (long i = 0; i < N; i++)                                                                                       \
        asm volatile(body ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",   \
                     "xmm11", "xmm12", "xmm13");                                                                       \
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();                          \
    std::printf("%-34s %.2f cycles an iteration\n", name, s / N * ghz * 1e9); }
int main() {
    long x = 1;
    auto c0 = std::chrono::steady_clock::now();
    for (long i = 0; i < 4 * N; i++)
        asm volatile("add %0,%0\n add %0,%0\n add %0,%0\n add %0,%0\n add %0,%0\n add %0,%0\n add %0,%0\n add %0,%0\n"
                     "add %0,%0\n add %0,%0" : "+r"(x));
    ghz = 40.0 * N / std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count() / 1e9;
    std::printf("clock %.2f GHz (dependent integer adds)\n", ghz);
    asm volatile("vxorps %%ymm14,%%ymm14,%%ymm14\n vxorps %%ymm15,%%ymm15,%%ymm15" ::: "xmm14", "xmm15");
    RUN("10 fma", F10)
    RUN("10 fma + 4 vpermps", F10 I4("vpermps"))
    RUN("10 fma + 8 vpermps", F10 I4("vpermps") I4("vpermps"))
    RUN("10 fma + 4 vpermilps", F10 I4("vpermilps"))
    RUN("10 fma + 8 vpermilps", F10 I4("vpermilps") I4("vpermilps"))
    RUN("10 fma + 4 vmulps", F10 I4("vmulps"))
    RUN("10 fma + 8 vmaxps", F10 I4("vmaxps") I4("vmaxps"))
    RUN("10 fma + 8 vaddps", F10 I4("vaddps") I4("vaddps"))
    RUN("10 fma + 4 vcmpnltps", F10 I4("vcmpnltps"))
    RUN("10 fma + 4 vandps", F10 I4("vandps"))
    RUN("10 fma + 4 vpand", F10 I4("vpand"))
    RUN("10 fma + 4 vpaddd", F10 I4("vpaddd"))
    RUN("10 fma + 8 vpaddd", F10 I4("vpaddd") I4("vpaddd"))
    RUN("10 fma + 4 vpslld", F10 "vpslld $1,%%ymm15,%%ymm10\n vpslld $1,%%ymm15,%%ymm11\n vpslld $1,%%ymm15,%%ymm12\n vpslld $1,%%ymm15,%%ymm13\n")
    RUN("10 fma + 4 vblendvps", F10 "vblendvps %%ymm14,%%ymm14,%%ymm15,%%ymm10\n vblendvps %%ymm14,%%ymm14,%%ymm15,%%ymm11\n"
                                "vblendvps %%ymm14,%%ymm14,%%ymm15,%%ymm12\n vblendvps %%ymm14,%%ymm14,%%ymm15,%%ymm13\n")
    return x == 12345 ? 1 : 0;
}
