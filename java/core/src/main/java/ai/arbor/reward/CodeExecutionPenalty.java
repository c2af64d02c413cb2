package ai.arbor.reward;

import java.util.List;
import java.util.Locale;

/**
 * CoRT's code-execution penalty (Li et al. 2025, "CoRT: Code-integrated Reasoning within Thinking";
 * released code {@code deepscaler/rewards/math_reward_hybrid.py}, option {@code use_code_exe_reward}):
 * an additive {@code penalty} (−0.1) when no code was run or every code execution failed, else 0. It is
 * added to the outcome reward for right and wrong answers alike (a correct answer can score 0.9).
 *
 * <p>Released-code difference: the code counts an execution as failed when its printed output is empty,
 * {@code "Done"}, {@code "[]"} or contains "error", "exception" or "traceback" (see
 * {@link #isErrorOutput(String)}); Arbor counts {@link TrajectorySummary#toolFailures()} as reported by
 * the tool (non-OK status). A rollout that wants the code's rule counts failures with
 * {@link #isErrorOutput(String)}. In the code "no code" makes {@code all([])} true, hence the penalty.
 *
 * @param penalty the additive term (CoRT: −0.1); finite and ≤ 0
 */
public record CodeExecutionPenalty(double penalty) implements RewardFunction {
    /** CoRT's −0.1. */
    public static final CodeExecutionPenalty CORT = new CodeExecutionPenalty(-0.1);

    public CodeExecutionPenalty {
        if (!Double.isFinite(penalty) || penalty > 0) throw new IllegalArgumentException("penalty must be finite and <= 0, got " + penalty);
    }

    @Override
    public double reward(TrajectorySummary t, List<String> goldAnswers) {
        return t.toolCalls() == 0 || t.toolFailures() == t.toolCalls() ? penalty : 0;
    }

    /** The released code's test of one execution output (null, empty, "Done", "[]", or an error word). */
    public static boolean isErrorOutput(String output) {
        if (output == null) return true;
        String s = output.strip();
        if (s.isEmpty() || s.equals("Done") || s.equals("[]")) return true;
        String l = s.toLowerCase(Locale.ROOT);
        return l.contains("error") || l.contains("exception") || l.contains("traceback");
    }
}
