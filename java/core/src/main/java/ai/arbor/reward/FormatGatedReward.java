package ai.arbor.reward;

import java.util.List;
import java.util.Optional;
import java.util.function.Predicate;

/**
 * ARPO / AEPO's search-task reward (Dong et al. 2025; released code {@code verl/utils/reward_score/deep_research.py},
 * the {@code custom_reward_function} of both releases; docs/algorithms.md §5): a response whose format is invalid
 * scores −1; otherwise the F1 (release) or exact match of its answer against the gold answers, plus 0.1 when the
 * answer scores above 0 and the response used both tools (the release tests that {@code </search>} and
 * {@code </python>} both occur in it).
 * <pre>
 *   format invalid or no answer          −1
 *   answer scores s = F1 (or EM) = 0       0
 *   s &gt; 0                                s (+ 0.1 with both tools)
 * </pre>
 * The format check is a parameter: the release's ({@code validate_format}: paired {@code <think>}, one
 * {@code <answer>} holding a {@code \boxed{}}, every call closed and followed by its result) fits its prompt; a
 * task passes its own ({@code TrainingTask.wellFormed()}), as the built-in kb task writes neither {@code <think>}
 * nor a box. Release details not replicated: F1 0 when either side is yes / no / noanswer and they differ
 * (no built-in task has such answers).
 *
 * @param grader     extraction, F1 and exact match
 * @param format     the format check of the whole response (text with observations)
 * @param metric     F1 (release) or exact match
 * @param bothTools  the closing tags whose joint presence earns the bonus (release: {@code </search>}, {@code </python>})
 * @param bonus      the bonus (0.1)
 * @param invalid    the score of an invalid format (−1)
 */
public record FormatGatedReward(QaGrader grader, Predicate<String> format, Metric metric, List<String> bothTools, double bonus,
                                double invalid) implements RewardFunction {

    /** How a well-formed answer is scored. */
    public enum Metric {
        /** Token F1 (the release's {@code get_f1_score}). */
        F1,
        /** Exact match after normalization, 1 / 0. */
        EXACT_MATCH
    }

    public FormatGatedReward {
        if (grader == null || format == null || metric == null || bothTools == null)
            throw new IllegalArgumentException("grader, format, metric and bothTools are required");
        bothTools = List.copyOf(bothTools);
        if (!Double.isFinite(bonus) || !Double.isFinite(invalid))
            throw new IllegalArgumentException("bonus and invalid must be finite, got " + bonus + ", " + invalid);
    }

    /** The release's values with the given format check: F1, +0.1 for {@code </search>} and {@code </python>}, −1. */
    public static FormatGatedReward arpo(Predicate<String> format) {
        return new FormatGatedReward(QaGrader.standard(), format, Metric.F1, List.of("</search>", "</python>"), 0.1, -1);
    }

    /**
     * The release's format check ({@code deep_research.py::validate_format}): {@code <think>} and {@code </think>}
     * equally often and at least once; exactly one {@code <answer>} and one {@code </answer>}, in that order, with
     * {@code \boxed{…}} inside; every {@code <search>} / {@code <python>} followed by its closing tag, then a
     * {@code <result>}, then {@code </result>}, in that order.
     */
    public static boolean releaseFormat(String text) {
        int thinkOpen = count(text, "<think>"), thinkClose = count(text, "</think>");
        if (thinkOpen != thinkClose || thinkOpen == 0) return false;
        if (count(text, "<answer>") != 1 || count(text, "</answer>") != 1) return false;
        for (String tag : List.of("search", "python")) {
            int at = 0;
            while (true) {
                int open = text.indexOf("<" + tag + ">", at);
                if (open < 0) break;
                int result = text.indexOf("<result>", open), close = text.indexOf("</" + tag + ">", open);
                int resultEnd = result < 0 ? -1 : text.indexOf("</result>", result);
                if (result < 0 || close < 0 || resultEnd < 0) return false;
                if (!(open < close && close < result && result < resultEnd)) return false;
                at = resultEnd;
            }
        }
        int a = text.indexOf("<answer>"), b = text.indexOf("</answer>");
        if (a > b) return false;
        String inside = text.substring(a, b);
        return inside.contains("\\boxed{") && inside.contains("}");
    }

    /** The content of the last {@code \boxed{…}} of an answer (the release scores that), else the answer itself. */
    static String unboxed(String answer) {
        int at = answer.lastIndexOf("\\boxed{");
        if (at < 0) return answer;
        int depth = 0;
        for (int i = at + "\\boxed".length(); i < answer.length(); i++) {
            char c = answer.charAt(i);
            if (c == '{') depth++;
            else if (c == '}' && --depth == 0) return answer.substring(at + "\\boxed{".length(), i);
        }
        return answer;
    }

    private static int count(String s, String sub) {
        int n = 0;
        for (int i = s.indexOf(sub); i >= 0; i = s.indexOf(sub, i + sub.length())) n++;
        return n;
    }

    /** This reward scoring by {@code m}. */
    public FormatGatedReward withMetric(Metric m) {
        return new FormatGatedReward(grader, format, m, bothTools, bonus, invalid);
    }

    @Override
    public double reward(TrajectorySummary t, List<String> goldAnswers) {
        if (!format.test(t.text())) return invalid;
        Optional<String> found = grader.extract(t.text());
        if (found.isEmpty()) return invalid;   // the release: "cannot extract answer" → −1
        String answer = unboxed(found.get());
        double s = metric == Metric.F1 ? QaGrader.f1(answer, goldAnswers) : QaGrader.exactMatch(answer, goldAnswers) ? 1 : 0;
        if (s <= 0) return 0;
        boolean all = !bothTools.isEmpty();
        for (String tag : bothTools) all &= t.text().contains(tag);
        return all ? s + bonus : s;
    }
}
