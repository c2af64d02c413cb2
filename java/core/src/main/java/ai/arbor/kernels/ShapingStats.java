package ai.arbor.kernels;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Batch statistics of one token-level advantage call (the {@code stats} array of
 * {@code arbor/advantages.h}), for metrics.
 *
 * @param validTokens       tokens with loss mask 1
 * @param postToolTokens    valid tokens flagged M_post (TAO-RL candidates; 0 when no flags were given)
 * @param shapedTokens      tokens whose advantage was scaled (AEPO: all valid; TAO-RL: the selected)
 * @param entropyMean       μ over the valid tokens (NaN without entropies or valid tokens)
 * @param entropyStd        unbiased std over the valid tokens (0 for one token; NaN as above)
 * @param threshold         TAO-RL's τ (NaN in other modes or without candidates)
 * @param scale             1 / sqrt(var + 1e-8), the factor of (H − μ) in Ĥ
 * @param nonFiniteEntropy  valid tokens whose entropy is NaN or infinite (CUDA reports them only here)
 */
public record ShapingStats(long validTokens, long postToolTokens, long shapedTokens, double entropyMean,
                           double entropyStd, double threshold, double scale, long nonFiniteEntropy) {

    /** Number of doubles in the native stats array. */
    public static final int LENGTH = 8;

    /** From the native stats array ({@code ARBOR_ADV_STAT_*} order). */
    public static ShapingStats of(double[] s) {
        if (s == null || s.length < LENGTH) throw new IllegalArgumentException("stats must hold " + LENGTH + " doubles");
        return new ShapingStats((long) s[0], (long) s[1], (long) s[2], s[3], s[4], s[5], s[6], (long) s[7]);
    }

    /** Metrics under {@code prefix} (e.g. {@code "adv/"}). */
    public Map<String, Double> metrics(String prefix) {
        Map<String, Double> m = new LinkedHashMap<>();
        m.put(prefix + "valid_tokens", (double) validTokens);
        m.put(prefix + "post_tool_tokens", (double) postToolTokens);
        m.put(prefix + "shaped_tokens", (double) shapedTokens);
        m.put(prefix + "entropy_mean", entropyMean);
        m.put(prefix + "entropy_std", entropyStd);
        m.put(prefix + "entropy_threshold", threshold);
        return m;
    }
}
