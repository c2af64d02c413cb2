package ai.arbor.rollout;

/**
 * What a rollout cost: the units in which tree and chain methods are compared at equal cost
 * (docs/algorithms.md §4, "Budgets": generated tokens and tool calls). Everything generated
 * counts — pruned leaves, AEPO's entropy pre-monitoring probes — not only what reaches the batch.
 *
 * @param generatedTokens  tokens the generator returned
 * @param generations      generation requests that returned
 * @param toolCalls        tool calls dispatched to a tool for the policy (malformed / unknown excluded)
 * @param replayedToolCalls calls re-executed to restore a stateful session: before every call of a path when
 *                          sessions are leased per call (k−1 before call k), else when a branch forks mid-path
 *                          or a timed-out session is rebuilt
 * @param observationTokens observation tokens appended (prefill cost, not generation)
 */
public record RolloutCost(long generatedTokens, long generations, long toolCalls, long replayedToolCalls, long observationTokens) {
    public static final RolloutCost ZERO = new RolloutCost(0, 0, 0, 0, 0);

    public RolloutCost plus(RolloutCost o) {
        return new RolloutCost(generatedTokens + o.generatedTokens, generations + o.generations, toolCalls + o.toolCalls,
                replayedToolCalls + o.replayedToolCalls, observationTokens + o.observationTokens);
    }

    public RolloutCost minus(RolloutCost o) {
        return new RolloutCost(generatedTokens - o.generatedTokens, generations - o.generations, toolCalls - o.toolCalls,
                replayedToolCalls - o.replayedToolCalls, observationTokens - o.observationTokens);
    }
}
