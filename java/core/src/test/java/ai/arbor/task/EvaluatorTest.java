package ai.arbor.task;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.kernels.SamplingParams;
import ai.arbor.rollout.CharTokenizer;
import ai.arbor.rollout.ScriptedGenerator;
import java.math.BigInteger;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The evaluator's accuracy and token counts against counts made by hand from the scripted responses. */
class EvaluatorTest {

    /** The problem whose question the context asks. */
    static int asked(String context, List<Problem> set) {
        for (int i = 0; i < set.size(); i++) if (context.contains("Q: " + set.get(i).question() + "\n")) return i;
        throw new AssertionError("no problem in " + context);
    }

    @Test
    void generatedTokensPerCorrectAnswerCountsWhatThePolicyWrote() {
        var tok = CharTokenizer.ascii();
        try (TrainingTask task = TrainingTask.withoutTools(TrainingTask.create("arith", 9, 20, 6))) {
            List<Problem> set = task.heldOut();
            // even problems answered right, odd ones off by one; every response ends with EOS (one more token)
            ScriptedGenerator gen = new ScriptedGenerator(tok, (ctx, rnd) -> {
                int i = asked(ctx, set);
                String a = i % 2 == 0 ? set.get(i).answer() : new BigInteger(set.get(i).answer()).add(BigInteger.ONE).toString();
                return ScriptedGenerator.Turn.of("\\boxed{" + a + "}");
            });
            Evaluator.Result r = Evaluator.evaluate(task, tok, gen, set, SamplingParams.temperature(1f), 2, 5, 2);
            long tokens = 0;
            int correct = 0;
            for (int i = 0; i < set.size(); i++) {
                String a = i % 2 == 0 ? set.get(i).answer() : new BigInteger(set.get(i).answer()).add(BigInteger.ONE).toString();
                tokens += 2L * (("\\boxed{" + a + "}").length() + 1);
                if (i % 2 == 0) correct += 2;
            }
            assertEquals(12, r.answers());
            assertEquals(correct / 12.0, r.accuracy(), 1e-12);
            assertEquals(tokens / 12.0, r.generatedTokens(), 1e-12);
            assertEquals(r.generatedTokens(), r.responseTokens(), 1e-12, "no observations without the tool");
            assertEquals((double) tokens / correct, r.generatedTokensPerCorrect(), 1e-9);
            assertEquals(tokens / (double) correct, (double) r.metrics("").get("generated_tokens_per_correct"), 1e-9);
            assertEquals(String.format(java.util.Locale.ROOT, "%.1f", (double) tokens / correct), r.generatedTokensPerCorrectText());
            // no correct answer: infinitely many tokens per correct answer, shown as "–" and left out of the metrics
            ScriptedGenerator wrong = new ScriptedGenerator(tok, (ctx, rnd) -> ScriptedGenerator.Turn.of("\\boxed{x}"));
            Evaluator.Result none = Evaluator.evaluate(task, tok, wrong, set, SamplingParams.temperature(1f), 1, 5, 2);
            assertEquals(0.0, none.accuracy());
            assertEquals(Double.POSITIVE_INFINITY, none.generatedTokensPerCorrect());
            assertEquals("–", none.generatedTokensPerCorrectText());
            assertTrue(!none.metrics("").containsKey("generated_tokens_per_correct"));
        }
    }

    @Test
    void observationsAreResponseTokensButNotGenerated() {
        var tok = CharTokenizer.ascii();
        try (TrainingTask task = TrainingTask.create("arith", 9, 20, 3)) {
            List<Problem> set = task.heldOut();
            ScriptedGenerator gen = new ScriptedGenerator(tok, (ctx, rnd) -> {
                Problem p = set.get(asked(ctx, set));
                return ScriptedGenerator.Turn.of(ctx.contains("<result>") ? "\\boxed{" + p.answer() + "}" : "<python>print(" + p.question() + ")</python>");
            });
            Evaluator.Result r = Evaluator.evaluate(task, tok, gen, set, SamplingParams.greedy(), 1, 0, 2);
            long generated = 0, observed = 0;
            for (Problem p : set) {
                // the call is cut at its stop string (no EOS), the answer ends with EOS
                generated += ("<python>print(" + p.question() + ")</python>").length() + ("\\boxed{" + p.answer() + "}").length() + 1;
                observed += (" <result>\n" + p.answer() + "\n</result>").length();
            }
            assertEquals(1.0, r.accuracy(), 1e-12);
            assertEquals(1.0, r.toolCalls(), 1e-12);
            assertEquals(generated / 3.0, r.generatedTokens(), 1e-12);
            assertEquals((generated + observed) / 3.0, r.responseTokens(), 1e-12);
            assertEquals(generated / 3.0, r.generatedTokensPerCorrect(), 1e-12);
        }
    }
}
