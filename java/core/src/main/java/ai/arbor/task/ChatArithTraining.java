package ai.arbor.task;

import ai.arbor.chat.ChatFormat;
import ai.arbor.kernels.SamplingParams;
import ai.arbor.reward.AnswerChecker;
import ai.arbor.rollout.AgentConfig;
import ai.arbor.rollout.Prompt;
import ai.arbor.rollout.Tokenizer;
import ai.arbor.rollout.ToolCallFormat;
import ai.arbor.rollout.ToolProvider;
import ai.arbor.tools.PythonTool;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;
import java.util.regex.Pattern;

/**
 * {@link ArithTraining} posed in a model's own chat format ({@link ChatFormat}, Qwen3): a system prompt and the
 * python tool declared through the chat template, the question as the user turn, tool calls as
 * {@code <tool_call>{"name": "python", "arguments": {"code": …}}</tool_call>}, results in the template's tool
 * turn, the answer {@code \boxed{…}}; every turn ends at {@code <|im_end|>}. The same sandbox, grader,
 * limits and demonstration mix as {@code arith}; the demonstrations say the same things in this format. A
 * solved response reads (thinking off)
 * <pre>{@code <tool_call>
 * {"name": "python", "arguments": {"code": "print(417*38-290)"}}
 * </tool_call><|im_end|>
 * <|im_start|>user
 * <tool_response>
 * 15556
 * </tool_response><|im_end|>
 * <|im_start|>assistant
 * <think>
 *
 * </think>
 *
 * \boxed{15556}<|im_end|>}</pre>
 */
final class ChatArithTraining implements TrainingTask {
    static final String SYSTEM = "Compute the value of the expression. Use the python tool, then give the result as \\boxed{value}.";
    private static final Pattern WELL_FORMED = Pattern.compile(
            "(?s)\\A(?:[^<]*<tool_call>\\n\\{.*?}\\n</tool_call>\\s*(?:user\\s*)?<tool_response>\\n.*?\\n</tool_response>\\s*(?:assistant\\s*)?(?:<think>\\s*</think>\\s*)?)*[^<]*\\\\boxed\\{[^}]+}\\s*\\z");

    private final ArithTraining base;
    private final ChatFormat chat;
    private final String system;
    private final List<Map<String, Object>> tools;

    ChatArithTraining(ArithTraining base, ChatFormat chat) {
        this(base, chat, SYSTEM, List.of(ChatFormat.schema("python", PythonTool.DESCRIPTION, PythonTool.PARAMETERS_SCHEMA)));
    }

    /**
     * {@code arith-small} in the chat format: the user turn alone, without a system message and without declaring the
     * tool, so the prompt is the template's shortest (22 Qwen3 tokens instead of 239). A random model learns to copy
     * the question into its program from that short a context in far fewer demonstrations (docs/models.md); it
     * learns the python tool from the demonstrations, not from a schema.
     */
    static ChatArithTraining small(ArithTraining base, ChatFormat chat) {
        return new ChatArithTraining(base, chat, null, List.of());
    }

    /** With this system prompt (null: none) and these declared tools (empty: none declared). */
    ChatArithTraining(ArithTraining base, ChatFormat chat, String system, List<Map<String, Object>> tools) {
        this.base = base;
        this.chat = chat;
        this.system = system;
        this.tools = List.copyOf(tools);
    }

    @Override
    public String name() {
        return base.name();
    }

    @Override
    public List<Problem> train() {
        return base.train();
    }

    @Override
    public List<Problem> heldOut() {
        return base.heldOut();
    }

    /** The system and user messages of {@code p}. */
    List<Map<String, Object>> messages(Problem p) {
        List<Map<String, Object>> m = new ArrayList<>();
        if (system != null) m.add(message("system", system));
        m.add(message("user", p.question()));
        return m;
    }

    static Map<String, Object> message(String role, String content) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("role", role);
        m.put("content", content);
        return m;
    }

    /** The chat template's rendering of the system prompt, the tools and the question, generation prompt open. */
    @Override
    public String promptText(Problem p) {
        return chat.prompt(messages(p), tools);
    }

    /** Encoded by the chat format's tokenizer, which must be the one the run uses. */
    @Override
    public Prompt prompt(Problem p, Tokenizer tokenizer) {
        if (tokenizer != chat.tokenizer())
            throw new IllegalArgumentException("the chat-format task encodes with its own tokenizer; the run passed another one (" + tokenizer + ")");
        return Prompt.of(p.id(), promptText(p), tokenizer, Map.of("answers", p.answers()));
    }

    @Override
    public ToolCallFormat format() {
        return chat.toolCallFormat();
    }

    @Override
    public ToolProvider tools() {
        return base.tools();
    }

    @Override
    public AnswerChecker checker() {
        return base.checker();
    }

    @Override
    public boolean questionAnswering() {
        return false;
    }

    /** arith's limits (JSON calls are longer in characters but, in Qwen3's tokens, about as long as the tag format's in characters). */
    @Override
    public AgentConfig agentConfig(SamplingParams sampling) {
        return base.agentConfig(sampling);
    }

    @Override
    public Map<DemoStyle, Double> demoMix() {
        return base.demoMix();
    }

    @Override
    public DemoScript demonstration(Problem p, DemoStyle style) {
        String call = ChatFormat.toolCall("python", Map.of("code", p.plan().get(0).argument()));
        return switch (style) {
            case TOOL -> (turn, so) -> turn == 0 ? call : answerFromResult(so, p);
            case HINT -> (turn, so) -> {
                if (turn == 0) return ArithTraining.firstProduct(p.question()) + " " + ArithTraining.HINT_CODE + "\n" + call;
                String a = answerFromResult(so, p);
                return a == null ? null : ArithTraining.HINT_TRUST + "\n" + a;
            };
            case HAND -> (turn, so) -> "\\boxed{" + p.answer() + "}";
            case PARTIAL -> throw new IllegalArgumentException("arith has no PARTIAL demonstrations (one program solves it)");
        };
    }

    /** {@code \boxed{output}} when the last tool response holds exactly the gold answer, else null. */
    private static String answerFromResult(String so, Problem p) {
        int open = so.lastIndexOf("<tool_response>\n");
        int close = so.lastIndexOf("\n</tool_response>");
        if (open < 0 || close <= open) return null;
        String out = so.substring(open + "<tool_response>\n".length(), close).strip();
        return out.equals(p.answer()) ? "\\boxed{" + out + "}" : null;
    }

    /** Calls in this format, each followed by its response, then the boxed answer (special tokens are decoded away). */
    @Override
    public Predicate<String> wellFormed() {
        return WELL_FORMED.asPredicate();
    }

    @Override
    public void close() {
        base.close();
    }
}
