package ai.arbor.kernels;

import ai.arbor.bindings.ArborCpu;
import ai.arbor.bindings.ArborCuda;
import java.util.List;

/**
 * Process-wide kernel settings and the return-code check shared by all kernel entry points.
 *
 * <p>CPU kernels split rows over {@link #threads()} threads (default: all available processors);
 * results are bitwise identical for every thread count.
 */
public final class Kernels {
    private static volatile int threads = Runtime.getRuntime().availableProcessors();

    private Kernels() {}

    /** Threads the CPU kernels use per call. */
    public static int threads() {
        return threads;
    }

    /** Sets the threads the CPU kernels use per call (1 = the calling thread only). */
    public static void setThreads(int n) {
        if (n < 1 || n > 4096) throw new IllegalArgumentException("threads must be in [1, 4096], got " + n);
        threads = n;
    }

    /**
     * Forces the portable (non-SIMD) CPU path, for tests and benchmarks; {@code false} restores
     * runtime dispatch.
     */
    public static void forceScalarCpu(boolean force) {
        ArborCpu.arbor_cpu_force_scalar(force ? 1 : 0);  // false: no path forced (as forceCpuIsa(null))
    }

    /**
     * Forces the CPU SIMD path {@code isa} ({@code "avx512-bf16"}, {@code "avx512"}, {@code "avx2-fma"}, {@code "scalar"}; see
     * {@link #cpuIsas()}) for tests and benchmarks, or restores runtime dispatch ({@code null}).
     * Process-wide: not to be changed while kernels run on other threads. The environment variable
     * {@code ARBOR_CPU_ISA} caps the path for the whole process instead.
     *
     * @throws IllegalArgumentException for an unknown name or a path this CPU lacks
     */
    public static void forceCpuIsa(String isa) {
        if (isa != null && !cpuIsas().contains(isa))
            throw new IllegalArgumentException("CPU ISA must be one of " + cpuIsas() + " on this machine, got " + isa);
        check(ArborCpu.arbor_cpu_force_isa(isa), "forceCpuIsa");
    }

    /** The CPU SIMD paths available here, best first (always ending in {@code "scalar"}). */
    public static List<String> cpuIsas() {
        String best = ArborCpu.arbor_cpu_best_isa().getString();
        List<String> all = List.of("avx512-bf16", "avx512", "avx2-fma", "scalar");
        return all.subList(all.indexOf(best), all.size());
    }

    /**
     * Throws for a non-OK ABI return code; {@code what} names the call: {@link IllegalArgumentException} for a
     * rejected argument, label, dtype or NaN, {@link OutOfMemoryError} when the kernel could not allocate its
     * host scratch memory, {@link KernelException} for a CUDA error or an unknown code.
     */
    public static void check(int rc, String what) {
        switch (rc) {
            case ArborCpu.OK:
                return;
            case ArborCpu.ERR_ARG:
                throw new IllegalArgumentException(what + ": native code rejected an argument (ARBOR_ERR_ARG)");
            case ArborCpu.ERR_LABEL:
                throw new IllegalArgumentException(what + ": a label of a valid row is outside [0, vocabLimit)"
                        + " (ARBOR_ERR_LABEL); that row's outputs are NaN");
            case ArborCpu.ERR_UNSUPPORTED:
                throw new IllegalArgumentException(what + ": unsupported dtype combination (ARBOR_ERR_UNSUPPORTED)");
            case ArborCpu.ERR_NAN:
                throw new IllegalArgumentException(what + ": NaN in an input (ARBOR_ERR_NAN)");
            case ArborCpu.ERR_ALLOC:
                throw new OutOfMemoryError(what + ": native code could not allocate its scratch memory (ARBOR_ERR_ALLOC)");
            case ArborCpu.ERR_CUDA:
                throw new KernelException(what + ": CUDA error: " + ArborCuda.arbor_cuda_last_error().getString(), rc);
            default:
                throw new KernelException(what + ": unknown native return code " + rc, rc);
        }
    }

    /**
     * Runs {@code call} with CUDA device {@code device} current on this thread, restoring the previous
     * current device afterwards. Throws {@link IllegalStateException} when CUDA is unavailable.
     */
    public static int onCudaDevice(int device, java.util.function.IntSupplier call) {
        if (!Backend.CUDA.isAvailable())
            throw new IllegalStateException("CUDA memory given but " + Backend.CUDA.unavailableReason());
        int[] prev = new int[1];
        check(ArborCuda.arbor_cuda_get_device(prev), "cudaGetDevice");
        if (prev[0] != device) check(ArborCuda.arbor_cuda_set_device(device), "cudaSetDevice(" + device + ")");
        try {
            return call.getAsInt();
        } finally {
            if (prev[0] != device) ArborCuda.arbor_cuda_set_device(prev[0]);
        }
    }
}
