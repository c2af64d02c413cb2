package ai.arbor.reward;

/**
 * What the reward functions read from a finished trajectory: nothing about tokens or logits, so rewards
 * stay pure functions that the rollout layer, the trainers and the advantage code can share.
 *
 * @param text           the response as the policy produced it, with tool observations interleaved
 *                       (answers are extracted from it; Search-R1's format check reads its tags)
 * @param toolCalls      tool calls made
 * @param toolFailures   of those, calls that failed (error, timeout, crash — {@code Observation.success()} false)
 * @param responseTokens the length that counts against the generation limit L_max (DAPO overlong shaping)
 * @param truncated      the response was cut by the length limit (no natural end)
 */
public record TrajectorySummary(String text, int toolCalls, int toolFailures, int responseTokens, boolean truncated) {
    public TrajectorySummary {
        if (text == null) throw new IllegalArgumentException("text must not be null");
        if (toolCalls < 0) throw new IllegalArgumentException("toolCalls must be >= 0, got " + toolCalls);
        if (toolFailures < 0 || toolFailures > toolCalls) {
            throw new IllegalArgumentException("toolFailures must be in [0, toolCalls=" + toolCalls + "], got " + toolFailures);
        }
        if (responseTokens < 0) throw new IllegalArgumentException("responseTokens must be >= 0, got " + responseTokens);
    }

    /** A response without tools, length unknown (0), not truncated. */
    public static TrajectorySummary ofText(String text) {
        return new TrajectorySummary(text, 0, 0, 0, false);
    }
}
