package ai.arbor.tree;

import java.util.Random;

/**
 * When ARPO / AEPO branch a path at a tool call, given the entropy change ΔH and (AEPO) the number
 * {@code l} of consecutive branchings (docs/algorithms.md §4). Four forms, the papers' and their released
 * code's:
 * <ul>
 *   <li>{@link ArpoCode}: branch iff clip(U − β·ΔH, 0, 1) ≤ τ, U ~ Uniform(0,1) — ARPO's code (β =
 *       {@code entropy_weight} 0.2, τ = {@code branch_probability} 0.5), so τ is the base probability of
 *       branching: P(branch) = clip(τ + β·ΔH, 0, 1) (1 when τ ≥ 1);</li>
 *   <li>{@link ArpoPaper}: branch iff α + β·ΔH &gt; τ (deterministic given ΔH);</li>
 *   <li>{@link AepoCode}: branch iff clip((U + β·ΔH)·max(0, 1 − c·l), 0, 1) ≥ τ — AEPO's code
 *       (β = 0.2, c = 0.05, τ = 0.5);</li>
 *   <li>{@link AepoPaper}: branch iff (α + γ·ΔH)·(1 − P̂(l)) &gt; τ with P̂(l) = min(1, c·l).</li>
 * </ul>
 * The code forms are the defaults: the papers give no values for α and τ, while the code's constants
 * are the ones the published results were trained with.
 */
public interface BranchRule {

    /** P(branch | ΔH, l). */
    double probability(double deltaH, int consecutive);

    /** Draws the decision; a stochastic rule consumes exactly one {@code rnd.nextDouble()}. */
    boolean decide(double deltaH, int consecutive, Random rnd);

    /**
     * ARPO's released rule ({@code vllm_rollout_with_tools.py}: {@code prob = clip(random() − entropy_weight·ΔH)};
     * no branch if {@code prob > branch_probability}): branch iff clip(U − β·ΔH, 0, 1) ≤ τ. τ is what the code calls
     * the branch probability: with ΔH = 0 a path branches with probability τ, and a rise in entropy raises it.
     */
    record ArpoCode(double beta, double tau) implements BranchRule {
        public ArpoCode {
            finite("beta", beta);
            finite("tau", tau);
        }

        @Override
        public double probability(double deltaH, int consecutive) {
            if (tau >= 1) return 1;   // clip(…) ≤ 1 always
            if (tau < 0) return 0;
            // for τ ∈ [0, 1) the clip does not change the comparison: clip(x) ≤ τ ⇔ x ≤ τ
            return clip01(tau + beta * deltaH);
        }

        @Override
        public boolean decide(double deltaH, int consecutive, Random rnd) {
            return clip01(rnd.nextDouble() - beta * deltaH) <= tau;
        }
    }

    /** ARPO's paper rule: branch iff α + β·ΔH &gt; τ. */
    record ArpoPaper(double alpha, double beta, double tau) implements BranchRule {
        public ArpoPaper {
            finite("alpha", alpha);
            finite("beta", beta);
            finite("tau", tau);
        }

        @Override
        public double probability(double deltaH, int consecutive) {
            return alpha + beta * deltaH > tau ? 1 : 0;
        }

        @Override
        public boolean decide(double deltaH, int consecutive, Random rnd) {
            return alpha + beta * deltaH > tau;
        }
    }

    /** AEPO's released rule: branch iff clip((U + β·ΔH)·max(0, 1 − c·l), 0, 1) ≥ τ. */
    record AepoCode(double beta, double tau, double penaltySlope) implements BranchRule {
        public AepoCode {
            finite("beta", beta);
            finite("tau", tau);
            finite("penaltySlope", penaltySlope);
        }

        @Override
        public double probability(double deltaH, int consecutive) {
            double f = Math.max(0, 1 - penaltySlope * consecutive);
            if (tau <= 0) return 1;
            if (tau > 1 || f == 0) return 0;
            // (U + βΔH)·f ≥ τ  ⇔  U ≥ τ/f − βΔH  (the clip to [0,1] does not change a comparison with τ ∈ (0,1])
            return clip01(1 - (tau / f - beta * deltaH));
        }

        @Override
        public boolean decide(double deltaH, int consecutive, Random rnd) {
            double p = (rnd.nextDouble() + beta * deltaH) * Math.max(0, 1 - penaltySlope * consecutive);
            return clip01(p) >= tau;
        }
    }

    /** AEPO's paper rule: branch iff (α + γ·ΔH)·(1 − min(1, c·l)) &gt; τ. */
    record AepoPaper(double alpha, double gamma, double tau, double penaltySlope) implements BranchRule {
        public AepoPaper {
            finite("alpha", alpha);
            finite("gamma", gamma);
            finite("tau", tau);
            finite("penaltySlope", penaltySlope);
        }

        @Override
        public double probability(double deltaH, int consecutive) {
            return decide(deltaH, consecutive, null) ? 1 : 0;
        }

        @Override
        public boolean decide(double deltaH, int consecutive, Random rnd) {
            return (alpha + gamma * deltaH) * (1 - Math.min(1, penaltySlope * consecutive)) > tau;
        }
    }

    /** ARPO's code defaults: β = 0.2, τ = 0.5. */
    static BranchRule arpoCode() {
        return new ArpoCode(0.2, 0.5);
    }

    /** AEPO's code defaults: β = 0.2, τ = 0.5, penalty 0.05 per consecutive branching. */
    static BranchRule aepoCode() {
        return new AepoCode(0.2, 0.5, 0.05);
    }

    private static double clip01(double x) {
        return Math.max(0, Math.min(1, x));
    }

    private static void finite(String name, double v) {
        if (!Double.isFinite(v)) throw new IllegalArgumentException(name + " must be finite, got " + v);
    }
}
