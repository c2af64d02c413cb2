// gpu_check: the JVM-free GPU check (see gpu-check.sh and docs/kernels.md).
// Usage: gpu_check OUTDIR [--quick]
#include <string.h>
#include <sys/stat.h>

#include "harness.h"

int main(int argc, char** argv) {
    setvbuf(stdout, nullptr, _IOLBF, 0);  // stdout is a pipe (tee): flush per line, so a hang or kill keeps the log
    harness::Ctx c;
    c.outdir = argc > 1 ? argv[1] : "gpu-check-out";
    for (int i = 2; i < argc; ++i)
        if (!strcmp(argv[i], "--quick")) c.quick = true;
    mkdir(c.outdir.c_str(), 0755);
    int n = arbor_cuda_device_count();
    if (n <= 0) {
        fprintf(stderr, "no usable CUDA device: %s\n", arbor_cuda_last_error());
        return 2;
    }
    cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs, %.1f GiB, cc %d.%d; CPU reference ISA: %s\n", prop.name, prop.multiProcessorCount,
           prop.totalGlobalMem / 1073741824.0, prop.major, prop.minor, arbor_cpu_isa());
    c.checks_csv = fopen((c.outdir + "/checks.csv").c_str(), "w");
    c.times_csv = fopen((c.outdir + "/kernel_times.csv").c_str(), "w");
    fprintf(c.checks_csv, "kernel,case,max_err_over_tol,ok\n");
    fprintf(c.times_csv, "kernel,shape,dtype,ms,bytes,gbps,frac_copy\n");
    c.copy_gbps = harness::measure_copy_gbps();
    printf("device-to-device copy bandwidth: %.1f GB/s (read + write)\n", c.copy_gbps);
    fprintf(c.times_csv, "copy,4GiB,u8,0,0,%.2f,1\n", c.copy_gbps);

    harness::check_token_stats(c);
    harness::check_policy_loss(c);
    harness::check_advantages(c);
    harness::check_sampling(c);
    harness::check_fused_linear(c);

    fclose(c.checks_csv);
    fclose(c.times_csv);
    printf("%s: %d failed check(s)\n", c.failures ? "FAILED" : "PASSED", c.failures);
    return c.failures ? 1 : 0;
}
