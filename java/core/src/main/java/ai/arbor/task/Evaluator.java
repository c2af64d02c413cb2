package ai.arbor.task;

import ai.arbor.kernels.SamplingParams;
import ai.arbor.rollout.AgentConfig;
import ai.arbor.rollout.Generator;
import ai.arbor.rollout.Prompt;
import ai.arbor.rollout.RolloutBatch;
import ai.arbor.rollout.RolloutEngine;
import ai.arbor.rollout.Tokenizer;
import ai.arbor.rollout.ToolCallRecord;
import ai.arbor.rollout.Trajectory;
import ai.arbor.task.Problem;
import ai.arbor.task.TrainingTask;
import ai.arbor.tree.ChainRollout;
import ai.arbor.tree.TreeGroup;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Held-out evaluation: each problem is answered {@code samples} times by the policy with its tools, at a
 * temperature (0 = greedy, one sample); accuracy is the mean correctness over all answers (for τ &gt; 0,
 * the expected accuracy of one sampled answer, pass@1).
 */
public final class Evaluator {
    private Evaluator() {}

    /**
     * One evaluation.
     *
     * @param decoding        "greedy" or "τ=…, k samples"
     * @param accuracy        correct answers / answers
     * @param toolUse         answers with at least one tool call / answers
     * @param toolCalls       tool calls per answer
     * @param toolFailureRate failed calls / calls
     * @param responseTokens  mean response length (generated + observation tokens)
     * @param generatedTokens mean tokens the policy generated per answer (observations left out)
     * @param answers         answers graded
     * @param seconds         wall time
     * @param examples        the first few responses (problem id, correct, text), for reports
     */
    public record Result(String decoding, double accuracy, double toolUse, double toolCalls, double toolFailureRate, double responseTokens,
                         double generatedTokens, int answers, double seconds, List<String> examples) {

        /** Generated tokens per correct answer (CoRT's efficiency measure): all generated tokens / correct answers; ∞ with none correct. */
        public double generatedTokensPerCorrect() {
            return accuracy > 0 ? generatedTokens / accuracy : Double.POSITIVE_INFINITY;
        }

        /** {@link #generatedTokensPerCorrect()} to one decimal, "–" with no correct answer. */
        public String generatedTokensPerCorrectText() {
            return accuracy > 0 ? String.format(Locale.ROOT, "%.1f", generatedTokensPerCorrect()) : "–";
        }

        public Map<String, Object> metrics(String prefix) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put(prefix + "accuracy", accuracy);
            m.put(prefix + "tool_use", toolUse);
            m.put(prefix + "tool_calls", toolCalls);
            m.put(prefix + "tool_failure_rate", toolFailureRate);
            m.put(prefix + "response_tokens", responseTokens);
            m.put(prefix + "generated_tokens", generatedTokens);
            if (accuracy > 0) m.put(prefix + "generated_tokens_per_correct", generatedTokensPerCorrect());
            m.put(prefix + "answers", answers);
            return m;
        }
    }

    /**
     * Evaluates {@code problems}.
     *
     * @param sampling    the distribution (a greedy one, temperature 0, gives one sample per problem)
     * @param samples     answers per problem when sampling
     */
    public static Result evaluate(TrainingTask task, Tokenizer tokenizer, Generator generator, List<Problem> problems,
                                  SamplingParams sampling, int samples, long seed, int toolThreads) {
        if (problems.isEmpty()) throw new IllegalArgumentException("no problems to evaluate");
        if (sampling == null) throw new IllegalArgumentException("sampling must not be null");
        double temperature = sampling.temperature();
        int k = sampling.isGreedy() ? 1 : Math.max(1, samples);
        long t0 = System.nanoTime();
        AgentConfig agent = task.agentConfig(sampling);
        List<Prompt> prompts = new ArrayList<>();
        for (Problem p : problems) prompts.add(task.prompt(p, tokenizer));
        RolloutBatch<TreeGroup> batch;
        try (RolloutEngine engine = RolloutEngine.builder().generator(generator).tokenizer(tokenizer).format(task.format()).tools(task.tools())
                .config(agent).toolThreads(Math.max(1, toolThreads)).build()) {
            batch = engine.run(prompts, new ChainRollout(k), seed);
        }
        int answers = 0, correct = 0, withTool = 0;
        long calls = 0, failed = 0, length = 0, generated = 0;
        List<String> examples = new ArrayList<>();
        for (int g = 0; g < batch.groups().size(); g++) {
            Problem p = problems.get(g);
            for (Trajectory t : batch.groups().get(g).trajectories()) {
                String text = t.responseText(tokenizer);
                boolean ok = !t.infrastructureFailure() && task.checker().isCorrect(text, p.answers());
                answers++;
                if (ok) correct++;
                if (!t.toolCalls().isEmpty()) withTool++;
                calls += t.toolCalls().size();
                for (ToolCallRecord c : t.toolCalls()) if (c.status().failed()) failed++;
                length += t.length();
                generated += t.generatedTokens();
                if (examples.size() < 6) examples.add(p.id() + (ok ? " [correct] " : " [wrong] ") + task.promptText(p).strip() + " -> " + text);
            }
        }
        String decoding = sampling.isGreedy() ? "greedy" : String.format(Locale.ROOT, "τ=%.2g, %d samples", temperature, k);
        return new Result(decoding, (double) correct / answers, (double) withTool / answers, (double) calls / answers,
                calls == 0 ? 0 : (double) failed / calls, (double) length / answers, (double) generated / answers, answers, (System.nanoTime() - t0) / 1e9, List.copyOf(examples));
    }
}
