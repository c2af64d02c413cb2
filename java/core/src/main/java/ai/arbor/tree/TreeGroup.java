package ai.arbor.tree;

import ai.arbor.rollout.GroupRollout;
import ai.arbor.rollout.Prompt;
import ai.arbor.rollout.RolloutCost;
import ai.arbor.rollout.Trajectory;
import java.util.List;
import java.util.Map;

/**
 * One prompt's rollout by a tree strategy: the group's trajectories (the kept leaves), the trees they
 * came from, the exact cost, and strategy details (e.g. the expansion points chosen, AEPO's entropies
 * and split) for metrics and tests.
 */
public record TreeGroup(Prompt prompt, List<Trajectory> trajectories, RolloutCost cost, List<RolloutTree> trees, Map<String, Object> info)
        implements GroupRollout {
    public TreeGroup {
        trajectories = List.copyOf(trajectories);
        trees = List.copyOf(trees);
        info = Map.copyOf(info);
    }
}
