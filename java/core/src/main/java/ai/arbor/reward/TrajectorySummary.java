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
 * @param malformedCalls of the failures, calls that never reached a tool (unparsable, unknown tool): a reward
 *                       that pays per executed call ({@link ToolCallReward}) does not count them
 */
public record TrajectorySummary(String text, int toolCalls, int toolFailures, int responseTokens, boolean truncated,
                                int malformedCalls) {
    public TrajectorySummary {
        if (text == null) throw new IllegalArgumentException("text must not be null");
        if (toolCalls < 0) throw new IllegalArgumentException("toolCalls must be >= 0, got " + toolCalls);
        if (toolFailures < 0 || toolFailures > toolCalls) {
            throw new IllegalArgumentException("toolFailures must be in [0, toolCalls=" + toolCalls + "], got " + toolFailures);
        }
        if (responseTokens < 0) throw new IllegalArgumentException("responseTokens must be >= 0, got " + responseTokens);
        if (malformedCalls < 0 || malformedCalls > toolFailures)
            throw new IllegalArgumentException("malformedCalls must be in [0, toolFailures=" + toolFailures + "], got " + malformedCalls);
    }

    /** A summary in which every failed call reached its tool (no malformed calls). */
    public TrajectorySummary(String text, int toolCalls, int toolFailures, int responseTokens, boolean truncated) {
        this(text, toolCalls, toolFailures, responseTokens, truncated, 0);
    }

    /** Calls that reached a tool and ran (successfully or not): {@code toolCalls − malformedCalls}. */
    public int executedCalls() {
        return toolCalls - malformedCalls;
    }

    /** A response without tools, length unknown (0), not truncated. */
    public static TrajectorySummary ofText(String text) {
        return new TrajectorySummary(text, 0, 0, 0, false);
    }
}
