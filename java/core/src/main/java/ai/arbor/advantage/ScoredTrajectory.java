package ai.arbor.advantage;

/**
 * What the filters (and {@link Advantages#grpo(java.util.List, boolean)}) need to know of one scored
 * trajectory, filled by the trainer from its rollout record — this package deliberately does not depend on
 * the rollout module — or from the rewards' {@link ai.arbor.reward.TrajectorySummary} with
 * {@link #of(int, float, ai.arbor.reward.TrajectorySummary, boolean)}.
 *
 * @param groupId          the GRPO group: the prompt the trajectory answers (all samples of a prompt share it)
 * @param reward           the final scalar reward, finite
 * @param toolCalls        tool calls the trajectory made, >= 0
 * @param toolCallsFailed  of those, calls that failed (error, timeout, crash), in [0, toolCalls]
 * @param hasVoidTurn      a turn with neither a tool call nor a final answer (SimpleTIR)
 * @param truncated        the response hit the length limit (DAPO overlong)
 */
public record ScoredTrajectory(int groupId, float reward, int toolCalls, int toolCallsFailed, boolean hasVoidTurn,
                                boolean truncated) {

    public ScoredTrajectory {
        if (!Float.isFinite(reward)) throw new IllegalArgumentException("reward must be finite, got " + reward);
        if (toolCalls < 0) throw new IllegalArgumentException("toolCalls must be >= 0, got " + toolCalls);
        if (toolCallsFailed < 0 || toolCallsFailed > toolCalls)
            throw new IllegalArgumentException("toolCallsFailed must be in [0, toolCalls = " + toolCalls + "], got " + toolCallsFailed);
    }

    /** A trajectory with no tool call, no void turn, not truncated. */
    public static ScoredTrajectory of(int groupId, float reward) {
        return new ScoredTrajectory(groupId, reward, 0, 0, false, false);
    }

    /**
     * From what the reward functions read ({@code ai.arbor.reward}): tool calls, failures and truncation
     * carried over; the group, the reward and the void-turn flag added.
     */
    public static ScoredTrajectory of(int groupId, float reward, ai.arbor.reward.TrajectorySummary summary,
                                      boolean hasVoidTurn) {
        if (summary == null) throw new IllegalArgumentException("summary must not be null");
        return new ScoredTrajectory(groupId, reward, summary.toolCalls(), summary.toolFailures(), hasVoidTurn,
                summary.truncated());
    }

    /** Called at least one tool and every call failed (TAO-RL). */
    public boolean allToolCallsFailed() {
        return toolCalls > 0 && toolCallsFailed == toolCalls;
    }
}
