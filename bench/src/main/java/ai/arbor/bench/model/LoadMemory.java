package ai.arbor.bench.model;

import ai.arbor.torch.model.HfCheckpoint;
import ai.arbor.torch.model.PolicyConfig;
import ai.arbor.torch.model.ReferencePolicy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicLong;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * Peak anonymous memory while {@link HfCheckpoint#load} reads a ~1 GB bf16 checkpoint into bf16 parameters:
 * a loader that held the file's tensors and then copied them would peak at about twice the weights.
 *
 * <pre>
 *   bench/run.sh --main ai.arbor.bench.model.LoadMemory write DIR    # a random 0.47 B-parameter Qwen3 in bf16 (0.94 GB)
 *   bench/run.sh --main ai.arbor.bench.model.LoadMemory load DIR     # in a fresh JVM
 * </pre>
 * Anonymous memory is the process's {@code RssAnon} (/proc/self/status), sampled every 5 ms; the mapped file's
 * pages are page cache ({@code RssFile}), shared and reclaimable, and reported apart.
 */
public final class LoadMemory {

    private LoadMemory() {}

    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[1]);
        if (args[0].equals("write")) {
            PolicyConfig c = HfCheckpoint.Family.QWEN3.config(32000, 2048, 8, 16, 8, 128, 6144, 4096, 1e6, 1e-6, true, false, 1);
            try (ReferencePolicy p = ReferencePolicy.create(c)) {
                HfCheckpoint.save(p, dir, HfCheckpoint.SaveOptions.defaults().withMaxShardBytes(512L << 20));
            }
            long bytes = 0;
            try (var files = Files.list(dir)) {
                for (Path f : files.toList()) bytes += Files.size(f);
            }
            System.out.printf("wrote %s: %,d parameters, %,d bytes%n", dir, c.parameterCount(), bytes);
            return;
        }
        // libtorch's own start-up memory is not the loader's: initialise it first
        try (ReferencePolicy warm = ReferencePolicy.create(PolicyConfig.tiny(8))) {
            warm.forward(new int[][] {{1, 2}}).close();
        }
        System.gc();
        long before = status("RssAnon");
        AtomicLong peak = new AtomicLong(before), peakFile = new AtomicLong(status("RssFile"));
        Thread sampler = new Thread(() -> {
            while (!Thread.currentThread().isInterrupted()) {
                peak.accumulateAndGet(status("RssAnon"), Math::max);
                peakFile.accumulateAndGet(status("RssFile"), Math::max);
                try {
                    Thread.sleep(5);
                } catch (InterruptedException e) {
                    return;
                }
            }
        });
        sampler.setDaemon(true);
        sampler.start();
        long t0 = System.nanoTime();
        try (ReferencePolicy p = HfCheckpoint.load(dir, "cpu", ScalarType.BFloat16)) {
            double s = (System.nanoTime() - t0) / 1e9;
            sampler.interrupt();
            sampler.join();
            long params = 0;
            for (Tensor t : p.namedParameters().values()) params += t.nbytes();
            long after = status("RssAnon");
            System.out.printf("loaded in %.1f s: parameters %,d bytes; RssAnon before %,d, after %,d, peak %,d (peak - before = %.2f × parameters); peak RssFile %,d%n",
                    s, params, before, after, peak.get(), (peak.get() - before) / (double) params, peakFile.get());
        }
    }

    /** A field of /proc/self/status in bytes. */
    static long status(String field) {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status")))
                if (line.startsWith(field + ":")) return Long.parseLong(line.replaceAll("\\D+", "")) * 1024;
        } catch (java.io.IOException e) {
            throw new IllegalStateException(e);
        }
        throw new IllegalStateException("no " + field + " in /proc/self/status");
    }
}
