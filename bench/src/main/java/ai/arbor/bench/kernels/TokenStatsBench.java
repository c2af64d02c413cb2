package ai.arbor.bench.kernels;

import ai.arbor.kernels.DType;
import ai.arbor.kernels.Kernels;
import ai.arbor.kernels.LogitsView;
import ai.arbor.kernels.MemRef;
import ai.arbor.kernels.NativeExit;
import ai.arbor.kernels.TokenStats;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
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
import org.openjdk.jmh.infra.Blackhole;

/**
 * Token statistics forward and backward, fp32, [rows, vocab]: Arbor's native CPU kernels (1 and 2
 * threads), a plain-Java scalar loop, and libtorch eager (log_softmax, gather, exp·logp sum; autograd
 * for the backward) on the same memory, in one run. See bench/RESULTS.md.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@State(Scope.Benchmark)
public class TokenStatsBench {

    @Param({"512"})
    public int rows;

    @Param({"32000", "151936"})
    public int vocab;

    ByteBuffer logits;
    float[] logitsArray;
    int[] labelsArray;
    MemRef labels, logprob, entropy, lse, gradLogprob, gradEntropy, grad;
    LogitsView view;
    float[] lpOut, hOut, gradArray;
    FloatPointer pinned;
    Tensor tLogits, tLabels, tGlp, tGh;

    @Setup(Level.Trial)
    public void setup() {
        NativeExit.install(); // the fork's exit must not crash a thread still inside libtorch
        Random rnd = new Random(42);
        long n = (long) rows * vocab;
        logits = ByteBuffer.allocateDirect((int) (4 * n)).order(ByteOrder.nativeOrder());
        logitsArray = new float[(int) n];
        for (int i = 0; i < n; i++) {
            float v = (float) (rnd.nextGaussian() * 3);
            logitsArray[i] = v;
            logits.putFloat(4 * i, v);
        }
        labelsArray = rnd.ints(rows, 0, vocab).toArray();
        ByteBuffer lb = ByteBuffer.allocateDirect(4 * rows).order(ByteOrder.nativeOrder());
        for (int r = 0; r < rows; r++) lb.putInt(4 * r, labelsArray[r]);
        labels = MemRef.of(lb);
        logprob = floats(rows);
        entropy = floats(rows);
        lse = floats(rows);
        gradLogprob = floats(rows);
        gradEntropy = floats(rows);
        grad = floats(n);
        ByteBuffer g1 = (ByteBuffer) gradLogprob.owner(), g2 = (ByteBuffer) gradEntropy.owner();
        for (int r = 0; r < rows; r++) {
            g1.putFloat(4 * r, -1f);
            g2.putFloat(4 * r, 0.01f);
        }
        view = LogitsView.of(MemRef.of(logits), DType.F32, rows, vocab);
        lpOut = new float[rows];
        hOut = new float[rows];
        gradArray = new float[(int) n];
        // libtorch tensors over the same native memory (no copy)
        pinned = new FloatPointer(new org.bytedeco.javacpp.Pointer(logits));
        tLogits = torch.from_blob(pinned, new long[] {rows, vocab}, new org.bytedeco.pytorch.TensorOptions(torch.ScalarType.Float));
        long[] lab64 = new long[rows];
        for (int r = 0; r < rows; r++) lab64[r] = labelsArray[r];
        tLabels = Tensor.create(lab64, rows);
        tGlp = torch.full(new long[] {rows}, new Scalar(-1f));
        tGh = torch.full(new long[] {rows}, new Scalar(0.01f));
        torch.set_num_threads(Runtime.getRuntime().availableProcessors());
    }

    static MemRef floats(long n) {
        return MemRef.of(ByteBuffer.allocateDirect((int) (4 * n)).order(ByteOrder.nativeOrder()));
    }

    @TearDown(Level.Trial)
    public void restore() {
        Kernels.setThreads(Runtime.getRuntime().availableProcessors());
    }

    // ---- forward -------------------------------------------------------------------------------

    @Benchmark
    public void forwardNative1Thread() {
        Kernels.setThreads(1);
        TokenStats.forward(view, labels, DType.I32, 1f, null, logprob, entropy, lse, 0);
    }

    @Benchmark
    public void forwardNative2Threads() {
        Kernels.setThreads(2);
        TokenStats.forward(view, labels, DType.I32, 1f, null, logprob, entropy, lse, 0);
    }

    /** The Java-array entry point (pinned arrays, no copy), 2 threads. */
    @Benchmark
    public void forwardNativeArrays2Threads() {
        Kernels.setThreads(2);
        TokenStats.forward(logitsArray, rows, vocab, labelsArray, 1f, lpOut, hOut);
    }

    /** Straightforward scalar Java: max pass, then sum of exp and of p·z, per row. */
    @Benchmark
    public void forwardPlainJava(Blackhole bh) {
        for (int r = 0; r < rows; r++) {
            int o = r * vocab;
            float m = Float.NEGATIVE_INFINITY;
            for (int j = 0; j < vocab; j++) m = Math.max(m, logitsArray[o + j]);
            double s = 0, u = 0;
            for (int j = 0; j < vocab; j++) {
                double d = logitsArray[o + j] - m;
                double e = Math.exp(d);
                s += e;
                u += e * d;
            }
            double logS = Math.log(s);
            lpOut[r] = (float) (logitsArray[o + labelsArray[r]] - m - logS);
            hOut[r] = (float) (logS - u / s);
        }
        bh.consume(lpOut);
    }

    @Benchmark
    public void forwardLibtorchEager(Blackhole bh) {
        try (PointerScope scope = new PointerScope()) {
            Tensor lp = torch.log_softmax(tLogits, 1);
            Tensor logp = torch.gather(lp, 1, tLabels.unsqueeze(1)).squeeze(1);
            Tensor ent = lp.exp().mul(lp).sum(new long[] {1}, false, new ScalarTypeOptional()).neg();
            bh.consume(logp.data_ptr().address() + ent.data_ptr().address());
        }
    }

    // ---- backward (from saved statistics) --------------------------------------------------------

    @Benchmark
    public void backwardNative1Thread() {
        Kernels.setThreads(1);
        TokenStats.backward(view, labels, DType.I32, 1f, null, lse, entropy, gradLogprob, gradEntropy, grad, DType.F32, vocab, 0);
    }

    @Benchmark
    public void backwardNative2Threads() {
        Kernels.setThreads(2);
        TokenStats.backward(view, labels, DType.I32, 1f, null, lse, entropy, gradLogprob, gradEntropy, grad, DType.F32, vocab, 0);
    }

    /** Forward + backward with libtorch autograd (the same math a trainer would write with torch ops). */
    @Benchmark
    public void forwardBackwardLibtorchEager(Blackhole bh) {
        try (PointerScope scope = new PointerScope()) {
            Tensor x = tLogits.detach().set_requires_grad(true);
            Tensor lp = torch.log_softmax(x, 1);
            Tensor logp = torch.gather(lp, 1, tLabels.unsqueeze(1)).squeeze(1);
            Tensor ent = lp.exp().mul(lp).sum(new long[] {1}, false, new ScalarTypeOptional()).neg();
            logp.mul(tGlp).sum().add(ent.mul(tGh).sum()).backward();
            bh.consume(x.grad().data_ptr().address());
        }
    }

    @Benchmark
    public void forwardBackwardNative2Threads() {
        Kernels.setThreads(2);
        TokenStats.forward(view, labels, DType.I32, 1f, null, logprob, entropy, lse, 0);
        TokenStats.backward(view, labels, DType.I32, 1f, null, lse, entropy, gradLogprob, gradEntropy, grad, DType.F32, vocab, 0);
    }
}
