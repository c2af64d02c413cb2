package ai.arbor.torch.model;

import ai.arbor.kernels.NativeExit;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.openblas.global.openblas_nolapack;
import org.bytedeco.pytorch.global.torch;

/**
 * Thread counts of the CPU math under the policy: libtorch's intra-op pool and OpenBLAS's own pool
 * (the preset's libtorch calls OpenBLAS for matrix products).
 *
 * <p>Why this exists: both pools spin while they wait for work. On a small, busy machine (2 cores
 * shared with other processes) with the tiny models of the laptop recipes, a training step of
 * {@link PolicyConfig#tiny} measured 120–400 ms with the default pools against 3–5 ms with one thread
 * each, because spinning threads of one pool starve the other's. Set the counts once at start-up,
 * before the first forward; they are process-wide.
 */
public final class CpuThreads {

    private CpuThreads() {}

    /** Sets libtorch's intra-op threads and OpenBLAS's threads to {@code n} (≥ 1). */
    public static void set(int n) {
        if (n < 1) throw new IllegalArgumentException("thread count must be >= 1, got " + n);
        NativeExit.install(); // start-up of libtorch work: exiting during it must not crash the JVM
        torch.set_num_threads(n);
        Loader.load(openblas_nolapack.class);
        org.bytedeco.openblas.presets.openblas_nolapack.blas_set_num_threads(n);
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
