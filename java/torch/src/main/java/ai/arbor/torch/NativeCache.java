package ai.arbor.torch;

import ai.arbor.bindings.ArborCpu;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.openblas.global.openblas_nolapack;
import org.bytedeco.pytorch.global.torch;

/**
 * Fills JavaCPP's library cache ({@code ~/.javacpp/cache}) before this JVM starts others that load the same
 * libraries.
 *
 * <p>Why: on a machine whose cache is empty, the first JVM to load libtorch extracts it from the preset's
 * jar (hundreds of MB). Several JVMs started at once (the ranks of {@code --nproc}, a fleet of servers, a
 * test's workers) each found the files missing or incomplete and extracted them over one another, and a
 * JVM mapping a file that another rewrote died of SIGBUS inside the dynamic loader (seen on a fresh
 * machine: {@code DistributedTest}'s two ranks and the test JVM). Loading everything once in the parent
 * first leaves complete files that the children only check and map.
 */
public final class NativeCache {
    private NativeCache() {}

    /** Loads (extracting when needed) libtorch, OpenBLAS and Arbor's kernels; cheap once they are loaded. */
    public static void fill() {
        Loader.load(torch.class);
        Loader.load(openblas_nolapack.class);
        Loader.load(ArborCpu.class);
    }
}
