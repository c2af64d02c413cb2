package ai.arbor.reward;

import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Each reward term against hand-computed values from its formula (docs/algorithms.md §3, §5). */
class RewardFunctionsTest {
    static final List<String> GOLD = List.of("\\frac{1}{2}");
    static final String RIGHT = "<think>…</think> The answer is \\boxed{0.5}.";
    static final String WRONG = "<think>…</think> The answer is \\boxed{0.25}.";
    static final String NONE = "<think>… out of tokens";

    static TrajectorySummary t(String text, int calls, int failures) {
        return new TrajectorySummary(text, calls, failures, 100, false);
    }

    @Test
    void outcomeRewardIsOneOrZero() {
        OutcomeReward r = OutcomeReward.of(MathGrader.standard());
        assertEquals(1.0, r.reward(t(RIGHT, 0, 0), GOLD));
        assertEquals(0.0, r.reward(t(WRONG, 0, 0), GOLD));
        assertEquals(0.0, r.reward(t(NONE, 0, 0), GOLD));
        OutcomeReward dapo = new OutcomeReward(MathGrader.standard(), 1, -1);
        assertEquals(-1.0, dapo.reward(t(WRONG, 0, 0), GOLD));
    }

    @Test
    void cortPenaltyWhenNoCodeOrAllCodeFailed() {
        RewardFunction cort = OutcomeReward.of(MathGrader.standard()).plus(CodeExecutionPenalty.CORT);
        assertEquals(1.0, cort.reward(t(RIGHT, 2, 1), GOLD), 1e-12);
        assertEquals(0.9, cort.reward(t(RIGHT, 2, 2), GOLD), 1e-12, "correct, every execution failed");
        assertEquals(0.9, cort.reward(t(RIGHT, 0, 0), GOLD), 1e-12, "correct, no code");
        assertEquals(-0.1, cort.reward(t(WRONG, 0, 0), GOLD), 1e-12);
        assertEquals(0.0, cort.reward(t(WRONG, 3, 0), GOLD), 1e-12);
        assertTrue(CodeExecutionPenalty.isErrorOutput("Traceback (most recent call last): ..."));
        assertTrue(CodeExecutionPenalty.isErrorOutput("  "));
        assertTrue(CodeExecutionPenalty.isErrorOutput("[]"));
        assertTrue(CodeExecutionPenalty.isErrorOutput("Done"));
        assertTrue(CodeExecutionPenalty.isErrorOutput("NameError: name 'x' is not defined"));
        assertFalse(CodeExecutionPenalty.isErrorOutput("42"));
        assertThrows(IllegalArgumentException.class, () -> new CodeExecutionPenalty(0.1));
    }

    @Test
    void grpoTcrWrongAnswerToolTerm() {
        ToolCallReward r = ToolCallReward.grpoTcr(MathGrader.standard());
        assertEquals(1.0, r.reward(t(RIGHT, 0, 0), GOLD));
        assertEquals(1.0, r.reward(t(RIGHT, 7, 7), GOLD));
        // min(-0.6, -1 + 0.1·calls)
        assertEquals(-1.0, r.reward(t(WRONG, 0, 0), GOLD), 1e-12);
        assertEquals(-0.9, r.reward(t(WRONG, 1, 1), GOLD), 1e-12);
        assertEquals(-0.8, r.reward(t(NONE, 2, 0), GOLD), 1e-12);
        assertEquals(-0.7, r.reward(t(WRONG, 3, 0), GOLD), 1e-12);
        assertEquals(-0.6, r.reward(t(WRONG, 4, 0), GOLD), 1e-12);
        assertEquals(-0.6, r.reward(t(WRONG, 10, 0), GOLD), 1e-12);
        // executed calls only: 3 calls of which 2 malformed (never reached a tool) pay for one, a failed execution counts
        assertEquals(-0.9, r.reward(new TrajectorySummary(WRONG, 3, 2, 0, false, 2), GOLD), 1e-12);
        assertEquals(-1.0, r.reward(new TrajectorySummary(WRONG, 10, 10, 0, false, 10), GOLD), 1e-12, "garbage calls farm nothing");
        assertEquals(-0.8, r.reward(new TrajectorySummary(WRONG, 2, 2, 0, false, 0), GOLD), 1e-12);
        assertThrows(IllegalArgumentException.class, () -> new TrajectorySummary(WRONG, 3, 1, 0, false, 2));
        assertThrows(IllegalArgumentException.class, () -> new ToolCallReward(MathGrader.standard(), 1, -1, 0.1, -2));
    }

    @Test
    void treeGrpoFormatTable() {
        QaFormatReward r = QaFormatReward.treeGrpo();
        List<String> gold = List.of("Paris");
        String valid = "<think>capital of France?</think><search>capital France</search>"
                + "<information>Paris is the capital.</information><think>so Paris</think><answer>%s</answer>";
        String invalid = "I think it is <answer>%s</answer>";
        assertEquals(1.0, r.reward(TrajectorySummary.ofText(valid.formatted("paris")), gold), 1e-12);
        assertEquals(0.8, r.reward(TrajectorySummary.ofText(invalid.formatted("Paris")), gold), 1e-12);
        assertEquals(0.2, r.reward(TrajectorySummary.ofText(valid.formatted("Lyon")), gold), 1e-12);
        assertEquals(0.1, r.reward(TrajectorySummary.ofText(invalid.formatted("Lyon")), gold), 1e-12);
        assertEquals(0.0, r.reward(TrajectorySummary.ofText("<think>no idea"), gold), 1e-12);
        QaFormatReward lenient = new QaFormatReward(QaGrader.standard(), s -> true, 1, 0.2, 0.1);
        assertEquals(0.2, lenient.reward(TrajectorySummary.ofText("no answer at all"), gold), 1e-12);
    }

    @Test
    void searchR1FormatSequences() {
        SearchR1Format f = SearchR1Format.SEARCH_R1;
        assertTrue(f.isValid("<think>a</think><answer>x</answer>"));
        assertTrue(f.isValid(" <think>a</think>\n<search>q</search> <information>i</information>"
                + "<think>b</think><search>q2</search><information>j</information><think>c</think><answer>x</answer>\n"));
        assertFalse(f.isValid("<think>a</think> text <answer>x</answer>"), "text between tags");
        assertFalse(f.isValid("<answer>x</answer>"), "no thinking");
        assertFalse(f.isValid("<think>a</think>"), "no answer");
        assertFalse(f.isValid("<think>a</think><information>i</information><answer>x</answer>"), "information without search");
        assertFalse(f.isValid("<think>a<think>b</think></think><answer>x</answer>"), "nested think");
        assertFalse(f.isValid("<think>a</think><answer>x</answer><answer>y</answer>"), "answer after the end");
        assertFalse(f.isValid("<think>a</think><answer>x"), "unbalanced");
        assertFalse(f.isValid(null));
        SearchR1Format code = new SearchR1Format("code", "output");
        assertTrue(code.isValid("<think>a</think><code>1+1</code><output>2</output><think>b</think><answer>2</answer>"));
        assertThrows(IllegalArgumentException.class, () -> new SearchR1Format("answer", "output"));
    }

    @Test
    void dapoOverlongShaping() {
        OverlongShaping s = OverlongShaping.dapo(100, 20);
        // 0 up to L - B = 80, then ((L - B) - |y|) / B, then -1
        assertEquals(0.0, s.penalty(0), 0);
        assertEquals(0.0, s.penalty(80), 0);
        assertEquals(-0.05, s.penalty(81), 1e-12);
        assertEquals(-0.25, s.penalty(85), 1e-12);
        assertEquals(-0.5, s.penalty(90), 1e-12);
        assertEquals(-1.0, s.penalty(100), 1e-12);
        assertEquals(-1.0, s.penalty(5000), 0);
        assertEquals(-0.125, new OverlongShaping(100, 20, 0.5, false).penalty(85), 1e-12);
        assertEquals(-0.5, s.reward(new TrajectorySummary("x", 0, 0, 90, true), GOLD), 1e-12);
        assertFalse(s.masked(new TrajectorySummary("x", 0, 0, 100, true)));
        OverlongShaping filtered = s.withMaskTruncated(true);
        assertTrue(filtered.masked(new TrajectorySummary("x", 0, 0, 100, true)));
        assertFalse(filtered.masked(new TrajectorySummary("x", 0, 0, 100, false)));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> OverlongShaping.dapo(100, 101));
        assertTrue(e.getMessage().contains("101"));
        assertThrows(IllegalArgumentException.class, () -> OverlongShaping.shape(-1, 100, 10));
        // GRPO-TCR = tool term + overlong shaping
        RewardFunction tcr = ToolCallReward.grpoTcr(MathGrader.standard()).plus(s);
        assertEquals(1.0 - 0.5, tcr.reward(new TrajectorySummary(RIGHT, 1, 0, 90, false), GOLD), 1e-12);
    }

    @Test
    void f1RewardAndComposition() {
        QaF1Reward f1 = new QaF1Reward(QaGrader.standard());
        assertEquals(0.5, f1.reward(TrajectorySummary.ofText("<answer>Broncos team</answer>"), List.of("Denver Broncos")), 1e-12);
        RewardFunction sum = RewardFunction.sum((tr, g) -> 1, (tr, g) -> 2, (tr, g) -> -0.5);
        assertEquals(2.5, sum.reward(TrajectorySummary.ofText(""), GOLD), 0);
        assertThrows(IllegalArgumentException.class, RewardFunction::sum);
    }

    @Test
    void trajectorySummaryValidation() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new TrajectorySummary("x", 1, 2, 0, false));
        assertTrue(e.getMessage().contains("2"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> new TrajectorySummary(null, 0, 0, 0, false));
        assertThrows(IllegalArgumentException.class, () -> new TrajectorySummary("x", 0, 0, -1, false));
    }
}
