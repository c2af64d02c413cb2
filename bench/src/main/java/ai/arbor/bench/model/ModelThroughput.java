package ai.arbor.bench.model;

import ai.arbor.torch.model.CpuThreads;
import ai.arbor.torch.model.HfCheckpoint;
import ai.arbor.torch.model.PolicyConfig;
import ai.arbor.torch.model.ReferencePolicy;
import java.util.Arrays;
import java.util.Locale;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.DeviceOptional;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * Forward + backward throughput of Qwen3-shaped random models (q/k norms, GQA, head_dim 64 / 128, tied
 * embeddings) as a fraction of the machine's sgemm rate, measured in the same run: the sgemm rate is the
 * best of a square fp32 {@code mm} timed before and after the model, with the same threads.
 *
 * <pre>
 *   bench/run.sh --main ai.arbor.bench.model.ModelThroughput [threads=2] [sizes=10m,100m] [steps=3] [recompute]
 * </pre>
 *
 * Model FLOPs per step: 6 · (linear-layer parameters incl. the LM head) · tokens, plus the attention
 * scores and values (forward 4 · T² / 2 · H · d_h per layer and sequence for causal attention; backward twice
 * that). Forward and backward are timed separately (the backward of a cross-entropy loss over all logits).
 * On a GPU (the -Pgpu build; "device=cuda") it runs under bf16 autocast and reports against the same
 * machine's bf16 {@code mm} rate.
 */
@SuppressWarnings("try") // PointerScope and NoGradGuard act through their try blocks
public final class ModelThroughput {

    private ModelThroughput() {}

    /** A benchmark shape: name, configuration, batch rows and sequence length. */
    record Shape(String name, PolicyConfig config, int batch, int seq) {}

    static Shape shape(String name) {
        HfCheckpoint.Family q3 = HfCheckpoint.Family.QWEN3;
        return switch (name) {
            // 10.0 M: vocab 8192 (tied), hidden 256, 10 layers, 4/2 heads of 64, ffn 768
            case "10m" -> new Shape(name, q3.config(8192, 256, 10, 4, 2, 64, 768, 4096, 1e6, 1e-6, true, false, 1), 4, 256);
            // 107 M: vocab 32000 (tied), hidden 768, 12 layers, 6/2 heads of 128, ffn 2304
            case "100m" -> new Shape(name, q3.config(32000, 768, 12, 6, 2, 128, 2304, 4096, 1e6, 1e-6, true, false, 1), 2, 256);
            // Qwen3-0.6B's shape (28 layers, 16/8 heads of 128, hidden 1024, ffn 3072, vocab 151936): GPU only
            case "0.6b" -> new Shape(name, q3.config(151936, 1024, 28, 16, 8, 128, 3072, 40960, 1e6, 1e-6, true, false, 1), 1, 8192);
            default -> throw new IllegalArgumentException("size must be 10m, 100m or 0.6b, got " + name);
        };
    }

    public static void main(String[] args) {
        int threads = 2, steps = 3;
        String[] sizes = {"10m", "100m"};
        String device = "cpu";
        boolean recompute = false;
        for (String a : args) {
            if (a.startsWith("threads=")) threads = Integer.parseInt(a.substring(8));
            else if (a.startsWith("sizes=")) sizes = a.substring(6).split(",");
            else if (a.startsWith("steps=")) steps = Integer.parseInt(a.substring(6));
            else if (a.startsWith("device=")) device = a.substring(7);
            else if (a.equals("recompute")) recompute = true;
            else throw new IllegalArgumentException("unknown argument " + a);
        }
        CpuThreads.set(threads);
        boolean cuda = device.startsWith("cuda");
        ScalarType mmType = cuda ? ScalarType.BFloat16 : ScalarType.Float;
        double gemm0 = gemmRate(device, mmType);
        System.out.printf(Locale.ROOT, "threads %d, device %s, %s mm 2048³: %.1f GFLOP/s%n", threads, device, mmType, gemm0 / 1e9);
        double[][] results = new double[sizes.length][];
        for (int i = 0; i < sizes.length; i++) results[i] = run(shape(sizes[i].trim()), device, steps, recompute);
        double gemm = Math.max(gemm0, gemmRate(device, mmType));
        System.out.printf(Locale.ROOT, "%s mm after: best %.1f GFLOP/s%n", mmType, gemm / 1e9);
        System.out.println();
        System.out.println("| model | params | tokens/step | forward s | backward s | tokens/s | model GFLOP/s | fraction of mm |");
        System.out.println("|---|---:|---:|---:|---:|---:|---:|---:|");
        for (int i = 0; i < sizes.length; i++) {
            double[] r = results[i];
            Shape s = shape(sizes[i].trim());
            System.out.printf(Locale.ROOT, "| %s%s | %.1f M | %d | %.3f | %.3f | %.0f | %.1f | %.2f |%n", s.name(), recompute ? " (recompute)" : "",
                    s.config().parameterCount() / 1e6, s.batch() * s.seq(), r[0], r[1], r[2], r[3] / 1e9, r[3] / gemm);
        }
    }

    /** Median forward seconds, median backward seconds, tokens/s and model FLOP/s of {@code steps} steps (one warm-up). */
    static double[] run(Shape s, String device, int steps, boolean recompute) {
        PolicyConfig c = s.config();
        try (ReferencePolicy p = ReferencePolicy.create(c, device, ScalarType.Float)) {
            if (p.device().is_cuda()) p.setAutocast(ScalarType.BFloat16);
            double[] fwd = new double[steps], bwd = new double[steps];
            for (int it = -1; it < steps; it++) {
                try (PointerScope scope = new PointerScope()) {
                    TensorOptions longs = new TensorOptions().dtype(new ScalarTypeOptional(ScalarType.Long)).device(new DeviceOptional(p.device()));
                    Tensor tokens = torch.randint(c.vocab(), new long[] {s.batch(), s.seq()}, longs);
                    Tensor targets = torch.randint(c.vocab(), new long[] {(long) s.batch() * s.seq()}, longs);
                    for (Tensor t : p.namedParameters().values()) if (t.grad().defined()) t.grad().zero_();
                    sync(p);
                    long t0 = System.nanoTime();
                    Tensor loss;
                    ReferencePolicy.Recomputed rec = null;
                    if (recompute) {
                        rec = p.forwardRecomputed(tokens);
                        loss = torch.cross_entropy_loss(p.logits(rec.hidden()).view(-1, c.vocab()), targets);
                    } else {
                        loss = torch.cross_entropy_loss(p.forward(tokens).view(-1, c.vocab()), targets);
                    }
                    loss.item_double();
                    long t1 = System.nanoTime();
                    loss.backward();
                    if (rec != null) {
                        rec.backward();
                        rec.close();
                    }
                    sync(p);
                    long t2 = System.nanoTime();
                    if (it >= 0) {
                        fwd[it] = (t1 - t0) / 1e9;
                        bwd[it] = (t2 - t1) / 1e9;
                    }
                    System.out.printf(Locale.ROOT, "  %s step %d: forward %.3f s, backward %.3f s, loss %.3f%n", s.name(), it, (t1 - t0) / 1e9,
                            (t2 - t1) / 1e9, loss.item_double());
                }
            }
            double f = median(fwd), b = median(bwd), tokens = (double) s.batch() * s.seq();
            return new double[] {f, b, tokens / (f + b), flops(s) / (f + b)};
        }
    }

    /** Forward + backward FLOPs of one step (3 × forward; causal attention counted over the lower triangle). */
    static double flops(Shape s) {
        PolicyConfig c = s.config();
        double d = c.dModel(), hd = c.headDim(), h = c.heads(), kv = c.kvHeads(), f = c.ffnDim();
        double linear = c.layers() * (d * h * hd * 2 + 2 * d * kv * hd + 3 * d * f) + (double) c.vocab() * d;
        double tokens = (double) s.batch() * s.seq();
        double attention = c.layers() * s.batch() * 4.0 * s.seq() * s.seq() / 2 * h * hd;
        return 3 * (2 * linear * tokens + attention);
    }

    /** Best FLOP/s of a 2048² {@code mm} over five repetitions. */
    static double gemmRate(String device, ScalarType type) {
        int n = 2048;
        double best = 0;
        try (PointerScope scope = new PointerScope(); NoGradGuard g = new NoGradGuard()) {
            TensorOptions o = new TensorOptions().dtype(new ScalarTypeOptional(type)).device(new DeviceOptional(new Device(device)));
            Tensor a = torch.randn(new long[] {n, n}, o), b = torch.randn(new long[] {n, n}, o);
            torch.mm(a, b);
            for (int i = 0; i < 5; i++) {
                long t0 = System.nanoTime();
                Tensor c = torch.mm(a, b);
                c.sum().item_double();
                best = Math.max(best, 2.0 * n * n * n / ((System.nanoTime() - t0) / 1e9));
            }
        }
        return best;
    }

    /** Waits for queued GPU work: reading a value back synchronizes the stream. */
    private static void sync(ReferencePolicy p) {
        if (!p.device().is_cuda()) return;
        try (PointerScope scope = new PointerScope()) {
            Tensor w = p.namedParameters().values().iterator().next();
            (w.grad().defined() ? w.grad() : w).sum().item_double();
        }
    }

    private static double median(double[] x) {
        double[] s = x.clone();
        Arrays.sort(s);
        return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    }
}
