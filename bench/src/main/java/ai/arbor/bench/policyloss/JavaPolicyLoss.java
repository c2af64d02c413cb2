package ai.arbor.bench.policyloss;

import java.util.Arrays;
import java.util.stream.IntStream;

/**
 * The token-mean PPO clip loss and ∂loss/∂logits in plain Java (the benchmarks' baseline): per row a
 * max, a sum of exponentials, the log-ratio, the clipped surrogate, and the gradient
 * g·(1[j = y] − p_j) with g = −A·r·w where the ratio is not clipped (docs/algorithms.md §1–§2). Rows run in
 * parallel on the common fork-join pool; the loss is summed in row order.
 */
final class JavaPolicyLoss {
    private JavaPolicyLoss() {}

    static double forwardBackward(float[] logits, int rows, int vocab, int[] labels, float[] old, float[] adv,
                                  float[] mask, double epsLow, double epsHigh, float[] grad, boolean parallel) {
        double n = 0;
        for (float m : mask) n += m;
        final double tokens = n;
        double[] partial = new double[rows];
        IntStream range = IntStream.range(0, rows);
        (parallel ? range.parallel() : range).forEach(r -> {
            int o = r * vocab;
            if (!(mask[r] > 0)) {
                Arrays.fill(grad, o, o + vocab, 0f);
                return;
            }
            float max = Float.NEGATIVE_INFINITY;
            for (int j = 0; j < vocab; j++) max = Math.max(max, logits[o + j]);
            double s = 0;
            for (int j = 0; j < vocab; j++) s += Math.exp(logits[o + j] - max);
            double lse = max + Math.log(s);
            double lp = logits[o + labels[r]] - lse;
            double dRaw = lp - old[r];
            double d = Math.max(-20, Math.min(20, dRaw));
            double ratio = Math.exp(d), a = adv[r], w = mask[r] / tokens;
            double clipped = Math.max(1 - epsLow, Math.min(1 + epsHigh, ratio));
            partial[r] = w * Math.max(-a * ratio, -a * clipped);
            boolean isClipped = (a > 0 && ratio > 1 + epsHigh) || (a < 0 && ratio < 1 - epsLow) || d != dRaw;
            double g = isClipped ? 0 : -a * ratio * w;  // dL/dlogprob
            for (int j = 0; j < vocab; j++) grad[o + j] = (float) (-g * Math.exp(logits[o + j] - lse));
            grad[o + labels[r]] += (float) g;
        });
        double loss = 0;
        for (double p : partial) loss += p;
        return loss;
    }
}
