package ai.arbor.bench.sampling;

import ai.arbor.kernels.DType;
import ai.arbor.kernels.Kernels;
import ai.arbor.kernels.LogitsView;
import ai.arbor.kernels.MemRef;
import ai.arbor.kernels.NativeExit;
import ai.arbor.kernels.Sampler;
import ai.arbor.kernels.SamplingParams;
import ai.arbor.kernels.TokenStats;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.T_TensorTensor_T;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.infra.Blackhole;

/**
 * One decoding step's sampling on the CPU: Arbor's fused kernel ({@link Sampler}: token, its logprob
 * under the sampling and the tempered distribution, row entropy; one read of the logits) against the
 * same outputs from libtorch eager ops on the same fp32 logits: {@code log_softmax(x / T)}, {@code exp},
 * {@code multinomial}, entropy {@code −Σ p log p}, {@code gather}. With {@code mode = topk_topp}
 * (k = 50, p = 0.9), libtorch sorts each row, masks below the k-th value and past the nucleus
 * ({@code cumsum}), renormalizes and draws in sorted order (vLLM's eager approach); Arbor selects the
 * thresholds without sorting. Logits are N(0, 3²), like a fresh policy's. Both sides use all cores
 * ({@link Kernels#threads()} and libtorch's intra-op pool). {@code tokenStatsFloor} is the token-stats
 * forward alone on the same logits: the statistics pass every sampler needs (one exp per element), the
 * floor the fused kernel is measured against.
 *
 * <p>Run: {@code bench/run.sh SamplingBench -f 1 -wi 2 -i 3}; figures in bench/RESULTS.md.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 2, time = 1)
@Measurement(iterations = 3, time = 1)
@Fork(value = 1, jvmArgsAppend = {"-Dorg.bytedeco.javacpp.maxPhysicalBytes=0"})
public class SamplingBench {

    @Param({"1", "32", "256"})
    public int rows;

    @Param({"32000", "151936"})
    public int vocab;

    @Param({"temperature", "topk_topp"})
    public String mode;

    private SamplingParams params;
    private Sampler.Batch batch;
    private Sampler.Outputs outputs;
    private Tensor logits;
    private long step;
    private MemRef labels, statLogprob, statEntropy;

    @Setup(Level.Trial)
    public void setup() {
        NativeExit.install(); // the fork's exit must not crash a thread still inside libtorch
        Random rnd = new Random(42);
        float[] x = new float[rows * vocab];
        for (int i = 0; i < x.length; i++) x[i] = (float) (rnd.nextGaussian() * 3);
        params = mode.equals("temperature") ? SamplingParams.temperature(1f)
                : SamplingParams.temperature(1f).withTopK(50).withTopP(0.9f);
        ByteBuffer xb = ByteBuffer.allocateDirect(4 * x.length).order(ByteOrder.nativeOrder());
        xb.asFloatBuffer().put(x);
        batch = Sampler.Batch.of(LogitsView.of(MemRef.of(xb), DType.F32, rows, vocab), params, 1234, 0);
        outputs = new Sampler.Outputs(MemRef.of(direct(8 * rows)), DType.I64, MemRef.of(direct(4 * rows)),
                MemRef.of(direct(4 * rows)), MemRef.of(direct(4 * rows)));
        logits = Tensor.create(x, rows, vocab);
        labels = MemRef.of(direct(8 * rows));
        statLogprob = MemRef.of(direct(4 * rows));
        statEntropy = MemRef.of(direct(4 * rows));
    }

    private static ByteBuffer direct(int bytes) {
        return ByteBuffer.allocateDirect(bytes).order(ByteOrder.nativeOrder());
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        logits.close();
    }

    @Benchmark
    public void arbor(Blackhole bh) {
        Sampler.sample(new Sampler.Batch(batch.logits(), params, batch.seed(), step++ & Sampler.MAX_STEP, null, null,
                null, null, null, null, null, null), outputs, 0);
        bh.consume(outputs);
    }

    @Benchmark
    public void tokenStatsFloor(Blackhole bh) {
        TokenStats.forward(batch.logits(), labels, DType.I64, params.temperature(), null, statLogprob, statEntropy,
                null, 0);
        bh.consume(statEntropy);
    }

    @Benchmark
    public void libtorchEager(Blackhole bh) {
        try (PointerScope scope = new PointerScope()) {
            Tensor lp = logits.div(new Scalar(params.temperature())).log_softmax(-1);
            Tensor p = lp.exp();
            Tensor entropy = p.mul(lp).sum(new long[] {-1}, false, new ScalarTypeOptional()).neg();
            Tensor token;
            if (!params.truncates()) {
                token = p.multinomial(1);
            } else {
                T_TensorTensor_T sorted = torch.sort(lp, -1, true);
                Tensor zs = sorted.get0(), idx = sorted.get1();
                Tensor kth = zs.narrow(1, params.topK() - 1, 1);
                zs = zs.masked_fill(zs.lt(kth), new Scalar(Float.NEGATIVE_INFINITY));
                Tensor ps = zs.softmax(-1);
                Tensor before = ps.cumsum(-1).sub(ps);
                zs = zs.masked_fill(before.ge(new Scalar(params.topP())), new Scalar(Float.NEGATIVE_INFINITY));
                Tensor pick = zs.softmax(-1).multinomial(1);
                token = idx.gather(-1, pick);
            }
            Tensor logprob = lp.gather(-1, token);
            bh.consume(token.data_ptr().address() + logprob.data_ptr().address() + entropy.data_ptr().address());
        }
    }
}
