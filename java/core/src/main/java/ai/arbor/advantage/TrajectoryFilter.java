package ai.arbor.advantage;

import java.util.List;

/**
 * A trajectory filter: decides, per trajectory, a loss weight in [0, 1] (1 = untouched, 0 = excluded
 * from the loss) and the reasons for anything below 1. Filters never change advantages themselves;
 * apply the result after computing advantages over all trajectories ({@link FilterResult#applyTo}).
 */
@FunctionalInterface
public interface TrajectoryFilter {

    /** The decision for every trajectory, in order. */
    FilterResult apply(List<ScoredTrajectory> trajectories);

    /** All filters: weights multiply, reasons accumulate (a trajectory may have several). */
    static TrajectoryFilter all(TrajectoryFilter... filters) {
        if (filters == null) throw new IllegalArgumentException("filters must not be null");
        TrajectoryFilter[] fs = filters.clone();
        for (int i = 0; i < fs.length; i++)
            if (fs[i] == null) throw new IllegalArgumentException("filters[" + i + "] is null");
        return trajectories -> {
            FilterResult r = FilterResult.keepAll(trajectories.size());
            for (TrajectoryFilter f : fs) r = r.and(f.apply(trajectories));
            return r;
        };
    }
}
