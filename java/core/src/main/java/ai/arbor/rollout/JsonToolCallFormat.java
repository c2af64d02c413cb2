package ai.arbor.rollout;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.List;
import java.util.function.Predicate;

/**
 * JSON tool calls (Hermes / Qwen function calling):
 * {@code <tool_call>{"name": "python", "arguments": {"code": "…"}}</tool_call>}. The turn stops at
 * {@code </tool_call>}; the tool receives the serialized {@code arguments} object (a JSON string
 * argument is passed as its string value). The response is shown as
 * {@code <tool_response>…</tool_response>}, either inline ({@link #hermes()}) or as a ChatML user turn
 * ({@link #chatMl()}, as Qwen's chat template renders a tool message). A turn without a call is the
 * model's reply, i.e. the final answer.
 */
public final class JsonToolCallFormat implements ToolCallFormat {
    private static final ObjectMapper JSON = new ObjectMapper();
    static final String OPEN = "<tool_call>", CLOSE = "</tool_call>";

    private final String name;
    private final List<String> stops;
    private final String observationTemplate;
    private final Predicate<String> answer;
    private final int maxArgumentChars;

    /**
     * @param name                format name
     * @param observationTemplate observation text with {@code {output}} where the tool output goes
     * @param answer              what counts as a final answer (default: any non-blank turn)
     * @param maxArgumentChars    longer calls are malformed
     */
    public JsonToolCallFormat(String name, String observationTemplate, Predicate<String> answer, int maxArgumentChars) {
        this(name, List.of(CLOSE), observationTemplate, answer, maxArgumentChars);
    }

    /**
     * @param stops stop strings of a turn: {@code [</tool_call>]}, or none when the turn ends at the
     *              tokenizer's EOS (the model closes its own turn, {@link #qwen3})
     */
    public JsonToolCallFormat(String name, List<String> stops, String observationTemplate, Predicate<String> answer, int maxArgumentChars) {
        if (stops == null) throw new IllegalArgumentException("stops must not be null (empty: the turn ends at EOS)");
        this.stops = List.copyOf(stops);
        if (observationTemplate == null || !observationTemplate.contains("{output}"))
            throw new IllegalArgumentException("observationTemplate must contain {output}, got " + observationTemplate);
        if (maxArgumentChars < 1) throw new IllegalArgumentException("maxArgumentChars must be >= 1, got " + maxArgumentChars);
        this.name = name;
        this.observationTemplate = observationTemplate;
        this.answer = answer == null ? Answers.NON_BLANK : answer;
        this.maxArgumentChars = maxArgumentChars;
    }

    /** Inline: {@code "\n<tool_response>\n…\n</tool_response>\n"}. */
    public static JsonToolCallFormat hermes() {
        return new JsonToolCallFormat("hermes", "\n<tool_response>\n{output}\n</tool_response>\n", Answers.NON_BLANK, 1 << 20);
    }

    /** ChatML (Qwen2.5 template): the response is a user turn, then a new assistant turn opens. */
    public static JsonToolCallFormat chatMl() {
        return new JsonToolCallFormat("chatml-json",
                "<|im_end|>\n<|im_start|>user\n<tool_response>\n{output}\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
                Answers.NON_BLANK, 1 << 20);
    }

    /**
     * Qwen3's chat template (tokenizer_config.json of the Qwen3 models): the model ends every turn itself with
     * {@code <|im_end|>} (the tokenizer's EOS, so no stop string), a tool call being
     * {@code <tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>}; the observation is the template's tool
     * turn and the next generation prompt: {@code \n<|im_start|>user\n<tool_response>\n…\n</tool_response><|im_end|>\n<|im_start|>assistant\n},
     * followed by {@code <think>\n\n</think>\n\n} when thinking is off (what the template's generation prompt
     * adds for {@code enable_thinking=false}). ai.arbor.chat.ChatFormat pairs it with the template; docs/chat.md.
     */
    public static JsonToolCallFormat qwen3(boolean thinking) {
        return new JsonToolCallFormat(thinking ? "qwen3" : "qwen3-no-think", List.of(),
                "\n<|im_start|>user\n<tool_response>\n{output}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
                        + (thinking ? "" : "<think>\n\n</think>\n\n"), Answers.NON_BLANK, 1 << 20);
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public List<String> stopStrings() {
        return stops;
    }

    @Override
    public ParsedTurn parse(String text, String matchedStop) {
        if (text == null) text = "";
        if (!Delimited.endsAt(text, matchedStop, CLOSE)) {
            if (text.contains(OPEN)) return ParsedTurn.none();   // an unfinished call is not an answer
            return answer.test(text) ? ParsedTurn.answer() : ParsedTurn.none();
        }
        Delimited.Block block = Delimited.lastBlock(text, OPEN, CLOSE);
        if (block.error() != null) return ParsedTurn.malformed(block.error());
        String body = block.body().strip();
        if (body.isEmpty()) return ParsedTurn.malformed("empty " + OPEN + " call");
        if (body.length() > maxArgumentChars) return ParsedTurn.malformed(Delimited.tooLong(body.length(), maxArgumentChars));
        JsonNode call;
        try {
            call = JSON.readTree(body);
        } catch (JsonProcessingException e) {
            return ParsedTurn.malformed("the tool call is not valid JSON: " + firstLine(e.getOriginalMessage()));
        } catch (RuntimeException e) {
            return ParsedTurn.malformed("the tool call is not valid JSON: " + e.getClass().getSimpleName());
        }
        if (call == null || !call.isObject()) return ParsedTurn.malformed("the tool call must be a JSON object with \"name\" and \"arguments\"");
        JsonNode nameNode = call.get("name");
        if (nameNode == null || !nameNode.isTextual() || nameNode.asText().isBlank())
            return ParsedTurn.malformed("the tool call has no \"name\" string");
        JsonNode args = call.has("arguments") ? call.get("arguments") : call.get("parameters");
        String arguments;
        if (args == null || args.isNull()) arguments = "{}";
        else if (args.isObject()) arguments = args.toString();
        else if (args.isTextual()) arguments = args.asText();
        else return ParsedTurn.malformed("\"arguments\" must be an object, got " + args.getNodeType().name().toLowerCase());
        return ParsedTurn.call(nameNode.asText().strip(), arguments);
    }

    private static String firstLine(String s) {
        if (s == null) return "";
        int nl = s.indexOf('\n');
        String l = nl < 0 ? s : s.substring(0, nl);
        return l.length() > 200 ? l.substring(0, 200) + "…" : l;
    }

    @Override
    public String renderObservation(String turnText, String output) {
        return observationTemplate.replace("{output}", Delimited.body(output));
    }

    @Override
    public String toString() {
        return "JsonToolCallFormat[" + name + "]";
    }
}
