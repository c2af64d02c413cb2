package ai.arbor.tree;

import ai.arbor.rollout.AgentLoop;
import ai.arbor.rollout.AgentState;
import ai.arbor.rollout.AgentStep;
import ai.arbor.rollout.Budget;
import ai.arbor.rollout.Prompt;
import ai.arbor.rollout.RolloutContext;
import ai.arbor.rollout.RolloutCost;
import ai.arbor.rollout.Trajectory;
import ai.arbor.rollout.TurnOutcome;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;

/**
 * The round-based entropy-driven branching shared by ARPO and AEPO ({@code vllm_rollout_with_tools.py}):
 * all active paths of a prompt take one step per round; after the round, tool-call events are visited
 * in path order and each may branch up to Z new paths while the group has free slots; when no path is
 * active and slots remain, fresh samples start from the prompt. Package-private.
 */
final class BranchingRounds {

    /** Knobs shared by ARPO and AEPO. */
    record Settings(int maxPaths, int branchesPerEvent, StepEntropy entropy, BranchRule rule, EntropyTiming timing,
                    boolean inheritInitialEntropy, int freshPerRound, boolean penalizeConsecutive, ConsecutiveScope scope, Budget budget) {}

    /** One decision taken: round, source path, ΔH, consecutive count, P(branch), and the outcome. */
    record Decision(int round, int path, double deltaH, int consecutive, double probability, boolean branched) {}

    private static final class Path {
        final int index;
        final TreeNode forkedAt;
        final boolean branch;
        AgentState state;
        TreeNode node;
        TreeNode previous;
        double initialEntropy = Double.NaN;
        int consecutive;

        Path(int index, AgentState state, TreeNode node, boolean branch) {
            this.index = index;
            this.state = state;
            this.node = node;
            this.forkedAt = node;
            this.branch = branch;
        }
    }

    private final Settings s;
    private final AgentLoop loop;
    private final RolloutContext ctx;
    private final RolloutTree tree;
    private final Random rnd;
    private final List<Path> paths = new ArrayList<>();
    private final List<Decision> decisions = new ArrayList<>();
    private final List<Integer> roundNewPaths = new ArrayList<>();
    private final BudgetPacer pacer;
    private int promptConsecutive;
    private int missingEntropy;
    private int fresh;
    /** Global samples of the split not started yet (only with a budget: started as they fit). */
    private int pendingGlobals;
    private int pilot;

    BranchingRounds(Settings s, Prompt prompt, RolloutContext ctx, Random rnd) {
        this.s = s;
        this.loop = ctx.loop();
        this.ctx = ctx;
        this.rnd = rnd;
        // The root is never stepped itself: every path, initial or fresh, is a fork of it.
        this.tree = new RolloutTree(0, loop.start(prompt, ctx.promptContext(), ctx.pathSeed(-1), ctx.meter()));
        this.pacer = new BudgetPacer(s.budget(), loop.config().maxGenerations());
    }

    /** The budget pacer (AEPO feeds it its probe rollout before {@link #run}). */
    BudgetPacer pacer() {
        return pacer;
    }

    /**
     * Runs the rounds from {@code initialPaths} global samples. With a budget they are started as they fit:
     * all that fit at once when a cost estimate exists (AEPO's probe), else a pilot of at most
     * {@link BudgetPacer#PILOT} first and the rest at round ends while they fit — never more than the budget
     * buys, however large the path bound.
     */
    CompletableFuture<TreeGroup> run(int initialPaths, Map<String, Object> info) {
        int m = Math.max(1, Math.min(initialPaths, s.maxPaths()));
        int start;
        if (!pacer.active()) start = m;
        else if (pacer.estimable()) start = Math.max(1, Math.min(m, pacer.affordablePaths(ctx.meter().cost(), m)));
        else start = Math.min(m, BudgetPacer.PILOT);
        pilot = pacer.active() && !pacer.estimable() ? start : 0;
        pendingGlobals = m - start;
        for (int i = 0; i < start; i++) newPath(tree.root(), Double.NaN, 0);
        return round(0).thenApply(v -> {
            List<Trajectory> out = new ArrayList<>();
            for (Path p : paths) out.add(tree.trajectory(p.node, out.size()));
            info.put("initialPaths", m);
            info.put("globalsNotStarted", pendingGlobals);
            info.put("pilotPaths", pilot);
            info.put("paths", paths.size());
            info.put("freshPaths", fresh);
            info.put("decisions", List.copyOf(decisions));
            info.put("stepsWithoutEntropy", missingEntropy);
            info.put("roundNewPaths", List.copyOf(roundNewPaths));
            return new TreeGroup(tree.prompt(), out, ctx.meter().cost(), List.of(tree), info);
        });
    }

    private Path newPath(TreeNode from, double initialEntropy, int consecutive) {
        Path p = new Path(paths.size(), loop.fork(from.state(), ctx.pathSeed(paths.size())), from, !from.isRoot());
        p.initialEntropy = initialEntropy;
        p.consecutive = consecutive;
        paths.add(p);
        return p;
    }

    private boolean canCreate() {
        return paths.size() < s.maxPaths() && !s.budget().exhaustedBy(ctx.meter().cost());
    }


    private CompletableFuture<Void> round(int round) {
        List<Path> active = new ArrayList<>();
        for (Path p : paths) if (!p.state.terminated()) active.add(p);
        if (active.isEmpty()) return CompletableFuture.completedFuture(null);
        RolloutCost before = ctx.meter().cost();
        List<CompletableFuture<AgentState>> steps = new ArrayList<>(active.size());
        for (Path p : active) steps.add(loop.step(p.state));
        return PathRunner.all(steps).thenCompose(results -> {
            List<Path> events = new ArrayList<>();
            List<Double> deltas = new ArrayList<>();
            List<TreeNode> points = new ArrayList<>();
            for (int i = 0; i < active.size(); i++) {
                Path p = active.get(i);
                p.previous = p.node;
                p.state = results.get(i);
                p.node = tree.add(p.node, p.state);
                AgentStep step = p.state.lastStep();
                pacer.observe(step, p.node.depth(), p.state.terminated());
                double h = s.entropy().of(step.entropies(), loop.tokenizer().vocabSize());
                if (Double.isNaN(h)) {
                    // The code counts a step without logprobs as entropy 0; so do we, visibly.
                    missingEntropy++;
                    h = 0;
                }
                if (Double.isNaN(p.initialEntropy)) p.initialEntropy = h;
                double dH = h - p.initialEntropy;
                if (s.timing() == EntropyTiming.STEP_BEFORE_CALL) {
                    if (step.outcome() == TurnOutcome.TOOL_CALL && !p.state.terminated()) {
                        events.add(p);
                        deltas.add(dH);
                        points.add(p.node);
                    }
                } else if (step.postTool() && !(p.branch && p.previous == p.forkedAt)) {
                    // A branch's own first step does not decide again at the point it was branched from
                    // (the decision there was already taken); its later tool calls are new events.
                    events.add(p);
                    deltas.add(dH);
                    points.add(p.previous);
                }
            }
            boolean anyNew = false;
            int pathsBefore = paths.size();
            // With a budget: the projected cost is what was spent plus the expected remainder of every active
            // path; each new path is admitted only while its expected cost fits (BudgetPacer).
            double[] projected = pacer.projection(ctx.meter().cost());
            double[] spread = new double[2];
            if (pacer.active())
                for (Path p : paths)
                    if (!p.state.terminated()) {
                        double[] r = orZero(pacer.remaining(p.node.depth()));
                        BudgetPacer.add(projected, r);
                        spread[0] += r[0] * r[0];
                        spread[1] += r[1] * r[1];
                    }
            BudgetPacer.Admission admission = pacer.admission(projected, spread);
            while (pendingGlobals > 0 && canCreate() && admission.admit(pacer.remaining(0))) {
                newPath(tree.root(), Double.NaN, 0);
                pendingGlobals--;
                anyNew = true;
            }
            for (int e = 0; e < events.size(); e++) {
                Path p = events.get(e);
                int l = !s.penalizeConsecutive() ? 0 : s.scope() == ConsecutiveScope.PROMPT ? promptConsecutive : p.consecutive;
                boolean branched = false;
                List<Path> born = new ArrayList<>();
                for (int z = 0; z < s.branchesPerEvent() && canCreate(); z++) {
                    double[] unit = pacer.remaining(points.get(e).depth());
                    if (!admission.admit(unit)) break;
                    double prob = s.rule().probability(deltas.get(e), l);
                    boolean b = s.rule().decide(deltas.get(e), l, rnd);
                    decisions.add(new Decision(round, p.index, deltas.get(e), l, prob, b));
                    if (b) {
                        born.add(newPath(points.get(e), s.inheritInitialEntropy() ? p.initialEntropy : Double.NaN, 0));
                        branched = true;
                    } else {
                        admission.release(unit);   // nothing was added
                    }
                }
                if (branched) {
                    anyNew = true;
                    p.consecutive++;
                    for (Path c : born) c.consecutive = p.consecutive;
                } else {
                    p.consecutive = 0;
                }
            }
            boolean anyActive = false;
            for (Path p : paths) anyActive |= !p.state.terminated();
            boolean progress = ctx.meter().cost().generatedTokens() > before.generatedTokens();
            if (!anyActive && progress) {
                // Leftover budget goes to fresh samples from the prompt (code: one per round while none is active;
                // with a budget, as many as fit at once, so the tail is not one path at a time).
                int add = s.freshPerRound() > 0 && !pacer.active() ? s.freshPerRound() : Integer.MAX_VALUE;
                for (int i = 0; i < add && canCreate() && admission.admit(pacer.remaining(0)); i++) {
                    newPath(tree.root(), Double.NaN, 0);
                    fresh++;
                    anyNew = true;
                }
            }
            roundNewPaths.add(paths.size() - pathsBefore);
    
            promptConsecutive = anyNew ? promptConsecutive + 1 : 0;
            return round(round + 1);
        });
    }

    private static double[] orZero(double[] c) {
        return c == null ? new double[2] : c;
    }
}
