package ai.arbor.advantage;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** Shared argument checks and grouping of the filters. */
final class Filters {
    private Filters() {}

    static int size(List<ScoredTrajectory> trajectories) {
        if (trajectories == null) throw new IllegalArgumentException("trajectories must not be null");
        return trajectories.size();
    }

    static ScoredTrajectory get(List<ScoredTrajectory> trajectories, int i) {
        ScoredTrajectory t = trajectories.get(i);
        if (t == null) throw new IllegalArgumentException("trajectories[" + i + "] is null");
        return t;
    }

    /** Indices of each group, groups in order of first appearance. */
    static Map<Integer, List<Integer>> groups(List<ScoredTrajectory> trajectories) {
        Map<Integer, List<Integer>> g = new LinkedHashMap<>();
        for (int i = 0; i < size(trajectories); i++)
            g.computeIfAbsent(get(trajectories, i).groupId(), k -> new java.util.ArrayList<>()).add(i);
        return g;
    }
}
