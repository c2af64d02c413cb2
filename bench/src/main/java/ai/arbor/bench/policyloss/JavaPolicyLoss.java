package ai.arbor.bench.policyloss;

import ai.arbor.kernels.PolicyLossConfig;
import ai.arbor.kernels.PolicyLossReference;

/**
 * The benchmarks' plain-Java baseline: the tests' double-precision reference ({@link PolicyLossReference},
 * docs/algorithms.md §1–§2, one thread) on float inputs, the gradient written back as floats. The formula
 * is not written again here.
 */
final class JavaPolicyLoss {
    private JavaPolicyLoss() {}

    static double forwardBackward(PolicyLossConfig cfg, float[] logits, int rows, int vocab, int[] labels, float[] old,
                                  float[] adv, float[] mask, float[] grad) {
        PolicyLossReference.Out o = PolicyLossReference.compute(cfg, doubles(logits), rows, vocab, vocab, labels, doubles(old),
                doubles(adv), doubles(mask), null, null, null, Double.NEGATIVE_INFINITY);
        for (int i = 0; i < grad.length; i++) grad[i] = (float) o.gradLogits[i];
        return o.loss;
    }

    private static double[] doubles(float[] v) {
        double[] d = new double[v.length];
        for (int i = 0; i < v.length; i++) d[i] = v[i];
        return d;
    }
}
