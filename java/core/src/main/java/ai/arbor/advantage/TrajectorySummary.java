package ai.arbor.advantage;

/**
 * What the filters need to know of one trajectory, filled by the trainer from its rollout record (this
 * package deliberately does not depend on the rollout module).
 *
 * @param groupId          the GRPO group: the prompt the trajectory answers (all samples of a prompt share it)
 * @param reward           the final scalar reward, finite
 * @param toolCalls        tool calls the trajectory made, >= 0
 * @param toolCallsFailed  of those, calls that failed (error, timeout, crash), in [0, toolCalls]
 * @param hasVoidTurn      a turn with neither a tool call nor a final answer (SimpleTIR)
 * @param truncated        the response hit the length limit (DAPO overlong)
 */
public record TrajectorySummary(int groupId, float reward, int toolCalls, int toolCallsFailed, boolean hasVoidTurn,
                                boolean truncated) {

    public TrajectorySummary {
        if (!Float.isFinite(reward)) throw new IllegalArgumentException("reward must be finite, got " + reward);
        if (toolCalls < 0) throw new IllegalArgumentException("toolCalls must be >= 0, got " + toolCalls);
        if (toolCallsFailed < 0 || toolCallsFailed > toolCalls)
            throw new IllegalArgumentException("toolCallsFailed must be in [0, toolCalls = " + toolCalls + "], got " + toolCallsFailed);
    }

    /** A trajectory with no tool call, no void turn, not truncated. */
    public static TrajectorySummary of(int groupId, float reward) {
        return new TrajectorySummary(groupId, reward, 0, 0, false, false);
    }

    /** Called at least one tool and every call failed (TAO-RL). */
    public boolean allToolCallsFailed() {
        return toolCalls > 0 && toolCallsFailed == toolCalls;
    }
}
