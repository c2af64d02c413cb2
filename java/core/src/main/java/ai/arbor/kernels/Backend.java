package ai.arbor.kernels;

import ai.arbor.bindings.ArborCpu;
import ai.arbor.bindings.ArborCuda;

/**
 * The kernel implementations: {@link #CPU} (always present: vectorized C++ with runtime ISA dispatch)
 * and {@link #CUDA} (present when the build had nvcc, the library loads, and a driver reports at
 * least one device). Asking about CUDA never throws; it reports why it is unavailable.
 */
public enum Backend {
    CPU,
    CUDA;

    /** True when kernels of this backend can run here. */
    public boolean isAvailable() {
        return this == CPU || CudaProbe.DEVICES > 0;
    }

    /** Why this backend is unavailable, or the empty string when it is available. */
    public String unavailableReason() {
        return isAvailable() ? "" : CudaProbe.REASON;
    }

    /** Number of CUDA devices (0 when CUDA is unavailable); 1 for the CPU. */
    public int deviceCount() {
        return this == CPU ? 1 : Math.max(CudaProbe.DEVICES, 0);
    }

    /** The backend that runs kernels on memory of {@code device}. */
    public static Backend of(Device device) {
        return device.isCuda() ? CUDA : CPU;
    }

    /**
     * The CPU SIMD path in use: {@code "avx512-bf16"} (AVX-512 with the hardware bf16 store),
     * {@code "avx512"}, {@code "avx2-fma"} or {@code "scalar"} (the best this
     * CPU has unless {@code ARBOR_CPU_ISA} or {@link Kernels#forceCpuIsa} chose a lower one).
     */
    public static String cpuIsa() {
        return ArborCpu.arbor_cpu_isa().getString();
    }

    /** Probed once, on first use. */
    static final class CudaProbe {
        static final int DEVICES;
        static final String REASON;

        static {
            int devices = -1;
            String reason;
            try {
                devices = ArborCuda.arbor_cuda_device_count();
                reason = devices > 0 ? "" : devices == 0 ? "no CUDA device"
                        : "CUDA runtime/driver unavailable: " + ArborCuda.arbor_cuda_last_error().getString();
            } catch (LinkageError | RuntimeException e) {
                // No CUDA library in this build (no nvcc at build time) or it failed to load.
                reason = "CUDA kernels not loadable: " + e;
            }
            DEVICES = devices;
            REASON = reason;
        }

        private CudaProbe() {}
    }
}
