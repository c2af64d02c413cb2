package ai.arbor.reward;

import java.util.List;

/**
 * The tool-call reward of the GRPO-TCR recipe (Yu et al. 2025, "Demystifying Reinforcement Learning in
 * Agentic Reasoning", arXiv 2510.11701, code Gen-Verse/Open-AgentRL; TCR there names the recipe's
 * Token-level loss, Clip-higher and overlong Reward shaping — this term is its math reward;
 * docs/algorithms.md §5): a correct answer earns {@code correct} (1); a wrong or missing one earns
 * <pre>  min(cap, wrong + perCall · toolCalls) = min(−0.6, −1 + 0.1 · toolCalls)</pre>
 * so that, among wrong answers, trying tools beats not trying (up to 4 calls). Released code (verl's
 * ReTool recipe, which the recipe builds on): the {@code math_dapo} score (±1) and, when negative,
 * {@code min(-0.6, score + (num_turns - 2) / 2 * 0.1)}, where {@code (num_turns − 2)/2} is the number of
 * tool calls; a malformed call adds no turn there. So {@code toolCalls} here counts executed calls only
 * ({@link TrajectorySummary#executedCalls()}: calls that reached a tool, successful or not); malformed
 * calls and calls to unknown tools add nothing, so garbage calls cannot farm the +0.1. Combine with
 * {@link OverlongShaping} for the full recipe.
 *
 * @param checker decides correctness
 * @param correct reward of a correct answer (1)
 * @param wrong   base reward of a wrong answer (−1)
 * @param perCall added per tool call to a wrong answer (0.1)
 * @param cap     upper bound of a wrong answer's reward (−0.6)
 */
public record ToolCallReward(AnswerChecker checker, double correct, double wrong, double perCall, double cap)
        implements RewardFunction {

    public ToolCallReward {
        if (checker == null) throw new IllegalArgumentException("checker must not be null");
        for (double v : new double[]{correct, wrong, perCall, cap}) {
            if (!Double.isFinite(v)) throw new IllegalArgumentException("ToolCallReward parameters must be finite, got " + v);
        }
        if (cap < wrong) throw new IllegalArgumentException("cap must be >= wrong, got cap=" + cap + " wrong=" + wrong);
    }

    /** GRPO-TCR's values: 1; min(−0.6, −1 + 0.1·calls). */
    public static ToolCallReward grpoTcr(AnswerChecker checker) {
        return new ToolCallReward(checker, 1, -1, 0.1, -0.6);
    }

    @Override
    public double reward(TrajectorySummary t, List<String> goldAnswers) {
        if (checker.isCorrect(t.text(), goldAnswers)) return correct;
        return wrongAnswerReward(t.executedCalls());
    }

    /** {@code min(cap, wrong + perCall · toolCalls)}. */
    public double wrongAnswerReward(int toolCalls) {
        if (toolCalls < 0) throw new IllegalArgumentException("toolCalls must be >= 0, got " + toolCalls);
        return Math.min(cap, wrong + perCall * toolCalls);
    }
}
