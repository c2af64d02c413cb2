package ai.arbor.kernels;

/**
 * The outputs of a policy-loss call (docs/algorithms.md §2). Sums run over the rows of the call; "valid"
 * tokens are those with mask m &gt; 0, and every metric is a mask-weighted mean over them,
 * Σ m·x / Σ m (verl's {@code masked_mean}), 0 when there is no valid token.
 *
 * @param loss          pgLoss + β·klLoss − c_H·entropyLoss (terms with a zero coefficient or KL NONE omitted)
 * @param pgLoss        Σ w·ℓ_clip
 * @param klLoss        Σ w·KL (unscaled by β; 0 for KL NONE)
 * @param entropyLoss   Σ w·H, the entropy aggregated like the loss (NaN when no entropy was available)
 * @param entropyMean   Σ m·H / Σ m
 * @param clipFracHigh  Σ m·1[A &gt; 0 and r &gt; 1 + ε_high] / Σ m (tokens clipped at the top; for AEPO the
 *                      ones whose gradient the stop-gradient clip keeps, when selected)
 * @param clipFracLow   Σ m·1[A &lt; 0 and r &lt; 1 − ε_low] / Σ m. clipFracHigh + clipFracLow is verl's
 *                      {@code pg_clipfrac}
 * @param dualClipFrac  Σ m·1[A &lt; 0 and ℓ_PPO &gt; −A·c] / Σ m (dual clip on only; verl's
 *                      {@code pg_clipfrac_lower})
 * @param approxKl      Σ m·(−δ) / Σ m, δ = clamp(logprob − old, ±20) (verl's {@code ppo_kl})
 * @param tokens        Σ m over the call's rows
 * @param normalizer    the divisor the weights used: N, B (both SEQ_MEAN modes) or F
 * @param aepoEntropyThreshold tokens with entropy ≥ this got AEPO's stop-gradient clip
 *                      (−∞ = all; NaN when the mode is not AEPO)
 */
public record PolicyLossResult(double loss, double pgLoss, double klLoss, double entropyLoss, double entropyMean,
                               double clipFracHigh, double clipFracLow, double dualClipFrac, double approxKl,
                               double tokens, double normalizer, double aepoEntropyThreshold) {

    /** Indices of the native sums ({@code ARBOR_PL_S_*}) and counts ({@code ARBOR_PL_C_*}). */
    static final int S_PG = 0, S_KL = 1, S_ENT = 2, S_MASK = 3, S_CLIP_HI = 4, S_CLIP_LO = 5, S_DUAL = 6,
            S_NEG_DELTA = 7, S_ENT_MASK = 8, NUM_SUMS = 9;
    static final int C_NORMALIZER = 3, NUM_COUNTS = 4;

    /**
     * The result from the kernels' sums ({@code double[9]}, {@code ARBOR_PL_S_*} of
     * {@code arbor/policy_loss.h}) and the normalizer. Sums of several row blocks may be added first.
     */
    public static PolicyLossResult fromSums(PolicyLossConfig cfg, double[] sums, double normalizer, double aepoThreshold) {
        Check.notNull("cfg", cfg);
        if (sums == null || sums.length < NUM_SUMS)
            throw new IllegalArgumentException("sums must hold " + NUM_SUMS + " values");
        double m = sums[S_MASK];
        double kl = cfg.klType() == KlType.NONE ? 0.0 : sums[S_KL];
        double loss = sums[S_PG];
        // the kernels' fp32 coefficients, so the value is the function whose gradient they wrote
        double beta = (float) cfg.klCoef(), ch = (float) cfg.entropyCoef();
        if (cfg.klType() != KlType.NONE && beta != 0) loss += beta * kl;
        if (ch != 0) loss -= ch * sums[S_ENT];
        return new PolicyLossResult(loss, sums[S_PG], kl, sums[S_ENT], mean(sums[S_ENT_MASK], m),
                mean(sums[S_CLIP_HI], m), mean(sums[S_CLIP_LO], m), mean(sums[S_DUAL], m), mean(sums[S_NEG_DELTA], m),
                m, normalizer, cfg.clipMode() == ClipMode.AEPO_STOP_GRADIENT ? aepoThreshold : Double.NaN);
    }

    private static double mean(double s, double m) {
        return m > 0 ? s / m : 0.0;
    }
}
