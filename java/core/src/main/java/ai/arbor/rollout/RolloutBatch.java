package ai.arbor.rollout;

import java.util.ArrayList;
import java.util.List;

/**
 * The result of rolling out a batch of prompts: one group per prompt (in prompt order) and the step's
 * metrics. {@code ai.arbor.rl.TokenBatch.of(trajectories())} turns it into the trainer's rows.
 */
public record RolloutBatch<G extends GroupRollout>(List<G> groups, RolloutMetrics metrics) {
    public RolloutBatch {
        groups = List.copyOf(groups);
    }

    /** All trajectories, group after group. */
    public List<Trajectory> trajectories() {
        List<Trajectory> all = new ArrayList<>();
        for (G g : groups) all.addAll(g.trajectories());
        return all;
    }

    /** Total cost. */
    public RolloutCost cost() {
        return metrics.cost();
    }
}
