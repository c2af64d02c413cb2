package ai.arbor.advantage;

import java.util.List;

/**
 * DAPO overlong filtering (Yu et al. 2025, "DAPO: An Open-Source LLM Reinforcement Learning System at
 * Scale"; docs/algorithms.md §3): truncated responses are masked from the loss, so a reasoning chain cut by the
 * length limit is not punished as if it were wrong. Reason: {@link FilterReason#TRUNCATED}. With {@code minWithinLength} &gt; 0
 * (TAO-RL's release, {@link #taoRl}) a group with fewer responses within the limit is dropped whole: its other
 * responses get {@link FilterReason#FEW_WITHIN_LENGTH}.
 *
 * <p>DAPO's overlong <em>reward shaping</em> (the soft penalty over the last L_c tokens before L_max),
 * CoRT's −0.1 penalty and GRPO-TCR's tool-count term are reward terms, computed once before the
 * advantages: {@link ai.arbor.reward.OverlongShaping}, {@link ai.arbor.reward.CodeExecutionPenalty},
 * {@link ai.arbor.reward.ToolCallReward}.
 */
public record OverlongFilter(boolean enabled, int minWithinLength) implements TrajectoryFilter {

    /** TAO-RL's release: {@code rollout.min_n = 4} with {@code trainer.remove_clip = True} ({@code train.sh}). */
    public static final int TAO_RL_MIN_WITHIN_LENGTH = 4;

    public OverlongFilter {
        if (minWithinLength < 0) throw new IllegalArgumentException("minWithinLength must be >= 0 (0 = no group rule), got " + minWithinLength);
        if (!enabled && minWithinLength > 0) throw new IllegalArgumentException("a disabled overlong filter has no group rule, got minWithinLength " + minWithinLength);
    }

    /** Masks truncated responses. */
    public OverlongFilter() {
        this(true, 0);
    }

    /** Masks truncated responses when {@code enabled}; no group rule. */
    public OverlongFilter(boolean enabled) {
        this(enabled, 0);
    }

    /**
     * TAO-RL's release ({@code tao_rl_ray_trainer.py}, {@code remove_clip} with {@code min_n}): truncated responses are
     * masked, and a group with fewer than {@value #TAO_RL_MIN_WITHIN_LENGTH} responses within the length limit is dropped
     * whole (every group whose responses are all truncated, too). Dynamic sampling applies the group rule before it fills
     * the batch ({@link ai.arbor.rl.StepPipeline#dynamicSample}), as the release does.
     */
    public static OverlongFilter taoRl() {
        return new OverlongFilter(true, TAO_RL_MIN_WITHIN_LENGTH);
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

    /** True when a group with {@code withinLength} of its responses within the length limit is dropped whole. */
    public boolean dropsGroup(int withinLength) {
        return withinLength < minWithinLength;
    }

    @Override
    public FilterResult apply(List<ScoredTrajectory> trajectories) {
        FilterResult.Builder b = FilterResult.builder(Filters.size(trajectories));
        if (!enabled) return b.build();
        for (int i = 0; i < trajectories.size(); i++)
            if (Filters.get(trajectories, i).truncated()) b.mark(i, FilterReason.TRUNCATED, 0f);
        if (minWithinLength > 0)
            for (List<Integer> g : Filters.groups(trajectories).values()) {
                int within = 0;
                for (int i : g) if (!trajectories.get(i).truncated()) within++;
                if (dropsGroup(within))
                    for (int i : g) if (!trajectories.get(i).truncated()) b.mark(i, FilterReason.FEW_WITHIN_LENGTH, 0f);
            }
        return b.build();
    }
}
