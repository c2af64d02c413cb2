package ai.arbor.tree;

import ai.arbor.rollout.AgentState;
import ai.arbor.rollout.Budget;
import ai.arbor.rollout.Prompt;
import ai.arbor.rollout.RolloutContext;
import ai.arbor.rollout.RolloutCost;
import ai.arbor.rollout.RolloutStrategy;
import ai.arbor.rollout.Trajectory;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * Plain chains — the GRPO baseline: {@code n} independent trajectories per prompt, each its own
 * one-path tree. With a {@link Budget}, waves of {@code n} chains are rolled out until the budget is
 * reached (the group then has a multiple of {@code n} trajectories), so chains can be compared with tree
 * methods at equal cost.
 */
public final class ChainRollout implements RolloutStrategy<TreeGroup> {
    private final int n;
    private final Budget budget;
    private final int maxWaves;

    public ChainRollout(int n) {
        this(n, Budget.UNLIMITED);
    }

    public ChainRollout(int n, Budget budget) {
        if (n < 1) throw new IllegalArgumentException("n must be >= 1, got " + n);
        if (budget == null) throw new IllegalArgumentException("budget must not be null");
        this.n = n;
        this.budget = budget;
        this.maxWaves = budget.unlimited() ? 1 : 1 << 16;
    }

    @Override
    public String name() {
        return "chains(n=" + n + (budget.unlimited() ? "" : ", " + budget) + ")";
    }

    @Override
    public CompletableFuture<TreeGroup> rollout(Prompt prompt, RolloutContext ctx) {
        List<RolloutTree> trees = new ArrayList<>();
        return wave(prompt, ctx, trees, 0, RolloutCost.ZERO).thenApply(v -> {
            List<Trajectory> out = new ArrayList<>();
            for (RolloutTree t : trees) out.add(t.trajectory(t.leaves().get(0), t.index()));
            return new TreeGroup(prompt, out, ctx.meter().cost(), trees, Map.of("waves", trees.size() / n));
        });
    }

    private CompletableFuture<Void> wave(Prompt prompt, RolloutContext ctx, List<RolloutTree> trees, int wave, RolloutCost before) {
        List<RolloutTree> mine = new ArrayList<>();
        List<CompletableFuture<List<AgentState>>> runs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            int index = trees.size() + i;
            AgentState root = ctx.loop().start(prompt, ctx.promptContext(), ctx.pathSeed(index), ctx.meter());
            mine.add(new RolloutTree(index, root));
            runs.add(PathRunner.run(ctx.loop(), root));
        }
        return PathRunner.all(runs).thenCompose(chains -> {
            for (int i = 0; i < n; i++) mine.get(i).addChain(mine.get(i).root(), chains.get(i));
            trees.addAll(mine);
            RolloutCost now = ctx.meter().cost();
            boolean progress = now.generatedTokens() > before.generatedTokens();
            if (wave + 1 >= maxWaves || budget.unlimited() || budget.exhaustedBy(now) || !progress) return CompletableFuture.completedFuture(null);
            return wave(prompt, ctx, trees, wave + 1, now);
        });
    }
}
