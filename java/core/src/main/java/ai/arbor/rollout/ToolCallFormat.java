package ai.arbor.rollout;

import java.util.List;

/**
 * How a model writes tool calls and how observations are shown to it — pluggable per recipe:
 * <ul>
 *   <li>{@link MarkdownToolCallFormat#cort()}: CoRT / TIR, {@code ```python … ```} then {@code ```output … ```};</li>
 *   <li>{@link TagToolCallFormat#arpo()}: ARPO/AEPO, {@code <python>…</python>}, {@code <search>…</search>} → {@code <result>…</result>};</li>
 *   <li>{@link TagToolCallFormat#searchR1()}: Search-R1 / Tree-GRPO, {@code <search>…</search>} → {@code <information>…</information>};</li>
 *   <li>{@link JsonToolCallFormat#hermes()}: {@code <tool_call>{"name":…,"arguments":…}</tool_call>} → {@code <tool_response>…</tool_response>};</li>
 *   <li>{@link JsonToolCallFormat#qwen3(boolean)}: the same calls in Qwen3's chat turns, the turn ending at {@code <|im_end|>}.</li>
 * </ul>
 * A format never throws for anything a model writes: unreadable calls are {@link ParsedTurn.Kind#MALFORMED_CALL},
 * which the agent loop answers with {@link #renderError}.
 */
public interface ToolCallFormat {

    /** Short name (used by {@link #byName}). */
    String name();

    /** Stop strings that end a turn at a tool call (added to the sampling parameters). */
    List<String> stopStrings();

    /**
     * Reads one model turn.
     *
     * @param turnText    the decoded text of the turn's generated tokens
     * @param matchedStop the stop string the generation stopped at, or null (EOS, length, or a backend
     *                    that does not report it)
     */
    ParsedTurn parse(String turnText, String matchedStop);

    /**
     * Text appended after the turn to show a tool's output (the observation; masked from the loss).
     * Trailing line breaks of the output are dropped (the frame supplies its own).
     */
    String renderObservation(String turnText, String output);

    /** Text appended after a malformed call or a failed dispatch (unknown tool). */
    default String renderError(String turnText, String message) {
        return renderObservation(turnText, "Error: " + message);
    }

    /** Default notice appended after the last allowed tool call's observation (CoRT / TIR wording). */
    default String limitNotice() {
        return "\nReach max function call limit.";
    }

    /** The built-in formats by name: {@code cort}, {@code arpo}, {@code search-r1}, {@code hermes}, {@code chatml-json}, {@code qwen3}, {@code qwen3-no-think}. */
    static ToolCallFormat byName(String name) {
        return switch (name == null ? "" : name) {
            case "cort", "tir", "markdown" -> MarkdownToolCallFormat.cort();
            case "arpo", "aepo", "tags" -> TagToolCallFormat.arpo();
            case "search-r1", "searchr1", "tree-grpo" -> TagToolCallFormat.searchR1();
            case "hermes", "json" -> JsonToolCallFormat.hermes();
            case "chatml-json", "qwen" -> JsonToolCallFormat.chatMl();
            case "qwen3" -> JsonToolCallFormat.qwen3(true);
            case "qwen3-no-think" -> JsonToolCallFormat.qwen3(false);
            default -> throw new IllegalArgumentException("unknown tool-call format '" + name
                    + "' (known: cort, arpo, search-r1, hermes, chatml-json, qwen3, qwen3-no-think)");
        };
    }
}
