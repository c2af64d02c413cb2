package ai.arbor.bench;

import ai.arbor.bindings.ArborCpu;
import ai.arbor.kernels.Kernels;
import ai.arbor.kernels.NativeExit;
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
 * This machine's memory bandwidth, the limit the CPU kernels are reported against, over one fp32
 * [rows, vocab] matrix split over {@link Kernels#threads()} threads as the kernels split it:
 * {@code read} and {@code copy} are the native STREAM-like loops (arbor_cpu_stream_read / _copy:
 * vector loads; non-temporal stores for the copy; 4·rows·vocab and 8·rows·vocab bytes), the floor.
 * {@code readLibtorchSum} (libtorch's vectorized sum) and {@code copyMemcpy} (memcpy per thread
 * block) are kept for comparison. Run it in the same JMH invocation as the kernel benchmarks so the
 * fractions are measured side by side, e.g. {@code bench/run.sh 'TokenStatsBench|MemoryBandwidthBench'
 * -p vocab=32000}; {@code KernelFloorBench} puts the floors and every row kernel in one class.
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
    FloatPointer sums;
    Tensor matrix;

    @Setup(Level.Trial)
    public void setup() {
        NativeExit.install(); // the fork's exit must not crash a thread still inside libtorch
        long bytes = 4L * rows * vocab;
        src = new BytePointer(bytes);
        dst = new BytePointer(bytes);
        Pointer.memset(src, 1, bytes);
        Pointer.memset(dst, 0, bytes);
        sums = new FloatPointer(rows);
        matrix = torch.from_blob(new FloatPointer(src), new long[] {rows, vocab}, new TensorOptions(torch.ScalarType.Float));
        torch.set_num_threads(Kernels.threads());
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        src.close();
        dst.close();
        sums.close();
    }

    /** Read of 4·rows·vocab bytes: the native floor. */
    @Benchmark
    public FloatPointer read() {
        Kernels.check(ArborCpu.arbor_cpu_stream_read(src.address(), rows, vocab, sums.address(), Kernels.threads()),
                "read");
        return sums;
    }

    /** Read + write of 8·rows·vocab bytes with non-temporal stores: the native floor. */
    @Benchmark
    public BytePointer copy() {
        Kernels.check(ArborCpu.arbor_cpu_stream_copy(src.address(), dst.address(), rows, vocab, Kernels.threads()),
                "copy");
        return dst;
    }

    /** Read + write of 8·rows·vocab bytes (memcpy per thread block). */
    @Benchmark
    public byte copyMemcpy() {
        long bytes = 4L * rows * vocab;
        int t = Kernels.threads();
        long part = (bytes + t - 1) / t;
        IntStream.range(0, t).parallel().forEach(i -> {
            long off = i * part, n = Math.min(part, bytes - off);
            if (n > 0) Pointer.memcpy(new BytePointer(dst).position(off), new BytePointer(src).position(off), n);
        });
        return dst.get(0);
    }

    /** Read of 4·rows·vocab bytes (libtorch's sum). */
    @Benchmark
    public float readLibtorchSum() {
        return matrix.sum().item_float();
    }
}
