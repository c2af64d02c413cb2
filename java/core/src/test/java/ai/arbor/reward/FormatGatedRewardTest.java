package ai.arbor.reward;

import static org.junit.jupiter.api.Assertions.*;

import ai.arbor.task.TrainingTask;
import java.util.List;
import org.junit.jupiter.api.Test;

/** ARPO / AEPO's format-gated search reward against hand-computed cases (deep_research.py's table). */
class FormatGatedRewardTest {
    static final List<String> GOLD = List.of("Lati Veso");
    static final String R = " <result>\nDoc 1(Title: Zuga Nosi) Zuga Nosi is employed by Duma Corp.\n</result>";

    static double score(RewardFunction f, String text) {
        return f.reward(TrajectorySummary.ofText(text), GOLD);
    }

    @Test
    void kbFormatF1AndExactMatch() {
        FormatGatedReward f1 = FormatGatedReward.arpo(TrainingTask.WELL_FORMED);
        String call = "<search>Zuga Nosi</search>" + R;
        assertEquals(1.0, score(f1, call + "<answer>Lati Veso</answer>"), 1e-12);
        // "Lati Vesu": 1 of 2 tokens in common, precision = recall = 1/2, F1 = 1/2
        assertEquals(0.5, score(f1, call + "<answer>Lati Vesu</answer>"), 1e-12);
        // "the Lati": normalization drops the article, 1 token: precision 1, recall 1/2, F1 = 2/3
        assertEquals(2.0 / 3, score(f1, call + "<answer>the Lati</answer>"), 1e-12);
        assertEquals(0.0, score(f1, call + "<answer>Bumak</answer>"), 1e-12, "well-formed, wrong: 0");
        assertEquals(-1.0, score(f1, "<search>Zuga Nosi</search><answer>Lati Veso</answer>"), 1e-12, "a call without its result");
        assertEquals(-1.0, score(f1, call), 1e-12, "no answer");
        FormatGatedReward em = f1.withMetric(FormatGatedReward.Metric.EXACT_MATCH);
        assertEquals(0.0, score(em, call + "<answer>Lati Vesu</answer>"), 1e-12);
        assertEquals(1.0, score(em, call + "<answer>lati veso.</answer>"), 1e-12);
        // both tools used: +0.1 on a positive score only
        String both = "<python>1</python> <result>\n1\n</result>" + call;
        assertEquals(0.6, score(f1, both + "<answer>Lati Vesu</answer>"), 1e-12);
        assertEquals(0.0, score(f1, both + "<answer>Bumak</answer>"), 1e-12);
        assertEquals(-1.0, score(f1, both), 1e-12);
    }

    @Test
    void theReleasesFormatCheckAndBoxedAnswers() {
        FormatGatedReward f = FormatGatedReward.arpo(FormatGatedReward::releaseFormat);
        String ok = "<think>a</think><search>q</search><result>r</result><think>b</think><python>x</python><result>1</result>"
                + "<answer>The answer is \\boxed{Lati Veso}</answer>";
        assertTrue(FormatGatedReward.releaseFormat(ok));
        assertEquals(1.1, score(f, ok), 1e-12, "F1 of the boxed content, both tools");
        assertFalse(FormatGatedReward.releaseFormat(ok.replace("<think>a</think>", "<think>a")), "<think> unpaired");
        assertFalse(FormatGatedReward.releaseFormat(ok.replace("<think>", "").replace("</think>", "")), "no <think>");
        assertFalse(FormatGatedReward.releaseFormat(ok.replace("\\boxed{Lati Veso}", "Lati Veso")), "no box in the answer");
        assertFalse(FormatGatedReward.releaseFormat(ok + "<answer>x</answer>"), "two answers");
        assertFalse(FormatGatedReward.releaseFormat(ok.replace("<search>q</search><result>r</result>", "<search>q<result>r</result></search>")),
                "result inside the call");
        assertFalse(FormatGatedReward.releaseFormat(ok.replace("<python>x</python><result>1</result>", "<python>x</python>")),
                "a call without a result");
        assertEquals(-1.0, score(f, ok.replace("\\boxed{Lati Veso}", "Lati Veso")), 1e-12);
        assertEquals("a{b}c", FormatGatedReward.unboxed("x \\boxed{1} y \\boxed{a{b}c}"));
        assertEquals("plain", FormatGatedReward.unboxed("plain"));
    }
}
