package ai.arbor.advantage;

import java.util.List;

/**
 * SimpleTIR void-turn filter (Xue et al. 2025, "SimpleTIR: End-to-End Reinforcement Learning for
 * Multi-Turn Tool-Integrated Reasoning"; docs/algorithms.md §3): a trajectory with a turn that has neither a
 * tool call nor a final answer is excluded from the loss but <em>still counted in its group's
 * statistics</em> — so compute the advantages over all trajectories first and apply this result after
 * ({@link FilterResult#applyTo}), never the other way round. Reason: {@link FilterReason#VOID_TURN}.
 */
public record VoidTurnFilter() implements TrajectoryFilter {

    @Override
    public FilterResult apply(List<ScoredTrajectory> trajectories) {
        FilterResult.Builder b = FilterResult.builder(Filters.size(trajectories));
        for (int i = 0; i < trajectories.size(); i++)
            if (Filters.get(trajectories, i).hasVoidTurn()) b.mark(i, FilterReason.VOID_TURN, 0f);
        return b.build();
    }
}
