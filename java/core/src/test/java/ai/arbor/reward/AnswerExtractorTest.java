package ai.arbor.reward;

import ai.arbor.reward.AnswerExtractor.Source;
import org.junit.jupiter.api.Test;

import java.util.Optional;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class AnswerExtractorTest {
    static Optional<String> boxed(String s) {
        return AnswerExtractor.lastBoxed(s);
    }

    @Test
    void lastBoxedWithNestedAndEscapedBraces() {
        assertEquals(Optional.of("\\frac{1}{2}"), boxed("so $\\boxed{\\frac{1}{2}}$."));
        assertEquals(Optional.of("\\{1,2\\}"), boxed("\\boxed{\\{1,2\\}}"));
        assertEquals(Optional.of("\\left\\{ x \\right\\}"), boxed("\\boxed{\\left\\{ x \\right\\}}"));
        assertEquals(Optional.of("3"), boxed("first \\boxed{1}, then \\boxed{2}, finally \\boxed{3}"));
        assertEquals(Optional.of("7"), boxed("\\fbox{7}"));
        assertEquals(Optional.of("8"), boxed("\\boxed{7} and \\fbox{8}"));
        assertEquals(Optional.of("a b"), boxed("\\boxed {  a b }"));
    }

    @Test
    void boxedWithoutBraces() {
        assertEquals(Optional.of("5"), boxed("the answer is $\\boxed 5$."));
        assertEquals(Optional.of("5"), boxed("\\boxed5"));
        assertEquals(Optional.of("12."), boxed("\\boxed 12. Done"));
    }

    @Test
    void brokenBoxesGiveNoAnswerAndNeverThrow() {
        assertEquals(Optional.empty(), boxed("\\boxed{\\frac{1}{2}"));
        assertEquals(Optional.empty(), boxed("\\boxed{2} but wait \\boxed{3"), "a truncated last box is no answer");
        assertEquals(Optional.empty(), boxed("\\boxed{}"));
        assertEquals(Optional.empty(), boxed("\\boxed{   }"));
        assertEquals(Optional.empty(), boxed("\\boxed"));
        assertEquals(Optional.empty(), boxed("\\boxed("));
        assertEquals(Optional.empty(), boxed("\\boxedx{3}"), "another command is not a box");
        assertEquals(Optional.empty(), boxed("no answer"));
        assertEquals(Optional.empty(), boxed(null));
        assertEquals(Optional.empty(), boxed("\\boxed{\\}"), "escaped brace does not close");
        assertEquals(Optional.of("1"), boxed("}}}{ \\boxed{1} }}"));
    }

    @Test
    void thinkBlockIsSkipped() {
        AnswerExtractor e = AnswerExtractor.MATH;
        assertEquals("2", e.extract("<think>maybe \\boxed{1}</think> it is \\boxed{2}").orElseThrow().answer());
        assertEquals(Optional.empty(), e.extract("<think>maybe \\boxed{1}</think> no idea"));
        assertEquals("1", e.extract("no think block \\boxed{1}").orElseThrow().answer());
        AnswerExtractor cort = e.withRequireThinkEnd(true);
        assertEquals(Optional.empty(), cort.extract("<think> truncated \\boxed{1}"));
        assertEquals("1", cort.extract("<think>x</think>\\boxed{1}").orElseThrow().answer());
    }

    @Test
    void answerTagsAndTheirOrder() {
        assertEquals(Optional.of("Paris"), AnswerExtractor.lastAnswerTag("<answer> Paris </answer>"));
        assertEquals(Optional.of("b"), AnswerExtractor.lastAnswerTag("<answer>a</answer> <answer>b</answer>"));
        assertEquals(Optional.of("a"), AnswerExtractor.lastAnswerTag("<answer>a</answer> <answer>b"));
        assertEquals(Optional.empty(), AnswerExtractor.lastAnswerTag("<answer></answer>"));
        AnswerExtractor.Extraction x = AnswerExtractor.MATH.extract("<answer>\\boxed{4}</answer>").orElseThrow();
        assertEquals("4", x.answer());
        assertEquals(Source.BOXED, x.source(), "a box is preferred to the tag around it");
        AnswerExtractor.Extraction y = AnswerExtractor.MATH.extract("<answer>4</answer>").orElseThrow();
        assertEquals(Source.ANSWER_TAG, y.source());
        assertEquals(Optional.empty(), AnswerExtractor.QA.extract("\\boxed{4}"), "QA reads tags only");
    }

    @Test
    void finalAnswerPhraseIsAnOption() {
        assertEquals(Optional.empty(), AnswerExtractor.MATH.extract("The final answer is 42."));
        AnswerExtractor e = AnswerExtractor.MATH.withFinalAnswerPhrase(true);
        AnswerExtractor.Extraction x = e.extract("So the final answer is $\\frac{3}{4}$. I hope").orElseThrow();
        assertEquals("\\frac{3}{4}", x.answer());
        assertEquals(Source.FINAL_ANSWER_PHRASE, x.source());
        assertEquals("7", e.extract("Final Answer: 7.\n").orElseThrow().answer());
        assertEquals("12", e.extract("final answer is 3. No wait, the final answer is 12").orElseThrow().answer());
        assertEquals("5", e.extract("final answer is 3 but \\boxed{5}").orElseThrow().answer(), "a box wins");
        assertTrue(e.extract("final answer is").isEmpty());
    }
}
