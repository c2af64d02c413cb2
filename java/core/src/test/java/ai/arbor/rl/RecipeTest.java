package ai.arbor.rl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.advantage.AdvantageEstimator;
import ai.arbor.advantage.DegenerateGroupFilter;
import ai.arbor.advantage.OverlongFilter;
import ai.arbor.advantage.VoidTurnFilter;
import ai.arbor.kernels.TokenShaping;
import ai.arbor.advantage.ToolAwareFilter;
import ai.arbor.kernels.ClipMode;
import ai.arbor.kernels.KlType;
import ai.arbor.kernels.LossAgg;
import ai.arbor.kernels.PolicyLossConfig;
import ai.arbor.reward.OutcomeReward;
import ai.arbor.reward.RewardFunction;
import ai.arbor.reward.TrajectorySummary;
import ai.arbor.rollout.AgentConfig;
import ai.arbor.rollout.Budget;
import ai.arbor.kernels.SamplingParams;
import ai.arbor.task.TrainingTask;
import ai.arbor.tree.AepoRollout;
import ai.arbor.tree.ArpoRollout;
import ai.arbor.tree.BranchRule;
import ai.arbor.tree.ChainRollout;
import ai.arbor.tree.TreeGrpoRollout;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Each recipe builds the strategy, estimator, shaping, loss, filters and reward its paper says (docs/algorithms.md §6). */
class RecipeTest {
    static TrainingTask arith, kb;
    static AgentConfig arithAgent;

    @BeforeAll
    static void tasks() {
        arith = TrainingTask.create("arith", 1, 10, 5);
        kb = TrainingTask.create("kb", 1, 10, 5);
        arithAgent = arith.agentConfig(SamplingParams.temperature(1f));
    }

    @AfterAll
    static void close() {
        arith.close();
        kb.close();
    }

    static void assertLoss(PolicyLossConfig c, ClipMode mode, double lo, double hi, KlType kl, double beta) {
        assertLoss(c, mode, lo, hi, kl, beta, 3.0, 0.0);
    }

    /** The loss of a recipe sampled at T 0.7; {@code dual}: verl's dual clip c (0 = off), {@code ent}: the entropy bonus. */
    static void assertLoss(PolicyLossConfig c, ClipMode mode, double lo, double hi, KlType kl, double beta, double dual, double ent) {
        assertEquals(mode, c.clipMode());
        assertEquals(dual, c.dualClipC(), 0, "dual clip c");
        assertEquals(lo, c.epsLow(), 0);
        assertEquals(hi, c.epsHigh(), 0);
        assertEquals(kl, c.klType());
        if (kl != KlType.NONE) assertEquals(beta, c.klCoef(), 0);
        assertEquals(LossAgg.TOKEN_MEAN, c.agg());
        assertEquals(ent, c.entropyCoef(), 0);
        assertEquals((double) 0.7f, c.temperature(), 0, "the loss uses the rollout temperature");
    }

    static TrajectorySummary said(String text, int calls, int tokens) {
        return new TrajectorySummary(text, calls, 0, tokens, false);
    }

    @Test
    void grpo() {
        Recipe r = Recipe.GRPO;
        assertEquals(Recipe.Kind.POLICY_GRADIENT, r.kind());
        assertInstanceOf(ChainRollout.class, r.strategy(Budget.UNLIMITED));
        assertEquals("chains(n=8)", r.strategy(Budget.UNLIMITED).name());
        assertEquals(AdvantageEstimator.GRPO, r.estimator());
        assertEquals(TokenShaping.broadcast(), r.shaping());
        assertLoss(r.withSampling(SamplingParams.temperature(0.7f)).loss(), ClipMode.PPO, 0.2, 0.2, KlType.K3, 0.001);
        assertTrue(r.filters().isEmpty());
        RewardFunction f = r.reward().reward(arith, arithAgent);
        assertInstanceOf(OutcomeReward.class, f);
        assertEquals(1.0, f.reward(said("\\boxed{12}", 0, 10), List.of("12")), 0);
        assertEquals(0.0, f.reward(said("\\boxed{13}", 3, 10), List.of("12")), 0);
    }

    @Test
    void grpoTcr() {
        Recipe r = Recipe.GRPO_TCR;
        assertEquals("chains(n=16)", r.strategy(Budget.UNLIMITED).name());
        assertEquals(4, r.miniBatches());
        assertEquals(AdvantageEstimator.GRPO, r.estimator());
        assertLoss(r.withSampling(SamplingParams.temperature(0.7f)).loss(), ClipMode.PPO, 0.2, 0.28, KlType.NONE, 0, 10.0, 0.0);
        RewardFunction f = r.reward().reward(arith, arithAgent);
        // 1 if correct, else min(−0.6, −1 + 0.1·executed calls); DAPO overlong with L_max 320, buffer 64: 0 up to 256 tokens
        assertEquals(1.0, f.reward(said("\\boxed{12}", 1, 100), List.of("12")), 1e-12);
        assertEquals(-1.0, f.reward(said("\\boxed{13}", 0, 100), List.of("12")), 1e-12);
        assertEquals(-0.8, f.reward(said("\\boxed{13}", 2, 100), List.of("12")), 1e-12);
        assertEquals(-0.6, f.reward(said("\\boxed{13}", 7, 100), List.of("12")), 1e-12);
        assertEquals(-1.0, f.reward(new TrajectorySummary("\\boxed{13}", 7, 7, 100, false, 7), List.of("12")), 1e-12,
                "malformed calls earn nothing");
        assertEquals(1.0 + (256 - 300) / 64.0, f.reward(said("\\boxed{12}", 1, 300), List.of("12")), 1e-12);
        assertEquals(TokenShaping.broadcast(), r.shaping());
        assertTrue(r.filters().isEmpty());
    }

    @Test
    void taoRlAsReleasedAndThePapersForm() {
        for (Recipe r : List.of(Recipe.TAO_RL, Recipe.TAO_RL_PAPER)) {
            assertEquals("chains(n=16)", r.strategy(Budget.UNLIMITED).name());
            assertEquals(2, r.miniBatches());
            assertEquals(3, r.oversample(), "over-sampling ×3 and refill");
            assertLoss(r.withSampling(SamplingParams.temperature(0.7f)).loss(), ClipMode.PPO, 0.2, 0.28, KlType.NONE, 0, 3.0, 0.001);
            RewardFunction f = r.reward().reward(arith, arithAgent);
            assertInstanceOf(OutcomeReward.class, f, "1/0 correctness, no shaping");
            assertEquals(0.0, f.reward(said("\\boxed{13}", 3, 100), List.of("12")), 0);
            assertEquals(1.0, f.reward(said("\\boxed{12}", 0, 319), List.of("12")), 0);
        }
        // release: overlong filtered, void turns masked, degenerate groups (of the 1/0 reward) dropped; broadcast advantages
        assertEquals(List.of(OverlongFilter.taoRl(), new VoidTurnFilter(), new DegenerateGroupFilter(1e-3, true)), Recipe.TAO_RL.filters());
        assertEquals(TokenShaping.broadcast(), Recipe.TAO_RL.shaping());
        // paper: plus the tool-aware filter (strength 1) and post-tool shaping α 0.01 on the top 20 %
        assertEquals(List.of(OverlongFilter.taoRl(), new VoidTurnFilter(), new ToolAwareFilter(1f), new DegenerateGroupFilter(1e-3, true)),
                Recipe.TAO_RL_PAPER.filters());
        TokenShaping tao = Recipe.TAO_RL_PAPER.shaping();
        assertEquals(TokenShaping.Mode.TAO_RL, tao.mode());
        assertEquals(0.01f, tao.coef(), 0);
        assertEquals(0.2, tao.topFraction(), 0);
    }

    @Test
    void cort() {
        Recipe r = Recipe.CORT;
        assertEquals("chains(n=8)", r.strategy(Budget.UNLIMITED).name());
        assertEquals(2, r.miniBatches());
        assertEquals(0.6f, r.sampling().temperature(), 0);
        assertEquals(0.95f, r.sampling().topP(), 0);
        assertEquals((double) 0.6f, r.loss().temperature(), 0);
        assertLoss(r.withSampling(SamplingParams.temperature(0.7f)).loss(), ClipMode.PPO, 0.2, 0.2, KlType.K3, 0.001, 3.0, 0.001);
        RewardFunction f = r.reward().reward(arith, arithAgent);
        // 1/0 plus −0.1 when no code ran or every execution failed
        assertEquals(1.0, f.reward(new TrajectorySummary("\\boxed{12}", 1, 0, 50, false), List.of("12")), 1e-12);
        assertEquals(0.9, f.reward(new TrajectorySummary("\\boxed{12}", 0, 0, 50, false), List.of("12")), 1e-12);
        assertEquals(-0.1, f.reward(new TrajectorySummary("\\boxed{13}", 2, 2, 50, false), List.of("12")), 1e-12);
        assertEquals(0.0, f.reward(new TrajectorySummary("\\boxed{13}", 2, 1, 50, false), List.of("12")), 1e-12);
        // cort-think: the answer counts only after </think>
        RewardFunction t = Recipe.CORT_THINK.reward().reward(arith, arithAgent);
        assertEquals(0.0, t.reward(new TrajectorySummary("\\boxed{12}", 1, 0, 50, false), List.of("12")), 1e-12);
        assertEquals(1.0, t.reward(new TrajectorySummary("<think>\\boxed{7}</think>\\boxed{12}", 1, 0, 50, false), List.of("12")), 1e-12);
        assertEquals(0.0, t.reward(new TrajectorySummary("<think>\\boxed{12}</think>no", 1, 0, 50, false), List.of("12")), 1e-12);
        // the agent loop: the task's 3 turns (arith) are CoRT's rounds; 2 calls; the notice inside the output; last round unstopped
        for (Recipe c : List.of(Recipe.CORT, Recipe.CORT_THINK)) {
            AgentConfig a = c.agentConfig(arith);
            assertEquals(arithAgent.maxTurns(), a.maxTurns());
            assertEquals(arithAgent.maxTurns() - 1, a.maxToolCalls());
            assertEquals(AgentConfig.CORT_LIMIT_NOTICE, a.limitNotice());
            assertTrue(a.limitNoticeInOutput() && a.lastTurnWithoutToolStops() && !a.finalTurnWithoutTools() && a.invalidActionObservation() == null, c.name());
            assertEquals(c.sampling(), a.sampling(), "the loop samples at the recipe's T 0.6, top-p 0.95");
            assertEquals(arithAgent.maxResponseTokens(), a.maxResponseTokens());
        }
        // a recipe's sampling override keeps its loop options; a plain recipe leaves the task's loop as it is
        assertTrue(r.withSampling(SamplingParams.temperature(0.9f)).agentConfig(arith).lastTurnWithoutToolStops());
        assertEquals(arithAgent, Recipe.GRPO.agentConfig(arith));
        assertEquals(arithAgent, Recipe.CORT.withAgent(Recipe.Agent.TASK).withSampling(SamplingParams.temperature(1f)).agentConfig(arith));
        assertThrows(IllegalArgumentException.class, () -> Recipe.CORT.withAgent(null));
    }

    @Test
    void everyReleasedRecipeHasDualClipAndItsOwnNAndMiniBatches() {
        // docs/algorithms.md §6: n and optimizer steps per rollout batch of the released runs
        Object[][] want = {{Recipe.GRPO, 8, 1}, {Recipe.GRPO_TCR, 16, 4}, {Recipe.TREE_GRPO, 6, 8}, {Recipe.ARPO, 16, 8},
                {Recipe.AEPO, 16, 8}, {Recipe.TAO_RL, 16, 2}, {Recipe.CORT, 8, 2}};
        for (Object[] w : want) {
            Recipe r = (Recipe) w[0];
            assertEquals(w[1], r.trajectoriesPerPrompt(), r + " n");
            assertEquals(w[2], r.miniBatches(), r + " mini-batches");
            assertTrue(r.loss().dualClipC() > 1, r + ": verl's vanilla loss has dual clip");
        }
        Recipe g = Recipe.GRPO.withEstimator(AdvantageEstimator.RLOO).withLoss(PolicyLossConfig.cispo()).withOversample(2);
        assertEquals(AdvantageEstimator.RLOO, g.estimator());
        assertEquals(ClipMode.CISPO, g.loss().clipMode());
        assertEquals(2, g.oversample());
        assertEquals(Recipe.GRPO.trajectoriesPerPrompt(), g.trajectoriesPerPrompt());
    }

    @Test
    void treeGrpo() {
        Recipe r = Recipe.TREE_GRPO;
        TreeGrpoRollout s = (TreeGrpoRollout) r.strategy(Budget.UNLIMITED);
        assertEquals(new TreeGrpoRollout.Config(2, 2, 1, 3, Budget.UNLIMITED), s.config());   // M, N, L, K
        Budget b = new Budget(600, 6);
        assertEquals(new TreeGrpoRollout.Config(4, 2, 0, 0, b), ((TreeGrpoRollout) r.withTrajectoriesPerPrompt(12).strategy(b)).config(),
                "with a budget: iterate until it is spent, keep every leaf");
        assertEquals(AdvantageEstimator.TREE_GRPO, r.estimator());
        assertEquals(TokenShaping.broadcast(), r.shaping());
        PolicyLossConfig c = r.withSampling(SamplingParams.temperature(0.7f)).loss();
        assertLoss(c, ClipMode.PPO, 0.2, 0.2, KlType.K3, 0.001, 3.0, 0.001);
        // the release's sampling (T 1, top-p 0.95) and agent loop: the invalid-action reply, one final turn without tools
        assertEquals(SamplingParams.temperature(1f).withTopP(0.95f), r.sampling());
        AgentConfig ka = r.agentConfig(kb), base = kb.agentConfig(r.sampling());
        assertEquals(ai.arbor.rollout.TagToolCallFormat.SEARCH_R1_INVALID, ka.invalidActionObservation());
        assertTrue(ka.finalTurnWithoutTools() && !ka.lastTurnWithoutToolStops() && !ka.limitNoticeInOutput());
        assertEquals(base.maxTurns() + 1, ka.maxGenerations());
        assertEquals(base.maxToolCalls(), ka.maxToolCalls());
        assertEquals(r.sampling(), ka.sampling());
        // QA: exact match with format terms 1 / 0.8 / 0.2 / 0.1 (well-formed = calls with results, then one answer)
        RewardFunction f = r.reward().reward(kb, kb.agentConfig(SamplingParams.temperature(1f)));
        String ok = "<search>Bo Ka</search> <result>\nDoc 1(Title: Bo Ka) Bo Ka works at Zu Corp.\n</result><answer>Zu Corp</answer>";
        assertEquals(1.0, f.reward(said(ok, 1, 50), List.of("Zu Corp")), 1e-12);
        assertEquals(0.2, f.reward(said(ok, 1, 50), List.of("Lomi")), 1e-12);
        assertEquals(0.8, f.reward(said("<search>Bo</search><answer>Zu Corp</answer>", 1, 50), List.of("Zu Corp")), 1e-12);
        assertEquals(0.1, f.reward(said("<search>Bo</search><answer>Lomi</answer>", 1, 50), List.of("Zu Corp")), 1e-12);
        assertEquals(0.0, f.reward(said("no answer", 0, 50), List.of("Zu Corp")), 1e-12);
        assertInstanceOf(OutcomeReward.class, r.reward().reward(arith, arithAgent), "math: outcome 1/0");
    }

    @Test
    void arpoAndAepo() {
        ArpoRollout arpo = (ArpoRollout) Recipe.ARPO.strategy(Budget.UNLIMITED);
        assertEquals(ArpoRollout.Config.defaults(), arpo.config());
        assertEquals(16, arpo.config().paths());
        assertEquals(8, arpo.config().initialPaths());
        assertEquals(1, arpo.config().branchesPerEvent());
        assertEquals(BranchRule.arpoCode(), arpo.config().rule());
        assertLoss(Recipe.ARPO.withSampling(SamplingParams.temperature(0.7f)).loss(), ClipMode.PPO, 0.2, 0.2, KlType.NONE, 0);
        assertEquals(TokenShaping.broadcast(), Recipe.ARPO.shaping());

        AepoRollout aepo = (AepoRollout) Recipe.AEPO.strategy(Budget.UNLIMITED);
        assertEquals(AepoRollout.Config.defaults(), aepo.config());
        assertEquals(16, aepo.config().paths());
        assertEquals(AepoRollout.SplitRule.CODE, aepo.config().splitRule());
        assertEquals(0.5, aepo.config().splitBeta(), 0);
        PolicyLossConfig c = Recipe.AEPO.withSampling(SamplingParams.temperature(0.7f)).loss();
        assertLoss(c, ClipMode.AEPO_STOP_GRADIENT, 0.2, 0.2, KlType.NONE, 0);
        assertEquals(1.0, c.aepoTopEntropyFraction(), 0, "the stop-gradient clip on every token (released code)");
        assertEquals(TokenShaping.broadcast(), Recipe.AEPO.shaping(), "released: no entropy-aware advantage (entropy_coeff = 0)");
        assertFalse(aepo.config().premonitoring(), "released: dynamic rollouts off, a fixed split");
        assertEquals(8, aepo.config().initialPaths());
        assertEquals(AdvantageEstimator.GRPO, Recipe.AEPO.estimator());
        // the paper's form: pre-monitoring split and the entropy-aware advantage Ã = A·(1 + 0.2·Ĥ)
        AepoRollout paper = (AepoRollout) Recipe.AEPO_PAPER.strategy(Budget.UNLIMITED);
        assertEquals(AepoRollout.Config.paper(), paper.config());
        assertTrue(paper.config().premonitoring());
        assertEquals(TokenShaping.Mode.AEPO, Recipe.AEPO_PAPER.shaping().mode());
        assertEquals(0.2f, Recipe.AEPO_PAPER.shaping().coef(), 0);
        assertEquals(Recipe.AEPO.loss(), Recipe.AEPO_PAPER.loss());
        // the released reward: format-gated F1 on QA (the task's format check), the outcome on math
        for (Recipe r : List.of(Recipe.ARPO, Recipe.AEPO, Recipe.AEPO_PAPER)) {
            RewardFunction f = r.reward().reward(kb, kb.agentConfig(SamplingParams.temperature(1f)));
            String ok = "<search>Bo Ka</search> <result>\nDoc 1(Title: Bo Ka) Bo Ka works at Zu Corp.\n</result><answer>Zu Corp</answer>";
            assertEquals(1.0, f.reward(said(ok, 1, 50), List.of("Zu Corp")), 1e-12);
            assertEquals(0.5, f.reward(said(ok, 1, 50), List.of("Zu Inc")), 1e-12, "F1 of one word in two");
            assertEquals(-1.0, f.reward(said("<search>Bo Ka</search><answer>Zu Corp</answer>", 1, 50), List.of("Zu Corp")), 1e-12);
            assertInstanceOf(OutcomeReward.class, r.reward().reward(arith, arith.agentConfig(SamplingParams.temperature(1f))));
        }

        Budget b = Budget.tokens(500);
        assertEquals(b, ((AepoRollout) Recipe.AEPO.withTrajectoriesPerPrompt(8).strategy(b)).config().budget());
        assertEquals(64, ((AepoRollout) Recipe.AEPO.withTrajectoriesPerPrompt(8).strategy(b)).config().paths(), "with a budget the path count is only a cap");
        assertEquals(b, ((ArpoRollout) Recipe.ARPO.withTrajectoriesPerPrompt(8).strategy(b)).config().budget());
    }

    @Test
    void supervisedRecipesAndNames() {
        assertFalse(Recipe.SFT.samples());
        assertThrows(IllegalStateException.class, () -> Recipe.SFT.strategy(Budget.UNLIMITED));
        assertEquals(Recipe.Kind.REJECTION_SAMPLING, Recipe.RFT.kind());
        assertEquals("chains(n=8)", Recipe.RFT.strategy(Budget.UNLIMITED).name());
        for (Recipe r : Recipe.values()) assertEquals(r, Recipe.byName(r.name()));
        assertEquals(Recipe.TREE_GRPO, Recipe.byName(" Tree_GRPO "));
        assertEquals(List.of("sft", "rft", "grpo", "grpo-tcr", "tree-grpo", "arpo", "aepo", "aepo-paper", "tao-rl", "tao-rl-paper", "cort", "cort-think"),
                Recipe.values().stream().map(Recipe::name).toList());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Recipe.byName("ppo"));
        assertTrue(e.getMessage().contains("tree-grpo"), e.getMessage());
    }

    @Test
    void wellFormedResponses() {
        var wf = TrainingTask.WELL_FORMED;
        assertTrue(wf.test("\\boxed{12}"));
        assertTrue(wf.test("<python>print(1)</python> <result>\n1\n</result>\\boxed{1}"));
        assertTrue(wf.test("417*38=15846. It looks tedious.\n<python>print(1)</python> <result>\n1\n</result>We don't need to doubt.\n\\boxed{1}"));
        assertFalse(wf.test("<python>print(1)</python>\\boxed{1}"), "a call without its result");
        assertFalse(wf.test("<answer>a</answer><answer>b</answer>"), "two answers");
        assertFalse(wf.test("<search>x</search> <result>\ny\n</result>"), "no answer");
    }
}
