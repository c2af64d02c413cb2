package ai.arbor.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.chat.ChatFormat;
import ai.arbor.rl.Recipe;
import ai.arbor.rl.Sequence;
import ai.arbor.task.DemoStyle;
import ai.arbor.task.Problem;
import ai.arbor.task.TrainingTask;
import ai.arbor.testing.Repository;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * {@code arith} in Qwen3's chat format with the real tokenizer: the SFT demonstrations, played through the
 * agent loop with the real sandbox, are the chat template's own rendering of the conversation (token for
 * token, up to the stated difference: thinking off puts an empty think block before every assistant turn,
 * the template keeps only the last, and ends with a newline after the last {@code <|im_end|>}); and a
 * whole {@link TrainingRun} (SFT, one GRPO step, evaluation) runs with a model at the full 151,936-row
 * vocabulary, printing the time of each phase.
 */
class ChatTrainingTest {
    static Path qwen3() {
        Path dir = Repository.root().resolve("third_party/qwen3-tokenizer");
        if (!Files.isRegularFile(dir.resolve("tokenizer.json")))
            throw new IllegalStateException(dir + "/tokenizer.json is missing: run scripts/fetch-qwen3-tokenizer.sh (scripts/setup.sh --test does)");
        return dir;
    }

    static Map<String, Object> msg(String role, String content) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("role", role);
        m.put("content", content);
        return m;
    }

    @Test
    void demonstrationsAreTheTemplatesRendering() throws Exception {
        try (ChatFormat chat = ChatFormat.qwen3(qwen3(), false); TrainingTask task = TrainingTask.create("arith", 3, 10, 2, chat)) {
            List<Problem> problems = task.train().subList(0, 3);
            Demonstrations.Rendered r = Demonstrations.render(task, chat.tokenizer(), problems, List.of(DemoStyle.TOOL, DemoStyle.HINT, DemoStyle.HAND), 2);
            assertEquals(3, r.demonstrations().size(), "dropped " + r.dropped());
            int[] empty = chat.tokenizer().encode("<think>\n\n</think>\n\n");
            int[] newline = chat.tokenizer().encode("\n");
            List<Map<String, Object>> tools = List.of(ChatFormat.schema("python", ai.arbor.tools.PythonTool.DESCRIPTION, ai.arbor.tools.PythonTool.PARAMETERS_SCHEMA));
            for (Demonstrations.Demonstration d : r.demonstrations()) {
                Problem p = d.problem();
                List<Map<String, Object>> conv = new ArrayList<>(List.of(msg("system", "Compute the value of the expression. Use the python tool, then give the result as \\boxed{value}."),
                        msg("user", p.question())));
                String answer = "\\boxed{" + p.answer() + "}";
                if (d.style() != DemoStyle.HAND) {
                    String code = p.plan().get(0).argument();
                    Map<String, Object> call = msg("assistant", d.style() == DemoStyle.HINT ? d.response().substring(0, d.response().indexOf("<tool_call>")).strip() : "");
                    call.put("tool_calls", List.of(Map.of("type", "function", "function", Map.of("name", "python", "arguments", Map.of("code", code)))));
                    conv.add(call);
                    conv.add(msg("tool", p.answer()));
                    if (d.style() == DemoStyle.HINT) answer = "We don't need to doubt the accuracy of python calculations.\n" + answer;
                }
                conv.add(msg("assistant", answer));
                int[] want = chat.tokenizer().encode(chat.render(conv, tools));
                Sequence s = d.sequence();
                // the demonstration's tokens without the empty think blocks of every assistant turn but the last, plus "\n"
                List<Integer> got = new ArrayList<>();
                List<Integer> at = new ArrayList<>();
                for (int i = 0; i + empty.length <= s.tokens().length; i++)
                    if (Arrays.equals(Arrays.copyOfRange(s.tokens(), i, i + empty.length), empty)) at.add(i);
                assertEquals(d.style() == DemoStyle.HAND ? 1 : 2, at.size(), d.style() + ": one empty think block per assistant turn");
                for (int i = 0; i < s.tokens().length; i++) {
                    if (at.size() == 2 && i == at.get(0)) {
                        i += empty.length - 1;
                        continue;
                    }
                    got.add(s.tokens()[i]);
                }
                for (int id : newline) got.add(id);
                assertArrayEquals(want, got.stream().mapToInt(Integer::intValue).toArray(), d.style() + " demonstration of " + p.question());
                // trained: the turns and their <|im_end|>; the prompt and tool turns are not
                int trainedEnds = 0;
                for (int i = 0; i < s.tokens().length; i++) if (s.mask()[i] && s.tokens()[i] == chat.tokenizer().eosId()) trainedEnds++;
                assertEquals(d.style() == DemoStyle.HAND ? 1 : 2, trainedEnds);
            }
        }
    }

    /**
     * {@code arith-small} in the chat format: no system prompt and no declared tool (the shortest prompt the template
     * renders), the {@code dd o d o dd} question, and every demonstration a plain tool call — token for token the
     * template's rendering of that conversation (the same two stated differences as above).
     */
    @Test
    void arithSmallDemonstrationsAreTheTemplatesRenderingWithoutSystemOrTools() throws Exception {
        try (ChatFormat chat = ChatFormat.qwen3(qwen3(), false); TrainingTask task = TrainingTask.create("arith-small", 3, 10, 2, chat)) {
            Problem first = task.train().get(0);
            assertEquals("<|im_start|>user\n" + first.question() + "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n", task.promptText(first));
            List<Problem> problems = task.train().subList(0, 4);
            Demonstrations.Rendered r = Demonstrations.render(task, chat.tokenizer(), problems, 7, 2);
            assertEquals(Map.of(DemoStyle.TOOL, 4), r.styles());
            int[] empty = chat.tokenizer().encode("<think>\n\n</think>\n\n");
            for (Demonstrations.Demonstration d : r.demonstrations()) {
                Problem p = d.problem();
                assertTrue(p.question().matches("[1-9][0-9][-+*][1-9][-+*][1-9][0-9]"), p.question());
                Map<String, Object> call = msg("assistant", "");
                call.put("tool_calls", List.of(Map.of("type", "function", "function", Map.of("name", "python", "arguments", Map.of("code", "print(" + p.question() + ")")))));
                List<Map<String, Object>> conv = List.of(msg("user", p.question()), call, msg("tool", p.answer()), msg("assistant", "\\boxed{" + p.answer() + "}"));
                int[] want = chat.tokenizer().encode(chat.render(conv, List.of()));
                int[] tokens = d.sequence().tokens();
                int at = -1;
                for (int i = 0; i + empty.length <= tokens.length && at < 0; i++)
                    if (Arrays.equals(Arrays.copyOfRange(tokens, i, i + empty.length), empty)) at = i;
                List<Integer> got = new ArrayList<>();
                for (int i = 0; i < tokens.length; i++) {
                    if (i == at) {
                        i += empty.length - 1;   // the first turn's empty think block, which the template drops from history
                        continue;
                    }
                    got.add(tokens[i]);
                }
                for (int id : chat.tokenizer().encode("\n")) got.add(id);
                assertArrayEquals(want, got.stream().mapToInt(Integer::intValue).toArray(), "demonstration of " + p.question());
            }
        }
    }

    @Test
    void aRunAtTheFullQwen3Vocabulary() throws Exception {
        Path out = Files.createTempDirectory("arbor-chat-run");
        TrainingRun.Options d = TrainingRun.Options.defaults();
        TrainingRun.Setup ds = d.setup();
        TrainingRun.Setup setup = new TrainingRun.Setup("arith", 5, 64, 8, ds.model(), null, 2048, 2, out, null, qwen3());
        TrainingRun.Options o = new TrainingRun.Options(Recipe.GRPO.withTrajectoriesPerPrompt(4), setup, TrainingRun.Sft.of(16, 2, 4, 3e-3, 1.0),
                new TrainingRun.Rl(1, 2, d.rl().budget(), 1, d.rl().oldLogprobs(), d.rl().optim()), new TrainingRun.Eval(2, 1, false, false));
        TrainingRun.Result r = TrainingRun.run(o, new TrainingRun.Listener() {});
        ObjectMapper json = new ObjectMapper();
        List<JsonNode> rows = new ArrayList<>();
        for (String line : Files.readAllLines(r.metrics())) rows.add(json.readTree(line));
        JsonNode rl = rows.stream().filter(x -> "rl".equals(x.path("phase").asText())).findFirst().orElseThrow();
        JsonNode sft = rows.stream().filter(x -> "sft".equals(x.path("phase").asText())).reduce((a, b) -> b).orElseThrow();
        System.out.printf("chat run at vocab 151936: SFT step %.2f s (%d tokens); RL step %.2f s = rollout %.2f s + train %.2f s; %d trajectories, %.1f response tokens%n",
                sft.path("seconds").asDouble(), sft.path("tokens").asInt(), rl.path("seconds").asDouble(), rl.path("rollout_seconds").asDouble(),
                rl.path("train_seconds").asDouble(), rl.path("trajectories").asInt(), rl.path("response_tokens").asDouble());
        assertTrue(rl.path("seconds").asDouble() > 0);
        String cfg = Files.readString(out.resolve("policy.safetensors"), java.nio.charset.StandardCharsets.ISO_8859_1);
        assertTrue(cfg.contains("151936"), "the checkpoint records the 151,936-row vocabulary");
        assertEquals(1, r.after().size());
    }
}
