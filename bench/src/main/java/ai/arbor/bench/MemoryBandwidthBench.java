package ai.arbor.bench;

import ai.arbor.kernels.Kernels;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * This machine's memory bandwidth, the limit the CPU kernels are reported against: a memcpy of one
 * fp32 [rows, vocab] matrix split over {@link Kernels#threads()} threads (read + write = 8·rows·vocab
 * bytes), and a read-only pass (libtorch's vectorized sum, 4·rows·vocab bytes). Run it in the same JMH
 * invocation as the kernel benchmarks so the fractions are measured side by side, e.g.
 * {@code bench/run.sh 'TokenStatsBench|MemoryBandwidthBench' -p vocab=32000}.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@State(Scope.Benchmark)
public class MemoryBandwidthBench {
    @Param({"512"})
    public int rows;

    @Param({"32000", "151936"})
    public int vocab;

    BytePointer src, dst;
    Tensor matrix;

    @Setup(Level.Trial)
    public void setup() {
        long bytes = 4L * rows * vocab;
        src = new BytePointer(bytes);
        dst = new BytePointer(bytes);
        Pointer.memset(src, 1, bytes);
        Pointer.memset(dst, 0, bytes);
        matrix = torch.from_blob(new FloatPointer(src), new long[] {rows, vocab}, new TensorOptions(torch.ScalarType.Float));
        torch.set_num_threads(Kernels.threads());
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        src.close();
        dst.close();
    }

    /** Read + write of 8·rows·vocab bytes. */
    @Benchmark
    public byte copy() {
        long bytes = 4L * rows * vocab;
        int t = Kernels.threads();
        long part = (bytes + t - 1) / t;
        IntStream.range(0, t).parallel().forEach(i -> {
            long off = i * part, n = Math.min(part, bytes - off);
            if (n > 0) Pointer.memcpy(new BytePointer(dst).position(off), new BytePointer(src).position(off), n);
        });
        return dst.get(0);
    }

    /** Read of 4·rows·vocab bytes. */
    @Benchmark
    public float read() {
        return matrix.sum().item_float();
    }
}
