package ai.arbor.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.kernels.KlType;
import ai.arbor.kernels.PolicyLossConfig;
import ai.arbor.kernels.SamplingParams;
import ai.arbor.rl.Recipe;
import ai.arbor.rl.Scored;
import ai.arbor.rollout.AgentConfig;
import ai.arbor.rollout.CharTokenizer;
import ai.arbor.rollout.FinishReason;
import ai.arbor.rollout.Generation;
import ai.arbor.rollout.GenerationRequest;
import ai.arbor.rollout.Generator;
import ai.arbor.rollout.Seeds;
import ai.arbor.rollout.TagToolCallFormat;
import ai.arbor.rollout.Termination;
import ai.arbor.rollout.Trajectory;
import ai.arbor.task.Problem;
import ai.arbor.torch.model.CpuThreads;
import ai.arbor.torch.model.PolicyConfig;
import ai.arbor.torch.model.ReferencePolicy;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The recipes' own agent loops and sampling reach the trainer's rollouts, and their loss coefficients reach the
 * update (docs/algorithms.md §6): Tree-GRPO's invalid-action reply and final turn without tools at T 1 / top-p
 * 0.95; CoRT's limit notice in round R − 2's output and its unstopped last round at T 0.6 / top-p 0.95, its −0.1
 * when no code ran; the step's loss is pg + 0.001·KL − 0.001·H for both.
 */
class RecipeAgentLoopTest {
    static final CharTokenizer TOK = CharTokenizer.ascii();

    @BeforeAll
    static void threads() {
        CpuThreads.set(1);
    }

    /** Two problems; a python tool that prints 1; 3 turns, 2 calls, 40 tokens a turn, 400 response tokens. */
    static RlTrainerTest.StubTask task() {
        return new RlTrainerTest.StubTask(List.of(new Problem("p0", "2*3", List.of("6"), List.of()), new Problem("p1", "4*5", List.of("20"), List.of())),
                400);
    }

    /**
     * A policy that writes what {@code script} says for the decoded context, cut as a backend cuts it: after the
     * earliest stop string of the request (kept), else EOS follows. Records every request. Logprob −0.5, entropy 1.
     */
    static final class Policy implements Generator {
        final Function<GenerationRequest, String> script;
        final List<GenerationRequest> requests = Collections.synchronizedList(new ArrayList<>());

        Policy(Function<GenerationRequest, String> script) {
            this.script = script;
        }

        public CompletableFuture<Generation> generate(GenerationRequest r) {
            requests.add(r);
            String text = script.apply(r);
            String stop = null;
            int end = -1;
            for (String s : r.limits().stopStrings()) {
                int at = text.indexOf(s);
                if (at >= 0 && (end < 0 || at + s.length() < end)) {
                    end = at + s.length();
                    stop = s;
                }
            }
            if (stop != null) text = text.substring(0, end);
            int[] ids = TOK.encode(text);
            if (stop == null) {
                ids = Arrays.copyOf(ids, ids.length + 1);
                ids[ids.length - 1] = TOK.eosId();
            }
            assertTrue(ids.length <= r.limits().maxNewTokens(), "the script fits a turn");
            float[] lp = new float[ids.length], h = new float[ids.length];
            Arrays.fill(lp, -0.5f);
            Arrays.fill(h, 1f);
            return CompletableFuture.completedFuture(stop != null ? new Generation(ids, lp, h, FinishReason.STOP_STRING, stop, -1)
                    : new Generation(ids, lp, h, FinishReason.STOP_TOKEN, null, TOK.eosId()));
        }

        public void close() {}
    }

    static String context(GenerationRequest r) {
        return TOK.decode(r.context().toArray());
    }

    static int count(String s, String sub) {
        int c = 0;
        for (int i = s.indexOf(sub); i >= 0; i = s.indexOf(sub, i + 1)) c++;
        return c;
    }

    static final PolicyConfig MODEL = new PolicyConfig(TOK.vocabSize(), 32, 1, 2, 1, 64, 512, 10_000.0, 1e-6, true, 3);

    /** One step of {@code recipe} with {@code policy}; checks the loss identity and returns the scored rollouts. */
    static List<Scored> stepAndCheckLoss(Recipe recipe, Policy policy, Map<String, Object>[] metrics) {
        try (RlTrainerTest.StubTask task = task(); ReferencePolicy p = ReferencePolicy.create(MODEL); ReferencePolicy ref = TrainingRun.copy(p);
             Trainer tr = new Trainer(p, OptimConfig.adamW(1e-3), 10, 4096, TOK.vocabSize());
             RlTrainer rl = new RlTrainer(task, TOK, tr, policy, () -> {}, ref, RlTrainer.Config.of(recipe), 4096, 2)) {
            PolicyLossConfig loss = rl.lossConfig();
            assertEquals(KlType.K3, loss.klType(), recipe + ": k3 KL");
            assertEquals(0.001, loss.klCoef(), 0, recipe + ": β");
            assertEquals(0.001, loss.entropyCoef(), 0, recipe + ": entropy bonus");
            assertEquals((double) recipe.sampling().temperature(), loss.temperature(), 0, recipe + ": the loss at the sampling temperature");
            List<Scored> scored = rl.rollout(task.train(), 5).scored();
            Map<String, Object> m = rl.step(task.train(), 5);
            metrics[0] = m;
            double pg = num(m, "pg_loss"), kl = num(m, "kl_ref"), h = num(m, "policy_entropy"), l = num(m, "loss");
            // the update's loss carries both coefficients: loss = pg + 0.001·KL − 0.001·H (averaged over the optimizer steps)
            assertTrue(h > 1, recipe + ": the policy's entropy is large enough for its term to show, " + h);
            assertEquals(pg + 0.001 * kl - 0.001 * h, l, 1e-5, recipe + ": loss " + l + " pg " + pg + " kl " + kl + " H " + h);
            assertEquals(Math.min(recipe.miniBatches(), scored.size()), ((Number) m.get("optimizer_steps")).intValue());
            return scored;
        }
    }

    static double num(Map<String, Object> m, String k) {
        return ((Number) m.get(k)).doubleValue();
    }

    @Test
    @SuppressWarnings("unchecked")
    void treeGrpoAnswersInvalidActionsAndEndsWithATurnWithoutTools() {
        // turn 0: neither call nor answer; every later turn: a call
        Policy policy = new Policy(r -> context(r).contains("My previous action is invalid") ? "<python>1</python>" : "hmm");
        Map<String, Object>[] m = new Map[1];
        List<Scored> scored = stepAndCheckLoss(Recipe.TREE_GRPO, policy, m);
        assertEquals(2 * Recipe.TREE_GRPO.trajectoriesPerPrompt(), scored.size(), "M = 2 trees of K = 3 leaves per prompt");
        String call = "<python>1</python>", obs = " <result>\n1\n</result>", invalid = TagToolCallFormat.SEARCH_R1_INVALID;
        // the void turn and its EOS, Search-R1's reply, two executed calls (the second with the default limit notice),
        // then the final turn after maxTurns = 3: its call is not executed and nothing follows it
        String expected = "hmm" + TOK.decode(new int[] {TOK.eosId()}) + invalid + call + obs + call + obs + "\nReach max function call limit." + call;
        int generated = "hmm".length() + 1 + 3 * call.length();
        for (Scored s : scored) {
            Trajectory t = s.trajectory();
            assertEquals(expected, TOK.decode(t.tokens()), "trajectory of group " + s.group());
            assertEquals(Termination.MAX_TURNS, t.termination());
            assertEquals(4, t.steps().size(), "3 turns and the final one");
            assertEquals(2, t.toolCalls().size());
            int trained = 0;
            for (boolean b : t.lossMask()) if (b) trained++;
            assertEquals(generated, trained, "the reply and the observations are masked");
            assertEquals(0.0, s.reward(), 0, "no answer: outcome 0");
        }
        for (GenerationRequest r : policy.requests) {
            assertEquals(SamplingParams.temperature(1f).withTopP(0.95f), r.sampling(), "Tree-GRPO samples at T 1, top-p 0.95");
            assertTrue(r.limits().stopStrings().contains("</python>"), "every turn, the final one too, stops at a call");
        }
        assertEquals(0.0, num(m[0], "pg_loss"), 1e-12, "all rewards equal: zero advantages, only the KL and entropy terms");
    }

    @Test
    @SuppressWarnings("unchecked")
    void cortNoticesTheLastCallRunsAnUnstoppedLastRoundAndPenalizesNoCode() {
        // a path's seed decides at its first turn: answer 6 without code, or write a call followed by the answer 6
        Policy policy = new Policy(r -> {
            String ctx = context(r);
            boolean direct = !ctx.contains("<result>") && Math.floorMod(Seeds.mix64(r.seed()), 2) == 0;
            return direct ? "\\boxed{6}" : "<python>1</python> so \\boxed{6}";
        });
        Map<String, Object>[] m = new Map[1];
        List<Scored> scored = stepAndCheckLoss(Recipe.CORT, policy, m);
        assertEquals(2 * Recipe.CORT.trajectoriesPerPrompt(), scored.size());
        String call = "<python>1</python>", obs = " <result>\n1\n</result>", last = " <result>\n1" + AgentConfig.CORT_LIMIT_NOTICE + "\n</result>";
        String viaCode = call + obs + call + last + "<python>1</python> so \\boxed{6}", direct = "\\boxed{6}";
        int codePaths = 0, directPaths = 0;
        for (Scored s : scored) {
            Trajectory t = s.trajectory();
            String text = t.responseText(TOK);
            boolean right = s.problem().answer().equals("6");
            if (text.equals(direct)) {
                directPaths++;
                assertEquals(1, t.steps().size());
                assertEquals(right ? 0.9 : -0.1, s.reward(), 1e-12, "no code ran: -0.1");
            } else {
                codePaths++;
                assertEquals(viaCode, text, "round R - 2 = 1's output holds the notice; the last round ran past its call");
                assertEquals(3, t.steps().size());
                assertEquals(2, t.toolCalls().size(), "the last round's call is text, not a call");
                assertEquals(right ? 1.0 : 0.0, s.reward(), 1e-12);
            }
            assertEquals(Termination.ANSWER, t.termination());
            assertEquals(right, s.correct());
        }
        assertTrue(codePaths > 0 && directPaths > 0, "the seeds give both kinds: " + codePaths + " / " + directPaths);
        for (GenerationRequest r : policy.requests) {
            assertEquals(SamplingParams.temperature(0.6f).withTopP(0.95f), r.sampling(), "CoRT samples at T 0.6, top-p 0.95");
            boolean lastRound = count(context(r), "<result>") == 2;
            assertEquals(!lastRound, r.limits().stopStrings().contains("</python>"), "only the last round has no tool stop");
        }
    }
}
