package ai.arbor.bench.policyloss;

import ai.arbor.kernels.Backend;
import ai.arbor.kernels.Kernels;
import ai.arbor.kernels.PolicyLoss;
import ai.arbor.kernels.PolicyLossConfig;
import ai.arbor.kernels.PolicyLossResult;
import ai.arbor.kernels.TokenStats;
import ai.arbor.torch.EagerPolicyLoss;
import ai.arbor.torch.TorchPolicyLoss;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * Forward + backward of the token-mean PPO loss (docs/algorithms.md §2, ε = 0.2) from logits, at
 * rows × vocab: the fused native kernel (statistics, loss and ∂loss/∂logits in one pass per row), the
 * composable native path (token stats forward, O(T) loss, token stats backward), libtorch eager with
 * autograd on the same math ({@link EagerPolicyLoss#loss}), and plain Java; plus a large memcpy,
 * the machine's copy bandwidth the kernels are reported against. All variants are checked against each
 * other once at setup (same loss, same gradient), so the timings compare the same computation.
 *
 * <p>Run: {@code bench/run.sh PolicyLossBench -f 1 -wi 2 -i 3} (results: bench/RESULTS.md).
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Fork(value = 1, jvmArgsAppend = {"-Dorg.bytedeco.javacpp.maxPhysicalBytes=0", "-Xms3g", "-Xmx3g"})
public class PolicyLossBench {
    @Param({"512"})
    public int rows;

    @Param({"32000", "151936"})
    public int vocab;

    PolicyLossConfig cfg;
    float[] logits, grad, old, adv, mask;
    int[] labels;
    Tensor x, labelsT, oldT, advT, maskT;
    BytePointer copySrc, copyDst;

    @Setup(Level.Trial)
    public void setup() {
        cfg = PolicyLossConfig.defaults();
        Random rnd = new Random(42);
        logits = new float[rows * vocab];
        for (int i = 0; i < logits.length; i++) logits[i] = (float) (rnd.nextGaussian() * 2);
        labels = new int[rows];
        mask = new float[rows];
        adv = new float[rows];
        for (int r = 0; r < rows; r++) {
            labels[r] = rnd.nextInt(vocab);
            mask[r] = r % 10 == 9 ? 0f : 1f;  // some prompt / tool-output tokens
            adv[r] = (float) rnd.nextGaussian();
        }
        float[] lp = new float[rows];
        TokenStats.forward(logits, rows, vocab, labels, 1f, lp, null);
        old = new float[rows];
        for (int r = 0; r < rows; r++) old[r] = (float) (lp[r] - 0.3 * rnd.nextGaussian());  // some tokens clip
        grad = new float[rows * vocab];
        x = Tensor.create(logits, rows, vocab);
        labelsT = Tensor.create(toLong(labels), rows);
        oldT = Tensor.create(old, rows);
        advT = Tensor.create(adv, rows);
        maskT = Tensor.create(mask, rows);
        copySrc = new BytePointer(4L * rows * vocab);
        copyDst = new BytePointer(4L * rows * vocab);
        Pointer.memset(copySrc, 1, 4L * rows * vocab);
        Pointer.memset(copyDst, 0, 4L * rows * vocab);
        verifySameMath();
        System.out.println("\nCPU ISA " + Backend.cpuIsa() + ", kernel threads " + Kernels.threads()
                + ", torch intra-op threads " + org.bytedeco.pytorch.global.torch.get_num_threads());
    }

    /** All four variants compute the same loss and gradient (fp32 round-off). */
    private void verifySameMath() {
        double fused = fused().loss(), comp = composable().loss(), java = plainJava();
        float[] g1 = grad.clone();
        double tl;
        float[] g2 = new float[grad.length];
        try (PointerScope scope = new PointerScope()) {
            Tensor[] t = torchEager();
            tl = t[0].item_double();
            ((java.nio.FloatBuffer) t[1].contiguous().createBuffer()).get(g2);
        }
        double gmax = 0, gdiff = 0;
        for (int i = 0; i < g1.length; i++) {
            gmax = Math.max(gmax, Math.abs(g2[i]));
            gdiff = Math.max(gdiff, Math.abs(g1[i] - g2[i]));
        }
        double tol = 1e-5 * (1 + Math.abs(tl));
        if (Math.abs(fused - tl) > tol || Math.abs(comp - tl) > tol || Math.abs(java - tl) > tol || gdiff > 1e-4 * gmax)
            throw new IllegalStateException("variants disagree: fused " + fused + " composable " + comp + " java " + java
                    + " torch " + tl + ", grad max diff " + gdiff + " of " + gmax);
    }

    private static long[] toLong(int[] a) {
        long[] l = new long[a.length];
        for (int i = 0; i < a.length; i++) l[i] = a[i];
        return l;
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        copySrc.close();
        copyDst.close();
    }

    @Benchmark
    public PolicyLossResult fused() {
        return PolicyLoss.forwardBackward(cfg, logits, rows, vocab, labels, old, adv, mask, null, null, grad);
    }

    @Benchmark
    public PolicyLossResult composable() {
        return PolicyLoss.forwardBackwardComposable(cfg, logits, rows, vocab, labels, old, adv, mask, null, null, grad);
    }

    @Benchmark
    public double libtorchEager() {
        try (PointerScope scope = new PointerScope()) {  // frees every temporary of this step
            Tensor[] t = torchEager();
            return t[0].item_double() + t[1].numel();
        }
    }

    /** loss and logits.grad by libtorch autograd (inside the caller's PointerScope). */
    private Tensor[] torchEager() {
        Tensor xg = x.detach().set_requires_grad(true);
        Tensor loss = EagerPolicyLoss.loss(cfg, xg, labelsT, oldT, advT, maskT, null, null, Float.NEGATIVE_INFINITY);
        loss.backward();
        return new Tensor[] {loss, xg.grad()};
    }

    @Benchmark
    public double plainJava() {
        return JavaPolicyLoss.forwardBackward(cfg, logits, rows, vocab, labels, old, adv, mask, grad);
    }

    /**
     * memcpy of one [rows, vocab] fp32 matrix (read + write of 2·4·rows·vocab bytes) split over the
     * kernels' thread count: the machine's copy bandwidth the kernels are reported against.
     */
    @Benchmark
    public long copyBandwidth() {
        long bytes = 4L * rows * vocab;
        int t = Kernels.threads();
        long part = (bytes + t - 1) / t;
        java.util.stream.IntStream.range(0, t).parallel().forEach(i -> {
            long off = i * part, n = Math.min(part, bytes - off);
            if (n > 0) Pointer.memcpy(new BytePointer(copyDst).position(off), new BytePointer(copySrc).position(off), n);
        });
        return copyDst.get(0);
    }
}
