package ai.arbor.tree;

import ai.arbor.rollout.AgentStep;
import ai.arbor.rollout.Budget;
import ai.arbor.rollout.RolloutCost;
import ai.arbor.rollout.ToolCallStatus;
import java.util.ArrayList;
import java.util.List;

/**
 * Paces one prompt's rollout under a {@link Budget} so that it ends near the budget, not one wave past
 * it (docs/rollouts.md, "Budgets"). A strategy asks, at a point where none of the prompt's work is in
 * flight ({@link #admission}), whether one more unit of work — a chain, an expansion from a node, a branch,
 * a fresh sample — fits: it does when the projected cost (spent, plus the expected remainder of the paths
 * still active, plus the units admitted so far at this point) plus <em>half</em> the unit's expected cost
 * stays within the point's limit. Admitting on the half makes the final cost the one nearest the budget in
 * whole units. The limit is the budget once what is left of it is at most two paths' worth (then one unit
 * per point); before that,
 * one point commits at most half of what is left, and never more units than paths have finished (at least
 * {@link #PILOT}), so the work grows geometrically while the estimate firms up: the units admitted last —
 * whose cost errors no later work corrects — are few, and the estimates they rely on rest on the paths
 * before them. (A path's cost is heavy-tailed — a run of tool calls — so two pilot paths can be off by 2×:
 * committing half the budget on them overshot by 30 % in the tests.)
 *
 * <p>Expected costs come from the prompt's own steps, counted once per tree node: at each depth j, the
 * mean cost c_j of the steps taken there and the fraction h_j of them that ended their path. Continuing a
 * path that has taken d steps and not ended costs E = Σ_{j>d} c_j · Π_{d<i<j} (1 − h_i) ({@link #remaining}),
 * with h = 1 at {@code maxTurns}. Counting every step when it is taken — of the paths still running too —
 * keeps the estimate free of the bias of finished paths alone, which early on are the short ones (with
 * those, ARPO overshot a tool-call budget by 30 % in the tests). At a depth not reached yet the pooled mean
 * step cost and end fraction stand in. Before any step has been seen there is no estimate: strategies then
 * start a pilot of at most {@link #PILOT} paths. Decisions depend only on completed work, so a
 * deterministic generator gives a deterministic rollout. Package-private.
 */
final class BudgetPacer {
    /** Paths a strategy starts before any cost is known. */
    static final int PILOT = 2;
    /**
     * Standard deviations of the work in flight kept free below the limit. It costs no undershoot: when
     * nothing is in flight there is no spread, and what was held back is admitted then.
     */
    static final double SPREAD_SDS = 2;

    private final Budget budget;
    private final int maxTurns;
    /** Per depth j ≥ 1 (index j): steps seen, steps that ended their path, their tokens and tool calls. */
    private final List<double[]> depths = new ArrayList<>();
    private long steps, finishedPaths;

    BudgetPacer(Budget budget, int maxTurns) {
        this.budget = budget == null ? Budget.UNLIMITED : budget;
        this.maxTurns = Math.max(1, maxTurns);
    }

    /** True when a budget is set (else every question about fitting answers yes). */
    boolean active() {
        return !budget.unlimited();
    }

    /** The cost of one step in the budget's units: {generated tokens, dispatched tool calls}. */
    static double[] cost(AgentStep s) {
        ToolCallStatus st = s.toolCall() == null ? null : s.toolCall().status();
        boolean dispatched = st != null && st != ToolCallStatus.MALFORMED && st != ToolCallStatus.UNKNOWN_TOOL;
        return new double[] {s.generated().length, dispatched ? 1 : 0};
    }

    /** A step was taken at {@code depth} (1 = a path's first); {@code ended}: its path ended with it. */
    void observe(AgentStep s, int depth, boolean ended) {
        if (depth < 1) throw new IllegalArgumentException("depth must be >= 1, got " + depth);
        while (depths.size() <= depth) depths.add(new double[4]);
        double[] c = cost(s), d = depths.get(depth);
        d[0]++;
        if (ended) {
            d[1]++;
            finishedPaths++;
        }
        d[2] += c[0];
        d[3] += c[1];
        steps++;
    }

    /**
     * A path ran to its end from depth {@code from} ({@code path} is all its steps from the prompt; the steps
     * before {@code from} were observed already, as the shared prefix of an expansion or a branch).
     */
    void finished(List<AgentStep> path, int from) {
        for (int i = from; i < path.size(); i++) observe(path.get(i), i + 1, i == path.size() - 1);
    }

    /** Paths seen to end (at least {@link #PILOT} units may be admitted at a point; more as more paths end). */
    long finishedPaths() {
        return finishedPaths;
    }

    /**
     * How many whole paths (each costing {@link #remaining}(0)) the rest of the budget buys after {@code spent}, at
     * most {@code max}: the count that brings the expected total nearest the budget (no halving: this is a plan,
     * not an admission).
     */
    int affordablePaths(RolloutCost spent, int max) {
        double[] projected = projection(spent);
        double[] unit = remaining(0);
        if (!active()) return max;
        if (unit == null) return 0;
        double[] caps = {budget.generatedTokens(), budget.toolCalls()};
        int k = 0;
        while (k < max) {
            boolean fit = true;
            for (int d = 0; d < 2; d++) if (caps[d] > 0 && projected[d] + unit[d] / 2 > caps[d]) fit = false;
            if (!fit) break;
            add(projected, unit);
            k++;
        }
        return k;
    }

    /** True once some step has been seen, so {@link #remaining} has an answer. */
    boolean estimable() {
        return steps > 0;
    }

    /**
     * The expected further cost {tokens, calls} of a path that has taken {@code depth} steps and has not
     * ended, or null before any step was seen.
     */
    double[] remaining(int depth) {
        if (steps == 0) return null;
        double n = 0, ended = 0, tokens = 0, calls = 0;
        for (double[] d : depths) {
            n += d[0];
            ended += d[1];
            tokens += d[2];
            calls += d[3];
        }
        double pooledEnd = ended / n, pooledTokens = tokens / n, pooledCalls = calls / n;
        double t = 0, c = 0, alive = 1;
        for (int j = Math.max(depth, 0) + 1; j <= Math.max(maxTurns, depth + 1) && alive > 0; j++) {
            double[] d = j < depths.size() ? depths.get(j) : null;
            boolean seen = d != null && d[0] > 0;
            t += alive * (seen ? d[2] / d[0] : pooledTokens);
            c += alive * (seen ? d[3] / d[0] : pooledCalls);
            alive *= 1 - (j >= maxTurns ? 1 : seen ? d[1] / d[0] : pooledEnd);
        }
        return new double[] {t, c};
    }

    /** A projection starting from what has been spent. */
    double[] projection(RolloutCost spent) {
        return new double[] {spent.generatedTokens(), spent.toolCalls()};
    }

    /** Adds {@code unit} to {@code projected}. */
    static void add(double[] projected, double[] unit) {
        projected[0] += unit[0];
        projected[1] += unit[1];
    }

    /**
     * The admissions of one decision point, starting from {@code projected} (spent plus the expected remainder
     * of the active paths).
     */
    Admission admission(double[] projected) {
        return admission(projected, new double[2]);
    }

    /**
     * As {@link #admission(double[])}, with the variance of the work in flight: a path's remaining cost is
     * taken to spread as much as it is expected to be (sd = mean, the geometric tail of a run of turns), so
     * the {@code inFlight} remainders r_i give Σ r_i², and a unit is admitted only while the projection plus
     * half the unit plus {@link #SPREAD_SDS} sd of everything in flight (the units admitted at this point
     * included) fits. The
     * work in flight cannot be stopped: its spread is what overshoots, and an undershoot is made up later,
     * when it has finished.
     */
    Admission admission(double[] projected, double[] inFlightVariance) {
        double[] caps = {budget.generatedTokens(), budget.toolCalls()};
        double[] limit = caps.clone();
        double[] path = remaining(0);
        boolean near = true;
        for (int d = 0; d < 2; d++) {
            double gap = caps[d] - projected[d];
            if (caps[d] > 0 && path != null && gap > 2 * path[d]) {
                limit[d] = projected[d] + gap / 2;
                near = false;
            }
        }
        // the last two paths' worth: one unit at a time, so the final overshoot is one path's deviation at most
        return new Admission(projected.clone(), limit, inFlightVariance.clone(), near ? 1 : (int) Math.min(1 << 20, Math.max(PILOT, finishedPaths)));
    }

    /** What one decision point admits: {@link #admit} adds a unit when it fits. */
    final class Admission {
        private final double[] projected, limit, variance;
        private final int maxUnits;
        private int units;

        private Admission(double[] projected, double[] limit, double[] variance, int maxUnits) {
            this.projected = projected;
            this.limit = limit;
            this.variance = variance;
            this.maxUnits = maxUnits;
        }

        /** Whether a unit of expected cost {@code unit} (null: unknown) fits; if so it is counted. */
        boolean admit(double[] unit) {
            if (!active()) return true;
            if (unit == null || units >= maxUnits) return false;
            for (int d = 0; d < 2; d++)
                if (limit[d] > 0 && projected[d] + unit[d] / 2 + SPREAD_SDS * Math.sqrt(variance[d]) > limit[d]) return false;
            add(projected, unit);
            variance[0] += unit[0] * unit[0];
            variance[1] += unit[1] * unit[1];
            units++;
            return true;
        }

        /** Takes back the last admitted {@code unit} (a branch that was drawn not to happen). */
        void release(double[] unit) {
            if (!active() || unit == null) return;
            projected[0] -= unit[0];
            projected[1] -= unit[1];
            variance[0] -= unit[0] * unit[0];
            variance[1] -= unit[1] * unit[1];
            units--;
        }

        double[] projected() {
            return projected.clone();
        }
    }

    /** True when {@code after} spent more than {@code before} in some capped unit (work that moves towards the budget). */
    boolean progressed(RolloutCost before, RolloutCost after) {
        return (budget.generatedTokens() > 0 && after.generatedTokens() > before.generatedTokens())
                || (budget.toolCalls() > 0 && after.toolCalls() > before.toolCalls());
    }
}
