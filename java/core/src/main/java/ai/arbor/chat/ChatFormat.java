package ai.arbor.chat;

import ai.arbor.rollout.HuggingFaceTokenizer;
import ai.arbor.rollout.JsonToolCallFormat;
import ai.arbor.rollout.ToolCallFormat;
import ai.arbor.tools.Tool;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A model's own conversation format for the agent loop: its tokenizer, its chat template, and the tool-call
 * format that continues the template token for token — Qwen3's ({@link JsonToolCallFormat#qwen3}). The
 * prompt is the template's rendering of the system and user messages with the tools declared and the
 * generation prompt open; from there the loop appends each generated turn (ending at {@code <|im_end|>})
 * and each tool turn as tokens, never re-tokenizing the history. Rendered after the fact, the same
 * conversation differs from those tokens only where the template rewrites history — see docs/chat.md
 * ("Token-in/token-out") and {@code ChatFormatTest}. Close it to free the tokenizer.
 */
public final class ChatFormat implements AutoCloseable {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final HuggingFaceTokenizer tokenizer;
    private final ChatTemplate template;
    private final boolean thinking;
    private final JsonToolCallFormat format;

    private ChatFormat(HuggingFaceTokenizer tokenizer, ChatTemplate template, boolean thinking) {
        this.tokenizer = tokenizer;
        this.template = template;
        this.thinking = thinking;
        this.format = JsonToolCallFormat.qwen3(thinking);
    }

    /**
     * The Qwen3 format of a tokenizer directory ({@code tokenizer.json} + {@code tokenizer_config.json}
     * with the chat template), e.g. {@code third_party/qwen3-tokenizer} or a checkpoint's directory.
     *
     * @param thinking the template's {@code enable_thinking}: false puts Qwen3's empty
     *                 {@code <think>\n\n</think>\n\n} after every generation prompt
     * @throws IllegalArgumentException when a file is missing, or the tokenizer lacks {@code <|im_end|>} as its EOS
     */
    public static ChatFormat qwen3(Path dir, boolean thinking) throws IOException {
        ChatTemplate template = ChatTemplate.load(dir);
        HuggingFaceTokenizer tok = HuggingFaceTokenizer.load(dir);
        if (tok.eosId() < 0 || tok.eosId() != tok.tokenId("<|im_end|>")) {
            tok.close();
            throw new IllegalArgumentException(dir + ": the Qwen3 chat format needs <|im_end|> as the tokenizer's EOS (eos_token of tokenizer_config.json)");
        }
        for (String t : List.of("<|im_start|>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"))
            if (tok.tokenId(t) < 0) {
                tok.close();
                throw new IllegalArgumentException(dir + ": the tokenizer has no " + t + " token; not a Qwen3 tokenizer");
            }
        return new ChatFormat(tok, template, thinking);
    }

    public HuggingFaceTokenizer tokenizer() {
        return tokenizer;
    }

    public ChatTemplate template() {
        return template;
    }

    public boolean thinking() {
        return thinking;
    }

    /** The agent loop's tool-call format: {@link JsonToolCallFormat#qwen3}. */
    public ToolCallFormat toolCallFormat() {
        return format;
    }

    /** The template's keyword arguments of every render: {@code enable_thinking}. */
    public Map<String, Object> kwargs() {
        return Map.of("enable_thinking", thinking);
    }

    /** The prompt text: {@code messages} (system, user) rendered with {@code tools} declared and the generation prompt open. */
    public String prompt(List<? extends Map<String, ?>> messages, List<? extends Map<String, ?>> tools) {
        return template.render(messages, tools, true, kwargs());
    }

    /** A conversation rendered as the template renders history (no generation prompt). */
    public String render(List<? extends Map<String, ?>> messages, List<? extends Map<String, ?>> tools) {
        return template.render(messages, tools, false, kwargs());
    }

    /** The function schemas of {@code tools}, as the template declares them: {@code {"type": "function", "function": {name, description, parameters}}}. */
    public static List<Map<String, Object>> schemas(List<? extends Tool> tools) {
        List<Map<String, Object>> out = new ArrayList<>();
        for (Tool t : tools) out.add(schema(t.name(), t.description(), t.parametersSchema()));
        return out;
    }

    /** One function schema; {@code parametersJson} is the JSON schema of the arguments object. */
    public static Map<String, Object> schema(String name, String description, String parametersJson) {
        Map<String, Object> fn = new LinkedHashMap<>();
        fn.put("name", name);
        fn.put("description", description);
        try {
            fn.put("parameters", JSON.readValue(parametersJson, new TypeReference<LinkedHashMap<String, Object>>() {}));
        } catch (IOException e) {
            throw new IllegalArgumentException("the parameters schema of tool " + name + " is not JSON: " + parametersJson, e);
        }
        Map<String, Object> s = new LinkedHashMap<>();
        s.put("type", "function");
        s.put("function", fn);
        return s;
    }

    /**
     * The text of a tool call as Qwen3 writes it and its template renders an assistant's {@code tool_calls}:
     * {@code <tool_call>\n{"name": "python", "arguments": {"code": "…"}}\n</tool_call>} (arguments by
     * Python's {@code json.dumps}).
     */
    public static String toolCall(String name, Map<String, ?> arguments) {
        return "<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": " + PyJson.dumps(arguments, null) + "}\n</tool_call>";
    }

    @Override
    public void close() {
        tokenizer.close();
    }
}
