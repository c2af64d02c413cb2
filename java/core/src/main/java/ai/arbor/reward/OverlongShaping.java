package ai.arbor.reward;

import java.util.List;

/**
 * DAPO's soft overlong punishment (Yu et al. 2025, "DAPO: An Open-Source LLM Reinforcement Learning
 * System at Scale", arXiv 2503.14476, eq. 13; docs/algorithms.md §3), added to the outcome reward, with
 * L = {@code maxLength} (L_max) and B = {@code buffer} (L_cache):
 * <pre>
 *   R_length(|y|) = 0                     if |y| ≤ L − B
 *                 = ((L − B) − |y|) / B   if L − B < |y| ≤ L
 *                 = −1                    if |y| > L
 * </pre>
 * scaled by {@code penaltyFactor} (verl's {@code overlong_buffer.penalty_factor}, 1 in the paper). The
 * released code computes {@code min(-(|y| - (L - B)) / B * factor, 0)}, identical for |y| ≤ L (the only
 * lengths generation produces there). {@code maskTruncated} is DAPO's "overlong filtering": truncated
 * responses are excluded from the loss ({@link #masked}) — the trainer applies the mask. This is the one
 * implementation of the shaping; GRPO-TCR and TAO-RL use it too.
 *
 * @param maxLength     L_max, in the units of {@link TrajectorySummary#responseTokens()} (> 0)
 * @param buffer        L_cache, the soft-punishment interval (1 … maxLength)
 * @param penaltyFactor scale of the punishment (≥ 0; 1 in the paper)
 * @param maskTruncated exclude truncated responses from the loss
 */
public record OverlongShaping(int maxLength, int buffer, double penaltyFactor, boolean maskTruncated)
        implements RewardFunction {

    public OverlongShaping {
        if (maxLength <= 0) throw new IllegalArgumentException("maxLength must be > 0, got " + maxLength);
        if (buffer <= 0 || buffer > maxLength) {
            throw new IllegalArgumentException("buffer must be in [1, maxLength=" + maxLength + "], got " + buffer);
        }
        if (!(penaltyFactor >= 0) || Double.isInfinite(penaltyFactor)) {
            throw new IllegalArgumentException("penaltyFactor must be finite and >= 0, got " + penaltyFactor);
        }
    }

    /** The paper's shaping (factor 1), without overlong filtering. */
    public static OverlongShaping dapo(int maxLength, int buffer) {
        return new OverlongShaping(maxLength, buffer, 1, false);
    }

    /** The same shaping with overlong filtering switched {@code on} or off. */
    public OverlongShaping withMaskTruncated(boolean on) {
        return new OverlongShaping(maxLength, buffer, penaltyFactor, on);
    }

    /** R_length(|y|) times the penalty factor; in [−penaltyFactor, 0]. */
    public double penalty(int length) {
        return penaltyFactor * shape(length, maxLength, buffer);
    }

    /** The unscaled R_length(|y|) of the formula above. */
    public static double shape(int length, int maxLength, int buffer) {
        if (length < 0) throw new IllegalArgumentException("length must be >= 0, got " + length);
        if (maxLength <= 0 || buffer <= 0 || buffer > maxLength) {
            throw new IllegalArgumentException("need 0 < buffer <= maxLength, got buffer=" + buffer + " maxLength=" + maxLength);
        }
        int expected = maxLength - buffer;
        if (length <= expected) return 0;
        if (length <= maxLength) return (double) (expected - length) / buffer;
        return -1;
    }

    @Override
    public double reward(TrajectorySummary t, List<String> goldAnswers) {
        return penalty(t.responseTokens());
    }

    /** True when this trajectory is excluded from the loss (overlong filtering on and truncated). */
    public boolean masked(TrajectorySummary t) {
        return maskTruncated && t.truncated();
    }
}
