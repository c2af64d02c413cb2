package ai.arbor.torch.model;

import ai.arbor.kernels.NativeExit;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.openblas.global.openblas_nolapack;
import org.bytedeco.pytorch.global.torch;

/**
 * Thread counts of the CPU math under the policy: libtorch's intra-op pool and OpenBLAS's own pool
 * (the preset's libtorch calls OpenBLAS for matrix products).
 *
 * <p>Why this exists: both pools spin while they wait for work, and a spinning thread of one pool holds
 * the core a thread of the other needs. With both pools at the machine's core count they oversubscribe it:
 * on 2 idle Zen 4 cores a kb SFT step of the laptop policy took 1.94 s with libtorch 2 / OpenBLAS 2, against
 * 0.188 s with libtorch 2 / OpenBLAS 1, 0.195 s with 1 / 2 and 0.265 s with 1 / 1 (bench/RESULTS.md, "Two
 * threads: one pool at a time"). So give the cores to one pool: {@link #set(int, int)} with the other at 1.
 * Set the counts once at start-up, before the first forward; they are process-wide.
 */
public final class CpuThreads {

    private CpuThreads() {}

    /** Sets libtorch's intra-op threads and OpenBLAS's threads both to {@code n} (≥ 1); see {@link #set(int, int)}. */
    public static void set(int n) {
        set(n, n);
    }

    /**
     * Sets libtorch's intra-op threads to {@code torchThreads} and OpenBLAS's to {@code blasThreads} (each ≥ 1).
     * Their sum should not exceed the free cores by more than one (the calling thread is shared), or the
     * spinning pools starve each other.
     */
    public static void set(int torchThreads, int blasThreads) {
        if (torchThreads < 1) throw new IllegalArgumentException("libtorch thread count must be >= 1, got " + torchThreads);
        if (blasThreads < 1) throw new IllegalArgumentException("OpenBLAS thread count must be >= 1, got " + blasThreads);
        NativeExit.install(); // start-up of libtorch work: exiting during it must not crash the JVM
        torch.set_num_threads(torchThreads);
        Loader.load(openblas_nolapack.class);
        org.bytedeco.openblas.presets.openblas_nolapack.blas_set_num_threads(blasThreads);
    }

    /** libtorch's intra-op thread count. */
    public static int torchThreads() {
        return torch.get_num_threads();
    }

    /** OpenBLAS's thread count. */
    public static int blasThreads() {
        Loader.load(openblas_nolapack.class);
        return org.bytedeco.openblas.presets.openblas_nolapack.blas_get_num_threads();
    }
}
