package ai.arbor.rollout;

/**
 * What a strategy gets for one prompt.
 *
 * @param loop          the agent loop (generator, tools, format, limits)
 * @param seed          this prompt's seed (derived from the run's seed and the prompt's index)
 * @param promptIndex   the prompt's index in the batch
 * @param meter         where this prompt's cost goes
 * @param promptContext the prompt's token context, shared by all its paths (prefix-cache affinity)
 */
public record RolloutContext(AgentLoop loop, long seed, int promptIndex, CostMeter meter, TokenContext promptContext) {
    public RolloutContext {
        if (loop == null || meter == null || promptContext == null) throw new IllegalArgumentException("loop, meter and promptContext are required");
    }

    /** Seed of path {@code index} of this prompt (paths are numbered in creation order). */
    public long pathSeed(int index) {
        return Seeds.derive(seed, 1, index);
    }

    /** Seed of the strategy's own random decisions. */
    public long strategySeed() {
        return Seeds.derive(seed, 2, 0);
    }
}
