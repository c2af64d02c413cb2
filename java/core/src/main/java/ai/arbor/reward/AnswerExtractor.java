package ai.arbor.reward;

import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Finds the final answer in a response. Looks, in this order, for the last {@code \boxed{…}} or
 * {@code \fbox{…}} (braces balanced, escaped {@code \{ \}} ignored), then the last complete
 * {@code <answer>…</answer>}, then (option) the last "final answer is …" phrase. When the response contains
 * {@code </think>}, only the text after the last one is searched (the reasoning of R1-style models boxes
 * intermediate results); {@link #requireThinkEnd()} makes a response without {@code </think>} answerless,
 * as CoRT's released reward does ({@code deepscaler/rewards/math_reward_hybrid.py}).
 *
 * <p>Edge cases: {@code \boxed 5} (no braces) gives the text up to the next space or {@code $}, as in the
 * MATH reference code ({@code last_boxed_only_string}); a last box whose braces never close (a truncated
 * response) gives no answer rather than an earlier box; an empty box gives no answer. Never throws.
 *
 * @param boxed             look for {@code \boxed{}} / {@code \fbox{}}
 * @param answerTag         look for {@code <answer>…</answer>}
 * @param finalAnswerPhrase fall back to "final answer is X"
 * @param requireThinkEnd   no answer unless {@code </think>} occurs
 */
public record AnswerExtractor(boolean boxed, boolean answerTag, boolean finalAnswerPhrase, boolean requireThinkEnd) {

    /** Math default: boxed, then {@code <answer>} tags. */
    public static final AnswerExtractor MATH = new AnswerExtractor(true, true, false, false);
    /** QA default (Search-R1, Tree-GRPO): {@code <answer>} tags only. */
    public static final AnswerExtractor QA = new AnswerExtractor(false, true, false, false);

    /** Where an answer was found. */
    public enum Source { BOXED, ANSWER_TAG, FINAL_ANSWER_PHRASE }

    /** An extracted answer (trimmed, non-empty) and where it was found. */
    public record Extraction(String answer, Source source) {
    }

    private static final Pattern FINAL_ANSWER = Pattern.compile("(?i)final answer(?: is)?\\s*[:：]?\\s*");

    public AnswerExtractor withFinalAnswerPhrase(boolean on) {
        return new AnswerExtractor(boxed, answerTag, on, requireThinkEnd);
    }

    public AnswerExtractor withRequireThinkEnd(boolean on) {
        return new AnswerExtractor(boxed, answerTag, finalAnswerPhrase, on);
    }

    /** The final answer, or empty when none is found. {@code null} text has none. */
    public Optional<Extraction> extract(String text) {
        if (text == null) return Optional.empty();
        int think = text.lastIndexOf("</think>");
        if (think >= 0) text = text.substring(think + "</think>".length());
        else if (requireThinkEnd) return Optional.empty();
        if (boxed) {
            Optional<String> b = lastBoxed(text);
            if (b.isPresent()) return Optional.of(new Extraction(b.get(), Source.BOXED));
            if (lastBoxedStart(text) >= 0) return Optional.empty(); // a truncated last box: no answer
        }
        if (answerTag) {
            Optional<String> a = lastAnswerTag(text);
            if (a.isPresent()) return Optional.of(new Extraction(a.get(), Source.ANSWER_TAG));
        }
        if (finalAnswerPhrase) {
            Optional<String> f = finalAnswerPhrase(text);
            if (f.isPresent()) return Optional.of(new Extraction(f.get(), Source.FINAL_ANSWER_PHRASE));
        }
        return Optional.empty();
    }

    /** Index of the backslash of the last {@code \boxed} / {@code \fbox} command, or -1. */
    private static int lastBoxedStart(String s) {
        int best = -1;
        for (String cmd : new String[]{"\\boxed", "\\fbox"}) {
            int from = s.length();
            while (from >= 0) {
                int i = s.lastIndexOf(cmd, from);
                if (i < 0) break;
                int end = i + cmd.length();
                if (end >= s.length() || !Tok.isAsciiLetter(s.charAt(end))) {
                    best = Math.max(best, i);
                    break;
                }
                from = i - 1;
            }
        }
        return best;
    }

    /** Content of the last {@code \boxed{…}} / {@code \fbox{…}}; empty if none, unbalanced, or blank. */
    public static Optional<String> lastBoxed(String s) {
        if (s == null) return Optional.empty();
        int start = lastBoxedStart(s);
        if (start < 0) return Optional.empty();
        int i = start + (s.startsWith("\\boxed", start) ? 6 : 5);
        int n = s.length();
        int j = i;
        while (j < n && Character.isWhitespace(s.charAt(j))) j++;
        if (j < n && s.charAt(j) == '{') {
            int depth = 0;
            for (int k = j; k < n; k++) {
                char c = s.charAt(k);
                if (c == '\\') {
                    k++; // \{ and \} do not count
                } else if (c == '{') {
                    depth++;
                } else if (c == '}' && --depth == 0) {
                    return nonBlank(s.substring(j + 1, k));
                }
            }
            return Optional.empty();
        }
        if (j == i && j < n && !Character.isDigit(s.charAt(j))) return Optional.empty(); // \boxed( etc.
        int k = j;
        while (k < n && !Character.isWhitespace(s.charAt(k)) && s.charAt(k) != '$') k++;
        return nonBlank(s.substring(j, k));
    }

    /** Content of the last complete {@code <answer>…</answer>}. */
    public static Optional<String> lastAnswerTag(String s) {
        if (s == null) return Optional.empty();
        int close = s.lastIndexOf("</answer>");
        while (close >= 0) {
            int open = s.lastIndexOf("<answer>", close);
            if (open >= 0) return nonBlank(s.substring(open + "<answer>".length(), close));
            close = s.lastIndexOf("</answer>", close - 1);
        }
        return Optional.empty();
    }

    /** The text after the last "final answer is": a {@code $…$} span, or the rest of the line. */
    public static Optional<String> finalAnswerPhrase(String s) {
        if (s == null) return Optional.empty();
        Matcher m = FINAL_ANSWER.matcher(s);
        int start = -1;
        while (m.find()) start = m.end();
        if (start < 0) return Optional.empty();
        String rest = s.substring(start);
        if (rest.startsWith("$")) {
            boolean dbl = rest.startsWith("$$");
            int open = dbl ? 2 : 1;
            int close = rest.indexOf(dbl ? "$$" : "$", open);
            if (close > open) return nonBlank(rest.substring(open, close));
        }
        int eol = rest.indexOf('\n');
        String line = eol < 0 ? rest : rest.substring(0, eol);
        line = line.strip();
        while (line.endsWith(".") || line.endsWith("$")) line = line.substring(0, line.length() - 1).strip();
        return nonBlank(line);
    }

    private static Optional<String> nonBlank(String s) {
        String t = s.strip();
        return t.isEmpty() ? Optional.empty() : Optional.of(t);
    }
}
