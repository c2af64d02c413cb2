package ai.arbor.reward;

import java.util.List;

/**
 * The outcome (correctness) reward: {@code correct} when the checker accepts the final answer, else
 * {@code wrong}. Math (CoRT, TAO-RL; docs/algorithms.md §5): 1 / 0 with {@link MathGrader}. DAPO's
 * {@code math_dapo} uses 1 / −1. QA exact match (Search-R1) is 1 / 0 with {@link QaGrader}.
 *
 * @param checker decides correctness
 * @param correct reward of a correct answer
 * @param wrong   reward of a wrong or missing answer
 */
public record OutcomeReward(AnswerChecker checker, double correct, double wrong) implements RewardFunction {
    public OutcomeReward {
        if (checker == null) throw new IllegalArgumentException("checker must not be null");
        if (!Double.isFinite(correct) || !Double.isFinite(wrong)) {
            throw new IllegalArgumentException("rewards must be finite, got correct=" + correct + " wrong=" + wrong);
        }
    }

    /** 1 for a correct answer, 0 otherwise. */
    public static OutcomeReward of(AnswerChecker checker) {
        return new OutcomeReward(checker, 1, 0);
    }

    @Override
    public double reward(TrajectorySummary trajectory, List<String> goldAnswers) {
        return checker.isCorrect(trajectory.text(), goldAnswers) ? correct : wrong;
    }
}
