package ai.arbor.advantage;

import java.util.List;
import java.util.Map;

/**
 * Degenerate-group filter (DAPO dynamic sampling; TAO-RL; docs/algorithms.md §3): a group whose rewards have
 * std &lt; {@code minStd} (all right or all wrong) carries no GRPO signal — its advantages are ≈ 0 — and
 * only dilutes token-mean losses, so all of its trajectories are excluded. Reason:
 * {@link FilterReason#DEGENERATE_GROUP}.
 * <pre>
 *   degenerate(g) ⇔ |g| ≥ 2 and sqrt( Σ_{i∈g} (R_i − μ_g)² / |g| ) &lt; minStd
 * </pre>
 * The std is the population std (numpy {@code np.std}, as DAPO's released {@code dapo_ray_trainer.py}),
 * and groups of one are kept, as there. The released code keeps groups with std &gt; 0; the threshold
 * 1e-3 of docs/algorithms.md §3 (default) also drops groups that differ only by float noise.
 * {@link DynamicSampling} refills the batch with other prompts.
 *
 * @param minStd         threshold, >= 0 (0 drops nothing: std &lt; 0 never holds)
 * @param keepSingletons keep groups of one trajectory (true in the released code)
 */
public record DegenerateGroupFilter(double minStd, boolean keepSingletons) implements TrajectoryFilter {

    /** docs/algorithms.md §3's threshold. */
    public static final double MIN_STD = 1e-3;

    public DegenerateGroupFilter {
        if (!(minStd >= 0) || Double.isInfinite(minStd)) throw new IllegalArgumentException("minStd must be finite and >= 0, got " + minStd);
    }

    /** Threshold 1e-3, singletons kept. */
    public DegenerateGroupFilter() {
        this(MIN_STD, true);
    }

    /** True when these rewards form a degenerate group. */
    public boolean isDegenerate(float[] groupRewards) {
        int n = groupRewards.length;
        if (n == 0) return false;
        if (n == 1) return !keepSingletons;
        double mean = 0;
        for (float r : groupRewards) mean += r;
        mean /= n;
        double ss = 0;
        for (float r : groupRewards) ss += (r - mean) * (r - mean);
        return Math.sqrt(ss / n) < minStd;
    }

    @Override
    public FilterResult apply(List<ScoredTrajectory> trajectories) {
        FilterResult.Builder b = FilterResult.builder(Filters.size(trajectories));
        for (Map.Entry<Integer, List<Integer>> g : Filters.groups(trajectories).entrySet()) {
            List<Integer> idx = g.getValue();
            float[] r = new float[idx.size()];
            for (int j = 0; j < r.length; j++) r[j] = trajectories.get(idx.get(j)).reward();
            if (isDegenerate(r))
                for (int i : idx) b.mark(i, FilterReason.DEGENERATE_GROUP, 0f);
        }
        return b.build();
    }
}
