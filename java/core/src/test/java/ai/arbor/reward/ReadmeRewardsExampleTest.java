package ai.arbor.reward;

import ai.arbor.testing.Repository;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** The README's "Rewards" example, verbatim between the markers, with its stated results asserted. */
class ReadmeRewardsExampleTest {

    @Test
    void readmeExampleWorksAsWritten() {
        // README-BEGIN
        MathGrader grader = MathGrader.standard();
        String response = "<think>2/4 reduces to 1/2</think> The answer is $\\boxed{\\dfrac{1}{2}}$.";
        Verdict v = grader.gradeResponse(response, "0.5");
        System.out.println(v.outcome() + " by " + v.rule() + ": " + v.detail()); // EQUAL by NUMERIC: exact: 1/2

        // CoRT: 1/0 correctness, -0.1 when no code ran or all code failed
        RewardFunction cort = OutcomeReward.of(grader).plus(CodeExecutionPenalty.CORT);
        TrajectorySummary t = new TrajectorySummary(response, 2, 2, 900, false); // 2 calls, both failed, 900 tokens
        double r1 = cort.reward(t, List.of("0.5"));                               // 0.9

        // GRPO-TCR: 1 or min(-0.6, -1 + 0.1·calls), plus DAPO overlong shaping (L_max 1000, buffer 200)
        RewardFunction tcr = ToolCallReward.grpoTcr(grader).plus(OverlongShaping.dapo(1000, 200));
        double r2 = tcr.reward(t, List.of("0.75"));                               // -0.8 - 0.5 = -1.3

        // Tree-GRPO QA: exact match with format terms (1 / 0.8 / 0.2 / 0.1 / 0)
        double r3 = QaFormatReward.treeGrpo().reward(
                TrajectorySummary.ofText("<think>easy</think><answer>The Beatles</answer>"), List.of("Beatles"));  // 1.0
        // README-END
        assertEquals(Verdict.Outcome.EQUAL, v.outcome());
        assertEquals(Verdict.Rule.NUMERIC, v.rule());
        assertEquals(0.9, r1, 1e-12);
        assertEquals(-1.3, r2, 1e-12);
        assertEquals(1.0, r3, 0);
    }

    /** The code block of the README's Rewards section is the block above, so the test runs what users read. */
    @Test
    void readmeShowsThisCode() throws IOException {
        Path readme = Repository.file("README.md");
        String md = Files.readString(readme);
        int section = md.indexOf("## Rewards");
        String block = md.substring(md.indexOf("```java\n", section) + 8, md.indexOf("```", md.indexOf("```java\n", section) + 8));
        String src = Files.readString(Paths.get("src/test/java/ai/arbor/reward/ReadmeRewardsExampleTest.java"));
        String mine = src.substring(src.indexOf("// README-BEGIN\n") + 16, src.indexOf("        // README-END"));
        StringBuilder dedented = new StringBuilder();
        for (String line : mine.split("\n", -1)) dedented.append(line.startsWith("        ") ? line.substring(8) : line).append('\n');
        assertEquals(dedented.toString().stripTrailing(), block.stripTrailing());
    }
}
