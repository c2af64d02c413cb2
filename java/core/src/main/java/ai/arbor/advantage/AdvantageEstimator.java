package ai.arbor.advantage;

import java.util.Locale;

/**
 * The sequence-level estimators by name, for recipes (docs/algorithms.md §3). Each constant delegates to
 * {@link Advantages}, where the formulas and sources are documented.
 */
public enum AdvantageEstimator {
    /** GRPO: A = (R − μ_g) / (σ_g + 1e-6), unbiased σ; singleton groups μ=0, σ=1 (verl). */
    GRPO,
    /** Dr.GRPO: A = R − μ_g (no division by the std). */
    DR_GRPO,
    /** Tree-GRPO: A = GRPO(intra-tree groups) + GRPO(inter-tree = prompt groups), plain sum. */
    TREE_GRPO,
    /** RLOO: A_i = R_i − mean_{j≠i} R_j over i's group ({@link Advantages#rloo}; verl {@code rloo}). */
    RLOO,
    /** REINFORCE++ baseline: R − μ_g, whitened over the batch's tokens ({@link Advantages#reinforcePlusPlusBaseline}). */
    REINFORCE_PLUS_PLUS_BASELINE;

    /**
     * Advantages of one step.
     *
     * @param rewards  one reward per trajectory
     * @param groupIds prompt (group) of each trajectory
     * @param treeIds  tree of each trajectory (TREE_GRPO only; ignored, may be null, otherwise)
     */
    public float[] compute(float[] rewards, int[] groupIds, int[] treeIds) {
        return compute(rewards, groupIds, treeIds, null);
    }

    /**
     * As {@link #compute(float[], int[], int[])} with the trained tokens of each trajectory, which the
     * REINFORCE++ baseline's token-level whitening weighs by (null: each trajectory weighs 1; the others ignore it).
     */
    public float[] compute(float[] rewards, int[] groupIds, int[] treeIds, int[] tokenCounts) {
        return switch (this) {
            case GRPO -> Advantages.grpo(rewards, groupIds, true);
            case DR_GRPO -> Advantages.grpo(rewards, groupIds, false);
            case TREE_GRPO -> Advantages.treeGrpo(rewards, groupIds, treeIds);
            case RLOO -> Advantages.rloo(rewards, groupIds);
            case REINFORCE_PLUS_PLUS_BASELINE -> Advantages.reinforcePlusPlusBaseline(rewards, groupIds, tokenCounts);
        };
    }

    /** By name, case-insensitive, '-' or '_' ({@code "grpo"}, {@code "dr_grpo"}, {@code "tree-grpo"}). */
    public static AdvantageEstimator byName(String name) {
        if (name == null) throw new IllegalArgumentException("estimator name must not be null");
        String n = name.trim().toUpperCase(Locale.ROOT).replace('-', '_').replace('.', '_');
        if (n.equals("DRGRPO")) n = "DR_GRPO";
        if (n.equals("TREE") || n.equals("TREEGRPO")) n = "TREE_GRPO";
        if (n.equals("REINFORCE_PLUS_PLUS_BASELINE") || n.equals("REINFORCE++_BASELINE") || n.equals("RPP_BASELINE"))
            n = "REINFORCE_PLUS_PLUS_BASELINE";
        try {
            return valueOf(n);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("unknown advantage estimator '" + name + "'; one of grpo, dr_grpo, tree_grpo, rloo, reinforce_plus_plus_baseline");
        }
    }
}
