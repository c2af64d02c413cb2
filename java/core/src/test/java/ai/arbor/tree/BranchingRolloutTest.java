package ai.arbor.tree;

import static ai.arbor.tree.Policies.*;
import static org.junit.jupiter.api.Assertions.*;

import ai.arbor.rollout.Budget;
import ai.arbor.rollout.RolloutBatch;
import ai.arbor.rollout.RolloutEngine;
import ai.arbor.rollout.ScriptedGenerator;
import ai.arbor.rollout.Trajectory;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** ARPO / AEPO: rules, entropies, splits and branching frequencies against the formulas of docs/algorithms.md §4. */
class BranchingRolloutTest {
    static final double LN_V = Math.log(TOK.vocabSize());
    static final double Z = 3.29;   // two-sided 0.001

    @SuppressWarnings("unchecked")
    static List<BranchingRounds.Decision> decisions(TreeGroup g) {
        return (List<BranchingRounds.Decision>) g.info().get("decisions");
    }

    static void assertFrequency(long hits, long n, double p, String what) {
        double se = Math.sqrt(Math.max(p * (1 - p), 1e-12) / n);
        double f = (double) hits / n;
        assertTrue(Math.abs(f - p) <= Z * se + 1e-12, what + ": frequency " + f + " of " + n + " draws vs probability " + p);
    }

    @Test
    void branchRulesMatchTheirFormulas() {
        BranchRule arpo = BranchRule.arpoCode();
        assertEquals(0.8, arpo.probability(1.5, 0), 1e-12);   // clip(1 − 0.5 + 0.2·1.5)
        assertEquals(0.3, arpo.probability(-1, 0), 1e-12);
        assertEquals(1.0, arpo.probability(3, 0), 1e-12);
        assertEquals(0.0, arpo.probability(-3, 0), 1e-12);
        BranchRule aepo = BranchRule.aepoCode();
        assertEquals(0.7, aepo.probability(1, 0), 1e-12);     // clip(1 − 0.5/1 + 0.2)
        assertEquals(0.2, aepo.probability(1, 10), 1e-12);    // f = 0.5: clip(1 − 1 + 0.2)
        assertEquals(1 - (0.5 / 0.85 - 0.2 * 0.5), aepo.probability(0.5, 3), 1e-12);
        assertEquals(0.0, aepo.probability(5, 20), 1e-12);    // f = 0: never
        assertEquals(1.0, new BranchRule.ArpoPaper(0.4, 0.2, 0.5).probability(1, 0));
        assertEquals(0.0, new BranchRule.ArpoPaper(0.4, 0.2, 0.5).probability(0, 0));
        assertTrue(new BranchRule.AepoPaper(0.6, 0.2, 0.5, 0.05).decide(0, 0, null));
        assertFalse(new BranchRule.AepoPaper(0.6, 0.2, 0.5, 0.05).decide(0, 4, null));   // 0.6 · 0.8 = 0.48
        // sampled decisions agree with the probabilities
        Random rnd = new Random(424242);
        double[][] cases = {{1.5, 0}, {-1, 0}, {0, 0}, {1, 10}, {0.5, 3}};
        for (BranchRule r : List.of(arpo, aepo))
            for (double[] c : cases) {
                int hits = 0, n = 20000;
                for (int i = 0; i < n; i++) if (r.decide(c[0], (int) c[1], rnd)) hits++;
                assertFrequency(hits, n, r.probability(c[0], (int) c[1]), r + " at " + java.util.Arrays.toString(c));
            }
    }

    @Test
    void arpoThresholdIsTheCodesBranchProbability() {
        // ARPO's code: prob = clip(random() − 0.2·ΔH); no branch when prob > branch_probability. So τ = 0.7 branches with
        // probability 0.7 at ΔH = 0 (the earlier reading U + βΔH ≥ τ would give 0.3), 0.9 at ΔH = 1, 0.5 at ΔH = −1
        BranchRule r = new BranchRule.ArpoCode(0.2, 0.7);
        assertEquals(0.7, r.probability(0, 0), 1e-12);
        assertEquals(0.9, r.probability(1, 0), 1e-12);
        assertEquals(0.5, r.probability(-1, 0), 1e-12);
        assertEquals(1.0, r.probability(2, 0), 1e-12);
        assertEquals(0.0, new BranchRule.ArpoCode(0.2, 0.1).probability(-1, 0), 1e-12);
        assertEquals(1.0, new BranchRule.ArpoCode(0.2, 1.0).probability(-4, 0), 1e-12, "clip(…) ≤ 1 always");
        assertEquals(0.0, new BranchRule.ArpoCode(0.2, -0.1).probability(4, 0), 1e-12, "clip(…) ≥ 0 > τ");
        // the draw: U = 0.65 − 0.2·0 = 0.65 ≤ 0.7 branches; U = 0.75 does not; U = 0.85 at ΔH = 1: 0.65 ≤ 0.7 branches
        assertTrue(r.decide(0, 0, fixedU(0.65)));
        assertFalse(r.decide(0, 0, fixedU(0.75)));
        assertTrue(r.decide(1, 0, fixedU(0.85)));
        Random rnd = new Random(77);
        for (double dh : new double[] {0, 1, -1}) {
            int hits = 0, n = 20000;
            for (int i = 0; i < n; i++) if (r.decide(dh, 0, rnd)) hits++;
            assertFrequency(hits, n, r.probability(dh, 0), "τ = 0.7, ΔH = " + dh);
        }
    }

    /** A Random whose nextDouble is {@code u}. */
    static Random fixedU(double u) {
        return new Random() {
            @Override
            public double nextDouble() {
                return u;
            }
        };
    }

    @Test
    void aepoReleasedFormHasAFixedSplitThePenaltyAndNoProbes() {
        double e0 = 0.2, e1 = e1For(e0, 0.5);
        ScriptedGenerator gen = new ScriptedGenerator(TOK, random(0.8, e0, e1)).recordRequests(false);
        try (RolloutEngine engine = engine(gen, 8)) {
            RolloutBatch<TreeGroup> batch = engine.run(prompts(20), new AepoRollout(AepoRollout.Config.released()), 5);
            boolean penalized = false;
            for (TreeGroup g : batch.groups()) {
                assertEquals(false, g.info().get("premonitoring"));
                assertEquals(8, g.info().get("initialPaths"), "the released split: 8 of 16");
                assertNull(g.info().get("hRoot"), "no pre-monitoring probes");
                assertEquals(16, g.trajectories().size());
                // cost = the tree's own steps: nothing generated outside it
                long tree = g.trees().get(0).nodes().stream().filter(x -> !x.isRoot()).mapToLong(x -> x.step().generated().length).sum();
                assertEquals(tree, g.cost().generatedTokens());
                @SuppressWarnings("unchecked")
                List<Integer> perRound = (List<Integer>) g.info().get("roundNewPaths");
                int[] l = new int[perRound.size() + 1];
                for (int r = 1; r <= perRound.size(); r++) l[r] = perRound.get(r - 1) > 0 ? l[r - 1] + 1 : 0;
                for (BranchingRounds.Decision d : decisions(g)) {
                    assertEquals(l[d.round()], d.consecutive(), "the penalty's l, per prompt");
                    double f = Math.max(0, 1 - 0.05 * d.consecutive());
                    assertEquals(Math.max(0, Math.min(1, 1 - (0.5 / f - 0.2 * d.deltaH()))), d.probability(), 1e-9);
                    penalized |= d.consecutive() > 0;
                }
            }
            assertTrue(penalized, "some decisions were taken under the consecutive-branch penalty");
            assertEquals(gen.tokensGenerated(), batch.cost().generatedTokens());
        }
    }

    @Test
    void stepEntropyAndSplitFormulas() {
        float[] h = {1, 2, 3, 4};
        assertEquals(6 / Math.log(100), new StepEntropy(3, StepEntropy.Aggregation.SUM, true).of(h, 100), 1e-12);
        assertEquals(2 / Math.log(100), new StepEntropy(3, StepEntropy.Aggregation.MEAN, true).of(h, 100), 1e-12);
        assertEquals(10, new StepEntropy(20, StepEntropy.Aggregation.SUM, false).of(h, 100), 1e-12);
        assertTrue(Double.isNaN(StepEntropy.code().of(null, 100)));
        assertTrue(Double.isNaN(StepEntropy.code().of(new float[0], 100)));
        // m = int(n·σ(0.5·ΔH)) + 1 clipped to [1, n] (code); round(n·σ(0.5·ΔH)) clipped (paper)
        int[] code = {2, 7, 9, 10, 15, 16};
        int[] paper = {2, 6, 8, 10, 14, 16};
        double[] dh = {-4, -1, 0, 1, 4, 100};
        for (int i = 0; i < dh.length; i++) {
            assertEquals(code[i], AepoRollout.globalSamples(AepoRollout.SplitRule.CODE, 16, 0.5, dh[i]), "code ΔH=" + dh[i]);
            assertEquals(paper[i], AepoRollout.globalSamples(AepoRollout.SplitRule.PAPER, 16, 0.5, dh[i]), "paper ΔH=" + dh[i]);
        }
        assertEquals(1, AepoRollout.globalSamples(AepoRollout.SplitRule.PAPER, 16, 0.5, -100));
    }

    /** e1 such that ΔH = (Σ_20 e1 − Σ_20 e0) / ln|V| equals {@code dh}. */
    static double e1For(double e0, double dh) {
        return e0 + dh * LN_V / 20;
    }

    @Test
    void arpoBranchesWithTheCodeRulesProbabilityAtControlledEntropy() {
        for (double dh : new double[] {1.5, -1.0}) {
            ScriptedGenerator gen = new ScriptedGenerator(TOK, random(0.7, 0.5, e1For(0.5, dh))).recordRequests(false);
            try (RolloutEngine engine = engine(gen, 6)) {
                ArpoRollout s = new ArpoRollout(ArpoRollout.Config.paper().withPaths(16, 4));
                RolloutBatch<TreeGroup> batch = engine.run(prompts(40), s, 9);
                long hits = 0, n = 0;
                for (TreeGroup g : batch.groups()) {
                    assertEquals(16, g.trajectories().size(), "the budget of paths is filled (branches, then fresh samples)");
                    assertEquals(4, g.info().get("initialPaths"));
                    assertEquals(0, g.info().get("stepsWithoutEntropy"));
                    for (int i = 0; i < 16; i++) assertEquals(i, g.trajectories().get(i).sampleIndex());
                    RolloutTree tree = g.trees().get(0);
                    // one decision per tool-call point: a node has its continuation plus at most Z = 1 branch
                    for (TreeNode x : tree.nodes()) if (!x.isRoot()) assertTrue(x.children().size() <= 2, "branching cascaded at " + x);
                    for (Trajectory t : g.trajectories()) assertTrue(tree.nodes().stream().anyMatch(x -> x.isLeaf() && java.util.Arrays.equals(x.path(), t.nodePath())));
                    for (BranchingRounds.Decision d : decisions(g)) {
                        assertEquals(dh, d.deltaH(), 1e-5);
                        assertEquals(Math.max(0, Math.min(1, 0.5 + 0.2 * dh)), d.probability(), 1e-5);
                        n++;
                        if (d.branched()) hits++;
                    }
                    int branched = (int) decisions(g).stream().filter(BranchingRounds.Decision::branched).count();
                    assertEquals(16, 4 + branched + (int) g.info().get("freshPaths"), "initial + branches + fresh = paths");
                }
                assertTrue(n > 200, "enough decisions: " + n);
                assertFrequency(hits, n, 0.5 + 0.2 * dh, "ARPO ΔH=" + dh);
                assertEquals(gen.tokensGenerated(), batch.cost().generatedTokens());
            }
        }
    }

    @Test
    void arpoTimingAndInheritanceOptions() {
        double dh = 1.5;
        ScriptedGenerator gen = new ScriptedGenerator(TOK, random(0.7, 0.5, e1For(0.5, dh))).recordRequests(false);
        try (RolloutEngine engine = engine(gen, 6)) {
            // code timing: the step that ended with the call decides; at a path's first call that step is its first, so ΔH = 0
            ArpoRollout code = new ArpoRollout(ArpoRollout.Config.paper().withPaths(16, 4).withTiming(EntropyTiming.STEP_BEFORE_CALL));
            Map<Double, Integer> seen = new HashMap<>();
            for (TreeGroup g : engine.run(prompts(10), code, 1).groups())
                for (BranchingRounds.Decision d : decisions(g)) seen.merge(Math.round(d.deltaH() * 1e4) / 1e4, 1, Integer::sum);
            assertEquals(2, seen.size(), "ΔH is 0 (first call) or 1.5: " + seen);
            assertTrue(seen.containsKey(0.0) && seen.containsKey(1.5), seen.toString());
            // code's H_initial for branches: measured on their own first step (post-tool, e1), so their ΔH is 0
            ArpoRollout own = new ArpoRollout(ArpoRollout.Config.paper().withPaths(16, 4).withInheritInitialEntropy(false));
            seen.clear();
            for (TreeGroup g : engine.run(prompts(10), own, 1).groups())
                for (BranchingRounds.Decision d : decisions(g)) seen.merge(Math.round(d.deltaH() * 1e4) / 1e4, 1, Integer::sum);
            assertTrue(seen.containsKey(0.0) && seen.containsKey(1.5), seen.toString());
            // paper rule: deterministic
            ArpoRollout paper = new ArpoRollout(ArpoRollout.Config.paper().withPaths(16, 4).withRule(new BranchRule.ArpoPaper(0.3, 0.2, 0.5)));
            for (TreeGroup g : engine.run(prompts(4), paper, 1).groups())
                for (BranchingRounds.Decision d : decisions(g)) assertTrue(d.branched(), "0.3 + 0.2·1.5 > 0.5");
        }
        // a backend without entropies: visible in info, ΔH = 0
        ScriptedGenerator none = new ScriptedGenerator(TOK, random(0.7, Double.NaN, Double.NaN)).recordRequests(false);
        try (RolloutEngine engine = engine(none, 6)) {
            TreeGroup g = engine.run(prompts(1), new ArpoRollout(ArpoRollout.Config.defaults().withPaths(8, 2)), 1).groups().get(0);
            assertTrue((int) g.info().get("stepsWithoutEntropy") > 0);
            for (BranchingRounds.Decision d : decisions(g)) assertEquals(0.0, d.deltaH());
        }
    }

    @Test
    void aepoPremonitoringSplitsTheBudgetByTheFormula() {
        double e0 = 1.0, e1 = 0.2;
        for (AepoRollout.ToolEntropySource src : AepoRollout.ToolEntropySource.values()) {
            ScriptedGenerator gen = new ScriptedGenerator(TOK, fixed(2, e0, e1)).recordRequests(false);
            try (RolloutEngine engine = engine(gen, 6)) {
                AepoRollout s = new AepoRollout(AepoRollout.Config.released().withPremonitoring(true).withToolEntropySource(src));
                RolloutBatch<TreeGroup> batch = engine.run(prompts(3), s, 2);
                double hRoot = 20 * e0 / LN_V;   // the probe has 46 tokens before its stop; the first 20 count
                double hTool = src == AepoRollout.ToolEntropySource.ALL_STEPS ? 20 * (e0 + 2 * e1) / 3 / LN_V : 20 * e1 / LN_V;
                double sigma = 1 / (1 + Math.exp(-0.5 * (hRoot - hTool)));
                int m = (int) Math.max(1, Math.min(16, Math.floor(16 * sigma) + 1));
                for (TreeGroup g : batch.groups()) {
                    assertEquals(hRoot, (double) g.info().get("hRoot"), 1e-5);
                    assertEquals(hTool, (double) g.info().get("hTool"), 1e-5);
                    assertEquals(m, g.info().get("globalSamples"), src.toString());
                    assertEquals(m, g.info().get("initialPaths"));
                    assertEquals(16, g.trajectories().size());
                }
                // the probes' tokens count: generator tokens = everything accounted
                assertEquals(gen.tokensGenerated(), batch.cost().generatedTokens());
                long inBatch = batch.trajectories().stream().mapToLong(Trajectory::generatedTokens).sum();
                assertTrue(batch.cost().generatedTokens() > inBatch, "probe rollouts are paid for but not in the batch");
            }
        }
        assertEquals(13, AepoRollout.globalSamples(AepoRollout.SplitRule.CODE, 16, 0.5, 20 * (1.0 - (1.0 + 0.4) / 3) / LN_V));
    }

    @Test
    void aepoConsecutiveBranchPenaltyFollowsTheCodeRule() {
        double e0 = 0.2, e1 = e1For(e0, 0.5), dh = 0.5;
        ScriptedGenerator gen = new ScriptedGenerator(TOK, random(0.8, e0, e1)).recordRequests(false);
        Map<Double, long[]> byProbability = new HashMap<>();
        try (RolloutEngine engine = engine(gen, 8)) {
            AepoRollout s = new AepoRollout(AepoRollout.Config.paper().withPaths(32).withSplit(AepoRollout.SplitRule.CODE, 0.5));
            for (TreeGroup g : engine.run(prompts(30), s, 4).groups()) {
                @SuppressWarnings("unchecked")
                List<Integer> perRound = (List<Integer>) g.info().get("roundNewPaths");
                // l at round r = consecutive rounds just before r that created paths (branches or fresh)
                int[] l = new int[perRound.size() + 1];
                for (int r = 1; r <= perRound.size(); r++) l[r] = perRound.get(r - 1) > 0 ? l[r - 1] + 1 : 0;
                for (BranchingRounds.Decision d : decisions(g)) {
                    assertEquals(l[d.round()], d.consecutive(), "round " + d.round());
                    assertEquals(dh, d.deltaH(), 1e-5);
                    double f = Math.max(0, 1 - 0.05 * d.consecutive());
                    double p = f == 0 ? 0 : Math.max(0, Math.min(1, 1 - (0.5 / f - 0.2 * dh)));
                    assertEquals(p, d.probability(), 1e-6);
                    long[] c = byProbability.computeIfAbsent(Math.round(p * 1e6) / 1e6, k -> new long[2]);
                    c[0]++;
                    if (d.branched()) c[1]++;
                }
            }
        }
        int checked = 0;
        for (Map.Entry<Double, long[]> e : byProbability.entrySet()) {
            if (e.getValue()[0] < 30) continue;
            assertFrequency(e.getValue()[1], e.getValue()[0], e.getKey(), "AEPO p=" + e.getKey());
            checked++;
        }
        assertTrue(checked >= 2, "decisions at several penalty levels: " + byProbability.keySet());
        assertTrue(byProbability.keySet().stream().anyMatch(p -> p < 1), "the penalty lowered some probabilities");
    }

    @Test
    void pathScopeAndBudgetMode() {
        ScriptedGenerator gen = new ScriptedGenerator(TOK, random(0.8, 0.2, 1.0)).recordRequests(false);
        try (RolloutEngine engine = engine(gen, 8)) {
            AepoRollout s = new AepoRollout(AepoRollout.Config.defaults().withPaths(16).withScope(ConsecutiveScope.PATH));
            for (TreeGroup g : engine.run(prompts(4), s, 4).groups()) {
                Map<Integer, List<BranchingRounds.Decision>> byPath = new HashMap<>();
                for (BranchingRounds.Decision d : decisions(g)) byPath.computeIfAbsent(d.path(), k -> new ArrayList<>()).add(d);
                for (List<BranchingRounds.Decision> ds : byPath.values()) {
                    // per path: l grows by one after an event that branched, resets after one that did not
                    for (int i = 1; i < ds.size(); i++) {
                        BranchingRounds.Decision prev = ds.get(i - 1), cur = ds.get(i);
                        if (prev.round() == cur.round()) continue;   // Z > 1 draws of one event
                        assertEquals(prev.branched() ? prev.consecutive() + 1 : 0, cur.consecutive());
                    }
                }
            }
            long budget = 3000;
            ArpoRollout b = new ArpoRollout(ArpoRollout.Config.defaults().withPaths(1000, 4).withBudget(Budget.tokens(budget)));
            for (TreeGroup g : engine.run(prompts(3), b, 4).groups()) {
                assertTrue(Math.abs(g.cost().generatedTokens() / (double) budget - 1) <= 0.1, g.cost().toString());
                assertTrue(g.trajectories().size() < 1000);
            }
        }
    }
}
