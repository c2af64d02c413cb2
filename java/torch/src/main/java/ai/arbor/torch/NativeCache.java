package ai.arbor.torch;

import ai.arbor.bindings.ArborCpu;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.openblas.global.openblas_nolapack;
import org.bytedeco.pytorch.global.torch;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.file.StandardOpenOption;

/**
 * Fills JavaCPP's library cache ({@code ~/.javacpp/cache}, or {@code -Dorg.bytedeco.javacpp.cachedir}) under a
 * lock that other JVMs on the machine take as well, before anything else loads those libraries.
 *
 * <p>Why: on a machine whose cache is empty, the first JVM to load libtorch extracts it from the preset's
 * jar (hundreds of MB). JVMs started at once (the ranks of {@code --nproc}, a fleet of servers, a test's
 * workers, two {@code ./arbor} commands started together) each found the files missing or incomplete and
 * extracted them over one another, and a JVM mapping a file that another rewrote died of SIGBUS inside the
 * dynamic loader (seen on fresh machines: {@code DistributedTest}'s two ranks and the test JVM; two
 * {@code ./arbor init-model} started in the same second, every time). JavaCPP does not serialise the
 * extraction between processes, so {@link #fill()} does: it holds an exclusive file lock
 * ({@code .arbor-extract.lock} in the cache directory) while it loads, and the JVM that waited finds complete
 * files that it only checks and maps.
 */
public final class NativeCache {
    private NativeCache() {}

    /** The lock file's name, in the cache directory. */
    public static final String LOCK_FILE = ".arbor-extract.lock";

    private static boolean filled;

    /**
     * Loads (extracting when needed) libtorch, OpenBLAS and Arbor's kernels while holding the cache's lock;
     * cheap once they are loaded in this JVM. Without a writable cache directory it loads without the lock (and
     * JavaCPP reports why it cannot extract).
     */
    public static synchronized void fill() {
        if (filled) return;
        File dir;
        try {
            dir = Loader.getCacheDir();
        } catch (IOException e) {
            throw new UncheckedIOException("JavaCPP's cache directory cannot be created", e);
        }
        FileChannel ch = null;
        try {
            ch = FileChannel.open(new File(dir, LOCK_FILE).toPath(), StandardOpenOption.CREATE, StandardOpenOption.WRITE);
        } catch (IOException e) {
            ch = null;  // read-only cache: nothing can be extracted into it by us either
        }
        try (FileChannel c = ch; FileLock lock = c == null ? null : c.lock()) {
            Loader.load(torch.class);
            Loader.load(openblas_nolapack.class);
            Loader.load(ArborCpu.class);
            filled = true;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot lock " + new File(dir, LOCK_FILE), e);
        }
    }
}
