package ai.arbor.reward;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Random LaTeX-ish soup from answer fragments: the grader returns a verdict for every pair (no internal
 * error), is reflexive on the soup, and stays fast on pathological nesting.
 */
class MathGraderFuzzTest {
    static final String[] PIECES = {
            "1", "2", "025", "3.5", ".5", "x", "y", "e", "i", "\\pi", "\\infty", "+", "-", "*", "/", "^", "_", "!", "=",
            ",", "(", ")", "[", "]", "{", "}", "\\{", "\\}", "|", "\\frac", "\\dfrac", "\\sqrt", "\\sqrt[3]", "\\binom",
            "\\left(", "\\right)", "\\cdot", "\\times", "\\pm", "\\cup", "\\in", "\\sin", "\\log_2", "\\ln", "\\text{",
            "\\text{ cm}", "\\mbox{and}", "^\\circ", "\\%", "\\$", "\\!", "\\,", " ", "\\\\", "&", "\\begin{pmatrix}",
            "\\end{pmatrix}", "\\boxed{", "\\lfloor", "\\rfloor", "<", "\\leq", "'", "\"", "\\", "°", "π", "−", "é",
    };

    static String soup(SplittableRandom r, int n) {
        StringBuilder b = new StringBuilder();
        for (int k = 0; k < n; k++) b.append(PIECES[r.nextInt(PIECES.length)]);
        return b.toString();
    }

    @Test
    void randomSoupNeverBreaksTheGrader() {
        long seed = TestSeeds.seed();
        System.out.println("[rewards] fuzz seed = " + seed + " (rerun with -Darbor.seed=" + seed + ")");
        SplittableRandom r = new SplittableRandom(seed);
        MathGrader g = MathGrader.standard();
        List<String> errors = new ArrayList<>();
        List<String> notReflexive = new ArrayList<>();
        for (int k = 0; k < 6000; k++) {
            String a = soup(r, 1 + r.nextInt(12));
            String b = soup(r, 1 + r.nextInt(12));
            Verdict v = g.grade(a, b);
            Verdict self = g.grade(a, a);
            if (v.detail().startsWith("grader error")) errors.add(a + " | " + b + " -> " + v);
            if (self.detail().startsWith("grader error")) errors.add(a + " (self) -> " + self);
            if (self.outcome() == Verdict.Outcome.NOT_EQUAL) notReflexive.add(a + " -> " + self);
        }
        System.out.printf("[rewards] fuzz: 12000 gradings, %d internal errors, %d non-reflexive%n", errors.size(), notReflexive.size());
        assertTrue(errors.isEmpty(), String.join("\n", errors.subList(0, Math.min(20, errors.size()))));
        assertTrue(notReflexive.isEmpty(), "an answer is never graded not equal to itself: " + notReflexive);
    }

    @Test
    void pathologicalInputsAreCheap() {
        MathGrader g = MathGrader.standard();
        String deep = "{".repeat(1500) + "1" + "}".repeat(1500);
        String parens = "(".repeat(1000) + "1" + ")".repeat(1000);
        String longList = "1," .repeat(1300) + "1";
        String tower = "2^{".repeat(200) + "2" + "}".repeat(200);
        String text = "\\text{".repeat(600) + "a" + "}".repeat(600);
        long t0 = System.nanoTime();
        for (String s : new String[]{deep, parens, longList, tower, text, "x".repeat(5000)}) {
            Verdict v = g.grade(s, "1");
            assertTrue(!v.detail().startsWith("grader error"), v.toString());
            Verdict w = g.grade(s, s.length() > 3000 ? "1" : s);
            assertTrue(!w.detail().startsWith("grader error"), w.toString());
        }
        double secs = (System.nanoTime() - t0) / 1e9;
        System.out.printf("[rewards] pathological inputs graded in %.2f s%n", secs);
    }
}
