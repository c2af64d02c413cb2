package ai.arbor.reward;

import java.util.List;

/**
 * The F1 option of the QA reward (Search-R1 / Tree-GRPO evaluation; docs/algorithms.md §5): the token F1 of
 * the extracted answer against the best gold answer ({@link QaGrader#f1(String, List)}), 0 without an
 * answer. A dense alternative to exact match for multi-token answers.
 *
 * @param grader extraction and F1
 */
public record QaF1Reward(QaGrader grader) implements RewardFunction {
    public QaF1Reward {
        if (grader == null) throw new IllegalArgumentException("grader must not be null");
    }

    @Override
    public double reward(TrajectorySummary t, List<String> goldAnswers) {
        return grader.f1Response(t.text(), goldAnswers);
    }
}
