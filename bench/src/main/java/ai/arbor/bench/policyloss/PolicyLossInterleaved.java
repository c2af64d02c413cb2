package ai.arbor.bench.policyloss;

import ai.arbor.kernels.PolicyLoss;
import ai.arbor.kernels.PolicyLossConfig;
import ai.arbor.kernels.TokenStats;
import java.util.Arrays;
import java.util.Random;

/**
 * Fused vs composable forward + backward (the inputs of {@link PolicyLossBench}), alternating call by
 * call in one JVM so both see the same load — on a shared machine JMH's separate forks run them at
 * different times. Prints min and median of each over {@code calls} pairs per vocabulary.
 *
 * <p>Run: {@code java -Dorg.bytedeco.javacpp.maxPhysicalBytes=0 -Xmx3g -cp "bench/target/classes:$(cat
 * bench/target/classpath.txt)" ai.arbor.bench.policyloss.PolicyLossInterleaved [calls]}
 */
public final class PolicyLossInterleaved {
    private PolicyLossInterleaved() {}

    public static void main(String[] args) {
        int calls = args.length > 0 ? Integer.parseInt(args[0]) : 30, rows = 512;
        PolicyLossConfig cfg = PolicyLossConfig.defaults();
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
            double[] fused = new double[calls], composable = new double[calls];
            for (int i = -2; i < calls; i++) {  // two pairs of warm-up
                long t0 = System.nanoTime();
                PolicyLoss.forwardBackward(cfg, logits, rows, vocab, labels, old, adv, mask, null, null, grad);
                long t1 = System.nanoTime();
                PolicyLoss.forwardBackwardComposable(cfg, logits, rows, vocab, labels, old, adv, mask, null, null, grad);
                long t2 = System.nanoTime();
                if (i < 0) continue;
                fused[i] = (t1 - t0) / 1e6;
                composable[i] = (t2 - t1) / 1e6;
            }
            Arrays.sort(fused);
            Arrays.sort(composable);
            System.out.printf("rows %d vocab %d: fused min %.1f median %.1f ms, composable min %.1f median %.1f ms%n",
                    rows, vocab, fused[0], fused[calls / 2], composable[0], composable[calls / 2]);
        }
    }
}
