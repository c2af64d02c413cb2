package ai.arbor.bench.kernels;

import ai.arbor.bindings.ArborCpu;
import ai.arbor.kernels.Backend;
import ai.arbor.kernels.DType;
import ai.arbor.kernels.Kernels;
import ai.arbor.kernels.LogitsView;
import ai.arbor.kernels.MemRef;
import ai.arbor.kernels.PolicyLoss;
import ai.arbor.kernels.PolicyLossConfig;
import ai.arbor.kernels.PolicyLossResult;
import ai.arbor.kernels.TokenStats;
import ai.arbor.kernels.Sampler;
import ai.arbor.kernels.SamplingParams;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Random;
import java.util.concurrent.TimeUnit;
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
 * Every CPU row kernel against the memory floor of its own bytes, side by side in one run, on
 * {@code threads} threads and the CPU path {@code isa} (forced): [rows, vocab] logits of {@code dtype}.
 * <ul>
 *   <li>{@code floorRead}: arbor_cpu_stream_read over as many bytes as the logits (vector loads, the
 *       kernels' row split) — the floor of {@code statsForward};
 *   <li>{@code floorCopy}: arbor_cpu_stream_copy of those bytes (non-temporal stores) — the floor of
 *       {@code statsBackward} (saved statistics, gradient in the logits' dtype) and of
 *       {@code policyLossFused} (forward + backward, gradient in the logits' dtype);
 *   <li>{@code sampleTemperature}, {@code sampleTopkTopp}, {@code sampleTopp}: the sampler (T = 1; top-k 50 +
 *       top-p 0.9; top-p 0.9 alone), against {@code statsForward}.
 * </ul>
 * The floors are forced onto the same ISA as the kernels. E.g.
 * {@code bench/run.sh KernelFloorBench -f 1 -wi 2 -i 5 -w 1s -r 1s}; see bench/RESULTS.md.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@State(Scope.Benchmark)
public class KernelFloorBench {
    @Param({"512"})
    public int rows;

    @Param({"32000", "151936"})
    public int vocab;

    @Param({"F32", "BF16"})
    public String dtype;

    @Param({"avx512-bf16", "avx512", "avx2-fma"})
    public String isa;

    @Param({"2"})
    public int threads;

    DType dt;
    ByteBuffer logits, grad, floorDst;
    MemRef labels, logprob, entropy, lse, gradLogprob, gradEntropy, gradMem, old, adv, mask, sums;
    LogitsView view;
    PolicyLossConfig cfg;
    PolicyLoss.Inputs plIn;
    Sampler.Outputs outputs;
    SamplingParams temperature, topkTopp, topp;
    long step, floorCols;

    static ByteBuffer direct(long bytes) {
        return ByteBuffer.allocateDirect((int) bytes).order(ByteOrder.nativeOrder());
    }

    @Setup(Level.Trial)
    public void setup() {
        if (!Kernels.cpuIsas().contains(isa)) throw new IllegalStateException("no " + isa + " here: " + Kernels.cpuIsas());
        Kernels.forceCpuIsa(isa);
        Kernels.setThreads(threads);
        dt = DType.valueOf(dtype);
        Random rnd = new Random(42);
        long n = (long) rows * vocab;
        logits = direct(n * dt.bytes());
        for (long i = 0; i < n; i++) {
            float v = (float) (rnd.nextGaussian() * 3);
            if (dt == DType.F32) logits.putFloat((int) (4 * i), v);
            else logits.putShort((int) (2 * i), (short) ArborCpu.arbor_f32_to_bf16(v));
        }
        grad = direct(n * dt.bytes());
        floorDst = direct(n * dt.bytes());
        floorCols = n * dt.bytes() / 4 / rows;  // fp32 columns per row with the logits' bytes
        sums = MemRef.of(direct(4L * rows));
        view = LogitsView.of(MemRef.of(logits), dt, rows, vocab);
        ByteBuffer lb = direct(4L * rows), g1 = direct(4L * rows), g2 = direct(4L * rows);
        ByteBuffer ob = direct(4L * rows), ab = direct(4L * rows), mb = direct(4L * rows);
        for (int r = 0; r < rows; r++) {
            lb.putInt(4 * r, rnd.nextInt(vocab));
            g1.putFloat(4 * r, -1f);
            g2.putFloat(4 * r, 0.01f);
            ab.putFloat(4 * r, (float) rnd.nextGaussian());
            mb.putFloat(4 * r, r % 10 == 9 ? 0f : 1f);
        }
        labels = MemRef.of(lb);
        gradLogprob = MemRef.of(g1);
        gradEntropy = MemRef.of(g2);
        logprob = MemRef.of(direct(4L * rows));
        entropy = MemRef.of(direct(4L * rows));
        lse = MemRef.of(direct(4L * rows));
        gradMem = MemRef.of(grad);
        statsForward();
        ByteBuffer lp = (ByteBuffer) logprob.owner();
        for (int r = 0; r < rows; r++) ob.putFloat(4 * r, (float) (lp.getFloat(4 * r) - 0.3 * rnd.nextGaussian()));
        old = MemRef.of(ob);
        adv = MemRef.of(ab);
        mask = MemRef.of(mb);
        cfg = PolicyLossConfig.defaults();
        plIn = PolicyLoss.Inputs.of(labels, DType.I32, old, adv, mask, null);
        temperature = SamplingParams.temperature(1f);
        topkTopp = SamplingParams.temperature(1f).withTopK(50).withTopP(0.9f);
        topp = SamplingParams.temperature(1f).withTopP(0.9f);
        outputs = new Sampler.Outputs(MemRef.of(direct(8L * rows)), DType.I64, MemRef.of(direct(4L * rows)),
                MemRef.of(direct(4L * rows)), MemRef.of(direct(4L * rows)));
        System.out.println("\nCPU ISA " + Backend.cpuIsa() + ", threads " + Kernels.threads());
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        Kernels.forceCpuIsa(null);
        Kernels.setThreads(Runtime.getRuntime().availableProcessors());
    }

    @Benchmark
    public MemRef floorRead() {
        Kernels.check(ArborCpu.arbor_cpu_stream_read(view.data().address(), rows, floorCols, sums.address(), threads),
                "read");
        return sums;
    }

    @Benchmark
    public ByteBuffer floorCopy() {
        Kernels.check(ArborCpu.arbor_cpu_stream_copy(view.data().address(), MemRef.of(floorDst).address(), rows,
                floorCols, threads), "copy");
        return floorDst;
    }

    @Benchmark
    public MemRef statsForward() {
        TokenStats.forward(view, labels, DType.I32, 1f, null, logprob, entropy, lse, 0);
        return entropy;
    }

    @Benchmark
    public ByteBuffer statsBackward() {
        TokenStats.backward(view, labels, DType.I32, 1f, null, lse, entropy, gradLogprob, gradEntropy, gradMem, dt,
                vocab, 0);
        return grad;
    }

    @Benchmark
    public PolicyLossResult policyLossFused() {
        return PolicyLoss.forwardBackward(cfg, view, plIn, gradMem, dt, vocab, null, null, 0);
    }

    @Benchmark
    public Sampler.Outputs sampleTemperature() {
        Sampler.sample(new Sampler.Batch(view, temperature, 1234, step++ & Sampler.MAX_STEP, null, null, null, null,
                null, null, null, null), outputs, 0);
        return outputs;
    }

    @Benchmark
    public Sampler.Outputs sampleTopkTopp() {
        Sampler.sample(new Sampler.Batch(view, topkTopp, 1234, step++ & Sampler.MAX_STEP, null, null, null, null,
                null, null, null, null), outputs, 0);
        return outputs;
    }

    @Benchmark
    public Sampler.Outputs sampleTopp() {
        Sampler.sample(new Sampler.Batch(view, topp, 1234, step++ & Sampler.MAX_STEP, null, null, null, null,
                null, null, null, null), outputs, 0);
        return outputs;
    }
}
