package ai.arbor.advantage;

import java.util.List;

/**
 * DAPO overlong filtering (Yu et al. 2025, "DAPO: An Open-Source LLM Reinforcement Learning System at
 * Scale"; ALGORITHMS.md §3): truncated responses are masked from the loss, so a reasoning chain cut by the
 * length limit is not punished as if it were wrong. Reason: {@link FilterReason#TRUNCATED}.
 *
 * <p>DAPO's overlong <em>reward shaping</em> (the soft penalty over the last L_c tokens before L_max),
 * CoRT's −0.1 penalty and GRPO-TCR's tool-count term are reward terms: they live in
 * {@code ai.arbor.reward}, computed once before the advantages.
 */
public record OverlongFilter() implements TrajectoryFilter {

    @Override
    public FilterResult apply(List<ScoredTrajectory> trajectories) {
        FilterResult.Builder b = FilterResult.builder(Filters.size(trajectories));
        for (int i = 0; i < trajectories.size(); i++)
            if (Filters.get(trajectories, i).truncated()) b.mark(i, FilterReason.TRUNCATED, 0f);
        return b.build();
    }
}
