package ai.arbor.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.advantage.Advantages;
import ai.arbor.kernels.SamplingParams;
import ai.arbor.reward.AnswerChecker;
import ai.arbor.reward.MathGrader;
import ai.arbor.rl.Recipe;
import ai.arbor.rl.RolloutCorrection;
import ai.arbor.rl.Scored;
import ai.arbor.rl.Sequence;
import ai.arbor.rl.StepPipeline;
import ai.arbor.rl.TokenBatch;
import ai.arbor.rollout.AgentConfig;
import ai.arbor.rollout.CharTokenizer;
import ai.arbor.rollout.FinishReason;
import ai.arbor.rollout.Generation;
import ai.arbor.rollout.GenerationRequest;
import ai.arbor.rollout.Generator;
import ai.arbor.rollout.Seeds;
import ai.arbor.rollout.ToolCallStatus;
import ai.arbor.rollout.ToolProvider;
import ai.arbor.task.DemoScript;
import ai.arbor.task.DemoStyle;
import ai.arbor.task.Problem;
import ai.arbor.task.TrainingTask;
import ai.arbor.tools.Observation;
import ai.arbor.tools.Tool;
import ai.arbor.torch.model.CpuThreads;
import ai.arbor.torch.model.PolicyConfig;
import ai.arbor.torch.model.ReferencePolicy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The RL step with a scripted policy and a tool whose infrastructure fails on demand: trajectories with an
 * infrastructure failure leave both the group statistics and the loss (never a reward of 0 that would punish
 * them), the others get exactly GRPO's advantages over the remaining members, the step trains and invalidates.
 */
class RlTrainerTest {
    static final CharTokenizer TOK = CharTokenizer.ascii();

    @BeforeAll
    static void threads() {
        CpuThreads.set(1);
    }

    /**
     * Problems with known answers (three by default); a "python" tool that prints 1 and fails as infrastructure on
     * "boom"; 3 turns, 2 calls, 40 tokens a turn.
     */
    static final class StubTask implements TrainingTask {
        final List<Problem> problems;
        final int maxResponseTokens;

        StubTask() {
            this(List.of(new Problem("p0", "2*3", List.of("6"), List.of()), new Problem("p1", "4*5", List.of("20"), List.of()),
                    new Problem("p2", "7*7", List.of("49"), List.of())), 120);
        }

        StubTask(List<Problem> problems, int maxResponseTokens) {
            this.problems = problems;
            this.maxResponseTokens = maxResponseTokens;
        }

        final Tool python = new Tool() {
            public String name() { return "python"; }
            public String description() { return "stub"; }
            public String parametersSchema() { return "{}"; }
            public Observation call(String args) {
                return args.contains("boom") ? Observation.infrastructureFailure("sandbox unavailable", null) : Observation.ok("1", null);
            }
        };

        public String name() { return "stub"; }
        public List<Problem> train() { return problems; }
        public List<Problem> heldOut() { return problems; }
        public ToolProvider tools() { return ToolProvider.shared(python); }
        public AnswerChecker checker() { return MathGrader.standard(); }
        public boolean questionAnswering() { return false; }
        public AgentConfig agentConfig(SamplingParams s) {
            return AgentConfig.builder().sampling(s).maxNewTokens(40).maxTurns(3).maxToolCalls(2).maxResponseTokens(maxResponseTokens)
                    .toolTimeout(Duration.ofSeconds(10)).build();
        }
        public Map<DemoStyle, Double> demoMix() { return Map.of(DemoStyle.HAND, 1.0); }
        public DemoScript demonstration(Problem p, DemoStyle style) { return (t, so) -> "\\boxed{" + p.answer() + "}"; }
        public void close() {}
    }

    /**
     * A path's first turn depends on its seed: the right answer, a wrong one, or a tool call whose
     * infrastructure fails — after which the path answers correctly (so a trainer that did not mask it would
     * see a correct trajectory). Logprob −0.5 and entropy 1 per token.
     */
    static final class Scripted implements Generator {
        final Map<String, String> answers = Map.of("2*3", "6", "4*5", "20", "7*7", "49");

        public CompletableFuture<Generation> generate(GenerationRequest r) {
            String ctx = TOK.decode(r.context().toArray());
            String q = ctx.substring(ctx.indexOf("Q: ") + 3, ctx.indexOf('\n'));
            String text;
            if (ctx.contains("<result>")) text = "\\boxed{" + answers.get(q) + "}";
            else text = switch (Math.floorMod(Seeds.mix64(r.seed()), 3)) {
                case 0 -> "\\boxed{" + answers.get(q) + "}";
                case 1 -> "\\boxed{0}";
                default -> "<python>boom</python>";
            };
            int[] ids = TOK.encode(text);
            boolean call = text.endsWith("</python>");
            if (!call) {
                ids = Arrays.copyOf(ids, ids.length + 1);
                ids[ids.length - 1] = TOK.eosId();
            }
            float[] lp = new float[ids.length], h = new float[ids.length];
            Arrays.fill(lp, -0.5f);
            Arrays.fill(h, 1f);
            return CompletableFuture.completedFuture(call ? new Generation(ids, lp, h, FinishReason.STOP_STRING, "</python>", -1)
                    : new Generation(ids, lp, h, FinishReason.STOP_TOKEN, null, TOK.eosId()));
        }

        public void close() {}
    }

    @Test
    void infrastructureFailuresAreMaskedNotPunished() {
        PolicyConfig cfg = new PolicyConfig(TOK.vocabSize(), 32, 1, 2, 1, 64, 256, 10_000.0, 1e-6, true, 3);
        AtomicInteger invalidations = new AtomicInteger();
        try (StubTask task = new StubTask(); ReferencePolicy p = ReferencePolicy.create(cfg); ReferencePolicy ref = TrainingRun.copy(p);
             Trainer tr = new Trainer(p, OptimConfig.adamW(1e-3), 10, 4096, TOK.vocabSize());
             RlTrainer rl = new RlTrainer(task, TOK, tr, new Scripted(), invalidations::incrementAndGet, ref,
                     new RlTrainer.Config(Recipe.GRPO.withTrajectoriesPerPrompt(6), null, 1, RlTrainer.OldLogprobs.BEHAVIOUR), 4096, 2)) {
            RlTrainer.Rollout ro = rl.rollout(task.train(), 11);
            List<Scored> scored = ro.scored();
            assertEquals(18, scored.size());
            int infra = 0;
            for (Scored s : scored) {
                boolean failed = s.trajectory().toolCalls().stream().anyMatch(c -> c.status() == ToolCallStatus.INFRASTRUCTURE_ERROR);
                assertEquals(failed, s.infrastructureFailure());
                if (failed) {
                    infra++;
                    assertTrue(s.trajectory().responseText(TOK).endsWith("\\boxed{" + s.problem().answer() + "}"),
                            "the failed path still answered correctly: " + s.trajectory().responseText(TOK));
                    assertEquals(0.0, s.reward(), 0, "no reward is computed for a masked trajectory");
                    assertTrue(!s.correct());
                }
            }
            assertTrue(infra >= 2 && infra <= 14, "the seeds give a mix of failures and answers: " + infra);

            StepPipeline.Prepared prep = rl.prepare(scored);
            // expected: GRPO over the trajectories WITHOUT infrastructure failure only
            List<Integer> live = new ArrayList<>();
            for (int i = 0; i < scored.size(); i++) if (!scored.get(i).infrastructureFailure()) live.add(i);
            float[] rewards = new float[live.size()];
            int[] groups = new int[live.size()];
            for (int k = 0; k < live.size(); k++) {
                rewards[k] = scored.get(live.get(k)).trajectory().responseText(TOK).contains("\\boxed{" + scored.get(live.get(k)).problem().answer() + "}") ? 1 : 0;
                groups[k] = scored.get(live.get(k)).group();
            }
            float[] expected = Advantages.grpo(rewards, groups, true);
            for (int i = 0, k = 0; i < scored.size(); i++) {
                if (scored.get(i).infrastructureFailure()) assertTrue(Float.isNaN(prep.sequenceAdvantages()[i]), "masked trajectory " + i);
                else assertEquals(expected[k++], prep.sequenceAdvantages()[i], 1e-6f, "advantage of trajectory " + i);
            }
            TokenBatch tb = prep.batch();
            assertEquals(live.size(), tb.sequenceCount(), "only trajectories without infrastructure failure are trained");
            for (int j = 0; j < tb.sequenceCount(); j++) assertTrue(!scored.get(tb.source()[j]).infrastructureFailure());
            for (int k = 0; k < tb.rows(); k++) {
                int src = tb.source()[tb.seqId()[k]];
                assertEquals(-0.5f, tb.old()[k], 0, "behaviour log-probs carried to the trained rows");
                assertEquals(prep.sequenceAdvantages()[src], tb.advantage()[k], 0, "broadcast advantage");
            }

            Map<String, Object> m = rl.step(task.train(), 11);
            assertEquals(infra, ((Number) m.get("infra_masked")).intValue(), "same seed, same rollouts");
            assertEquals(live.size(), ((Number) m.get("trained_sequences")).intValue());
            assertEquals(1, ((Number) m.get("optimizer_steps")).intValue());
            assertTrue(Double.isFinite(((Number) m.get("loss")).doubleValue()));
            double acc = ((Number) m.get("accuracy")).doubleValue(), reward = ((Number) m.get("reward")).doubleValue();
            double sum = 0;
            for (float r : rewards) sum += r;
            assertEquals(sum / live.size(), acc, 1e-9, "accuracy over the trajectories that were not masked");
            assertEquals(sum / live.size(), reward, 1e-9);
            assertEquals(1, invalidations.get(), "the generator is told after the update");
        }
    }

    /**
     * The off-policy correction in the step (docs/algorithms.md §7): the scripted sampler reports log-prob −0.5 for
     * every token while the random policy recomputes others, so δ = log π_old − log π_rollout is far from 0. The
     * correction's mean |δ| must equal the trainer's own old-vs-behaviour difference (computed separately), IS
     * weights are reported, and a rejection band that no token meets leaves no policy-gradient loss.
     */
    @Test
    void offPolicyCorrectionWeightsAndRejectsInTheStep() {
        PolicyConfig cfg = new PolicyConfig(TOK.vocabSize(), 32, 1, 2, 1, 64, 256, 10_000.0, 1e-6, true, 3);
        RolloutCorrection tis = RolloutCorrection.tokenIs(2);
        RolloutCorrection rejectAll = RolloutCorrection.NONE.withRejection(RolloutCorrection.RejectLevel.TOKEN, 0.999999, 1.000001);
        for (RolloutCorrection rc : List.of(tis, rejectAll)) {
            try (StubTask task = new StubTask(); ReferencePolicy p = ReferencePolicy.create(cfg); ReferencePolicy ref = TrainingRun.copy(p);
                 Trainer tr = new Trainer(p, OptimConfig.adamW(1e-3), 10, 4096, TOK.vocabSize());
                 RlTrainer rl = new RlTrainer(task, TOK, tr, new Scripted(), () -> {}, ref,
                         new RlTrainer.Config(Recipe.GRPO.withTrajectoriesPerPrompt(6), null, 1, RlTrainer.OldLogprobs.AUTO, rc), 4096, 2)) {
                Map<String, Object> m = rl.step(task.train(), 11);
                double diff = ((Number) m.get("old_logprob_abs_diff")).doubleValue();
                assertTrue(diff > 0.1, "the random policy disagrees with the scripted log-probs: " + diff);
                assertEquals(diff, ((Number) m.get("rc_mean_abs_delta")).doubleValue(), 1e-5 * diff, rc + ": two computations of mean |δ|");
                if (rc == tis) {
                    double mean = ((Number) m.get("rc_is_mean")).doubleValue(), max = ((Number) m.get("rc_is_max")).doubleValue();
                    assertTrue(mean > 0 && mean <= 2 && max <= 2, "truncated at 2: mean " + mean + " max " + max);
                    assertEquals(0.0, ((Number) m.get("rc_rejected_frac")).doubleValue(), 0);
                } else {
                    assertEquals(1.0, ((Number) m.get("rc_rejected_frac")).doubleValue(), 1e-9, "no token has |δ| < 1e-6");
                    assertEquals(0.0, ((Number) m.get("pg_loss")).doubleValue(), 0, "nothing left to train");
                }
            }
        }
        IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> new RlTrainer.Config(Recipe.GRPO, null, 1, RlTrainer.OldLogprobs.BEHAVIOUR, tis));
        assertTrue(e.getMessage().contains("behaviour"), e.getMessage());
    }
    /** Right on every prompt but 2*3, which is right on odd seeds only: its groups are the only informative ones. */
    static final class OneHardPrompt implements Generator {
        final Map<String, String> answers = Map.of("2*3", "6", "4*5", "20", "7*7", "49");

        public CompletableFuture<Generation> generate(GenerationRequest r) {
            String ctx = TOK.decode(r.context().toArray());
            String q = ctx.substring(ctx.indexOf("Q: ") + 3, ctx.indexOf('\n'));
            boolean right = !q.equals("2*3") || (Seeds.mix64(r.seed()) & 1) == 1;
            int[] body = TOK.encode("\\boxed{" + (right ? answers.get(q) : "0") + "}");
            int[] ids = Arrays.copyOf(body, body.length + 1);
            ids[body.length] = TOK.eosId();
            float[] lp = new float[ids.length], h = new float[ids.length];
            Arrays.fill(lp, -0.5f);
            Arrays.fill(h, 1f);
            return CompletableFuture.completedFuture(new Generation(ids, lp, h, FinishReason.STOP_TOKEN, null, TOK.eosId()));
        }

        public void close() {}
    }

    /**
     * DAPO dynamic sampling in the step (TAO-RL: 6 prompts rolled out for a target of 2 groups): one informative group
     * is repeated to fill the batch ({@link Recipe.Refill#REPLICATE}, the release), or trained alone ({@link
     * Recipe.Refill#SHRINK}); with none, nothing is trained.
     */
    @Test
    void dynamicSamplingFillsAShortBatchWithCopies() {
        PolicyConfig cfg = new PolicyConfig(TOK.vocabSize(), 32, 1, 2, 1, 64, 256, 10_000.0, 1e-6, true, 3);
        StubTask task = new StubTask();
        Problem hard = task.train().get(0), p1 = task.train().get(1), p2 = task.train().get(2);
        List<Problem> oneInformative = List.of(hard, p1, p2, p1, p2, p1), none = List.of(p1, p2, p1, p2, p1, p2);
        for (Recipe.Refill refill : Recipe.Refill.values()) {
            Recipe tao = Recipe.TAO_RL.withTrajectoriesPerPrompt(6).withMiniBatches(1).withRefill(refill);
            try (ReferencePolicy p = ReferencePolicy.create(cfg); Trainer tr = new Trainer(p, OptimConfig.adamW(1e-3), 10, 4096, TOK.vocabSize());
                 RlTrainer rl = new RlTrainer(task, TOK, tr, new OneHardPrompt(), () -> {}, null,
                         new RlTrainer.Config(tao, null, 1, RlTrainer.OldLogprobs.BEHAVIOUR), 4096, 2)) {
                Map<String, Object> m = rl.step(oneInformative, 11);
                assertEquals(6, ((Number) m.get("dynamic/offered_groups")).intValue());
                assertEquals(2, ((Number) m.get("dynamic/target_groups")).intValue());
                assertEquals(1, ((Number) m.get("dynamic/kept_groups")).intValue(), "only 2*3's group is informative");
                boolean copies = refill == Recipe.Refill.REPLICATE;
                assertEquals(copies ? 2 : 1, ((Number) m.get("dynamic/trained_groups")).intValue(), refill.toString());
                assertEquals(copies ? 12 : 6, ((Number) m.get("trained_sequences")).intValue(), refill + ": 6 chains per trained group");
                Map<String, Object> n = rl.step(none, 12);
                assertEquals(0, ((Number) n.get("dynamic/kept_groups")).intValue());
                assertEquals(0, ((Number) n.get("trained_sequences")).intValue(), "no informative group: nothing trained");
            }
        }
    }
}
