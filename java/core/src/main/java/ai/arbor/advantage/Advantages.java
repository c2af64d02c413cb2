package ai.arbor.advantage;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Sequence-level advantage estimators (docs/algorithms.md §3): one reward per trajectory in, one advantage per
 * trajectory out. Statistics are computed in double precision in index order (deterministic), results
 * are rounded once to float. Group ids are arbitrary ints (not necessarily dense or sorted); a group is
 * the set of trajectories sharing an id.
 *
 * <p>These are O(B) over the B trajectories of a step (hundreds to thousands), so they run in Java; the
 * per-token broadcast and entropy shaping of the result run as native kernels ({@link ai.arbor.kernels.TokenAdvantages}).
 *
 * <p>Filtered trajectories: compute advantages over <em>all</em> trajectories of each group first, then
 * apply the filters' weights ({@link FilterResult#applyTo(float[])}): a trajectory excluded from the loss
 * (void turn, all tool calls failed, truncated) still counts in its group's mean and std, as SimpleTIR
 * and TAO-RL specify.
 */
public final class Advantages {
    private Advantages() {}

    /** ε added to the group std (verl {@code compute_grpo_outcome_advantage}, epsilon = 1e-6). */
    public static final double GRPO_EPS = 1e-6;

    /**
     * GRPO (Shao et al. 2024, DeepSeekMath; verl {@code compute_grpo_outcome_advantage}) or, with
     * {@code scaleByStd = false}, Dr.GRPO (Liu et al. 2025, "Understanding R1-Zero-Like Training"):
     * <pre>
     *   A_i = (R_i − μ_g) / (σ_g + 1e-6)      (scaleByStd)
     *   A_i =  R_i − μ_g                      (Dr.GRPO)
     * </pre>
     * μ_g, σ_g = mean and unbiased (n−1) standard deviation of the rewards of i's group g. A group of one
     * trajectory uses μ = 0, σ = 1 (so A = R/(1 + 1e-6), or R for Dr.GRPO), as verl does.
     *
     * @param rewards    one finite reward per trajectory
     * @param groupIds   the group (prompt) of each trajectory
     * @param scaleByStd true for GRPO, false for Dr.GRPO
     */
    public static float[] grpo(float[] rewards, int[] groupIds, boolean scaleByStd) {
        checkRewards(rewards);
        checkIds("groupIds", groupIds, rewards.length);
        long[] keys = new long[groupIds.length];
        for (int i = 0; i < keys.length; i++) keys[i] = groupIds[i];
        return toFloat(grpoDouble(rewards, keys, scaleByStd));
    }

    /** Dr.GRPO: {@code grpo(rewards, groupIds, false)}, A_i = R_i − μ_g. */
    public static float[] drGrpo(float[] rewards, int[] groupIds) {
        return grpo(rewards, groupIds, false);
    }

    /**
     * GRPO over trajectory summaries (their {@link ScoredTrajectory#groupId()} and reward), every
     * trajectory included in its group's statistics whatever the filters decide.
     */
    public static float[] grpo(List<ScoredTrajectory> trajectories, boolean scaleByStd) {
        if (trajectories == null) throw new IllegalArgumentException("trajectories must not be null");
        float[] r = new float[trajectories.size()];
        int[] g = new int[r.length];
        for (int i = 0; i < r.length; i++) {
            ScoredTrajectory t = trajectories.get(i);
            if (t == null) throw new IllegalArgumentException("trajectories[" + i + "] is null");
            r[i] = t.reward();
            g[i] = t.groupId();
        }
        return grpo(r, g, scaleByStd);
    }

    /**
     * Tree-GRPO (Ji et al. 2025, "Tree Search for LLM Agent Reinforcement Learning"; code AMAP-ML/Tree-GRPO,
     * {@code ray_trainer_ts.py::compute_advantage}, mode {@code tree}):
     * <pre>
     *   A_i = A_intra(i) + A_inter(i)
     *   A_intra = GRPO over the leaves of one tree   (group = (promptId, treeId))
     *   A_inter = GRPO over all leaves of the prompt (group = promptId, M trees × K leaves)
     * </pre>
     * Both terms are std-normalized GRPO (unbiased std, ε = 1e-6, singleton μ=0 σ=1); the sum is plain,
     * unweighted, of the two fp32 results — exactly what the released code does (it adds the two
     * {@code compute_grpo_outcome_advantage} outputs, grouped by {@code uid} = dataset index and
     * {@code tree_uid} = a fresh uuid per tree). Tree ids may be local to a prompt (0..M−1) or global:
     * the intra groups are keyed by the pair.
     *
     * <p>Released-code details not reproduced: its scalar reward is the sum of the non-zero token-level
     * scores (with its process-reward modes spreading credit over steps); here the caller passes the leaf
     * reward directly.
     */
    public static float[] treeGrpo(float[] rewards, int[] promptIds, int[] treeIds) {
        return treeGrpoParts(rewards, promptIds, treeIds).advantages();
    }

    /** The two terms of Tree-GRPO and their sum (the released code logs both terms as metrics). */
    public record TreeParts(float[] intra, float[] inter, float[] advantages) {}

    /** {@link #treeGrpo} with its intra-tree and inter-tree terms. */
    public static TreeParts treeGrpoParts(float[] rewards, int[] promptIds, int[] treeIds) {
        checkRewards(rewards);
        checkIds("promptIds", promptIds, rewards.length);
        checkIds("treeIds", treeIds, rewards.length);
        long[] prompt = new long[rewards.length], tree = new long[rewards.length];
        for (int i = 0; i < rewards.length; i++) {
            prompt[i] = promptIds[i];
            tree[i] = ((long) promptIds[i] << 32) | (treeIds[i] & 0xffffffffL);
        }
        float[] inter = toFloat(grpoDouble(rewards, prompt, true));
        float[] intra = toFloat(grpoDouble(rewards, tree, true));
        float[] sum = new float[rewards.length];
        for (int i = 0; i < sum.length; i++) sum[i] = inter[i] + intra[i];  // fp32 sum, as the released code
        return new TreeParts(intra, inter, sum);
    }

    /**
     * RLOO (Ahmadian et al. 2024, "Back to Basics"; verl {@code compute_rloo_outcome_advantage}): the leave-one-out
     * baseline,
     * <pre>
     *   A_i = R_i − mean_{j∈g, j≠i} R_j = n/(n−1) · (R_i − μ_g)      (n = |g| ≥ 2)
     *   A_i = R_i                                                      (a group of one, as verl)
     * </pre>
     */
    public static float[] rloo(float[] rewards, int[] groupIds) {
        checkRewards(rewards);
        checkIds("groupIds", groupIds, rewards.length);
        long[] keys = new long[groupIds.length];
        for (int i = 0; i < keys.length; i++) keys[i] = groupIds[i];
        double[] centered = grpoDouble(rewards, keys, false);  // R − μ_g (R for a group of one)
        long[] count = groupSizes(keys);
        for (int i = 0; i < centered.length; i++)
            if (count[i] > 1) centered[i] *= (double) count[i] / (count[i] - 1);
        return toFloat(centered);
    }

    /**
     * REINFORCE++ baseline (Hu et al. 2025, arXiv 2501.03262; verl
     * {@code compute_reinforce_plus_plus_baseline_outcome_advantage}): x_i = R_i − μ_g (μ = 0 for a group of one),
     * then whitened over the batch's tokens as verl's {@code masked_whiten} does — every token of trajectory i
     * carries x_i, so with L_i trained tokens and N = Σ L_i:
     * <pre>
     *   m = Σ L_i x_i / (N + 1e-8),   v = Σ L_i (x_i − m)² / (N + 1e-8) · N / (N − 1),   A_i = (x_i − m) / sqrt(v + 1e-8)
     * </pre>
     * {@code tokenCounts} null weighs every trajectory 1 (whitening over sequences). N ≤ 1 (verl raises): A = x.
     *
     * @param tokenCounts trained tokens per trajectory (≥ 0), or null
     */
    public static float[] reinforcePlusPlusBaseline(float[] rewards, int[] groupIds, int[] tokenCounts) {
        checkRewards(rewards);
        checkIds("groupIds", groupIds, rewards.length);
        if (tokenCounts != null) {
            checkIds("tokenCounts", tokenCounts, rewards.length);
            for (int i = 0; i < tokenCounts.length; i++)
                if (tokenCounts[i] < 0) throw new IllegalArgumentException("tokenCounts[" + i + "] = " + tokenCounts[i] + " is negative");
        }
        long[] keys = new long[groupIds.length];
        for (int i = 0; i < keys.length; i++) keys[i] = groupIds[i];
        double[] x = grpoDouble(rewards, keys, false);
        double n = 0, sum = 0;
        for (int i = 0; i < x.length; i++) {
            double l = tokenCounts == null ? 1 : tokenCounts[i];
            n += l;
            sum += l * x[i];
        }
        if (n <= 1) return toFloat(x);
        double mean = sum / (n + 1e-8), ss = 0;
        for (int i = 0; i < x.length; i++) {
            double l = tokenCounts == null ? 1 : tokenCounts[i];
            ss += l * (x[i] - mean) * (x[i] - mean);
        }
        double var = ss / (n + 1e-8) * (n / (n - 1));
        double inv = 1 / Math.sqrt(var + 1e-8);
        for (int i = 0; i < x.length; i++) x[i] = (x[i] - mean) * inv;
        return toFloat(x);
    }

    /** Per trajectory, the size of its group. */
    private static long[] groupSizes(long[] keys) {
        Map<Long, Long> c = new HashMap<>();
        for (long k : keys) c.merge(k, 1L, Long::sum);
        long[] out = new long[keys.length];
        for (int i = 0; i < keys.length; i++) out[i] = c.get(keys[i]);
        return out;
    }

    /** Per-group mean and unbiased std (μ = 0, σ = 1 for a group of one), then A_i in double. */
    static double[] grpoDouble(float[] rewards, long[] keys, boolean scaleByStd) {
        int n = rewards.length;
        Map<Long, Integer> index = new HashMap<>();
        int[] group = new int[n];
        for (int i = 0; i < n; i++) group[i] = index.computeIfAbsent(keys[i], k -> index.size());
        int g = index.size();
        long[] count = new long[g];
        double[] mean = new double[g], m2 = new double[g];
        for (int i = 0; i < n; i++) {
            count[group[i]]++;
            mean[group[i]] += rewards[i];
        }
        for (int j = 0; j < g; j++) mean[j] /= count[j];
        for (int i = 0; i < n; i++) {
            double d = rewards[i] - mean[group[i]];
            m2[group[i]] += d * d;
        }
        double[] out = new double[n];
        for (int i = 0; i < n; i++) {
            int j = group[i];
            double mu = count[j] == 1 ? 0.0 : mean[j];
            double sigma = count[j] == 1 ? 1.0 : Math.sqrt(m2[j] / (count[j] - 1));
            out[i] = scaleByStd ? (rewards[i] - mu) / (sigma + GRPO_EPS) : rewards[i] - mu;
        }
        return out;
    }

    static void checkRewards(float[] rewards) {
        if (rewards == null) throw new IllegalArgumentException("rewards must not be null");
        for (int i = 0; i < rewards.length; i++)
            if (!Float.isFinite(rewards[i]))
                throw new IllegalArgumentException("rewards[" + i + "] = " + rewards[i] + " is not finite");
    }

    static void checkIds(String name, int[] ids, int n) {
        if (ids == null) throw new IllegalArgumentException(name + " must not be null");
        if (ids.length != n) throw new IllegalArgumentException(name + ".length must be " + n + " (rewards), got " + ids.length);
    }

    private static float[] toFloat(double[] a) {
        float[] f = new float[a.length];
        for (int i = 0; i < a.length; i++) f[i] = (float) a[i];
        return f;
    }
}
