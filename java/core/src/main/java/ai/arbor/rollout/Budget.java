package ai.arbor.rollout;

/**
 * A per-prompt cost cap, so methods can be compared at equal cost. A strategy given a budget keeps
 * adding work (chains, expansions, fresh samples) while the cost so far is below every set cap, and
 * stops adding once one is reached; work already in flight finishes, so the final cost may exceed the
 * cap by at most one unit of work (one wave of chains / one expansion iteration / one round). The
 * reported {@link RolloutCost} is always exact.
 *
 * @param generatedTokens cap on generated tokens per prompt; 0 = none
 * @param toolCalls       cap on tool calls per prompt; 0 = none
 */
public record Budget(long generatedTokens, long toolCalls) {
    public static final Budget UNLIMITED = new Budget(0, 0);

    public Budget {
        if (generatedTokens < 0) throw new IllegalArgumentException("generatedTokens must be >= 0, got " + generatedTokens);
        if (toolCalls < 0) throw new IllegalArgumentException("toolCalls must be >= 0, got " + toolCalls);
    }

    public static Budget tokens(long n) {
        return new Budget(n, 0);
    }

    /** True when no cap is set. */
    public boolean unlimited() {
        return generatedTokens == 0 && toolCalls == 0;
    }

    /** True when {@code cost} reached a set cap. */
    public boolean exhaustedBy(RolloutCost cost) {
        return (generatedTokens > 0 && cost.generatedTokens() >= generatedTokens) || (toolCalls > 0 && cost.toolCalls() >= toolCalls);
    }
}
