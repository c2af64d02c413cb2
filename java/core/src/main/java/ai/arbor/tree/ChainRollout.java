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
 * one-path tree. With a {@link Budget}, chains are added until the budget is spent, so chains can be
 * compared with tree methods at equal cost: a pilot wave of min(n, 2) chains, then waves sized from the
 * mean cost of the chains so far, each committing at most half of what is left until the rest is two
 * chains' worth, so that the expected total is nearest the budget ({@link BudgetPacer}), until no further
 * chain fits. The group then has as many chains as the budget buys (not a multiple of n).
 */
public final class ChainRollout implements RolloutStrategy<TreeGroup> {
    private final int n;
    private final Budget budget;
    private final int maxWaves;
    /** Most chains one budgeted wave adds (a guard when a chain costs nothing in the capped unit). */
    private static final int MAX_WAVE = 1 << 12;

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
        BudgetPacer pacer = new BudgetPacer(budget, ctx.loop().config().maxGenerations());
        int first = pacer.active() ? Math.min(n, BudgetPacer.PILOT) : n;
        int[] waves = {0};
        return wave(prompt, ctx, trees, pacer, first, waves, RolloutCost.ZERO).thenApply(v -> {
            List<Trajectory> out = new ArrayList<>();
            for (RolloutTree t : trees) out.add(t.trajectory(t.leaves().get(0), t.index()));
            return new TreeGroup(prompt, out, ctx.meter().cost(), trees, Map.of("waves", waves[0]));
        });
    }

    private CompletableFuture<Void> wave(Prompt prompt, RolloutContext ctx, List<RolloutTree> trees, BudgetPacer pacer, int size, int[] waves,
                                         RolloutCost before) {
        waves[0]++;
        List<RolloutTree> mine = new ArrayList<>();
        List<CompletableFuture<List<AgentState>>> runs = new ArrayList<>();
        for (int i = 0; i < size; i++) {
            int index = trees.size() + i;
            AgentState root = ctx.loop().start(prompt, ctx.promptContext(), ctx.pathSeed(index), ctx.meter());
            mine.add(new RolloutTree(index, root));
            runs.add(PathRunner.run(ctx.loop(), root));
        }
        return PathRunner.all(runs).thenCompose(chains -> {
            for (int i = 0; i < size; i++) {
                mine.get(i).addChain(mine.get(i).root(), chains.get(i));
                List<AgentState> c = chains.get(i);
                if (!c.isEmpty()) pacer.finished(c.get(c.size() - 1).steps(), 0);
            }
            trees.addAll(mine);
            RolloutCost now = ctx.meter().cost();
            if (!pacer.active() || waves[0] >= maxWaves || !pacer.progressed(before, now)) return CompletableFuture.completedFuture(null);
            // the next wave: as many chains as fit (nothing is in flight now, so the projection is what was spent)
            BudgetPacer.Admission admission = pacer.admission(pacer.projection(now));
            double[] unit = pacer.remaining(0);
            int next = 0;
            while (next < MAX_WAVE && admission.admit(unit)) next++;
            if (next == 0) return CompletableFuture.completedFuture(null);
            return wave(prompt, ctx, trees, pacer, next, waves, now);
        });
    }
}
