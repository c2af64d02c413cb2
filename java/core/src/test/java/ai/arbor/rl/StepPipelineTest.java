package ai.arbor.rl;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.kernels.LossAgg;
import ai.arbor.kernels.SamplingParams;
import ai.arbor.rollout.CharTokenizer;
import ai.arbor.rollout.Prompt;
import ai.arbor.rollout.Termination;
import ai.arbor.rollout.ToolCallRecord;
import ai.arbor.rollout.ToolCallStatus;
import ai.arbor.rollout.Trajectory;
import ai.arbor.task.Problem;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The step from scores to the token batch without libtorch, against hand-computed batches: infrastructure
 * masking, GRPO advantages, the filters, AEPO's shaping, the weights, the layout and its normalizers
 * (docs/algorithms.md §2, §3, §6).
 */
class StepPipelineTest {
    static final CharTokenizer TOK = CharTokenizer.ascii();
    static final Prompt PROMPT = new Prompt("p", new int[] {1, 2}, "Q", Map.of());
    static final Problem PROBLEM = new Problem("p", "Q", List.of("1"), List.of());

    /** A trajectory of {@code tokens} (mask, log-prob −0.1·(q+1), entropy {@code h}, post-tool after an observation). */
    static Trajectory traj(int tree, int[] tokens, boolean[] mask, float[] h, boolean[] post, List<ToolCallRecord> calls, Termination end) {
        int n = tokens.length;
        float[] lp = new float[n];
        for (int q = 0; q < n; q++) lp[q] = -0.1f * (q + 1);
        return new Trajectory(PROMPT, 0, tree, new int[0], tokens, mask, lp, h, new int[n], post, calls, List.of(), end);
    }

    static Scored scored(int group, Trajectory t, double reward) {
        return new Scored(PROBLEM, group, t, t.infrastructureFailure() ? 0 : reward, reward > 0, t.infrastructureFailure());
    }

    static float[] ones(int n, float v) {
        float[] a = new float[n];
        java.util.Arrays.fill(a, v);
        return a;
    }

    @Test
    void grpoMasksInfrastructureFailuresAndLaysOutOneRowPerTrainedToken() {
        ToolCallRecord infra = new ToolCallRecord(0, "python", "x", ToolCallStatus.INFRASTRUCTURE_ERROR, 0, "", null, false);
        List<Scored> s = List.of(
                scored(0, traj(0, new int[] {10, 11, 12}, new boolean[] {true, true, true}, ones(3, 1f), new boolean[3], List.of(), Termination.ANSWER), 1),
                scored(0, traj(0, new int[] {10, 20, 21, 22}, new boolean[] {true, false, false, true}, ones(4, 1f), new boolean[] {false, false, false, true},
                        List.of(), Termination.ANSWER), 0),
                scored(0, traj(0, new int[] {30}, new boolean[] {true}, ones(1, 1f), new boolean[1], List.of(infra), Termination.ANSWER), 1));
        StepPipeline.Prepared p = new StepPipeline(Recipe.GRPO, TOK).prepare(s);
        // rewards (1, 0) over the two live trajectories: μ = 0.5, unbiased σ = √0.5, A = ±0.5/(√0.5 + 1e-6)
        float a = (float) (0.5 / (Math.sqrt(0.5) + 1e-6));
        assertEquals(a, p.sequenceAdvantages()[0], 1e-6f);
        assertEquals(-a, p.sequenceAdvantages()[1], 1e-6f);
        assertTrue(Float.isNaN(p.sequenceAdvantages()[2]), "the infrastructure failure is in neither the statistics nor the loss");
        TokenBatch b = p.batch();
        assertEquals(2, b.sequenceCount());
        assertArrayEquals(new int[] {0, 1}, b.source());
        assertArrayEquals(new int[] {1, 2, 10, 11, 12}, b.sequences().get(0));
        assertArrayEquals(new int[] {0, 0, 0, 1, 1}, b.seqId());
        assertArrayEquals(new int[] {2, 3, 4, 2, 5}, b.position(), "prompt of 2 tokens, the observation (3, 4) of sequence 1 untrained");
        assertArrayEquals(new int[] {10, 11, 12, 10, 22}, b.label());
        assertArrayEquals(new float[] {-0.1f, -0.2f, -0.3f, -0.1f, -0.4f}, b.behaviour());
        assertArrayEquals(b.behaviour(), b.old(), "old = behaviour until recomputed");
        assertArrayEquals(new float[] {a, a, a, -a, -a}, b.advantage(), 1e-6f);
        assertArrayEquals(ones(5, 1f), b.weight());
        assertArrayEquals(new boolean[] {false, false, false, false, true}, b.postTool());
        assertEquals(5, b.normalizer(LossAgg.TOKEN_MEAN), 0);
        assertEquals(2, b.normalizer(LossAgg.SEQ_MEAN_TOKEN_MEAN), 0);
        assertEquals(4, b.normalizer(LossAgg.SEQ_MEAN_TOKEN_SUM_NORM), 0, "longest trained span: positions 2..5");
        Map<String, Object> m = p.stats().metrics();
        assertEquals(2, m.get("trained_sequences"));
        assertEquals(5, m.get("trained_tokens"));
        assertEquals((3 * a + 2 * a) / 5, (double) m.get("adv_abs_mean"), 1e-6);

        TokenBatch second = b.select(new int[] {1});
        assertArrayEquals(new int[] {0, 0}, second.seqId(), "a selected sequence is renumbered from 0");
        assertArrayEquals(new int[] {2, 5}, second.position());
        assertArrayEquals(new int[] {3, 4}, b.rowsOf(new int[] {1}));
        assertEquals(4, second.normalizer(LossAgg.SEQ_MEAN_TOKEN_SUM_NORM), 0);
    }

    @Test
    void taoRlPaperFiltersToolFailuresAndDegenerateGroups() {
        ToolCallRecord failed = new ToolCallRecord(0, "python", "x", ToolCallStatus.TOOL_ERROR, 0, "err", null, false);
        boolean[] m2 = {true, true};
        List<Scored> s = List.of(
                scored(0, traj(0, new int[] {10, 11}, m2, ones(2, 1f), new boolean[2], List.of(), Termination.ANSWER), 1),
                scored(0, traj(0, new int[] {10, 12}, m2, ones(2, 1f), new boolean[2], List.of(), Termination.ANSWER), 1),
                scored(1, traj(0, new int[] {10, 13}, m2, ones(2, 1f), new boolean[2], List.of(), Termination.ANSWER), 1),
                scored(1, traj(0, new int[] {10, 14}, m2, ones(2, 1f), new boolean[2], List.of(failed), Termination.ANSWER), 0));
        StepPipeline.Prepared p = new StepPipeline(withoutGroupRule(Recipe.TAO_RL_PAPER), TOK).prepare(s);
        // group 0 has equal rewards (degenerate: out); in group 1 the trajectory whose only call failed is out
        assertArrayEquals(new int[] {2}, p.batch().source());
        assertEquals(3, p.filter().excludedCount(), "three trajectories leave the loss");
        float a = (float) (0.5 / (Math.sqrt(0.5) + 1e-6));
        assertArrayEquals(new float[] {a, a}, p.batch().advantage(), 1e-6f, "no post-tool token: nothing shaped");
        // as released (no tool-aware filter): the failed-call trajectory stays in the loss
        StepPipeline.Prepared rel = new StepPipeline(withoutGroupRule(Recipe.TAO_RL), TOK).prepare(s);
        assertArrayEquals(new int[] {2, 3}, rel.batch().source());
        assertArrayEquals(new float[] {a, a, -a, -a}, rel.batch().advantage(), 1e-6f, "released: broadcast advantages");
    }

    @Test
    void treeGrpoAddsTheIntraTreeAndTheInterTreeAdvantages() {
        boolean[] m = {true};
        List<Scored> s = List.of(
                scored(0, traj(0, new int[] {10}, m, ones(1, 1f), new boolean[1], List.of(), Termination.ANSWER), 1),
                scored(0, traj(0, new int[] {11}, m, ones(1, 1f), new boolean[1], List.of(), Termination.ANSWER), 0),
                scored(0, traj(1, new int[] {12}, m, ones(1, 1f), new boolean[1], List.of(), Termination.ANSWER), 1),
                scored(0, traj(1, new int[] {13}, m, ones(1, 1f), new boolean[1], List.of(), Termination.ANSWER), 1));
        StepPipeline.Prepared p = new StepPipeline(Recipe.TREE_GRPO, TOK).prepare(s);
        // intra: tree 0 (1, 0) gives ±0.5/(√0.5 + 1e-6), tree 1 (1, 1) gives 0; inter over (1, 0, 1, 1):
        // μ = 0.75, unbiased σ = 0.5, so (R − 0.75)/(0.5 + 1e-6); A = intra + inter (docs/algorithms.md §3)
        double intra = 0.5 / (Math.sqrt(0.5) + 1e-6), up = 0.25 / (0.5 + 1e-6), down = -0.75 / (0.5 + 1e-6);
        double[] expected = {intra + up, -intra + down, up, up};
        for (int k = 0; k < 4; k++) {
            assertEquals(expected[k], p.sequenceAdvantages()[k], 1e-5, "trajectory " + k);
            assertEquals(expected[k], p.batch().advantage()[k], 1e-5, "row " + k + ": broadcast");
        }
    }

    @Test
    void grpoTcrAndArpoTrainDegenerateGroupsWithZeroAdvantage() {
        boolean[] m = {true, true};
        for (Recipe r : List.of(Recipe.GRPO_TCR, Recipe.ARPO)) {
            List<Scored> s = List.of(
                    scored(0, traj(0, new int[] {10, 11}, m, ones(2, 1f), new boolean[2], List.of(), Termination.ANSWER), 1),
                    scored(0, traj(0, new int[] {10, 12}, m, ones(2, 1f), new boolean[2], List.of(), Termination.ANSWER), 1),
                    scored(1, traj(0, new int[] {10, 13}, m, ones(2, 1f), new boolean[2], List.of(), Termination.ANSWER), 1),
                    scored(1, traj(0, new int[] {10, 14}, m, ones(2, 1f), new boolean[2], List.of(), Termination.ANSWER), 0));
            TokenBatch b = new StepPipeline(r, TOK).prepare(s).batch();
            // no filter: the all-correct group stays, (1 − 1)/(0 + 1e-6) = 0 on its tokens; group 1 gives ±a
            float a = (float) (0.5 / (Math.sqrt(0.5) + 1e-6));
            assertArrayEquals(new int[] {0, 1, 2, 3}, b.source(), r.name());
            assertArrayEquals(new float[] {0, 0, 0, 0, a, a, -a, -a}, b.advantage(), 1e-6f, r.name());
            assertArrayEquals(ones(8, 1f), b.weight(), r.name());
        }
    }

    @Test
    void taoRlShapesTheTopEntropyPostToolTokens() {
        ToolCallRecord ok = new ToolCallRecord(0, "python", "x", ToolCallStatus.OK, 0, "4", null, false);
        List<Scored> s = List.of(
                // 10, then an observation (20, 21: untrained), then the post-tool turn 11, 12
                scored(0, traj(0, new int[] {10, 20, 21, 11, 12}, new boolean[] {true, false, false, true, true},
                        new float[] {1f, 0f, 0f, 2f, 6f}, new boolean[] {false, false, false, true, true}, List.of(ok), Termination.ANSWER), 1),
                scored(0, traj(0, new int[] {10, 13}, new boolean[] {true, true}, new float[] {3f, 4f}, new boolean[2],
                        List.of(), Termination.ANSWER), 0));
        TokenBatch b = new StepPipeline(withoutGroupRule(Recipe.TAO_RL_PAPER), TOK).prepare(s).batch();
        // valid entropies (1, 2, 6, 3, 4): mean 3.2, unbiased var 3.7; two post-tool tokens, k = ⌈0.2·2⌉ = 1:
        // only the highest (H = 6) is shaped, Ã = A·(1 + 0.01·(6 − 3.2)/√(3.7 + 1e-8)) (docs/algorithms.md §3)
        double a = 0.5 / (Math.sqrt(0.5) + 1e-6);
        double shaped = a * (1 + 0.01 * (6 - 3.2) / Math.sqrt(3.7 + 1e-8));
        double[] expected = {a, a, shaped, -a, -a};
        assertArrayEquals(new int[] {10, 11, 12, 10, 13}, b.label());
        for (int k = 0; k < 5; k++) assertEquals(expected[k], b.advantage()[k], 1e-6, "row " + k);
        assertArrayEquals(new boolean[] {false, true, true, false, false}, b.postTool());
    }

    @Test
    void summaryCountsMalformedCallsSoGrpoTcrPaysExecutedCallsOnly() {
        List<ToolCallRecord> calls = new java.util.ArrayList<>();
        ToolCallStatus[] st = {ToolCallStatus.MALFORMED, ToolCallStatus.UNKNOWN_TOOL, ToolCallStatus.TOOL_ERROR, ToolCallStatus.OK};
        for (ToolCallStatus x : st) calls.add(new ToolCallRecord(0, "python", "x", x, 0, "o", null, false));
        Trajectory t = traj(0, new int[] {10, 11}, new boolean[] {true, true}, ones(2, 1f), new boolean[2], calls, Termination.ANSWER);
        var sum = t.summary(TOK);
        assertEquals(4, sum.toolCalls());
        assertEquals(3, sum.toolFailures());
        assertEquals(2, sum.malformedCalls(), "malformed and unknown-tool calls never reached a tool");
        assertEquals(2, sum.executedCalls());
        // a wrong answer with 2 executed calls: min(−0.6, −1 + 0.2) = −0.8 (the overlong term is 0 at 2 tokens)
        var task = ai.arbor.task.TrainingTask.create("arith", 1, 4, 2);
        try {
            var f = Recipe.GRPO_TCR.reward().reward(task, task.agentConfig(ai.arbor.kernels.SamplingParams.temperature(1f)));
            assertEquals(-0.8, f.reward(sum, List.of("12345")), 1e-12);
        } finally {
            task.close();
        }
    }

    @Test
    void dynamicSamplingKeepsTheFirstInformativeGroupsJudgedOnCorrectness() {
        boolean[] m = {true};
        // groups 0 (all correct), 1 (mixed), 2 (mixed, but only by a shaped reward: correctness all 0), 3 (mixed)
        List<Scored> s = new java.util.ArrayList<>();
        double[][] rewards = {{1, 1}, {1, 0}, {-0.7, -1}, {0, 1}};
        boolean[][] correct = {{true, true}, {true, false}, {false, false}, {false, true}};
        for (int g = 0; g < 4; g++)
            for (int j = 0; j < 2; j++)
                s.add(new Scored(PROBLEM, g, traj(0, new int[] {10 + g}, m, ones(1, 1f), new boolean[1], List.of(), Termination.ANSWER),
                        rewards[g][j], correct[g][j], false));
        List<Scored> kept = StepPipeline.dynamicSample(s, 1);
        assertEquals(List.of(s.get(2), s.get(3)), kept, "the first informative group only (target 1)");
        kept = StepPipeline.dynamicSample(s, 5);
        assertEquals(List.of(s.get(2), s.get(3), s.get(6), s.get(7)), kept, "groups 1 and 3; group 2 differs only in the shaped reward");
        assertThrows(IllegalArgumentException.class, () -> StepPipeline.dynamicSample(s, 0));
    }

    /** The recipe with its overlong filter's group rule (TAO-RL's min_n = 4) off, for cases built on groups of 2. */
    static Recipe withoutGroupRule(Recipe r) {
        List<ai.arbor.advantage.TrajectoryFilter> f = new java.util.ArrayList<>();
        for (var x : r.filters()) f.add(x instanceof ai.arbor.advantage.OverlongFilter ? new ai.arbor.advantage.OverlongFilter() : x);
        return r.withFilters(f);
    }

    /**
     * TAO-RL's release drops a group with fewer than min_n = 4 responses within the length limit in the same pass as the
     * spread check, before the fill; the spread counts the truncated responses too (tao_rl_ray_trainer.py).
     */
    @Test
    void dynamicSamplingDropsGroupsWithFewerThanFourResponsesWithinTheLimit() {
        boolean[] m = {true};
        // group 0: 5 responses, 2 truncated (3 within): mixed but dropped; group 1: 1 truncated (4 within), mixed: kept;
        // group 2: 4 within all wrong, the truncated one right: mixed over all five, kept
        boolean[][] truncated = {{false, false, false, true, true}, {false, false, false, false, true}, {false, false, false, false, true}};
        boolean[][] correct = {{true, false, true, false, false}, {true, false, false, true, false}, {false, false, false, false, true}};
        List<Scored> s = new java.util.ArrayList<>();
        for (int g = 0; g < 3; g++)
            for (int j = 0; j < 5; j++)
                s.add(new Scored(PROBLEM, g, traj(0, new int[] {10 + g}, m, ones(1, 1f), new boolean[1], List.of(),
                        truncated[g][j] ? Termination.MAX_TOKENS : Termination.ANSWER), correct[g][j] ? 1 : 0, correct[g][j], false));
        assertTrue(Termination.MAX_TOKENS.truncated() && !Termination.ANSWER.truncated());
        List<Scored> kept = StepPipeline.dynamicSample(s, 3, Recipe.TAO_RL.minWithinLength());
        assertEquals(4, Recipe.TAO_RL.minWithinLength());
        assertEquals(s.subList(5, 15), kept, "groups 1 and 2; group 0 has 3 responses within the limit");
        assertEquals(s, StepPipeline.dynamicSample(s, 3, 0), "without the rule every mixed group is informative");
        assertEquals(0, Recipe.GRPO.minWithinLength());
        assertThrows(IllegalArgumentException.class, () -> StepPipeline.dynamicSample(s, 3, -1));
        // the same rule in the recipe's filters, without dynamic sampling: group 0 leaves the loss
        StepPipeline.Prepared p = new StepPipeline(Recipe.TAO_RL.withOversample(1), TOK).prepare(s);
        assertEquals(3, p.filter().count(ai.arbor.advantage.FilterReason.FEW_WITHIN_LENGTH));
        // a group size below the rule would train nothing: refused, naming the sizes
        var e = assertThrows(IllegalArgumentException.class, () -> Recipe.TAO_RL.withTrajectoriesPerPrompt(2));
        assertTrue(e.getMessage().contains("2 responses per prompt") && e.getMessage().contains(">= 4"), e.getMessage());
        assertEquals(2, withoutGroupRule(Recipe.TAO_RL).withTrajectoriesPerPrompt(2).trajectoriesPerPrompt());
    }

    /**
     * TAO-RL's release fills a short dynamic-sampling batch by repeating its informative groups, each copy a group of
     * its own (tao_rl_ray_trainer.py: repeat_with_uid_suffix(⌈target / kept⌉), then the target's worth of groups).
     */
    @Test
    void aShortDynamicSamplingBatchIsFilledWithCopiesOfItsGroups() {
        boolean[] m = {true};
        List<Scored> s = new java.util.ArrayList<>();
        double[][] rewards = {{1, 1}, {1, 0}, {0, 0}, {0, 1}};
        for (int g = 0; g < 4; g++)
            for (int j = 0; j < 2; j++)
                s.add(new Scored(PROBLEM, g, traj(0, new int[] {10 + g}, m, ones(1, 1f), new boolean[1], List.of(), Termination.ANSWER),
                        rewards[g][j], rewards[g][j] > 0, false));
        List<Scored> kept = StepPipeline.dynamicSample(s, 5);   // groups 1 and 3 are informative
        List<Scored> full = StepPipeline.replicateGroups(kept, 5);
        assertEquals(10, full.size(), "5 groups of 2");
        int[] groups = full.stream().mapToInt(Scored::group).toArray();
        assertArrayEquals(new int[] {1, 1, 3, 3, 4, 4, 5, 5, 6, 6}, groups, "originals, then copies of 1, 3, 1 under fresh ids");
        int[] source = {2, 3, 6, 7, 2, 3, 6, 7, 2, 3};
        for (int i = 0; i < full.size(); i++) {
            assertTrue(full.get(i).trajectory() == s.get(source[i]).trajectory(), "copy " + i + " is trajectory " + source[i]);
            assertEquals(s.get(source[i]).reward(), full.get(i).reward());
            assertEquals(s.get(source[i]).correct(), full.get(i).correct());
        }
        // each copy is its own group: the same GRPO advantages as its original, ±0.5 / (√0.5 + 1e-6)
        float[] adv = new StepPipeline(withoutGroupRule(Recipe.TAO_RL), TOK).prepare(full).sequenceAdvantages();
        double a = 0.5 / (Math.sqrt(0.5) + 1e-6);
        double[] want = {a, -a, -a, a, a, -a, -a, a, a, -a};
        for (int i = 0; i < want.length; i++) assertEquals(want[i], adv[i], 1e-6, "advantage " + i);
        // enough groups, or none: unchanged
        assertEquals(kept, StepPipeline.replicateGroups(kept, 2));
        assertEquals(kept, StepPipeline.replicateGroups(kept, 1));
        assertEquals(List.of(), StepPipeline.replicateGroups(List.of(), 4));
        assertThrows(IllegalArgumentException.class, () -> StepPipeline.replicateGroups(kept, 0));
        // the recipe: TAO-RL's release replicates; SHRINK is the option that trains the smaller batch
        assertEquals(Recipe.Refill.REPLICATE, Recipe.TAO_RL.refill());
        assertEquals(Recipe.Refill.SHRINK, Recipe.TAO_RL.withRefill(Recipe.Refill.SHRINK).refill());
        assertEquals(Recipe.TAO_RL.oversample(), Recipe.TAO_RL.withRefill(Recipe.Refill.SHRINK).oversample());
        assertEquals(Recipe.Refill.SHRINK, Recipe.TAO_RL.withRefill(Recipe.Refill.SHRINK).withMiniBatches(4).refill(), "kept by the other withers");
    }

    @Test
    void aepoShapesEveryTokenByItsEntropy() {
        boolean[] m = {true, true};
        List<Scored> s = List.of(
                scored(0, traj(0, new int[] {10, 11}, m, new float[] {1f, 2f}, new boolean[2], List.of(), Termination.ANSWER), 1),
                scored(0, traj(0, new int[] {10, 12}, m, new float[] {3f, 4f}, new boolean[2], List.of(), Termination.ANSWER), 0));
        TokenBatch b = new StepPipeline(Recipe.AEPO_PAPER, TOK).prepare(s).batch();
        // Ã = A·(1 + 0.2·(H − mean)/√(var + 1e-8)), mean 2.5, unbiased var 5/3 (docs/algorithms.md §3)
        double a = 0.5 / (Math.sqrt(0.5) + 1e-6), sd = Math.sqrt(5.0 / 3 + 1e-8);
        double[] h = {1, 2, 3, 4}, sign = {1, 1, -1, -1};
        for (int k = 0; k < 4; k++) assertEquals(sign[k] * a * (1 + 0.2 * (h[k] - 2.5) / sd), b.advantage()[k], 1e-5, "row " + k);
    }

    @Test
    void tokenBatchOfTrajectoriesIsTheRolloutsColumnsAndAMissingEntropyIsCountedAsZero() {
        float nan = Float.NaN;
        Trajectory withObs = traj(0, new int[] {10, 20, 21, 22}, new boolean[] {true, false, false, true}, new float[] {0.5f, nan, nan, 0.25f},
                new boolean[] {false, false, false, true}, List.of(), Termination.ANSWER);
        Trajectory noEntropy = traj(1, new int[] {30, 31}, new boolean[] {true, true}, new float[] {nan, nan}, new boolean[2], List.of(),
                Termination.ANSWER);
        TokenBatch b = TokenBatch.of(List.of(withObs, noEntropy));
        assertArrayEquals(new int[] {0, 1}, b.source());
        assertArrayEquals(new int[] {0, 0, 1, 1}, b.seqId());
        assertArrayEquals(new int[] {2, 5, 2, 3}, b.position(), "the observation's tokens (3, 4) are context, not rows");
        assertArrayEquals(new int[] {10, 22, 30, 31}, b.label());
        assertArrayEquals(new float[] {-0.1f, -0.4f, -0.1f, -0.2f}, b.behaviour());
        assertArrayEquals(new float[] {0.5f, 0.25f, 0f, 0f}, b.entropy(), "an unmasked NaN on the observation is never read");
        assertArrayEquals(new boolean[] {false, true, false, false}, b.postTool());
        assertArrayEquals(ones(4, 1f), b.weight());
        assertEquals(null, b.advantage());
        assertArrayEquals(new float[] {1, 2, 3, 4}, b.withAdvantages(new float[] {1, 2, 3, 4}).advantage());

        // the pipeline builds the same rows and reports the two tokens whose entropy the backend did not give
        StepPipeline.Prepared p = new StepPipeline(Recipe.GRPO, TOK).prepare(List.of(scored(0, withObs, 1), scored(0, noEntropy, 0)));
        assertArrayEquals(b.position(), p.batch().position());
        assertArrayEquals(b.entropy(), p.batch().entropy());
        assertEquals(2, p.stats().entropyMissing());
        assertEquals(2, p.stats().metrics().get("entropy_missing"));
    }

    @Test
    void rejectionSamplingKeepsTheShortestCorrectSamplesWithoutFailedCalls() {
        ToolCallRecord failed = new ToolCallRecord(0, "python", "x", ToolCallStatus.TOOL_ERROR, 0, "err", null, false);
        List<Scored> s = List.of(
                scored(0, traj(0, new int[] {10, 11, 12}, new boolean[] {true, true, true}, ones(3, 1f), new boolean[3], List.of(), Termination.ANSWER), 1),
                scored(0, traj(0, new int[] {10}, new boolean[] {true}, ones(1, 1f), new boolean[1], List.of(failed), Termination.ANSWER), 1),
                scored(0, traj(0, new int[] {10, 11}, new boolean[] {true, true}, ones(2, 1f), new boolean[2], List.of(), Termination.ANSWER), 1),
                scored(0, traj(0, new int[] {13}, new boolean[] {true}, ones(1, 1f), new boolean[1], List.of(), Termination.ANSWER), 0),
                scored(0, traj(0, new int[] {10, 11, 12, 13}, new boolean[] {true, true, true, true}, ones(4, 1f), new boolean[4], List.of(),
                        Termination.ANSWER), 1));
        assertEquals(2, Recipe.RFT.keepPerPrompt(), "CoRT keeps two per prompt");
        TokenBatch b = new StepPipeline(Recipe.RFT, TOK).rejectionSample(s);
        assertEquals(2, b.sequenceCount());
        assertArrayEquals(new int[] {1, 2, 10, 11}, b.sequences().get(0), "shortest correct first");
        assertArrayEquals(new int[] {1, 2, 10, 11, 12}, b.sequences().get(1));
        assertEquals(5, b.rows());
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> new StepPipeline(Recipe.GRPO, TOK).rejectionSample(s));
        assertTrue(e.getMessage().contains("grpo"), e.getMessage());
    }

    @Test
    void aRecipeIsOneValueWhoseLossFollowsItsSampling() {
        Recipe r = Recipe.GRPO.withSampling(SamplingParams.temperature(0.5f)).withTrajectoriesPerPrompt(4).withMiniBatches(2);
        assertEquals(0.5, r.loss().temperature(), 0, "the loss's temperature is the sampler's");
        assertEquals(4, r.trajectoriesPerPrompt());
        assertEquals("chains(n=4)", r.strategy(null).name());
        assertEquals(2, r.miniBatches());
        assertEquals(Recipe.GRPO.loss().klType(), r.loss().klType());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Recipe.GRPO.withSampling(SamplingParams.greedy()));
        assertTrue(e.getMessage().contains("0.0"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> Recipe.GRPO.withMiniBatches(0));
        assertTrue(e.getMessage().contains("got 0"), e.getMessage());
    }
}
