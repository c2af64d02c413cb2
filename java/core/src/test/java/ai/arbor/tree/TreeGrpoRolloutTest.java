package ai.arbor.tree;

import static ai.arbor.tree.Policies.*;
import static org.junit.jupiter.api.Assertions.*;

import ai.arbor.rollout.AgentStep;
import ai.arbor.rollout.Budget;
import ai.arbor.rollout.RolloutBatch;
import ai.arbor.rollout.RolloutEngine;
import ai.arbor.rollout.ScriptedGenerator;
import ai.arbor.rollout.Termination;
import ai.arbor.rollout.Trajectory;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

class TreeGrpoRolloutTest {

    @SuppressWarnings("unchecked")
    static List<TreeGrpoRollout.Expansion> expansions(TreeGroup g) {
        return (List<TreeGrpoRollout.Expansion>) g.info().get("expansions");
    }

    @Test
    void structureEligibilitySharedPrefixesAndBudget() {
        long seed = ScriptedGenerator.seed();
        System.out.println("structureEligibilitySharedPrefixesAndBudget seed=" + seed);
        ScriptedGenerator gen = new ScriptedGenerator(TOK, random(0.6, 1, 1)).recordRequests(false);
        try (RolloutEngine engine = engine(gen, 6)) {
            RolloutBatch<TreeGroup> batch = engine.run(prompts(16), new TreeGrpoRollout(), seed);
            long groupTokens = 0;
            for (TreeGroup g : batch.groups()) {
                groupTokens += g.cost().generatedTokens();
                assertEquals(2, g.trees().size(), "M trees");
                assertEquals(List.of(3, 3), g.info().get("leavesBeforeKeep"), "1 + L*N leaves per tree");
                assertEquals(6, g.trajectories().size(), "K=3 kept of 3 per tree");
                // expansion points: N per tree per iteration, root or non-leaf, present at the iteration's start
                List<TreeGrpoRollout.Expansion> ex = expansions(g);
                assertEquals(4, ex.size());
                for (TreeGrpoRollout.Expansion e : ex) {
                    TreeNode n = g.trees().get(e.tree()).nodes().stream().filter(x -> x.id() == e.node()).findFirst().orElseThrow();
                    assertTrue(n.isRoot() || !n.isLeaf(), "expansion from a leaf: " + n);
                    assertTrue(e.node() < e.nodesAtStart(), "expansion from a node created in the same iteration");
                    assertEquals(1 + depthOfChain(g.trees().get(e.tree())) - 1, e.candidates(), "candidates = root + non-leaf nodes of the chain");
                }
                for (RolloutTree t : g.trees()) checkTree(g, t);
            }
            assertEquals(gen.tokensGenerated(), batch.cost().generatedTokens(), "accounting equals the tokens generated");
            assertEquals(batch.cost().generatedTokens(), groupTokens);
        }
    }

    /** Steps of the tree's first chain (its candidates at iteration 0 are the root and the chain's non-leaf nodes). */
    static int depthOfChain(RolloutTree t) {
        TreeNode n = t.root();
        int d = 0;
        while (!n.children().isEmpty()) {
            n = n.children().get(0);
            d++;
        }
        return d;
    }

    static void checkTree(TreeGroup g, RolloutTree t) {
        List<Trajectory> mine = g.trajectories().stream().filter(x -> x.treeIndex() == t.index()).toList();
        Map<Integer, TreeNode> byId = new HashMap<>();
        for (TreeNode n : t.nodes()) byId.put(n.id(), n);
        for (Trajectory a : mine) {
            // the trajectory is exactly its path's steps
            List<Integer> expected = new ArrayList<>();
            for (int id : a.nodePath()) {
                AgentStep s = byId.get(id).step();
                for (int x : s.generated()) expected.add(x);
                for (int x : s.observation()) expected.add(x);
            }
            assertEquals(expected, Arrays.stream(a.tokens()).boxed().toList());
            assertTrue(byId.get(a.nodePath()[a.nodePath().length - 1]).isLeaf());
            assertNotEquals(null, a.termination());
            for (Trajectory b : mine) {
                if (a == b) continue;
                int common = 0;
                while (common < Math.min(a.nodePath().length, b.nodePath().length) && a.nodePath()[common] == b.nodePath()[common]) common++;
                int shared = 0;
                for (int i = 0; i < common; i++) shared += byId.get(a.nodePath()[i]).step().length();
                // shared prefix identical, token for token, including masks and behaviour logprobs
                assertArrayEquals(Arrays.copyOf(a.tokens(), shared), Arrays.copyOf(b.tokens(), shared));
                assertArrayEquals(Arrays.copyOf(a.lossMask(), shared), Arrays.copyOf(b.lossMask(), shared));
                assertArrayEquals(Arrays.copyOf(a.logprobs(), shared), Arrays.copyOf(b.logprobs(), shared));
                // and they part right after it (different seeds sample different thoughts)
                if (shared + 8 <= a.length() && shared + 8 <= b.length())
                    assertFalse(Arrays.equals(a.tokens(), shared, shared + 8, b.tokens(), shared, shared + 8), "paths part after the shared prefix");
            }
        }
    }

    @Test
    void keepingKLeavesPrunesButCostCountsEverything() {
        ScriptedGenerator gen = new ScriptedGenerator(TOK, random(0.5, 1, 1)).recordRequests(false);
        try (RolloutEngine engine = engine(gen, 6)) {
            TreeGrpoRollout s = new TreeGrpoRollout(new TreeGrpoRollout.Config(3, 2, 2, 1, Budget.UNLIMITED));
            RolloutBatch<TreeGroup> batch = engine.run(prompts(6), s, 11);
            for (TreeGroup g : batch.groups()) {
                assertEquals(List.of(5, 5, 5), g.info().get("leavesBeforeKeep"));
                assertEquals(3, g.trajectories().size());
                for (RolloutTree t : g.trees()) {
                    assertEquals(1, t.leaves().size(), "pruned to the kept leaf");
                    assertEquals(t.leaves().get(0).depth() + 1, t.nodes().size(), "only the kept path remains");
                    assertTrue(t.generatedNodes() > t.nodes().size() - 1);
                }
            }
            assertEquals(gen.tokensGenerated(), batch.cost().generatedTokens());
        }
    }

    @Test
    void expansionPointDrawIsUniform() {
        // Pearson chi-square goodness of fit, significance 0.001, fixed seeds (deterministic outcome).
        // Critical values: df=4 → 18.467, df=2 → 13.816.
        List<TreeNode> five = fakeCandidates(5);
        long[] counts = new long[5];
        Random rnd = new Random(20240601L);
        for (int i = 0; i < 5000; i++) for (TreeNode n : TreeGrpoRollout.chooseExpansionPoints(five, 2, rnd)) counts[n.id()]++;
        assertEquals(10000, Arrays.stream(counts).sum(), "N draws per call, with replacement");
        assertTrue(chiSquareUniform(counts) < 18.467, "chi2=" + chiSquareUniform(counts) + " counts=" + Arrays.toString(counts));
        // negative control: the same test rejects a draw biased toward the root (p = 0.28 instead of 0.2)
        long[] biased = new long[5];
        Random r2 = new Random(20240601L);
        for (int i = 0; i < 10000; i++) biased[r2.nextDouble() < 0.1 ? 0 : r2.nextInt(5)]++;
        assertTrue(chiSquareUniform(biased) > 18.467, "control chi2=" + chiSquareUniform(biased));

        // End to end: every chain is tool, tool, answer, so each tree's candidates are {root, n1, n2}.
        ScriptedGenerator gen = new ScriptedGenerator(TOK, fixed(2, 1, 1)).recordRequests(false);
        long[] depth = new long[3];
        try (RolloutEngine engine = engine(gen, 6)) {
            RolloutBatch<TreeGroup> batch = engine.run(prompts(300), new TreeGrpoRollout(), 77);
            for (TreeGroup g : batch.groups())
                for (TreeGrpoRollout.Expansion e : expansions(g)) {
                    assertEquals(3, e.candidates());
                    depth[e.node()]++;   // chain node ids are 0 (root), 1, 2, 3 (leaf) = their depths
                }
        }
        assertEquals(1200, Arrays.stream(depth).sum());
        assertTrue(chiSquareUniform(depth) < 13.816, "chi2=" + chiSquareUniform(depth) + " counts=" + Arrays.toString(depth));
    }

    static List<TreeNode> fakeCandidates(int n) {
        ai.arbor.rollout.AgentLoop loop = ai.arbor.rollout.AgentLoop.builder().generator(r -> null).tokenizer(TOK)
                .format(ai.arbor.rollout.TagToolCallFormat.arpo()).toolExecutor(Runnable::run).build();
        RolloutTree t = new RolloutTree(0, loop.start(prompts(1).get(0), null, 0, null));
        List<TreeNode> out = new ArrayList<>();
        out.add(t.root());
        for (int i = 1; i < n; i++) out.add(new TreeNode(i, t.root(), t.root().state()));
        return out;
    }

    @Test
    void deterministicForASeed() {
        List<List<String>> runs = new ArrayList<>();
        for (long seed : new long[] {5, 5, 6}) {
            ScriptedGenerator gen = new ScriptedGenerator(TOK, random(0.6, 1, 1)).recordRequests(false);
            try (RolloutEngine engine = engine(gen, 6)) {
                RolloutBatch<TreeGroup> b = engine.run(prompts(8), new TreeGrpoRollout(), seed);
                runs.add(b.trajectories().stream().map(t -> t.prompt().id() + t.treeIndex() + Arrays.toString(t.nodePath()) + Arrays.toString(t.tokens()))
                        .toList());
            }
        }
        assertEquals(runs.get(0), runs.get(1));
        assertNotEquals(runs.get(0), runs.get(2));
    }

    @Test
    void budgetModeExpandsUntilTheBudgetAndChainsComparable() {
        ScriptedGenerator gen = new ScriptedGenerator(TOK, random(0.5, 1, 1)).recordRequests(false);
        try (RolloutEngine engine = engine(gen, 6)) {
            long budget = 2000;
            RolloutBatch<TreeGroup> tree = engine.run(prompts(4), new TreeGrpoRollout(new TreeGrpoRollout.Config(2, 2, 0, 0, Budget.tokens(budget))), 3);
            for (TreeGroup g : tree.groups()) {
                List<TreeGrpoRollout.Expansion> ex = expansions(g);
                int iterations = ex.get(ex.size() - 1).iteration() + 1;
                assertTrue(Math.abs(g.cost().generatedTokens() / (double) budget - 1) <= 0.1, "ran to the budget: " + g.cost());
                assertTrue(iterations >= 2, "more than one iteration: " + iterations);
                assertEquals(g.trajectories().size(), 2 + ex.size(), "K=0 keeps every leaf: the M chains and one leaf per expansion");
                for (int i = 0; i < iterations; i++) {
                    int it = i;
                    long made = ex.stream().filter(e -> e.iteration() == it).count();
                    assertTrue(made >= 1 && made <= 4, "at most N per tree per iteration, at least one: " + made);
                }
            }
            RolloutBatch<TreeGroup> chains = engine.run(prompts(4), new ChainRollout(4, Budget.tokens(budget)), 3);
            for (TreeGroup g : chains.groups()) {
                assertTrue(Math.abs(g.cost().generatedTokens() / (double) budget - 1) <= 0.1, "chains ran to the budget: " + g.cost());
                assertTrue((int) g.info().get("waves") >= 2, "a pilot wave, then waves sized from it");
                List<Trajectory> ts = g.trajectories();
                assertEquals(g.cost().generatedTokens(), ts.stream().mapToLong(Trajectory::generatedTokens).sum());
                for (Trajectory t : g.trajectories()) assertEquals(t.sampleIndex(), t.treeIndex());
            }
            RolloutBatch<TreeGroup> plain = engine.run(prompts(2), new ChainRollout(5), 3);
            for (TreeGroup g : plain.groups()) {
                assertEquals(5, g.trajectories().size());
                for (Trajectory t : g.trajectories()) assertTrue(t.termination() == Termination.ANSWER || t.termination() == Termination.MAX_TURNS);
            }
            assertEquals(gen.tokensGenerated(), tree.cost().generatedTokens() + chains.cost().generatedTokens() + plain.cost().generatedTokens());
        }
    }

    @Test
    void configValidation() {
        assertThrows(IllegalArgumentException.class, () -> new TreeGrpoRollout.Config(0, 2, 1, 3, null));
        assertThrows(IllegalArgumentException.class, () -> new TreeGrpoRollout.Config(2, -1, 1, 3, null));
        assertEquals(new TreeGrpoRollout.Config(2, 2, 1, 3, Budget.UNLIMITED), TreeGrpoRollout.Config.defaults());
    }

    @Test
    void treeGrpoExpandsFromAnInvalidActionWhenThePathGoesOn() {
        // a policy whose first turn is void: with Tree-GRPO's loop the void step is an inner node, a candidate for expansion
        ScriptedGenerator.Script s = (ctx, rnd) -> {
            if (!ctx.contains("My previous action is invalid")) return ScriptedGenerator.Turn.of(word(rnd, 8));
            return ScriptedGenerator.Turn.of(word(rnd, 8) + " <answer>" + word(rnd, 2) + "</answer>");
        };
        ScriptedGenerator gen = new ScriptedGenerator(TOK, s).recordRequests(false);
        try (RolloutEngine engine = ai.arbor.rollout.RolloutEngine.builder().generator(gen).tokenizer(TOK)
                .format(ai.arbor.rollout.TagToolCallFormat.searchR1()).tools(ai.arbor.rollout.ToolProvider.none())
                .config(ai.arbor.rollout.AgentConfig.builder().maxNewTokens(200).maxTurns(3).build().treeGrpo()).toolThreads(1).build()) {
            for (TreeGroup g : engine.run(prompts(4), new TreeGrpoRollout(), 11).groups()) {
                for (var t : g.trajectories()) {
                    assertEquals(ai.arbor.rollout.Termination.ANSWER, t.termination(), "the path went on past its void turn");
                    assertEquals(ai.arbor.rollout.TurnOutcome.VOID, t.steps().get(0).outcome());
                }
                // candidates at iteration 0 = the root and the void node of the first chain
                for (TreeGrpoRollout.Expansion x : expansions(g)) assertEquals(2, x.candidates());
            }
        }
    }
}
