package ai.arbor.reward;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.function.UnaryOperator;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The grader over every gold answer of the math benchmarks (600 rows): each equals itself boxed in a
 * response and each applicable rewritten form; and it differs from the gold answers of other problems
 * that have a different value (seeded sample of pairs). Counts are printed.
 */
class MathGraderDatasetTest {
    static List<MathData.Row> rows;
    static final MathGrader GRADER = MathGrader.standard();

    @BeforeAll
    static void load() throws IOException {
        rows = MathData.rows();
    }

    /** Rewrites of a gold answer that keep its value; each returns null where it does not apply. */
    static final Map<String, UnaryOperator<String>> REWRITES = new LinkedHashMap<>();

    static {
        REWRITES.put("leading zeros stripped (025 -> 25)", g -> g.matches("0\\d+") ? g.replaceFirst("^0+", "") : null);
        REWRITES.put("trailing .0 dropped (27.0 -> 27)", g -> g.matches("-?\\d+\\.0+") ? g.replaceFirst("\\.0+$", "") : null);
        REWRITES.put("integer as decimal (27 -> 27.0)", g -> g.matches("-?\\d+") ? g + ".0" : null);
        REWRITES.put("leading zeros added (25 -> 025)", g -> g.matches("\\d{1,2}") ? "0" + g : null);
        REWRITES.put("\\frac -> \\dfrac", g -> g.contains("\\frac") ? g.replace("\\frac", "\\dfrac") : null);
        REWRITES.put("\\dfrac -> \\frac", g -> g.contains("\\dfrac") ? g.replace("\\dfrac", "\\frac") : null);
        REWRITES.put("\\frac{a}{b} -> a/b", g -> {
            Matcher m = Pattern.compile("(-?)\\\\frac\\{(\\d+)\\}\\{(\\d+)\\}").matcher(g);
            return m.matches() ? m.group(1) + m.group(2) + "/" + m.group(3) : null;
        });
        REWRITES.put("\\frac{a}{b} -> decimal", g -> {
            Matcher m = Pattern.compile("(-?)\\\\frac\\{(\\d+)\\}\\{(\\d+)\\}").matcher(g);
            if (!m.matches()) return null;
            try {
                BigDecimal d = new BigDecimal(m.group(2)).divide(new BigDecimal(m.group(3)));
                return m.group(1) + d.toPlainString();
            } catch (ArithmeticException nonTerminating) {
                return null;
            }
        });
        REWRITES.put("spaces after commas added", g -> g.contains(",") && !g.contains(", ") ? g.replace(",", ", ") : null);
        REWRITES.put("spaces removed", g -> g.contains(" ") ? g.replace(" ", "") : null);
        REWRITES.put("\\left/\\right removed", g -> g.contains("\\left") ? g.replace("\\left", "").replace("\\right", "") : null);
        REWRITES.put("^\\circ removed", g -> g.contains("^\\circ") ? g.replace("^\\circ", "") : null);
        REWRITES.put("^\\circ braced", g -> g.contains("^\\circ") ? g.replace("^\\circ", "^{\\circ}") : null);
        REWRITES.put("\\text{unit} removed", g -> {
            String r = g.replaceAll("\\s*\\\\(text|mbox)\\{\\s*[a-z ]+\\}(\\^\\d)?$", "");
            return r.equals(g) || r.isBlank() ? null : r;
        });
        REWRITES.put("\\text{X} unwrapped", g -> g.matches("\\\\text\\{[^}]*\\}") ? g.substring(6, g.length() - 1) : null);
        REWRITES.put("in dollars", g -> g.matches("\\d+") ? "\\$" + g : null);
        REWRITES.put("in $...$", g -> "$" + g + "$");
        REWRITES.put("\\sqrt{d} -> \\sqrt d", g -> g.matches(".*\\\\sqrt\\{\\d\\}.*") ? g.replaceAll("\\\\sqrt\\{(\\d)\\}", "\\\\sqrt $1") : null);
        REWRITES.put("\\sqrt d -> \\sqrt{d}", g -> g.matches(".*\\\\sqrt\\d.*") ? g.replaceAll("\\\\sqrt(\\d)", "\\\\sqrt{$1}") : null);
        REWRITES.put("bare list reversed", g -> {
            if (!g.contains(",") || g.matches(".*[\\[\\](){}].*") || g.contains("\\!") || g.matches("\\d{1,3}(,\\d{3})+")) return null;
            String[] parts = g.split(",");
            StringBuilder b = new StringBuilder();
            for (int i = parts.length - 1; i >= 0; i--) b.append(parts[i].trim()).append(i > 0 ? ", " : "");
            return b.toString();
        });
        REWRITES.put("thousands separator removed", g -> g.matches("[\\\\$]*\\d{1,3}(,(\\\\!)? ?\\d{3})+") ? g.replaceAll("[,\\\\! $]", "") : null);
        REWRITES.put("x = value", g -> g.matches("-?\\d+") ? "x = " + g : null);
        REWRITES.put("percentless .5 -> 0.5", g -> g.matches("\\.\\d+") ? "0" + g : null);
        REWRITES.put("\\pi moved to the front", g -> {
            Matcher m = Pattern.compile("(\\d+)\\s*\\\\pi").matcher(g);
            return m.matches() ? "\\pi \\cdot " + m.group(1) : null;
        });
        REWRITES.put("(C) -> C", g -> {
            Matcher m = Pattern.compile("\\\\text\\{\\(([A-E])\\)\\}").matcher(g);
            return m.matches() ? m.group(1) : null;
        });
        REWRITES.put("polynomial terms reversed", g -> {
            if (!g.matches("[-+ 0-9a-z^{}]+") || !g.matches(".*[a-z].*") || !g.contains("+") && !g.contains(" - ")) return null;
            List<String> terms = new ArrayList<>();
            Matcher m = Pattern.compile("([-+]?)\\s*([^-+\\s][^-+]*)").matcher(g.trim());
            while (m.find()) terms.add((m.group(1).isEmpty() ? "+" : m.group(1)) + m.group(2).trim());
            if (terms.size() < 2) return null;
            StringBuilder b = new StringBuilder();
            for (int i = terms.size() - 1; i >= 0; i--) b.append(terms.get(i));
            String r = b.toString();
            return r.startsWith("+") ? r.substring(1) : r;
        });
    }

    @Test
    void everyGoldEqualsItselfBoxedInAResponse() {
        Map<Verdict.Rule, Integer> rules = new EnumMap<>(Verdict.Rule.class);
        List<String> failures = new ArrayList<>();
        for (MathData.Row r : rows) {
            String response = "Let me think.</think> Computing carefully, the answer is $\\boxed{" + r.gold() + "}$.";
            Verdict v = GRADER.gradeResponse(response, r.gold());
            rules.merge(v.rule(), 1, Integer::sum);
            if (!v.isEqual()) failures.add(r.source() + "#" + r.index() + " " + r.gold() + " -> " + v);
            Verdict plain = GRADER.grade(r.gold(), r.gold());
            if (!plain.isEqual()) failures.add("plain " + r.gold() + " -> " + plain);
        }
        System.out.printf("[rewards] self-grading: %d rows, %d equal, rules %s%n", rows.size(), rows.size() - failures.size(), rules);
        assertEquals(600, rows.size(), "the four benchmark files hold 600 rows");
        assertTrue(failures.isEmpty(), "not equal to itself: " + failures);
    }

    @Test
    void everyApplicableRewriteIsEqual() {
        Map<String, Integer> applied = new LinkedHashMap<>();
        Map<Verdict.Rule, Integer> rules = new EnumMap<>(Verdict.Rule.class);
        List<String> failures = new ArrayList<>();
        int rowsWithRewrite = 0;
        int rowsWithNonTrivialRewrite = 0;
        for (MathData.Row r : rows) {
            boolean any = false;
            boolean nonTrivial = false;
            for (Map.Entry<String, UnaryOperator<String>> e : REWRITES.entrySet()) {
                String w = e.getValue().apply(r.gold());
                if (w == null || w.equals(r.gold())) continue;
                any = true;
                if (!e.getKey().equals("in $...$")) nonTrivial = true;
                applied.merge(e.getKey(), 1, Integer::sum);
                Verdict v = GRADER.grade(w, r.gold());
                Verdict back = GRADER.grade(r.gold(), w);
                rules.merge(v.rule(), 1, Integer::sum);
                if (!v.isEqual() || !back.isEqual()) failures.add(e.getKey() + ": '" + w + "' vs gold '" + r.gold() + "' -> " + v + " / " + back);
            }
            if (any) rowsWithRewrite++;
            if (nonTrivial) rowsWithNonTrivialRewrite++;
        }
        System.out.printf("[rewards] rewrites: %d of %d rows have one (%d beyond $...$), %d rewritten pairs, failures %d%n",
                rowsWithRewrite, rows.size(), rowsWithNonTrivialRewrite, applied.values().stream().mapToInt(Integer::intValue).sum(), failures.size());
        applied.forEach((k, n) -> System.out.printf("[rewards]   %-40s %d%n", k, n));
        System.out.printf("[rewards]   deciding rules: %s%n", rules);
        assertEquals(rows.size(), rowsWithRewrite, "the $...$ rewrite applies to every row");
        assertTrue(rowsWithNonTrivialRewrite >= 450, "most rows have a non-trivial rewrite, got " + rowsWithNonTrivialRewrite);
        assertTrue(failures.isEmpty(), failures.size() + " rewrites not equal:\n" + String.join("\n", failures));
    }

    @Test
    void goldAnswersOfDifferentProblemsWithDifferentValuesAreNotEqual() {
        long seed = TestSeeds.seed();
        System.out.println("[rewards] pairs seed = " + seed + " (rerun with -Darbor.seed=" + seed + ")");
        SplittableRandom rnd = new SplittableRandom(seed);
        int pairs = 0;
        int sameValue = 0;
        Map<Verdict.Outcome, Integer> outcomes = new EnumMap<>(Verdict.Outcome.class);
        List<String> failures = new ArrayList<>();
        while (pairs < 20000) {
            MathData.Row a = rows.get(rnd.nextInt(rows.size()));
            MathData.Row b = rows.get(rnd.nextInt(rows.size()));
            if (a == b) continue;
            if (sameValueReference(a.gold(), b.gold())) {
                sameValue++;
                continue;
            }
            pairs++;
            Verdict v = GRADER.grade(a.gold(), b.gold());
            outcomes.merge(v.outcome(), 1, Integer::sum);
            if (v.outcome() != Verdict.Outcome.NOT_EQUAL) failures.add("'" + a.gold() + "' vs '" + b.gold() + "' -> " + v);
        }
        System.out.printf("[rewards] different-value pairs: %d graded, outcomes %s, %d same-value pairs skipped%n", pairs, outcomes, sameValue);
        assertTrue(failures.isEmpty(), failures.size() + " pairs not NOT_EQUAL:\n" + String.join("\n", failures.subList(0, Math.min(50, failures.size()))));
    }

    /**
     * An independent, deliberately simple "same value" test used only to skip pairs: plain numbers compared
     * as decimals, anything else after removing spaces, \left/\right, degree marks, \dfrac, $, a leading
     * "x=" and a base subscript (the grader's documented choices: {@code x=5} is 5, {@code 40_9} matches 40).
     */
    static boolean sameValueReference(String a, String b) {
        String ka = key(a);
        String kb = key(b);
        if (ka.equals(kb)) return true;
        try {
            return new BigDecimal(ka).compareTo(new BigDecimal(kb)) == 0;
        } catch (NumberFormatException e) {
            return false;
        }
    }

    private static String key(String s) {
        String k = s.replace("\\left", "").replace("\\right", "").replace("^\\circ", "").replace("^{\\circ}", "")
                .replace("\\dfrac", "\\frac").replace("\\$", "").replace("$", "").replace("\\!", "")
                .replaceAll("\\\\(text|mbox)\\{\\s*[a-z ]+\\}(\\^\\d)?$", "").replace(" ", "")
                .replaceAll("\\\\frac(\\d)(\\d)", "\\\\frac{$1}{$2}").replaceAll("\\\\frac(\\d)\\{", "\\\\frac{$1}{")
                .replaceAll("\\\\frac\\{(\\d+)\\}(\\d)", "\\\\frac{$1}{$2}").replaceAll("\\\\sqrt(\\d)", "\\\\sqrt{$1}")
                .replaceAll("^[a-z]=", "")             // x = 5 is 5 (the equation rule)
                .replaceAll("^(\\d+)_\\{?\\d+\\}?$", "$1"); // 40_9 is 40 (a base-b numeral's digits)
        if (k.matches("\\d{1,3}(,\\d{3})+")) return k.replace(",", "");
        if (k.contains(",") && !k.matches(".*[\\[\\](){}].*")) { // a bare list is a set of solutions
            String[] items = k.split(",");
            java.util.Arrays.sort(items);
            return String.join(",", items);
        }
        return k;
    }

    @Test
    void noRowBreaksTheGraderWhateverTheAnswerLooksLike() {
        List<String> broken = new ArrayList<>();
        int graded = 0;
        for (MathData.Row r : rows) {
            String g = r.gold();
            String[] probes = {
                    "\\boxed{" + g,                       // truncated box
                    g + "}}}", "{{{" + g, "\\frac{" + g, g + "^", "\\sqrt[", "(" + g + "]", g + ",", "=" + g,
                    g.replace("{", ""), g.replace("}", ""), r.problem().length() > 300 ? r.problem().substring(0, 300) : r.problem(),
            };
            for (String p : probes) {
                graded++;
                Verdict v = GRADER.grade(p, g);
                Verdict w = GRADER.gradeResponse(p, g);
                if (v.detail().startsWith("grader error") || w.detail().startsWith("grader error")) broken.add(p + " -> " + v + " / " + w);
            }
        }
        System.out.printf("[rewards] malformed probes: %d graded, %d internal errors%n", graded, broken.size());
        assertTrue(broken.isEmpty(), "internal errors: " + broken);
        assertFalse(GRADER.gradeResponse("\\boxed{" + "5", "5").isEqual(), "a truncated box is no answer");
    }
}
