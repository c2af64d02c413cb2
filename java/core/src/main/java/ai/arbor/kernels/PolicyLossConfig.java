package ai.arbor.kernels;

import ai.arbor.bindings.ArborCpu;

/**
 * Hyper-parameters of a clipped policy-gradient loss (docs/algorithms.md §2). Per token t, with
 * δ = clamp(logprob − oldLogprob, −20, 20), r = e^δ, advantage A, entropy H, aggregation weight w_t
 * ({@link LossAgg}):
 * <pre>
 *   loss = Σ_t w_t · ( ℓ_clip(r, A)  +  klCoef · KL_t  −  entropyCoef · H_t )
 * </pre>
 * with ℓ_clip from {@link ClipMode} and KL from {@link KlType} (not added when {@code NONE}).
 *
 * <p>Defaults ({@link #defaults()}): PPO clip ε_low = ε_high = 0.2, no dual clip (c = 0; verl's
 * {@code compute_policy_loss_vanilla} always applies c = 3, and every recipe of docs/algorithms.md §6
 * sets it: {@link #vanilla()}), AEPO on every token, no KL (β = 0.001 when a KL type is chosen, verl's
 * {@code kl_loss_coef}), no entropy bonus, token-mean, normalizer from the batch, temperature 1.
 * Recipes of docs/algorithms.md §6: {@link #vanilla()}, {@link #grpoTcr()}, {@link #treeGrpo()},
 * {@link #aepo()}; estimators of §8: {@link #cispo()}, {@link #gspo()}.
 *
 * @param clipMode               the surrogate
 * @param epsLow                 lower clip ε_low ∈ [0, 1] (bound 1 − ε_low)
 * @param epsHigh                upper clip ε_high ≥ 0 (bound 1 + ε_high; clip-higher: &gt; ε_low)
 * @param dualClipC              dual clip c &gt; 1 (for A &lt; 0, ℓ = min(ℓ, −A·c); {@link ClipMode#PPO} and
 *                               {@link ClipMode#AEPO_STOP_GRADIENT} only), or 0 = off
 * @param aepoTopEntropyFraction q ∈ (0, 1] of {@link ClipMode#AEPO_STOP_GRADIENT}: the stop-gradient
 *                               clip applies to the ⌈q·N_valid⌉ valid tokens of highest entropy (ties
 *                               at the threshold included); 1 = every token (the released code)
 * @param klType                 KL estimator, or NONE
 * @param klCoef                 β ≥ 0
 * @param entropyCoef            c_H (finite): the loss gets −c_H·agg(H)
 * @param agg                    loss aggregation
 * @param aggNormalizer          N / B / F of {@code agg} when &gt; 0 (global counts for data-parallel
 *                               training); 0 = computed from the batch
 * @param temperature            z = logits / temperature, &gt; 0
 */
public record PolicyLossConfig(ClipMode clipMode, double epsLow, double epsHigh, double dualClipC,
                               double aepoTopEntropyFraction, KlType klType, double klCoef, double entropyCoef,
                               LossAgg agg, double aggNormalizer, double temperature) {

    public PolicyLossConfig {
        Check.notNull("clipMode", clipMode);
        Check.notNull("klType", klType);
        Check.notNull("agg", agg);
        if (!(epsLow >= 0 && epsLow <= 1)) throw new IllegalArgumentException("epsLow must be in [0, 1], got " + epsLow);
        if (!(epsHigh >= 0) || Double.isInfinite(epsHigh))
            throw new IllegalArgumentException("epsHigh must be finite and >= 0, got " + epsHigh);
        if (dualClipC != 0 && (!(dualClipC > 1) || Double.isInfinite(dualClipC)))
            throw new IllegalArgumentException("dualClipC must be 0 (off) or finite and > 1, got " + dualClipC);
        if (dualClipC != 0 && !clipMode.allowsDualClip())
            throw new IllegalArgumentException("dual clip (dualClipC " + dualClipC + ") applies to PPO and AEPO only, not "
                    + clipMode + "; set dualClipC(0)");
        if (!(aepoTopEntropyFraction > 0 && aepoTopEntropyFraction <= 1))
            throw new IllegalArgumentException("aepoTopEntropyFraction must be in (0, 1], got " + aepoTopEntropyFraction);
        if (!(klCoef >= 0) || Double.isInfinite(klCoef))
            throw new IllegalArgumentException("klCoef must be finite and >= 0, got " + klCoef);
        Check.finite("entropyCoef", entropyCoef);
        if (clipMode.isGspo() && agg != LossAgg.SEQ_MEAN_TOKEN_MEAN)  // verl's compute_policy_loss_gspo forces it
            throw new IllegalArgumentException(clipMode + " aggregates seq-mean-token-mean (as verl), got " + agg);
        if (!(aggNormalizer >= 0) || Double.isInfinite(aggNormalizer))
            throw new IllegalArgumentException("aggNormalizer must be finite and >= 0 (0 = from the batch), got " + aggNormalizer);
        Check.finitePositive("temperature", temperature);
    }

    /** The defaults listed above. */
    public static PolicyLossConfig defaults() {
        return builder().build();
    }

    /** verl's {@code compute_policy_loss_vanilla} (docs/algorithms.md §6): PPO clip 0.2 with dual clip c = 3, token-mean. */
    public static PolicyLossConfig vanilla() {
        return builder().dualClipC(3).build();
    }

    /** GRPO-TCR (docs/algorithms.md §6): token-mean, clip-higher 0.2 / 0.28, dual clip c = 10 (its release), no KL. */
    public static PolicyLossConfig grpoTcr() {
        return builder().epsHigh(0.28).dualClipC(10).build();
    }

    /** Tree-GRPO (docs/algorithms.md §6): PPO 0.2 with dual clip c = 3, KL k3 with β = 0.001. */
    public static PolicyLossConfig treeGrpo() {
        return builder().dualClipC(3).klType(KlType.K3).klCoef(0.001).build();
    }

    /** AEPO (docs/algorithms.md §6): the stop-gradient clip on every token with dual clip c = 3, as in the released code. */
    public static PolicyLossConfig aepo() {
        return builder().clipMode(ClipMode.AEPO_STOP_GRADIENT).dualClipC(3).build();
    }

    /** CISPO as in verl's example (docs/algorithms.md §8): ε_low = 1 (no lower bound), ε_high = 0.2, token-mean. */
    public static PolicyLossConfig cispo() {
        return builder().clipMode(ClipMode.CISPO).epsLow(1).epsHigh(0.2).build();
    }

    /** GSPO, token form, as in verl's examples (docs/algorithms.md §8): ε 3e-4 / 4e-4, seq-mean-token-mean. */
    public static PolicyLossConfig gspo() {
        return builder().clipMode(ClipMode.GSPO_TOKEN).epsLow(3e-4).epsHigh(4e-4).agg(LossAgg.SEQ_MEAN_TOKEN_MEAN).build();
    }

    public static Builder builder() {
        return new Builder();
    }

    public Builder toBuilder() {
        return new Builder().clipMode(clipMode).epsLow(epsLow).epsHigh(epsHigh).dualClipC(dualClipC)
                .aepoTopEntropyFraction(aepoTopEntropyFraction).klType(klType).klCoef(klCoef).entropyCoef(entropyCoef)
                .agg(agg).aggNormalizer(aggNormalizer).temperature(temperature);
    }

    /** This config with the aggregation normalizer N / B / F given (0 = from the batch). */
    public PolicyLossConfig withAggNormalizer(double normalizer) {
        return toBuilder().aggNormalizer(normalizer).build();
    }

    /** True when AEPO's stop-gradient clip applies to only part of the tokens (an entropy threshold is needed). */
    public boolean selectsByEntropy() {
        return clipMode == ClipMode.AEPO_STOP_GRADIENT && aepoTopEntropyFraction < 1;
    }

    /** The native parameter struct; the caller closes it. */
    ArborCpu.PolicyLossParams params(float aepoThreshold) {
        return new ArborCpu.PolicyLossParams().clip_mode(clipMode.code()).eps_low((float) epsLow)
                .eps_high((float) epsHigh).dual_clip_c((float) dualClipC).aepo_entropy_threshold(aepoThreshold)
                .kl_type(klType.code()).kl_coef((float) klCoef).entropy_coef((float) entropyCoef)
                .temperature((float) temperature);
    }

    /** Builder with the defaults of {@link PolicyLossConfig}. */
    public static final class Builder {
        private ClipMode clipMode = ClipMode.PPO;
        private double epsLow = 0.2, epsHigh = 0.2, dualClipC = 0.0, aepoTopEntropyFraction = 1.0;
        private KlType klType = KlType.NONE;
        private double klCoef = 0.001, entropyCoef = 0.0;
        private LossAgg agg = LossAgg.TOKEN_MEAN;
        private double aggNormalizer = 0.0, temperature = 1.0;

        private Builder() {}

        public Builder clipMode(ClipMode v) { clipMode = v; return this; }
        public Builder epsLow(double v) { epsLow = v; return this; }
        public Builder epsHigh(double v) { epsHigh = v; return this; }
        /** Sets ε_low = ε_high = {@code v}. */
        public Builder eps(double v) { epsLow = v; epsHigh = v; return this; }
        public Builder dualClipC(double v) { dualClipC = v; return this; }
        public Builder aepoTopEntropyFraction(double v) { aepoTopEntropyFraction = v; return this; }
        public Builder klType(KlType v) { klType = v; return this; }
        public Builder klCoef(double v) { klCoef = v; return this; }
        public Builder entropyCoef(double v) { entropyCoef = v; return this; }
        public Builder agg(LossAgg v) { agg = v; return this; }
        public Builder aggNormalizer(double v) { aggNormalizer = v; return this; }
        public Builder temperature(double v) { temperature = v; return this; }

        public PolicyLossConfig build() {
            return new PolicyLossConfig(clipMode, epsLow, epsHigh, dualClipC, aepoTopEntropyFraction, klType, klCoef,
                    entropyCoef, agg, aggNormalizer, temperature);
        }
    }
}
