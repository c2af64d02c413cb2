package ai.arbor.advantage;

import java.util.List;

/**
 * DAPO overlong filtering (Yu et al. 2025, "DAPO: An Open-Source LLM Reinforcement Learning System at
 * Scale"; docs/algorithms.md §3): truncated responses are masked from the loss, so a reasoning chain cut by the
 * length limit is not punished as if it were wrong. Reason: {@link FilterReason#TRUNCATED}.
 *
 * <p>DAPO's overlong <em>reward shaping</em> (the soft penalty over the last L_c tokens before L_max),
 * CoRT's −0.1 penalty and GRPO-TCR's tool-count term are reward terms, computed once before the
 * advantages: {@link ai.arbor.reward.OverlongShaping}, {@link ai.arbor.reward.CodeExecutionPenalty},
 * {@link ai.arbor.reward.ToolCallReward}.
 */
public record OverlongFilter(boolean enabled) implements TrajectoryFilter {

    /** Masks truncated responses. */
    public OverlongFilter() {
        this(true);
    }

    /**
     * The filter a DAPO overlong configuration asks for: on exactly when the shaping's
     * {@link ai.arbor.reward.OverlongShaping#maskTruncated()} is (one switch for both halves of DAPO's
     * overlong handling).
     */
    public static OverlongFilter of(ai.arbor.reward.OverlongShaping shaping) {
        if (shaping == null) throw new IllegalArgumentException("shaping must not be null");
        return new OverlongFilter(shaping.maskTruncated());
    }

    @Override
    public FilterResult apply(List<ScoredTrajectory> trajectories) {
        FilterResult.Builder b = FilterResult.builder(Filters.size(trajectories));
        if (!enabled) return b.build();
        for (int i = 0; i < trajectories.size(); i++)
            if (Filters.get(trajectories, i).truncated()) b.mark(i, FilterReason.TRUNCATED, 0f);
        return b.build();
    }
}
