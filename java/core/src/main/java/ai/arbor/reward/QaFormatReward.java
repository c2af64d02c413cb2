package ai.arbor.reward;

import java.util.List;
import java.util.Optional;
import java.util.function.Predicate;

/**
 * Tree-GRPO's QA reward, exact match with format terms (Ji et al. 2025, "Tree Search for LLM Agent
 * Reinforcement Learning"; code AMAP-ML/Tree-GRPO, from Search-R1's {@code qa_em_format.py} with
 * {@code structure_format_score = 0.2}, {@code final_format_score = 0.1}; docs/algorithms.md §5):
 * <pre>
 *                      format valid   format invalid
 *   answer correct          1            1 − 0.2 = 0.8
 *   answer wrong           0.2               0.1
 *   no answer              0.2                0
 * </pre>
 * "Correct" is exact match after SQuAD normalization ({@link QaGrader}); "format valid" is
 * {@link SearchR1Format} by default (a valid sequence always ends in an answer, so "no answer, valid"
 * arises only with a custom format check). Released-code difference: Search-R1 extracts the answer from
 * prompt + response and requires at least two {@code <answer>} blocks (the prompt shows one); here the
 * response alone is searched. The code's optional {@code retrieval_score} is 0 in Tree-GRPO and omitted.
 *
 * @param grader               extraction and exact match
 * @param format               the format check
 * @param score                reward of a correct, well-formatted answer (1)
 * @param structureFormatScore the format credit (0.2): a wrong answer in valid format earns it, a correct
 *                             answer in invalid format loses it
 * @param finalFormatScore     reward of a wrong answer in invalid format (0.1)
 */
public record QaFormatReward(QaGrader grader, Predicate<String> format, double score, double structureFormatScore,
                             double finalFormatScore) implements RewardFunction {

    public QaFormatReward {
        if (grader == null || format == null) throw new IllegalArgumentException("grader and format must not be null");
        for (double v : new double[]{score, structureFormatScore, finalFormatScore}) {
            if (!Double.isFinite(v)) throw new IllegalArgumentException("scores must be finite, got " + v);
        }
    }

    /** Tree-GRPO's values with Search-R1's tags: 1, 0.2, 0.1. */
    public static QaFormatReward treeGrpo() {
        return new QaFormatReward(QaGrader.standard(), SearchR1Format.SEARCH_R1, 1, 0.2, 0.1);
    }

    @Override
    public double reward(TrajectorySummary t, List<String> goldAnswers) {
        boolean valid = format.test(t.text());
        Optional<String> answer = grader.extract(t.text());
        if (answer.isEmpty()) return valid ? structureFormatScore : 0;
        if (QaGrader.exactMatch(answer.get(), goldAnswers)) return valid ? score : score - structureFormatScore;
        return valid ? structureFormatScore : finalFormatScore;
    }
}
