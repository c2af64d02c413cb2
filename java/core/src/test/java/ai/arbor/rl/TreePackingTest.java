package ai.arbor.rl;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

class TreePackingTest {

    /** Every position from 1 on trained. */
    static TokenBatch allTrained(List<int[]> seqs) {
        List<Sequence> s = new ArrayList<>();
        for (int[] t : seqs) {
            boolean[] m = new boolean[t.length];
            Arrays.fill(m, 1, t.length, true);
            s.add(new Sequence(t, m));
        }
        return TokenBatch.supervised(s);
    }

    /**
     * Hand-computed: [5 6 7 8], [5 6 9], [5 6] (a strict prefix of both) and [4 1] (nothing shared). Sorted:
     * [4 1], [5 6], [5 6 7 8], [5 6 9]; the trie of the 5-pack has slots 5 6 7 8 9 with 9's parent 6.
     */
    @Test
    void handMadeTrie() {
        TokenBatch b = allTrained(List.of(new int[] {5, 6, 7, 8}, new int[] {5, 6, 9}, new int[] {5, 6}, new int[] {4, 1}));
        List<TreePacking.MicroBatch> plan = TreePacking.plan(b, 1 << 10, 1 << 10, TreePacking.Cost.tokensOnly());
        assertEquals(1, plan.size());
        TreePacking.MicroBatch mb = plan.get(0);
        assertEquals(2, mb.packs().length);
        assertArrayEquals(new int[] {2, 0, 1}, mb.packs()[0], "the larger pack first, its sequences sorted");
        assertArrayEquals(new int[] {3}, mb.packs()[1]);
        TreePacking.Packed p = TreePacking.pack(b, mb);
        assertEquals(5, p.width());
        assertEquals(7, p.uniqueTokens());
        assertEquals(11, p.totalTokens());
        assertArrayEquals(new long[] {5, 6, 7, 8, 9, 4, 1, 0, 0, 0}, p.tokens());
        assertArrayEquals(new long[] {0, 1, 2, 3, 2, 0, 1, 0, 0, 0}, p.positions());
        assertArrayEquals(new int[] {-1, 0, 1, 2, 1, -1, 0, -1, -1, -1}, p.parent(), "parents are slots of the same pack");
        boolean[] m = p.mask();
        // slot 4 (token 9) reads 5, 6 and itself, not 7 or 8
        assertTrue(m[4 * 5 + 0] && m[4 * 5 + 1] && m[4 * 5 + 4]);
        assertFalse(m[4 * 5 + 2] || m[4 * 5 + 3]);
        // padding slot 2 of pack 1 reads itself only
        int base = (5 + 2) * 5;
        for (int k = 0; k < 5; k++) assertEquals(k == 2, m[base + k], "padding reads itself only, k " + k);
        // rows: seq [5 6] → 1 row (6, predicted at slot 0); [5 6 7 8] → 3; [5 6 9] → 2; [4 1] → 1 — 7 pairs
        assertEquals(7, p.rows().rows());
        // predicting slots: 0 (→6, three pairs), 1 (→7 and →9), 2 (→8), 5 (→1): 4 unique logit rows
        assertArrayEquals(new long[] {0, 1, 2, 5}, p.logitRows());
        assertArrayEquals(new long[] {0, 0, 1, 2, 0, 1, 3}, p.pairIndex());
    }

    /**
     * Random tries: with packing always allowed every distinct prefix is one slot (the unique-token count is the
     * number of distinct non-empty prefixes of each pack); every pair's predicting slot holds the token before
     * its label at the depth before it, and the mask is exactly the ancestor relation of the trie.
     */
    @Test
    void randomTriesAreExact() {
        long seed = ai.arbor.testing.Seeds.seed("TreePackingTest");
        Random rnd = new Random(seed);
        for (int trial = 0; trial < 50; trial++) {
            List<int[]> seqs = new ArrayList<>();
            int n = 1 + rnd.nextInt(12);
            for (int i = 0; i < n; i++) {
                int[] t;
                if (!seqs.isEmpty() && rnd.nextBoolean()) {   // branch off an earlier sequence
                    int[] from = seqs.get(rnd.nextInt(seqs.size()));
                    int keep = 1 + rnd.nextInt(from.length);
                    t = Arrays.copyOf(from, Math.max(2, keep + rnd.nextInt(5)));
                    for (int p = keep; p < t.length; p++) t[p] = rnd.nextInt(4);
                } else {
                    t = new int[2 + rnd.nextInt(8)];
                    for (int p = 0; p < t.length; p++) t[p] = rnd.nextInt(4);
                }
                seqs.add(t);
            }
            TokenBatch b = allTrained(seqs);
            int budget = 8 + rnd.nextInt(64), maxPack = 4 + rnd.nextInt(40);
            long maxUnpacked = rnd.nextBoolean() ? Long.MAX_VALUE : 10 + rnd.nextInt(60);
            List<TreePacking.MicroBatch> plan = TreePacking.plan(b, budget, maxPack, TreePacking.Cost.tokensOnly(), maxUnpacked);
            int[] seen = new int[n];
            long rows = 0;
            for (TreePacking.MicroBatch mb : plan) {
                for (int s : mb.sequences()) seen[s]++;
                TreePacking.Packed p = TreePacking.pack(b, mb);
                assertTrue(p.packs() * p.width() <= budget || p.packs() == 1, "micro-batch within the budget (seed " + seed + ")");
                assertTrue(p.totalTokens() <= maxUnpacked || mb.sequences().length == 1, "unpacked tokens within the bound (seed " + seed + ")");
                int unique = 0;
                for (int[] pack : mb.packs()) {
                    Set<String> prefixes = new HashSet<>();
                    for (int s : pack) for (int l = 1; l <= seqs.get(s).length; l++) prefixes.add(Arrays.toString(Arrays.copyOf(seqs.get(s), l)));
                    unique += prefixes.size();
                    int size = prefixes.size();
                    assertTrue(size <= maxPack || pack.length == 1, "pack of " + size + " > " + maxPack + " (seed " + seed + ")");
                }
                assertEquals(unique, p.uniqueTokens(), "unique tokens = distinct prefixes (seed " + seed + ")");
                TokenBatch r = p.rows();
                rows += r.rows();
                for (int k = 0; k < r.rows(); k++) {
                    int slot = (int) p.logitRows()[(int) p.pairIndex()[k]];
                    int[] t = r.sequences().get(r.seqId()[k]);
                    assertEquals(t[r.position()[k] - 1], p.tokens()[slot], "predicting slot's token (seed " + seed + ")");
                    assertEquals(r.position()[k] - 1, p.positions()[slot], "predicting slot's depth (seed " + seed + ")");
                }
                // path attention: each unique slot is computed by exactly one query row, which reads its path (depth ≤ its own)
                TreePacking.PathAttention pa = p.pathAttention();
                assertEquals(p.uniqueTokens(), pa.tokens().length);
                for (int slot = 0; slot < pa.tokens().length; slot++) {
                    int row = (int) pa.scatter()[slot], a = row / pa.queries();
                    assertEquals(slot, pa.queryIndex()[row], "scatter row computes the slot (seed " + seed + ")");
                    assertEquals(slot, pa.keyIndex()[(int) pa.causalScatter()[slot]], "causal scatter row is the slot's (seed " + seed + ")");
                    assertEquals(pa.positions()[slot], pa.causalScatter()[slot] % pa.keys(), "at its depth on the path (seed " + seed + ")");
                    for (int t = 0; t < pa.keys(); t++) {
                        boolean reads = pa.mask()[row * pa.keys() + t];
                        if (reads) assertTrue(pa.positions()[(int) pa.keyIndex()[a * pa.keys() + t]] == t && t <= pa.positions()[slot],
                                "reads its own ancestors only (seed " + seed + ")");
                        else assertTrue(t > pa.positions()[slot], "reads every ancestor (seed " + seed + ")");
                    }
                }
                boolean[] m = p.mask();
                for (int q = 0; q < p.packs() * p.width(); q++) {
                    Set<Integer> anc = new HashSet<>();
                    for (int k = q % p.width(); k >= 0; k = p.parent()[q - q % p.width() + k]) anc.add(k);
                    for (int k = 0; k < p.width(); k++)
                        assertEquals(anc.contains(k), m[q * p.width() + k], "mask (seed " + seed + ")");
                }
            }
            for (int s = 0; s < n; s++) assertEquals(1, seen[s], "sequence " + s + " in exactly one pack (seed " + seed + ")");
            assertEquals(b.rows(), rows, "every row once");
        }
    }

    /** The cost model keeps a sequence out of a pack where the quadratic mask costs more than it saves. */
    @Test
    void costModelRefusesUnprofitableJoins() {
        // two sequences of 100 sharing 1 token: joining saves 1 token of work, costs ~(199² − 100²/2 − 100²/2)·perPair
        int[] a = new int[100], c = new int[100];
        Arrays.fill(a, 1);
        Arrays.fill(c, 2);
        c[0] = 1;
        TokenBatch b = allTrained(List.of(a, c));
        assertEquals(2, TreePacking.plan(b, 1 << 12, 1 << 12, new TreePacking.Cost(100, 1)).get(0).packs().length);
        assertEquals(1, TreePacking.plan(b, 1 << 12, 1 << 12, TreePacking.Cost.tokensOnly()).get(0).packs().length);
        assertThrows(IllegalArgumentException.class, () -> TreePacking.plan(b, 0, 10, TreePacking.Cost.tokensOnly()));
        assertThrows(IllegalArgumentException.class, () -> new TreePacking.Cost(0, 1));
    }
}
