package ai.arbor.tree;

import ai.arbor.rollout.AgentState;
import ai.arbor.rollout.Budget;
import ai.arbor.rollout.Prompt;
import ai.arbor.rollout.RolloutContext;
import ai.arbor.rollout.RolloutCost;
import ai.arbor.rollout.RolloutStrategy;
import ai.arbor.rollout.Trajectory;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;

/**
 * Tree-GRPO tree search over agent steps (docs/algorithms.md §4; released code AMAP-ML/Tree-GRPO
 * {@code search_r1/llm_agent/generation_ts.py} + {@code tree_node.py}). A node is one agent step.
 * Per prompt:
 * <ol>
 *   <li>{@code M} trees, each starting with one full chain from the prompt;</li>
 *   <li>{@code L} iterations: per tree, choose {@code N} expansion points uniformly at random with
 *       replacement among {root} ∪ non-leaf nodes that exist at the start of the iteration; each
 *       expansion continues from the node's full context (after its observation, with the turn and
 *       tool-call counts of that node) to a new leaf — one new path;</li>
 *   <li>keep {@code K} leaves per tree, chosen at random (code: shuffle, take the first K, prune).</li>
 * </ol>
 * Each tree then has 1 + L·N leaves before keeping K; expected cost ≈ M·B·(1 + L·N/2) chains of cost B
 * (an expansion from a uniformly chosen depth costs about half a chain). Defaults M=2, N=2, L=1, K=3.
 *
 * <p>Differences from the released code, all deliberate: the code asserts when a tree has fewer than K
 * leaves; here all leaves are kept and the shortfall is reported in {@code info} (it cannot happen with
 * K ≤ 1 + L·N). With a {@link Budget}, expansion iterations continue (beyond L when L is 0 = "until the
 * budget") while the prompt's cost is below the budget.
 *
 * <p>Output: trajectories carry the tree index (intra-tree groups) and node path; their group is the
 * prompt (inter-tree group) — what Tree-GRPO's intra + inter advantage needs.
 */
public final class TreeGrpoRollout implements RolloutStrategy<TreeGroup> {

    /**
     * @param m      trees per prompt (≥ 1)
     * @param n      expansion points per tree per iteration (≥ 0)
     * @param l      iterations (≥ 0); with a budget, 0 = as many as the budget allows
     * @param k      leaves kept per tree (≥ 1); 0 = keep all
     * @param budget per-prompt cost cap; {@link Budget#UNLIMITED} for the fixed M/N/L structure
     */
    public record Config(int m, int n, int l, int k, Budget budget) {
        public Config {
            if (m < 1) throw new IllegalArgumentException("m (trees per prompt) must be >= 1, got " + m);
            if (n < 0) throw new IllegalArgumentException("n (expansions per tree per iteration) must be >= 0, got " + n);
            if (l < 0) throw new IllegalArgumentException("l (iterations) must be >= 0, got " + l);
            if (k < 0) throw new IllegalArgumentException("k (leaves kept per tree) must be >= 0, got " + k);
            if (budget == null) budget = Budget.UNLIMITED;
        }

        /** The paper's defaults: M=2, N=2, L=1, K=3. */
        public static Config defaults() {
            return new Config(2, 2, 1, 3, Budget.UNLIMITED);
        }
    }

    /**
     * An expansion that was made: iteration, tree, chosen node id, how many candidates there were, and
     * how many nodes the tree had when the iteration started (node ids below it existed then).
     */
    public record Expansion(int iteration, int tree, int node, int candidates, int nodesAtStart) {}

    private final Config config;
    /** With a budget: iterations in a row that spend nothing in a capped unit before the search stops. */
    private static final int MAX_IDLE_ITERATIONS = 4;

    public TreeGrpoRollout(Config config) {
        if (config == null) throw new IllegalArgumentException("config must not be null");
        this.config = config;
    }

    public TreeGrpoRollout() {
        this(Config.defaults());
    }

    public Config config() {
        return config;
    }

    @Override
    public String name() {
        return "tree-grpo(M=" + config.m + ", N=" + config.n + ", L=" + config.l + ", K=" + config.k + ")";
    }

    /**
     * Chooses {@code n} expansion points uniformly with replacement among {@code candidates} — the
     * draw Tree-GRPO makes ({@code random.choices(candidate_set, k=n)}). Public so its uniformity can be
     * tested directly.
     */
    public static List<TreeNode> chooseExpansionPoints(List<TreeNode> candidates, int n, Random rnd) {
        if (candidates.isEmpty()) throw new IllegalArgumentException("no expansion candidates");
        List<TreeNode> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) out.add(candidates.get(rnd.nextInt(candidates.size())));
        return out;
    }

    @Override
    public CompletableFuture<TreeGroup> rollout(Prompt prompt, RolloutContext ctx) {
        Random rnd = new Random(ctx.strategySeed());
        int[] paths = {0};
        List<RolloutTree> trees = new ArrayList<>();
        List<CompletableFuture<List<AgentState>>> chains = new ArrayList<>();
        for (int i = 0; i < config.m; i++) {
            AgentState root = ctx.loop().start(prompt, ctx.promptContext(), ctx.pathSeed(paths[0]++), ctx.meter());
            trees.add(new RolloutTree(i, root));
            chains.add(PathRunner.run(ctx.loop(), root));
        }
        List<Expansion> expansions = new ArrayList<>();
        BudgetPacer pacer = new BudgetPacer(config.budget, ctx.loop().config().maxGenerations());
        return PathRunner.all(chains).thenCompose(cs -> {
            for (int i = 0; i < config.m; i++) {
                trees.get(i).addChain(trees.get(i).root(), cs.get(i));
                finished(pacer, cs.get(i), 0);
            }
            return iterate(ctx, rnd, trees, paths, expansions, pacer, 0, 0);
        }).thenApply(v -> finish(prompt, ctx, rnd, trees, expansions));
    }

    private int iterations() {
        if (config.budget.unlimited()) return config.l;
        return config.l == 0 ? Integer.MAX_VALUE : config.l;
    }

    /** The steps of a path run from a node at depth {@code from} (the ones before it are the tree's, seen already). */
    private static void finished(BudgetPacer pacer, List<AgentState> path, int from) {
        if (!path.isEmpty()) pacer.finished(path.get(path.size() - 1).steps(), from);
    }

    private CompletableFuture<Void> iterate(RolloutContext ctx, Random rnd, List<RolloutTree> trees, int[] paths, List<Expansion> expansions,
                                            BudgetPacer pacer, int iteration, int idle) {
        RolloutCost before = ctx.meter().cost();
        if (iteration >= iterations() || config.n == 0 || config.budget.exhaustedBy(before)) return CompletableFuture.completedFuture(null);
        // Choose every tree's points from the nodes present now, before any of this iteration's paths exist.
        // With a budget, a drawn point is expanded only while its expected cost (the remainder of a path at
        // the point's depth) fits this iteration's admission (BudgetPacer); the search ends with an iteration
        // that admits none.
        BudgetPacer.Admission admission = pacer.admission(pacer.projection(before));
        boolean full = false;
        List<TreeNode> points = new ArrayList<>();
        List<RolloutTree> owners = new ArrayList<>();
        for (RolloutTree t : trees) {
            List<TreeNode> candidates = t.expansionCandidates();
            int nodesAtStart = t.nodes().size();
            for (TreeNode p : chooseExpansionPoints(candidates, config.n, rnd)) {
                if (full) break;
                if (pacer.active() && !admission.admit(pacer.remaining(p.depth()))) {
                    full = true;
                    break;
                }
                points.add(p);
                owners.add(t);
                expansions.add(new Expansion(iteration, t.index(), p.id(), candidates.size(), nodesAtStart));
            }
        }
        if (points.isEmpty()) return CompletableFuture.completedFuture(null);
        List<CompletableFuture<List<AgentState>>> runs = new ArrayList<>();
        for (TreeNode p : points) runs.add(PathRunner.run(ctx.loop(), ctx.loop().fork(p.state(), ctx.pathSeed(paths[0]++))));
        return PathRunner.all(runs).thenCompose(results -> {
            for (int i = 0; i < points.size(); i++) {
                owners.get(i).addChain(points.get(i), results.get(i));
                finished(pacer, results.get(i), points.get(i).depth());
            }
            // an iteration may spend nothing in the capped unit (expansions near the leaves make no tool call); a run
            // of them means the policy does not spend that unit at all, and the search stops
            int idleNow = pacer.progressed(before, ctx.meter().cost()) ? 0 : idle + 1;
            if (idleNow >= MAX_IDLE_ITERATIONS && !config.budget.unlimited()) return CompletableFuture.completedFuture(null);
            return iterate(ctx, rnd, trees, paths, expansions, pacer, iteration + 1, idleNow);
        });
    }

    private TreeGroup finish(Prompt prompt, RolloutContext ctx, Random rnd, List<RolloutTree> trees, List<Expansion> expansions) {
        List<Trajectory> out = new ArrayList<>();
        int shortfall = 0;
        Map<String, Object> info = new HashMap<>();
        List<Integer> leavesBefore = new ArrayList<>();
        for (RolloutTree t : trees) {
            List<TreeNode> leaves = t.leaves();
            leavesBefore.add(leaves.size());
            List<TreeNode> keep = new ArrayList<>(leaves);
            if (config.k > 0 && leaves.size() > config.k) {
                Collections.shuffle(keep, rnd);
                keep = new ArrayList<>(keep.subList(0, config.k));
                keep.sort((a, b) -> Integer.compare(a.id(), b.id()));
            } else if (config.k > 0 && leaves.size() < config.k) {
                shortfall += config.k - leaves.size();
            }
            t.retainLeaves(keep);
            for (TreeNode leaf : keep) out.add(t.trajectory(leaf, out.size()));
        }
        info.put("expansions", List.copyOf(expansions));
        info.put("leavesBeforeKeep", List.copyOf(leavesBefore));
        info.put("leafShortfall", shortfall);
        return new TreeGroup(prompt, out, ctx.meter().cost(), trees, info);
    }
}
