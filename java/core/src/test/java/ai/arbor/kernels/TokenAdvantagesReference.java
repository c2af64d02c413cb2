package ai.arbor.kernels;

import java.util.Arrays;

/**
 * The test oracle of {@link TokenAdvantages}: docs/algorithms.md §3 in double precision, written
 * independently of the native kernels (shared with the benchmarks through the test jar).
 */
public final class TokenAdvantagesReference {
    private TokenAdvantagesReference() {}

    /** The reference's output. */
    public record Result(double[] advantages, ShapingStats stats) {}

    /**
     * The scalar reference, straight from docs/algorithms.md §3 in double precision: index-order sums, a full
     * sort for τ. Arguments as {@link TokenAdvantages#compute} ({@code seqIds} null = padded with {@code seqLen}); entropies
     * must be finite on valid tokens for the shaping modes.
     */
    public static Result compute(double[] seqAdvantages, int[] seqIds, int seqLen, boolean[] lossMask,
                                 double[] entropy, boolean[] postTool, TokenShaping shaping) {
        int n = seqIds != null ? seqIds.length : Check.arrayProduct("nSeqs * seqLen", seqAdvantages.length, seqLen);
        long valid = 0, nPost = 0, nonFinite = 0;
        double sum = 0;
        for (int t = 0; t < n; t++) {
            if (lossMask != null && !lossMask[t]) continue;
            valid++;
            if (postTool != null && postTool[t]) nPost++;
            if (entropy != null) {
                if (Double.isFinite(entropy[t])) sum += entropy[t];
                else nonFinite++;
            }
        }
        boolean haveH = entropy != null && valid > 0 && nonFinite == 0;
        if (shaping.needsEntropy() && !haveH && nonFinite > 0)
            throw new IllegalArgumentException("reference: non-finite entropy on a valid token");
        double mean = Double.NaN, var = Double.NaN, scale = Double.NaN, tau = Double.NaN;
        if (haveH) {
            mean = sum / valid;
            double ss = 0;
            for (int t = 0; t < n; t++)
                if (lossMask == null || lossMask[t]) ss += (entropy[t] - mean) * (entropy[t] - mean);
            var = valid >= 2 ? ss / (valid - 1) : 0.0;
            scale = 1.0 / Math.sqrt(var + 1e-8);
        }
        if (shaping.mode() == TokenShaping.Mode.TAO_RL && haveH && nPost > 0) {
            double[] cand = new double[(int) nPost];
            int c = 0;
            for (int t = 0; t < n; t++)
                if ((lossMask == null || lossMask[t]) && postTool[t]) cand[c++] = entropy[t];
            Arrays.sort(cand);  // ascending: the k-th largest is at nPost − k
            tau = cand[(int) (nPost - topCount(shaping.topFraction(), nPost))];
        }
        double[] out = new double[n];
        long shaped = 0;
        for (int t = 0; t < n; t++) {
            if (lossMask != null && !lossMask[t]) continue;
            int s = seqIds != null ? seqIds[t] : t / seqLen;
            double a = seqAdvantages[s];
            boolean shape = switch (shaping.mode()) {
                case BROADCAST -> false;
                case AEPO -> true;
                case TAO_RL -> postTool != null && postTool[t] && entropy[t] >= tau;
            };
            if (shape) {
                out[t] = a * (1.0 + shaping.coef() * (entropy[t] - mean) * scale);  // docs/algorithms.md §3
                shaped++;
            } else {
                out[t] = a;
            }
        }
        ShapingStats st = new ShapingStats(valid, postTool != null ? nPost : 0, shaped, mean, haveH ? Math.sqrt(var) : Double.NaN,
                tau, scale, nonFinite);
        return new Result(out, st);
    }

    /**
     * k = ⌈q·n⌉ in [1, n], a product within a relative 1e-6 of an integer counting as that integer (as the
     * kernels), so a q that went through a float (0.2f) still takes 2 of 10.
     */
    static long topCount(double q, long n) {
        if (n <= 0) return 0;
        double x = q * n;
        double r = Math.rint(x);
        long k = Math.abs(x - r) <= 1e-6 * Math.max(1.0, x) ? (long) r : (long) Math.ceil(x);
        return Math.max(1, Math.min(n, k));
    }
}
