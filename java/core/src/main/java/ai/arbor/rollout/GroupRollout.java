package ai.arbor.rollout;

import java.util.List;

/** What a {@link RolloutStrategy} produced for one prompt: its group of trajectories and what it cost. */
public interface GroupRollout {

    Prompt prompt();

    /** The group (the trajectories that go to the batch), in sample-index order. */
    List<Trajectory> trajectories();

    /** Everything this prompt's rollout generated and called, including work that was discarded. */
    RolloutCost cost();
}
