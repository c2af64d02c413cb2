package ai.arbor.advantage;

import java.util.List;

/**
 * TAO-RL tool-aware trajectory filter (docs/algorithms.md §3): a trajectory that called a tool at least once
 * and whose calls all failed (error, timeout, crash) is masked from the loss. With {@code strength} s the
 * trajectory's loss weight becomes 1 − s: s = 1 (default, the paper) excludes it, s &lt; 1 keeps it with
 * its advantage scaled by 1 − s. Its reward still counts in its group's statistics (the filter acts after
 * the advantages). Reason: {@link FilterReason#ALL_TOOL_CALLS_FAILED}.
 *
 * <p>A sandbox infrastructure failure (SANDBOX_ERROR) is not the policy's fault: count such calls as
 * failed here only if the trainer wants them masked, which is the safe choice.
 *
 * @param strength mask strength in (0, 1]
 */
public record ToolAwareFilter(float strength) implements TrajectoryFilter {

    public ToolAwareFilter {
        if (!(strength > 0f && strength <= 1f)) throw new IllegalArgumentException("strength must be in (0, 1], got " + strength);
    }

    /** Strength 1: trajectories whose tool calls all failed are excluded. */
    public ToolAwareFilter() {
        this(1f);
    }

    @Override
    public FilterResult apply(List<ScoredTrajectory> trajectories) {
        FilterResult.Builder b = FilterResult.builder(Filters.size(trajectories));
        for (int i = 0; i < trajectories.size(); i++)
            if (Filters.get(trajectories, i).allToolCallsFailed()) b.mark(i, FilterReason.ALL_TOOL_CALLS_FAILED, 1f - strength);
        return b.build();
    }
}
