package ai.arbor.kernels;

import java.util.Locale;

/**
 * How a sequence advantage A becomes token advantages Ã_t (docs/algorithms.md §3). In both shaping modes
 * <pre>
 *   Ĥ_t = (H_t − μ) / sqrt(var + 1e-8)
 * </pre>
 * with μ and var the mean and <b>unbiased</b> (n−1) variance of the token entropies over the valid
 * (loss-mask) tokens of the whole batch passed in one call — verl's {@code masked_whiten}, the token-level
 * standardization of the verl-based releases — var = 0 when fewer than two tokens are valid. Ĥ is a
 * constant of the step (detached): the entropies come from the rollout/old-policy pass and no gradient
 * flows through them.
 *
 * @param mode        the estimator
 * @param coef        a (AEPO) or α (TAO-RL); finite. Ignored by {@link Mode#BROADCAST}
 * @param topFraction q_H in (0, 1] (TAO-RL only; 1 for the other modes)
 */
public record TokenShaping(Mode mode, float coef, double topFraction) {

    /** AEPO's a (released code). */
    public static final float AEPO_A = 0.2f;
    /** TAO-RL's α. */
    public static final float TAO_ALPHA = 0.01f;
    /** TAO-RL's q_H in the paper (≈ 0.2–0.3); the released code uses 1.0 (all post-tool tokens). */
    public static final double TAO_TOP_FRACTION = 0.2;

    /** The token-level estimators. */
    public enum Mode {
        /** Ã_t = A for every valid token (GRPO, Dr.GRPO, Tree-GRPO: "broadcast to every masked token"). */
        BROADCAST(0),
        /**
         * AEPO entropy-aware advantage (Dong et al. 2025, "Agentic Entropy-Balanced Policy Optimization";
         * released code {@code AEPO/verl_aepo_entropy}, multiplicative form): Ã_t = A · (1 + a · Ĥ_t) on
         * every valid token, a = 0.2.
         */
        AEPO(1),
        /**
         * TAO-RL entropy-guided post-tool shaping: on M_post (tokens of the assistant turn right after a tool
         * observation) take the valid tokens whose entropy is among the top q_H fraction — k = ⌈q_H·n_post⌉,
         * τ = the k-th largest entropy, selected = H_t ≥ τ (ties at τ all selected) — and set
         * Ã_t = A · (1 + α · Ĥ_t) there, α = 0.01; every other token keeps A. q_H ≈ 0.2–0.3 in the paper
         * (default 0.2); 1.0 = all post-tool tokens, as the released code.
         */
        TAO_RL(2);

        private final int code;

        Mode(int code) {
            this.code = code;
        }

        /** The ABI's {@code ARBOR_ADV_*} code. */
        public int code() {
            return code;
        }
    }

    public TokenShaping {
        if (mode == null) throw new IllegalArgumentException("mode must not be null");
        if (!Float.isFinite(coef)) throw new IllegalArgumentException("coef must be finite, got " + coef);
        if (!(topFraction > 0 && topFraction <= 1))
            throw new IllegalArgumentException("topFraction (q_H) must be in (0, 1], got " + topFraction);
    }

    /** Plain broadcast of the sequence advantage. */
    public static TokenShaping broadcast() {
        return new TokenShaping(Mode.BROADCAST, 0f, 1.0);
    }

    /** AEPO with a = 0.2. */
    public static TokenShaping aepo() {
        return aepo(AEPO_A);
    }

    /** AEPO with coefficient {@code a}. */
    public static TokenShaping aepo(float a) {
        return new TokenShaping(Mode.AEPO, a, 1.0);
    }

    /** TAO-RL with α = 0.01 and q_H = 0.2 (paper). */
    public static TokenShaping taoRl() {
        return taoRl(TAO_ALPHA, TAO_TOP_FRACTION);
    }

    /** TAO-RL with α and q_H ({@code topFraction} = 1.0 shapes every post-tool token, as the released code). */
    public static TokenShaping taoRl(float alpha, double topFraction) {
        return new TokenShaping(Mode.TAO_RL, alpha, topFraction);
    }

    /** True when the mode reads token entropies (AEPO, TAO-RL). */
    public boolean needsEntropy() {
        return mode != Mode.BROADCAST;
    }

    /** By name for recipes: {@code broadcast}, {@code aepo}, {@code tao_rl} (alias {@code tao}), with the defaults. */
    public static TokenShaping byName(String name) {
        if (name == null) throw new IllegalArgumentException("shaping name must not be null");
        return switch (name.trim().toLowerCase(Locale.ROOT).replace('-', '_')) {
            case "broadcast", "none", "grpo" -> broadcast();
            case "aepo" -> aepo();
            case "tao_rl", "tao", "taorl" -> taoRl();
            default -> throw new IllegalArgumentException("unknown token shaping '" + name + "'; one of broadcast, aepo, tao_rl");
        };
    }
}
