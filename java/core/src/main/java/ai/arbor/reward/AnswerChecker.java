package ai.arbor.reward;

import java.util.List;

/**
 * Decides whether a response's final answer is correct; implemented by {@link MathGrader} (math
 * equivalence) and {@link QaGrader} (exact match after SQuAD normalization). The reward functions
 * ({@link OutcomeReward}, {@link ToolCallReward}) take one, so the same reward shape serves math and QA.
 */
@FunctionalInterface
public interface AnswerChecker {

    /**
     * @param response    the model's response text (the answer is extracted from it)
     * @param goldAnswers one or more accepted answers (non-empty)
     */
    boolean isCorrect(String response, List<String> goldAnswers);
}
