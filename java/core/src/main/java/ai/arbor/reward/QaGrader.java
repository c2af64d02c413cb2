package ai.arbor.reward;

import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * Question-answering correctness as in SQuAD's official evaluation script and Search-R1 / Tree-GRPO
 * ({@code verl/utils/reward_score/qa_em.py}): exact match after normalization (lower case, ASCII punctuation
 * removed, the articles a/an/the removed, whitespace collapsed) against any of several gold answers, and
 * token F1 (the maximum over the gold answers).
 *
 * <p>F1 = 2·P·R / (P + R) with P = |common| / |prediction tokens|, R = |common| / |gold tokens|, common
 * counted as a multiset intersection; 0 when nothing is in common. When either side normalizes to no
 * tokens, F1 is 1 if both do and 0 otherwise (SQuAD 2.0's rule; 1.1 gives 0). Immutable, thread-safe.
 */
public final class QaGrader implements AnswerChecker {
    /** Python's {@code string.punctuation}. */
    private static final String PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
    private static final Pattern ARTICLES = Pattern.compile("\\b(a|an|the)\\b", Pattern.UNICODE_CHARACTER_CLASS);
    private static final Pattern SPACES = Pattern.compile("\\s+", Pattern.UNICODE_CHARACTER_CLASS);

    private final AnswerExtractor extractor;

    /** @param extractor how the answer is found in a response (Search-R1: {@link AnswerExtractor#QA}) */
    public QaGrader(AnswerExtractor extractor) {
        if (extractor == null) throw new IllegalArgumentException("extractor must not be null");
        this.extractor = extractor;
    }

    /** {@code <answer>…</answer>} extraction. */
    public static QaGrader standard() {
        return new QaGrader(AnswerExtractor.QA);
    }

    public AnswerExtractor extractor() {
        return extractor;
    }

    /** SQuAD's {@code normalize_answer}: lower, remove punctuation, remove articles, fix whitespace. */
    public static String normalize(String s) {
        if (s == null) throw new IllegalArgumentException("text must not be null");
        String lower = s.toLowerCase(Locale.ROOT);
        StringBuilder b = new StringBuilder(lower.length());
        for (int i = 0; i < lower.length(); i++) {
            char c = lower.charAt(i);
            if (PUNCTUATION.indexOf(c) < 0) b.append(c);
        }
        String noArticles = ARTICLES.matcher(b).replaceAll(" ");
        return String.join(" ", tokens(noArticles));
    }

    private static List<String> tokens(String s) {
        String t = s.strip();
        return t.isEmpty() ? List.of() : List.of(SPACES.split(t));
    }

    /** Exact match of the normalized prediction with any normalized gold answer. */
    public static boolean exactMatch(String prediction, List<String> goldAnswers) {
        checkGold(goldAnswers);
        String p = normalize(prediction);
        for (String g : goldAnswers) if (normalize(g).equals(p)) return true;
        return false;
    }

    /** Token F1 between a prediction and one gold answer. */
    public static double f1(String prediction, String goldAnswer) {
        List<String> p = tokens(normalize(prediction));
        List<String> g = tokens(normalize(goldAnswer));
        if (p.isEmpty() || g.isEmpty()) return p.isEmpty() && g.isEmpty() ? 1 : 0;
        Map<String, Integer> counts = new HashMap<>();
        for (String t : g) counts.merge(t, 1, Integer::sum);
        int common = 0;
        for (String t : p) {
            Integer c = counts.get(t);
            if (c != null && c > 0) {
                common++;
                counts.put(t, c - 1);
            }
        }
        if (common == 0) return 0;
        double precision = (double) common / p.size();
        double recall = (double) common / g.size();
        return 2 * precision * recall / (precision + recall);
    }

    /** The best F1 over the gold answers. */
    public static double f1(String prediction, List<String> goldAnswers) {
        checkGold(goldAnswers);
        double best = 0;
        for (String g : goldAnswers) best = Math.max(best, f1(prediction, g));
        return best;
    }

    /** The answer in a response, or empty. */
    public Optional<String> extract(String response) {
        return extractor.extract(response).map(AnswerExtractor.Extraction::answer);
    }

    /** Exact match of the response's extracted answer; false when there is none. */
    @Override
    public boolean isCorrect(String response, List<String> goldAnswers) {
        checkGold(goldAnswers);
        Optional<String> a = extract(response);
        return a.isPresent() && exactMatch(a.get(), goldAnswers);
    }

    /** F1 of the response's extracted answer; 0 when there is none. */
    public double f1Response(String response, List<String> goldAnswers) {
        checkGold(goldAnswers);
        Optional<String> a = extract(response);
        return a.isPresent() ? f1(a.get(), goldAnswers) : 0;
    }

    private static void checkGold(List<String> golds) {
        if (golds == null || golds.isEmpty()) throw new IllegalArgumentException("gold answers must be a non-empty list, got " + golds);
        for (String g : golds) if (g == null) throw new IllegalArgumentException("gold answers must not contain null");
    }
}
