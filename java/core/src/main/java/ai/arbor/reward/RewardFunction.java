package ai.arbor.reward;

import java.util.List;

/**
 * A scalar reward of a finished trajectory (docs/algorithms.md §5, and §3 for DAPO overlong shaping). Small
 * pure functions composed by addition, e.g. CoRT's math reward with its code penalty:
 * <pre>{@code
 * RewardFunction cort = OutcomeReward.of(MathGrader.standard()).plus(CodeExecutionPenalty.CORT);
 * }</pre>
 * Implementations are stateless (or immutable) and thread-safe.
 */
@FunctionalInterface
public interface RewardFunction {

    /**
     * @param trajectory  the finished trajectory
     * @param goldAnswers the accepted answers of its prompt (non-empty; terms that ignore correctness ignore it)
     */
    double reward(TrajectorySummary trajectory, List<String> goldAnswers);

    /** This reward plus {@code other}. */
    default RewardFunction plus(RewardFunction other) {
        if (other == null) throw new IllegalArgumentException("other must not be null");
        RewardFunction self = this;
        return (t, g) -> self.reward(t, g) + other.reward(t, g);
    }

    /** The sum of the terms (at least one). */
    static RewardFunction sum(RewardFunction... terms) {
        if (terms == null || terms.length == 0) throw new IllegalArgumentException("sum needs at least one term");
        RewardFunction[] ts = terms.clone();
        for (RewardFunction f : ts) if (f == null) throw new IllegalArgumentException("terms must not be null");
        return (t, g) -> {
            double s = 0;
            for (RewardFunction f : ts) s += f.reward(t, g);
            return s;
        };
    }
}
