package ai.arbor.rollout;

import static org.junit.jupiter.api.Assertions.*;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class BatchAssemblerTest {
    static final CharTokenizer TOK = CharTokenizer.ascii();

    /** A hand-made trajectory: response "ab" generated, "X" observation, "c" generated (post-tool). */
    static Trajectory traj(String promptId, String prompt, int tree) {
        int[] t = TOK.encode("abXc");
        return new Trajectory(new Prompt(promptId, TOK.encode(prompt), null, Map.of()), 0, tree, new int[] {1, 2}, t,
                new boolean[] {true, true, false, true}, new float[] {-1, -2, Float.NaN, -3}, new float[] {0.5f, Float.NaN, Float.NaN, 0.25f},
                new int[] {0, 0, 0, 1}, new boolean[] {false, false, false, true}, List.of(), List.of(), Termination.ANSWER);
    }

    @Test
    void paddedLayoutByHand() {
        TrainingBatch b = BatchAssembler.padded(TOK.padId()).assemble(List.of(traj("p", "Q", 0), traj("p", "QQQ", 1), traj("r", "Q", 0)));
        assertEquals(BatchAssembler.Layout.PADDED, b.layout());
        assertEquals(3, b.rows());
        assertEquals(7, b.width());   // 3 prompt + 4 response
        int[] row0 = java.util.Arrays.copyOfRange(b.tokens(), 0, 7);
        int pad = TOK.padId();
        assertArrayEquals(new int[] {TOK.encode("Q")[0], TOK.encode("a")[0], TOK.encode("b")[0], TOK.encode("X")[0], TOK.encode("c")[0], pad, pad}, row0);
        assertArrayEquals(new float[] {0, 1, 1, 0, 1, 0, 0}, java.util.Arrays.copyOfRange(b.lossMask(), 0, 7));
        assertArrayEquals(new float[] {0, -1, -2, 0, -3, 0, 0}, java.util.Arrays.copyOfRange(b.behaviourLogprobs(), 0, 7));
        assertArrayEquals(new byte[] {1, 1, 1, 1, 1, 0, 0}, java.util.Arrays.copyOfRange(b.attentionMask(), 0, 7));
        assertArrayEquals(new int[] {0, 1, 2, 3, 4, 0, 0}, java.util.Arrays.copyOfRange(b.positionIds(), 0, 7));
        assertArrayEquals(new int[] {0, 0, 0, 0, 0, -1, -1}, java.util.Arrays.copyOfRange(b.sequenceIds(), 0, 7));
        assertArrayEquals(new int[] {-1, 0, 0, 0, 1, -1, -1}, java.util.Arrays.copyOfRange(b.turnIndex(), 0, 7));
        assertArrayEquals(new byte[] {0, 0, 0, 0, 1, 0, 0}, java.util.Arrays.copyOfRange(b.postToolMask(), 0, 7));
        assertEquals(0.5f, b.entropies()[1]);
        assertTrue(Float.isNaN(b.entropies()[0]) && Float.isNaN(b.entropies()[2]) && Float.isNaN(b.entropies()[3]));
        // row 1: the longer prompt fills the width exactly
        assertArrayEquals(new float[] {0, 0, 0, 1, 1, 0, 1}, java.util.Arrays.copyOfRange(b.lossMask(), 7, 14));
        assertArrayEquals(new int[] {0, 0, 1}, b.groupIds());
        assertArrayEquals(new int[] {0, 1, 2}, b.treeIds());
        assertArrayEquals(new int[] {1, 3, 1}, b.promptLengths());
        assertArrayEquals(new int[] {4, 4, 4}, b.responseLengths());
        assertEquals(9, b.trainedTokens());
        assertEquals(8, BatchAssembler.padded(0).padToMultipleOf(8).assemble(List.of(traj("p", "QQQ", 0))).width());
    }

    @Test
    void packedLayoutByHand() {
        TrainingBatch b = BatchAssembler.packed(TOK.padId(), 12).assemble(List.of(traj("p", "Q", 0), traj("p", "QQ", 0), traj("r", "Q", 0)));
        assertEquals(2, b.rows());
        assertArrayEquals(new int[] {0, 0, 1}, b.sequenceRow());
        assertArrayEquals(new int[] {0, 5, 0}, b.sequenceOffset());
        assertArrayEquals(new int[] {0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, -1}, java.util.Arrays.copyOfRange(b.sequenceIds(), 0, 12));
        assertArrayEquals(new int[] {0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5, 0}, java.util.Arrays.copyOfRange(b.positionIds(), 0, 12));
        assertArrayEquals(new float[] {0, 1, 1, 0, 1, 0, 0, 1, 1, 0, 1, 0}, java.util.Arrays.copyOfRange(b.lossMask(), 0, 12));
        assertArrayEquals(new int[] {0, 0, 1}, b.treeIds());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> BatchAssembler.packed(0, 4).assemble(List.of(traj("p", "Q", 0))));
        assertTrue(e.getMessage().contains("5 tokens"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> BatchAssembler.padded(0).assemble(List.of()));
    }
}
