package ai.arbor.rollout;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;

/**
 * Tool calls written as XML-like tags, one tag per tool: {@code <python>code</python>},
 * {@code <search>query</search>}. The turn stops at a closing tag; the text inside the last
 * {@code <tag>…</tag>} (stripped) is the call's argument.
 *
 * <ul>
 *   <li>{@link #arpo()} — ARPO / AEPO ({@code vllm_rollout_with_tools.py}): tags {@code python}, {@code search};
 *       observation {@code " <result>\n…\n</result>"}; answer {@code \boxed{}} or {@code <answer>}.</li>
 *   <li>{@link #searchR1()} — Search-R1 and Tree-GRPO ({@code generation.py}): tag {@code search};
 *       observation {@code "\n\n<information>…</information>\n\n"}; a bad call gets Search-R1's
 *       "My previous action is invalid…" text; answer {@code <answer>…</answer>}, which also stops the turn.</li>
 * </ul>
 */
public final class TagToolCallFormat implements ToolCallFormat {
    /** Search-R1's reply to an invalid action (generation.py, {@code execute_predictions}). */
    public static final String SEARCH_R1_INVALID = "\nMy previous action is invalid. If I want to search, I should put the query between "
            + "<search> and </search>. If I want to give the final answer, I should put the answer between <answer> and </answer>. "
            + "Let me try again.\n";

    private final String name;
    private final Map<String, String> tagToTool;
    private final List<String> stops;
    private final String observationTemplate;
    private final String errorTemplate;
    private final Predicate<String> answer;
    private final int maxArgumentChars;

    /**
     * @param name                format name
     * @param tagToTool           tag name → tool name (e.g. {@code python → python})
     * @param extraStops          stop strings besides the closing tags (e.g. {@code </answer>})
     * @param observationTemplate observation text with {@code {output}} where the tool output goes
     * @param errorTemplate       error text with {@code {error}} where the message goes
     * @param answer              what counts as a final answer
     * @param maxArgumentChars    longer arguments are a malformed call (protects tools from giant inputs)
     */
    public TagToolCallFormat(String name, Map<String, String> tagToTool, List<String> extraStops, String observationTemplate,
                             String errorTemplate, Predicate<String> answer, int maxArgumentChars) {
        if (tagToTool == null || tagToTool.isEmpty()) throw new IllegalArgumentException("tagToTool must not be empty");
        for (String tag : tagToTool.keySet())
            if (tag.isEmpty() || tag.contains("<") || tag.contains(">")) throw new IllegalArgumentException("invalid tag '" + tag + "'");
        if (observationTemplate == null || !observationTemplate.contains("{output}"))
            throw new IllegalArgumentException("observationTemplate must contain {output}, got " + observationTemplate);
        if (maxArgumentChars < 1) throw new IllegalArgumentException("maxArgumentChars must be >= 1, got " + maxArgumentChars);
        this.name = name;
        this.tagToTool = new LinkedHashMap<>(tagToTool);
        List<String> s = new ArrayList<>();
        for (String tag : tagToTool.keySet()) s.add("</" + tag + ">");
        if (extraStops != null) for (String e : extraStops) if (!s.contains(e)) s.add(e);
        this.stops = List.copyOf(s);
        this.observationTemplate = observationTemplate;
        this.errorTemplate = errorTemplate;
        this.answer = answer == null ? Answers.BOXED_OR_TAG : answer;
        this.maxArgumentChars = maxArgumentChars;
    }

    /** ARPO / AEPO: {@code <python>}, {@code <search>} → {@code " <result>\n…\n</result>"}. */
    public static TagToolCallFormat arpo() {
        Map<String, String> tags = new LinkedHashMap<>();
        tags.put("python", "python");
        tags.put("search", "search");
        return new TagToolCallFormat("arpo", tags, List.of(),
                " <result>\n{output}\n</result>", null, Answers.BOXED_OR_TAG, 1 << 20);
    }

    /** Search-R1 / Tree-GRPO: {@code <search>} → {@code "\n\n<information>…</information>\n\n"}. */
    public static TagToolCallFormat searchR1() {
        return new TagToolCallFormat("search-r1", Map.of("search", "search"), List.of("</answer>"),
                "\n\n<information>{output}</information>\n\n", SEARCH_R1_INVALID, Answers.ANSWER_TAG, 1 << 16);
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
        // The call that ended the turn: the closing tag that was the stop (or that ends the text).
        String tag = null;
        int best = Integer.MIN_VALUE;
        for (String t : tagToTool.keySet()) {
            String close = "</" + t + ">";
            if (!Delimited.endsAt(text, matchedStop, close)) continue;
            int at = text.lastIndexOf(close);
            if (tag == null || at > best) {
                best = at;
                tag = t;
            }
        }
        if (tag != null) {
            Delimited.Block block = Delimited.lastBlock(text, "<" + tag + ">", "</" + tag + ">");
            if (block.error() != null) return ParsedTurn.malformed(block.error());
            String args = block.body().strip();
            if (args.isEmpty()) return ParsedTurn.malformed("empty <" + tag + "> call");
            if (args.length() > maxArgumentChars) return ParsedTurn.malformed(Delimited.tooLong(args.length(), maxArgumentChars));
            return ParsedTurn.call(tagToTool.get(tag), args);
        }
        return answer.test(text) ? ParsedTurn.answer() : ParsedTurn.none();
    }

    @Override
    public String renderObservation(String turnText, String output) {
        return observationTemplate.replace("{output}", Delimited.body(output));
    }

    @Override
    public String renderError(String turnText, String message) {
        if (errorTemplate == null) return ToolCallFormat.super.renderError(turnText, message);
        return errorTemplate.replace("{error}", message == null ? "" : message);
    }

    @Override
    public String toString() {
        return "TagToolCallFormat[" + name + ", tags=" + tagToTool + "]";
    }
}
