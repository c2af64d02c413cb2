package ai.arbor.advantage;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.arbor.kernels.TokenAdvantages;
import ai.arbor.kernels.TokenShaping;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The README's "Advantages and filters" example, verbatim, with its stated results asserted. */
class ReadmeAdvantagesTest {

    @Test
    void readmeExample() {
        // one prompt, two trees of three leaves (Tree-GRPO: intra-tree + inter-tree GRPO)
        float[] rewards = {1, 0, 0, 1, 1, 0};
        int[] prompt = {0, 0, 0, 0, 0, 0}, tree = {0, 0, 0, 1, 1, 1};
        float[] seqAdv = Advantages.treeGrpo(rewards, prompt, tree);
        // {2.0676, -1.4902, -1.4902, 1.4902, 1.4902, -2.0676}
        assertArrayEquals(new float[] {2.0676f, -1.4902f, -1.4902f, 1.4902f, 1.4902f, -2.0676f}, seqAdv, 1e-4f);

        // leaf 2 had a void turn, leaf 5's only tool call failed: out of the loss, still in the statistics above
        List<ScoredTrajectory> leaves = List.of(ScoredTrajectory.of(0, 1), ScoredTrajectory.of(0, 0),
                new ScoredTrajectory(0, 0, 0, 0, true, false), ScoredTrajectory.of(0, 1),
                ScoredTrajectory.of(0, 1), new ScoredTrajectory(0, 0, 1, 1, false, false));
        FilterResult keep = TrajectoryFilter.all(new ToolAwareFilter(), new VoidTurnFilter()).apply(leaves);
        seqAdv = keep.applyTo(seqAdv);  // leaves 2 and 5 → 0; keep.count(FilterReason.VOID_TURN) == 1
        assertEquals(0f, seqAdv[2]);
        assertEquals(0f, seqAdv[5]);
        assertEquals(1, keep.count(FilterReason.VOID_TURN));
        assertEquals(1, keep.count(FilterReason.ALL_TOOL_CALLS_FAILED));

        // tokens: 4 per leaf, the last two after a tool observation; TAO-RL shapes the top 20% of those by entropy
        int[] seqIds = TokenAdvantages.seqIdsOf(4, 4, 4, 4, 4, 4);
        float[] entropy = new float[24];
        boolean[] postTool = new boolean[24];
        for (int t = 0; t < 24; t++) {
            entropy[t] = (t % 4) * 0.5f;
            postTool[t] = t % 4 >= 2;
        }
        TokenAdvantages.Result r = TokenAdvantages.compute(seqAdv, seqIds, keep.tokenMask(seqIds, null), entropy,
                postTool, TokenShaping.taoRl());
        // leaf 0's tokens: {2.0676, 2.0676, 2.0676, 2.0944}; r.stats().shapedTokens() == 4 (ties at τ = 1.5)
        // (16 valid tokens, entropies 0, .5, 1, 1.5 per leaf: μ = 0.75, var = 5/15, scale = √3;
        //  8 candidates, k = ⌈0.2 · 8⌉ = 2, τ = 1.5, so the four 1.5s: Ĥ = 0.75 √3 = 1.2990381,
        //  2.0675678 · (1 + 0.01 · 1.2990381) = 2.0944266)
        assertArrayEquals(new float[] {2.0676f, 2.0676f, 2.0676f, 2.0944f}, java.util.Arrays.copyOf(r.advantages(), 4), 1e-4f);
        assertEquals(4, r.stats().shapedTokens());
        assertEquals(1.5, r.stats().threshold(), 0.0);
        assertEquals(0f, r.advantages()[8]);  // leaf 2 masked out
    }
}
