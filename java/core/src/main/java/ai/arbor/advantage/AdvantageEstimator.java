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
    TREE_GRPO;

    /**
     * Advantages of one step.
     *
     * @param rewards  one reward per trajectory
     * @param groupIds prompt (group) of each trajectory
     * @param treeIds  tree of each trajectory (TREE_GRPO only; ignored, may be null, otherwise)
     */
    public float[] compute(float[] rewards, int[] groupIds, int[] treeIds) {
        return switch (this) {
            case GRPO -> Advantages.grpo(rewards, groupIds, true);
            case DR_GRPO -> Advantages.grpo(rewards, groupIds, false);
            case TREE_GRPO -> Advantages.treeGrpo(rewards, groupIds, treeIds);
        };
    }

    /** By name, case-insensitive, '-' or '_' ({@code "grpo"}, {@code "dr_grpo"}, {@code "tree-grpo"}). */
    public static AdvantageEstimator byName(String name) {
        if (name == null) throw new IllegalArgumentException("estimator name must not be null");
        String n = name.trim().toUpperCase(Locale.ROOT).replace('-', '_').replace('.', '_');
        if (n.equals("DRGRPO")) n = "DR_GRPO";
        if (n.equals("TREE") || n.equals("TREEGRPO")) n = "TREE_GRPO";
        try {
            return valueOf(n);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("unknown advantage estimator '" + name + "'; one of grpo, dr_grpo, tree_grpo");
        }
    }
}
