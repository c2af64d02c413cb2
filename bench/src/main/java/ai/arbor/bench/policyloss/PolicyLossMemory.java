package ai.arbor.bench.policyloss;

import ai.arbor.kernels.PolicyLoss;
import ai.arbor.kernels.PolicyLossConfig;
import ai.arbor.kernels.TokenStats;
import ai.arbor.torch.EagerPolicyLoss;
import ai.arbor.torch.TorchPolicyLoss;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Random;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;

/**
 * Peak extra memory of one forward + backward of the token-mean PPO loss, per variant of
 * {@link PolicyLossBench}, beyond the inputs and the gradient output (both allocated before):
 * <ul>
 *   <li>native and libtorch memory: the rise of the process's peak resident set (VmHWM, reset through
 *       /proc/self/clear_refs before each call) over its resident set before the call — run with
 *       {@code MALLOC_MMAP_THRESHOLD_=131072} so large allocations are fresh mmaps, returned when freed
 *       (else glibc recycles freed pages and a repeat call would show no rise);</li>
 *   <li>Java heap: bytes the calling thread allocated ({@code ThreadMXBean.getThreadAllocatedBytes}),
 *       with a pre-touched fixed-size heap so heap growth does not show up as resident memory.</li>
 * </ul>
 * Each variant is run once to warm up, then measured 3 times; the median is printed.
 *
 * <p>Run (after {@code bench/run.sh} built the module):
 * {@code MALLOC_MMAP_THRESHOLD_=131072 java -Xms3g -Xmx3g -XX:+AlwaysPreTouch -Dorg.bytedeco.javacpp.maxPhysicalBytes=0
 * -cp "bench/target/classes:$(cat bench/target/classpath.txt)" ai.arbor.bench.policyloss.PolicyLossMemory}
 */
public final class PolicyLossMemory {
    private PolicyLossMemory() {}

    public static void main(String[] args) throws IOException {
        int rows = 512;
        System.out.printf("%-12s %8s %22s %18s%n", "variant", "vocab", "peak extra RSS (KiB)", "Java heap (KiB)");
        for (int vocab : new int[] {32000, 151936}) {
            Random rnd = new Random(42);
            float[] logits = new float[rows * vocab], grad = new float[rows * vocab];
            for (int i = 0; i < logits.length; i++) logits[i] = (float) (rnd.nextGaussian() * 2);
            int[] labels = new int[rows];
            float[] mask = new float[rows], adv = new float[rows], old = new float[rows], lp = new float[rows];
            for (int r = 0; r < rows; r++) {
                labels[r] = rnd.nextInt(vocab);
                mask[r] = r % 10 == 9 ? 0f : 1f;
                adv[r] = (float) rnd.nextGaussian();
            }
            TokenStats.forward(logits, rows, vocab, labels, 1f, lp, null);
            for (int r = 0; r < rows; r++) old[r] = (float) (lp[r] - 0.3 * rnd.nextGaussian());
            PolicyLossConfig cfg = PolicyLossConfig.defaults();
            Tensor x = Tensor.create(logits, rows, vocab);
            long[] lab64 = new long[rows];
            for (int r = 0; r < rows; r++) lab64[r] = labels[r];
            Tensor labT = Tensor.create(lab64, rows), oldT = Tensor.create(old, rows), advT = Tensor.create(adv, rows),
                    maskT = Tensor.create(mask, rows);
            measure("fused", vocab, () -> PolicyLoss.forwardBackward(cfg, logits, rows, vocab, labels, old, adv, mask,
                    null, null, grad));
            measure("composable", vocab, () -> PolicyLoss.forwardBackwardComposable(cfg, logits, rows, vocab, labels,
                    old, adv, mask, null, null, grad));
            measure("libtorch", vocab, () -> {
                try (PointerScope scope = new PointerScope()) {
                    Tensor xg = x.detach().set_requires_grad(true);
                    Tensor loss = EagerPolicyLoss.loss(cfg, xg, labT, oldT, advT, maskT, null, null,
                            Float.NEGATIVE_INFINITY);
                    loss.backward();
                    xg.grad().numel();
                }
            });
            measure("plainJava", vocab, () -> JavaPolicyLoss.forwardBackward(cfg, logits, rows, vocab, labels, old, adv, mask, grad));
        }
    }

    private static void measure(String name, int vocab, Runnable op) throws IOException {
        com.sun.management.ThreadMXBean tb = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        long tid = Thread.currentThread().getId();
        op.run();  // warm-up (class loading, JIT, first-touch of outputs)
        double[] rss = new double[3], heap = new double[3];
        for (int i = 0; i < 3; i++) {
            Files.writeString(Path.of("/proc/self/clear_refs"), "5");  // VmHWM := VmRSS
            long before = status("VmRSS"), h0 = tb.getThreadAllocatedBytes(tid);
            op.run();
            long peak = status("VmHWM"), h1 = tb.getThreadAllocatedBytes(tid);
            rss[i] = peak - before;
            heap[i] = (h1 - h0) / 1024.0;
        }
        Arrays.sort(rss);
        Arrays.sort(heap);
        System.out.printf("%-12s %8d %22.0f %18.1f%n", name, vocab, rss[1], heap[1]);
    }

    /** A /proc/self/status field in KiB. */
    private static long status(String field) throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/self/status")))
            if (line.startsWith(field + ":")) return Long.parseLong(line.replaceAll("[^0-9]", ""));
        throw new IllegalStateException(field + " not in /proc/self/status");
    }
}
