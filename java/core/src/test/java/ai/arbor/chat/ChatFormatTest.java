package ai.arbor.chat;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.rollout.AgentConfig;
import ai.arbor.rollout.AgentLoop;
import ai.arbor.rollout.Prompt;
import ai.arbor.rollout.ScriptedGenerator;
import ai.arbor.rollout.Termination;
import ai.arbor.rollout.ToolProvider;
import ai.arbor.rollout.Trajectory;
import ai.arbor.tools.Observation;
import ai.arbor.tools.Tool;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * Token-in/token-out in Qwen3's own format: the agent loop (prompt from the template, generated turns ending
 * at {@code <|im_end|>}, tool turns appended as tokens) produces exactly the token ids of the chat template's
 * rendering of the same conversation, tokenized whole — apart from the template's own rewriting of history,
 * asserted here to the token: the newline after the last {@code <|im_end|>} (the loop stops at EOS), and,
 * with thinking off, the empty {@code <think>\n\n</think>\n\n} the generation prompt put before every turn,
 * which the template keeps only on the last assistant turn.
 */
class ChatFormatTest {
    static final String CODE = "print(417*38-290)";

    /** A python stand-in: answers the one program of the script (the real sandbox is exercised elsewhere). */
    static final Tool PYTHON = new Tool() {
        public String name() {
            return "python";
        }

        public String description() {
            return "Runs Python code and returns what it prints.";
        }

        public String parametersSchema() {
            return ai.arbor.tools.PythonTool.PARAMETERS_SCHEMA;
        }

        public Observation call(String arguments) {
            return arguments.contains(CODE.replace("\"", "\\\"")) ? Observation.ok("15556\n", null) : Observation.failure("NameError\n", null);
        }
    };

    static Map<String, Object> msg(String role, String content) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("role", role);
        m.put("content", content);
        return m;
    }

    int[] loopTokens(ChatFormat chat, List<Map<String, Object>> promptMessages, List<String> turns) {
        assertEquals(-1, chat.tokenizer().bosId(), "Qwen3 has no BOS (bos_token: null)");
        Prompt prompt = Prompt.of("p", chat.prompt(promptMessages, ChatFormat.schemas(List.of(PYTHON))), chat.tokenizer(), Map.of());
        AtomicInteger turn = new AtomicInteger();
        ScriptedGenerator gen = new ScriptedGenerator(chat.tokenizer(), (ctx, rnd) -> ScriptedGenerator.Turn.of(turns.get(turn.getAndIncrement())));
        ExecutorService pool = Executors.newSingleThreadExecutor();
        try {
            AgentLoop loop = AgentLoop.builder().generator(gen).tokenizer(chat.tokenizer()).format(chat.toolCallFormat())
                    .tools(ToolProvider.shared(PYTHON)).config(AgentConfig.builder().maxNewTokens(200).build()).toolExecutor(pool).build();
            Trajectory t = loop.run(prompt, 1).join();
            assertEquals(Termination.ANSWER, t.termination());
            assertEquals(1, t.toolCalls().size());
            assertEquals("15556\n", t.toolCalls().get(0).output());
            // what is trained: the turns themselves, each with its closing <|im_end|>; the tool turns are masked
            List<Integer> trained = new ArrayList<>();
            for (int i = 0; i < t.tokens().length; i++) if (t.lossMask()[i]) trained.add(t.tokens()[i]);
            int imEnd = chat.tokenizer().eosId();
            assertEquals(2, trained.stream().filter(x -> x == imEnd).count(), "each of the two turns ends with <|im_end|> and is trained on it");
            int[] all = Arrays.copyOf(prompt.tokens(), prompt.tokens().length + t.tokens().length);
            System.arraycopy(t.tokens(), 0, all, prompt.tokens().length, t.tokens().length);
            return all;
        } finally {
            pool.shutdownNow();
        }
    }

    static List<Map<String, Object>> conversation(List<Map<String, Object>> prompt, String reasoning1, String reasoning2) {
        List<Map<String, Object>> c = new ArrayList<>(prompt);
        Map<String, Object> call = msg("assistant", "");
        if (reasoning1 != null) call.put("reasoning_content", reasoning1);
        call.put("tool_calls", List.of(Map.of("type", "function", "function", Map.of("name", "python", "arguments", Map.of("code", CODE)))));
        c.add(call);
        c.add(msg("tool", "15556"));
        Map<String, Object> answer = msg("assistant", "\\boxed{15556}");
        if (reasoning2 != null) answer.put("reasoning_content", reasoning2);
        c.add(answer);
        return c;
    }

    static int[] concat(int[] a, int[] b) {
        int[] out = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }

    @Test
    void thinkingLoopTokensEqualTheRenderedConversation() throws Exception {
        try (ChatFormat chat = ChatFormat.qwen3(ChatTemplateTest.qwen3(), true)) {
            List<Map<String, Object>> prompt = List.of(msg("system", "Solve it with the python tool."), msg("user", "417*38-290"));
            String call = ChatFormat.toolCall("python", Map.of("code", CODE));
            int[] loop = loopTokens(chat, prompt, List.of("<think>\nI will run it.\n</think>\n\n" + call, "<think>\nIt printed 15556.\n</think>\n\n\\boxed{15556}"));
            String rendered = chat.render(conversation(prompt, "I will run it.", "It printed 15556."), ChatFormat.schemas(List.of(PYTHON)));
            // the only difference: the template ends the last turn with "<|im_end|>\n", the loop stops at <|im_end|>
            assertArrayEquals(chat.tokenizer().encode(rendered), concat(loop, chat.tokenizer().encode("\n")));
        }
    }

    @Test
    void noThinkingLoopTokensDifferOnlyByTheEarlierEmptyThinkBlocks() throws Exception {
        try (ChatFormat chat = ChatFormat.qwen3(ChatTemplateTest.qwen3(), false)) {
            List<Map<String, Object>> prompt = List.of(msg("user", "417*38-290"));
            int[] loop = loopTokens(chat, prompt, List.of(ChatFormat.toolCall("python", Map.of("code", CODE)), "\\boxed{15556}"));
            int[] rendered = chat.tokenizer().encode(chat.render(conversation(prompt, null, null), ChatFormat.schemas(List.of(PYTHON))));
            int[] empty = chat.tokenizer().encode("<think>\n\n</think>\n\n");
            assertArrayEquals(new int[] {151667, 271, 151668, 271}, empty);
            // the loop's sequence with the empty think block of every assistant turn but the last removed, plus the final "\n"
            List<Integer> kept = new ArrayList<>();
            int blocks = 0;
            List<Integer> starts = new ArrayList<>();
            for (int i = 0; i + empty.length <= loop.length; i++)
                if (Arrays.equals(Arrays.copyOfRange(loop, i, i + empty.length), empty)) starts.add(i);
            assertEquals(2, starts.size(), "one empty think block per assistant turn");
            for (int i = 0; i < loop.length; i++) {
                if (i == starts.get(0)) {
                    i += empty.length - 1;
                    blocks++;
                    continue;
                }
                kept.add(loop[i]);
            }
            assertEquals(1, blocks);
            int[] expected = concat(kept.stream().mapToInt(Integer::intValue).toArray(), chat.tokenizer().encode("\n"));
            assertArrayEquals(rendered, expected);
        }
    }
}
