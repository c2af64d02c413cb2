package ai.arbor.reward;

import ai.arbor.reward.Verdict.Outcome;
import ai.arbor.reward.Verdict.Rule;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;

import static ai.arbor.reward.Verdict.Outcome.EQUAL;
import static ai.arbor.reward.Verdict.Outcome.NOT_EQUAL;
import static ai.arbor.reward.Verdict.Outcome.UNPARSEABLE;
import static ai.arbor.reward.Verdict.Rule.NUMERIC;
import static ai.arbor.reward.Verdict.Rule.SAMPLED;
import static ai.arbor.reward.Verdict.Rule.STRING;
import static ai.arbor.reward.Verdict.Rule.STRUCTURAL;
import static ai.arbor.reward.Verdict.Rule.SYMBOLIC;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Hand-written tricky pairs, each with the outcome and the rule that must decide it (every rule, and pairs
 * that must NOT match). Each pair is graded both ways round.
 */
class MathGraderTableTest {
    static final MathGrader GRADER = MathGrader.standard();

    record Case(String answer, String gold, Outcome outcome, Rule rule) {
        @Override
        public String toString() {
            return "'" + answer + "' vs '" + gold + "' -> " + outcome + " by " + rule;
        }
    }

    static Case c(String a, String g, Outcome o, Rule r) {
        return new Case(a, g, o, r);
    }

    static List<Case> cases() {
        List<Case> t = new ArrayList<>();
        // string rule: normalization
        t.add(c("\\frac{1}{2}", "\\dfrac{1}{2}", EQUAL, STRING));
        t.add(c("\\tfrac12", "\\frac{1}{2}", EQUAL, STRING));
        t.add(c("\\frac 59", "\\frac{5}{9}", EQUAL, STRING));
        t.add(c("\\frac9{19}", "\\frac{9}{19}", EQUAL, STRING));
        t.add(c("\\left( 3, \\frac{\\pi}{2} \\right)", "(3,\\frac{\\pi}{2})", EQUAL, STRING));
        t.add(c("90^\\circ", "90", EQUAL, STRING));
        t.add(c("90^{\\circ}", "90°", EQUAL, STRING));
        t.add(c("\\text{Evelyn}", "evelyn", EQUAL, STRING));
        t.add(c("\\text{east}", "west", NOT_EQUAL, STRING));
        t.add(c("\\text{an ellipse}", "\\text{ellipse}", EQUAL, STRING));
        t.add(c("\\text{(C)}", "C", EQUAL, STRING));
        t.add(c("\\textbf{(C)}", "D", NOT_EQUAL, STRING));
        t.add(c("5 \\text{ cm}", "5", EQUAL, STRING));
        t.add(c("864 \\mbox{ inches}^2", "864", EQUAL, STRING));
        t.add(c("12 square feet", "12", EQUAL, STRING));
        t.add(c("\\$18.90", "18.90", EQUAL, STRING));
        t.add(c("50\\%", "50", EQUAL, STRING));
        t.add(c("3.", "3", EQUAL, STRING));
        t.add(c("$\\sqrt3$", "\\sqrt{3}", EQUAL, STRING));
        t.add(c("x^{2}", "x^2", EQUAL, STRING));
        t.add(c("\\boxed{7}", "7", EQUAL, STRING));
        t.add(c("10,\\!080", "10080", EQUAL, STRING));
        t.add(c("52_8", "52", EQUAL, STRING));
        t.add(c("4210_{5}", "4210_5", EQUAL, STRING));
        t.add(c("52_8", "42", NOT_EQUAL, STRING));
        t.add(c("52_8", "52_9", NOT_EQUAL, STRING));
        t.add(c("\\text{even}", "2", NOT_EQUAL, STRING));
        // numeric rule: constants
        t.add(c("025", "25", EQUAL, NUMERIC));
        t.add(c("27.0", "27", EQUAL, NUMERIC));
        t.add(c("\\frac{1}{2}", "\\frac{1}{3}", NOT_EQUAL, NUMERIC));
        t.add(c("0.5", "\\frac{1}{2}", EQUAL, NUMERIC));
        t.add(c("1\\frac{4}{5}", "\\frac{9}{5}", EQUAL, NUMERIC));
        t.add(c("137 \\frac{1}{2}", "275/2", EQUAL, NUMERIC));
        t.add(c("-1\\frac{1}{2}", "-1.5", EQUAL, NUMERIC));
        t.add(c("2\\frac{\\sqrt{3}}{2}", "\\sqrt{3}", EQUAL, NUMERIC)); // not a mixed number: a product
        t.add(c("50\\%", "0.5", EQUAL, NUMERIC));
        t.add(c("50\\%", "0.05", NOT_EQUAL, NUMERIC));
        t.add(c("1.5 \\times 10^{3}", "1500", EQUAL, NUMERIC));
        t.add(c("1.5e3", "1500", EQUAL, NUMERIC));
        t.add(c("2.5E-2", "\\frac{1}{40}", EQUAL, NUMERIC));
        t.add(c(".0000672", "6.72\\times10^{-5}", EQUAL, NUMERIC));
        t.add(c("3\\sqrt{13}", "\\sqrt{117}", EQUAL, NUMERIC));
        t.add(c("\\sqrt{2}", "1.4142", EQUAL, NUMERIC));
        t.add(c("\\sqrt{2}", "1.41", NOT_EQUAL, NUMERIC));
        t.add(c("\\pi", "3.14159", EQUAL, NUMERIC));
        t.add(c("\\pi", "3.14", NOT_EQUAL, NUMERIC));
        t.add(c("\\pi", "\\frac{22}{7}", NOT_EQUAL, NUMERIC));
        t.add(c("2^{100}+1", "1267650600228229401496703205377", EQUAL, NUMERIC));
        t.add(c("2^{100}+1", "1267650600228229401496703205376", NOT_EQUAL, NUMERIC)); // doubles cannot tell
        t.add(c("6 - 5i", "-5i+6", EQUAL, NUMERIC));
        t.add(c("6 - 5i", "6 + 5i", NOT_EQUAL, NUMERIC));
        t.add(c("\\frac{\\sqrt{3}}{3}", "\\frac{1}{\\sqrt{3}}", EQUAL, NUMERIC));
        t.add(c("e^{i\\pi}", "-1", EQUAL, NUMERIC));
        t.add(c("\\binom{5}{2}", "10", EQUAL, NUMERIC));
        t.add(c("5!", "120", EQUAL, NUMERIC));
        t.add(c("\\log_2 8", "3", EQUAL, NUMERIC));
        t.add(c("\\sqrt[3]{-8}", "-2", EQUAL, NUMERIC));
        t.add(c("-0", "0", EQUAL, NUMERIC));
        t.add(c("\\frac{270}7\\text{ degrees}", "\\frac{270}{7}", EQUAL, STRING));
        t.add(c("\\dfrac{17}{50}", "0.34", EQUAL, NUMERIC));
        t.add(c("\\infty", "-\\infty", NOT_EQUAL, NUMERIC));
        t.add(c("\\frac{1}{0}", "\\frac{1}{0}", EQUAL, STRING));
        // sampled rule: free variables
        t.add(c("2", "2x", NOT_EQUAL, SAMPLED));
        t.add(c("p - q", "-q + p", EQUAL, SAMPLED));
        t.add(c("(a+5)(b+2)", "ab + 2a + 5b + 10", EQUAL, SAMPLED));
        t.add(c("x^2+2x+1", "(x+1)^2", EQUAL, SAMPLED));
        t.add(c("x^2+2x+1", "(x-1)^2", NOT_EQUAL, SAMPLED));
        t.add(c("\\cot x", "\\frac{\\cos x}{\\sin x}", EQUAL, SAMPLED));
        t.add(c("\\sin^2 x + \\cos^2 x", "1", EQUAL, SAMPLED));
        t.add(c("\\sqrt{x^2}", "x", NOT_EQUAL, SAMPLED));
        t.add(c("|x|", "\\sqrt{x^2}", EQUAL, SAMPLED));
        t.add(c("|x|^2", "x^2", EQUAL, SAMPLED));
        t.add(c("2k+2", "2(k+1)", EQUAL, SAMPLED));
        t.add(c("2k", "2n", NOT_EQUAL, SAMPLED));
        t.add(c("\\frac{11+9a}{20}", "\\frac{11}{20}+\\frac{9a}{20}", EQUAL, SAMPLED));
        t.add(c("x^2", "x^3", NOT_EQUAL, SAMPLED));
        t.add(c("\\sin 2x", "2\\sin x\\cos x", EQUAL, SAMPLED));
        // structural rule
        t.add(c("(1,2)", "[1,2]", NOT_EQUAL, STRUCTURAL));
        t.add(c("(1,2)", "(2,1)", NOT_EQUAL, STRUCTURAL));
        t.add(c("(3,4]", "(3, \\frac{8}{2}]", EQUAL, STRUCTURAL));
        t.add(c("(3,4]", "(3,4)", NOT_EQUAL, STRUCTURAL));
        t.add(c("\\{1,2,3\\}", "\\{3,1,2\\}", EQUAL, STRUCTURAL));
        t.add(c("\\{1,2\\}", "\\{1,2,3\\}", NOT_EQUAL, STRUCTURAL));
        t.add(c("1,-2", "-2, 1", EQUAL, STRUCTURAL));
        t.add(c("1 \\text{ and } -2", "-2, 1", EQUAL, STRUCTURAL));
        t.add(c("\\{1\\pm\\sqrt{5},-2\\}", "-2, 1+\\sqrt5, 1-\\sqrt5", EQUAL, STRUCTURAL));
        t.add(c("1 \\pm \\sqrt{19}", "1-\\sqrt{19}, 1+\\sqrt{19}", EQUAL, STRUCTURAL));
        t.add(c("1 \\pm \\sqrt{19}", "1+\\sqrt{19}", NOT_EQUAL, STRUCTURAL));
        t.add(c("(0,9) \\cup (9,36)", "(9,36)\\cup(0,9)", EQUAL, STRUCTURAL));
        t.add(c("(0,9) \\cup (9,36)", "(0,36)", NOT_EQUAL, STRUCTURAL));
        t.add(c("\\begin{pmatrix} -1/3 \\\\ 2/3 \\\\ 5/3 \\end{pmatrix}", "\\begin{pmatrix} -\\frac13 \\\\ \\frac23 \\\\ \\frac53 \\end{pmatrix}", EQUAL, STRUCTURAL));
        t.add(c("\\begin{pmatrix} -1/3 \\\\ 2/3 \\\\ 5/3 \\end{pmatrix}", "(-1/3, 2/3, 5/3)", EQUAL, STRUCTURAL));
        t.add(c("\\begin{pmatrix} -1 & 0 \\\\ 0 & -1 \\end{pmatrix}", "\\begin{bmatrix} -1 & 0 \\\\ 0 & 1 \\end{bmatrix}", NOT_EQUAL, STRUCTURAL));
        t.add(c("\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}", "\\begin{pmatrix} 1 & 2 & 3 & 4 \\end{pmatrix}", NOT_EQUAL, STRUCTURAL));
        t.add(c("x = 3", "3", EQUAL, STRUCTURAL));
        t.add(c("x = 3", "4", NOT_EQUAL, STRUCTURAL));
        t.add(c("y = 2x + 3", "2x+3", EQUAL, STRUCTURAL));
        t.add(c("y = 2x + 3", "2x - y + 3 = 0", EQUAL, STRUCTURAL));
        t.add(c("5x - 7y + 11z + 4 = 0", "-5x + 7y - 11z - 4 = 0", EQUAL, STRUCTURAL));
        t.add(c("5x - 7y + 11z + 4 = 0", "5x - 7y + 11z - 4 = 0", NOT_EQUAL, STRUCTURAL));
        t.add(c("x \\in [-2,7]", "[-2, 7]", EQUAL, STRUCTURAL));
        t.add(c("(6,31,-1)", "6, 31, -1", EQUAL, STRUCTURAL));
        t.add(c("(15,-29)", "15,-29", NOT_EQUAL, STRUCTURAL)); // two items: (a,b) may be an open interval
        t.add(c("(2,\\infty)", "(2,+\\infty)", EQUAL, STRUCTURAL));
        t.add(c("(-\\infty, 0]", "(-\\infty, 0)", NOT_EQUAL, STRUCTURAL));
        t.add(c("\\frac{1}{2}", "(1,2)", NOT_EQUAL, STRUCTURAL));
        t.add(c("\\langle 1, 2, 3\\rangle", "(1,2,3)", EQUAL, STRING));
        // undecided
        t.add(c("\\lim_{x\\to 0} x", "0", UNPARSEABLE, NUMERIC));
        t.add(c("2^{2^{100}}", "2^{2^{100}}+1", UNPARSEABLE, SYMBOLIC)); // overflow: only sympy could tell
        t.add(c("x > 2", "x < 2", UNPARSEABLE, NUMERIC));
        return t;
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void pair(Case c) {
        Verdict v = GRADER.grade(c.answer(), c.gold());
        assertEquals(c.outcome(), v.outcome(), () -> c + ": got " + v);
        assertEquals(c.rule(), v.rule(), () -> c + ": got " + v);
        Verdict back = GRADER.grade(c.gold(), c.answer());
        assertEquals(c.outcome(), back.outcome(), () -> "reversed " + c + ": got " + back);
    }

    @Test
    void tableIsLargeAndCoversEveryRule() {
        List<Case> t = cases();
        Set<Rule> rules = EnumSet.noneOf(Rule.class);
        int notEqual = 0;
        for (Case c : t) {
            rules.add(c.rule());
            if (c.outcome() == NOT_EQUAL) notEqual++;
        }
        System.out.printf("[rewards] tricky pairs: %d (%d must not match), rules %s%n", t.size(), notEqual, rules);
        assertTrue(t.size() >= 60, "at least 60 pairs");
        assertTrue(notEqual >= 25, "many pairs must not match");
        assertEquals(EnumSet.of(STRING, NUMERIC, SAMPLED, STRUCTURAL, SYMBOLIC), rules);
    }

    @Test
    void responseExtractionFeedsTheGrader() {
        assertTrue(GRADER.gradeResponse("<think>maybe \\boxed{3}</think> so \\boxed{\\dfrac{1}{2}}.", "0.5").isEqual());
        assertEquals(Rule.NO_ANSWER, GRADER.gradeResponse("no box here", "1").rule());
        assertEquals(Outcome.NOT_EQUAL, GRADER.gradeResponse("no box here", "1").outcome());
        // the box in the reasoning does not count once </think> is there
        assertEquals(Rule.NO_ANSWER, GRADER.gradeResponse("<think>\\boxed{3}</think> I am not sure.", "3").rule());
        assertTrue(GRADER.gradeResponse("<answer>42</answer>", "42").isEqual());
        assertTrue(GRADER.isCorrect("\\boxed{2}", List.of("1", "2")));
        assertEquals(Outcome.NOT_EQUAL, GRADER.grade("3", List.of("1", "2")).outcome());
    }

    @Test
    void optionsChangeTheDecidingRule() {
        MathGrader noSampling = MathGrader.builder().sampleVariables(false).build();
        Verdict v = noSampling.grade("x^2+2x+1", "(x+1)^2");
        assertEquals(UNPARSEABLE, v.outcome());
        assertEquals(SYMBOLIC, v.rule(), v.toString());
        MathGrader loose = MathGrader.builder().decimalTolerance(1e-2).build();
        assertTrue(loose.grade("3.14", "\\pi").isEqual());
        MathGrader strict = MathGrader.builder().decimalTolerance(0).build();
        assertEquals(NOT_EQUAL, strict.grade("3.14159", "\\pi").outcome());
    }

    @Test
    void badArgumentsAreRejectedWithTheValue() {
        IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> MathGrader.builder().decimalTolerance(0.5));
        assertTrue(e.getMessage().contains("0.5"));
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, () -> GRADER.grade("1", (String) null));
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, () -> GRADER.grade("1", List.of()));
        assertEquals(Rule.NO_ANSWER, GRADER.grade(null, "1").rule());
    }
}
