package ai.arbor.advantage;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Random;
import org.junit.jupiter.api.Test;

/** GRPO, Dr.GRPO and Tree-GRPO against hand-computed cases and seeded properties (docs/algorithms.md §3). */
class AdvantagesTest {

    static long seed() {
        return ai.arbor.testing.Seeds.seed();
    }

    // ---- hand-computed -----------------------------------------------------------------------------

    @Test
    void grpoGroupOfOneUsesMeanZeroStdOne() {
        // verl: a group of one has μ = 0, σ = 1, so A = (0.7 − 0) / (1 + 1e-6) = 0.6999993
        float[] a = Advantages.grpo(new float[] {0.7f}, new int[] {42}, true);
        assertEquals(0.6999993f, a[0], 1e-7f);
        // Dr.GRPO: A = R − 0 = 0.7
        assertEquals(0.7f, Advantages.grpo(new float[] {0.7f}, new int[] {42}, false)[0], 0f);
    }

    @Test
    void grpoGroupOfEqualRewardsIsZero() {
        // μ = 0.5, every deviation 0, σ = 0: A = 0 / (0 + 1e-6) = 0 exactly
        assertArrayEquals(new float[] {0f, 0f, 0f}, Advantages.grpo(new float[] {0.5f, 0.5f, 0.5f}, new int[] {1, 1, 1}, true), 0f);
        assertArrayEquals(new float[] {0f, 0f, 0f}, Advantages.drGrpo(new float[] {0.5f, 0.5f, 0.5f}, new int[] {1, 1, 1}), 0f);
    }

    @Test
    void grpoGroupOfTwoValues() {
        // rewards (1, 0, 1, 0) in one group: μ = 0.5, deviations ±0.5,
        // unbiased σ = sqrt((4 · 0.25) / 3) = sqrt(1/3) = 0.5773503
        // A = ±0.5 / (0.5773503 + 1e-6) = ±0.8660239
        float[] a = Advantages.grpo(new float[] {1, 0, 1, 0}, new int[] {7, 7, 7, 7}, true);
        assertArrayEquals(new float[] {0.8660239f, -0.8660239f, 0.8660239f, -0.8660239f}, a, 2e-7f);
        // Dr.GRPO: ±0.5
        assertArrayEquals(new float[] {0.5f, -0.5f, 0.5f, -0.5f}, Advantages.drGrpo(new float[] {1, 0, 1, 0}, new int[] {7, 7, 7, 7}), 0f);
    }

    @Test
    void grpoGroupsAreFoundByIdInAnyOrder() {
        // group 9: (2, 4) → μ 3, σ = sqrt((1 + 1)/1) = 1.4142136 → ∓1/(1.4142136 + 1e-6) = ∓0.7071063
        // group −3: (1) → singleton: 1 / (1 + 1e-6) = 0.999999
        float[] a = Advantages.grpo(new float[] {2, 1, 4}, new int[] {9, -3, 9}, true);
        assertArrayEquals(new float[] {-0.7071063f, 0.999999f, 0.7071063f}, a, 2e-7f);
    }

    /**
     * One prompt, two trees of three leaves, rewards (1, 0, 0 | 1, 1, 0) — a worked example, by hand.
     * ε = 1e-6 changes the 7th significant digit only; the numbers below include it.
     */
    @Test
    void treeGrpoTwoTreesOfThreeLeavesByHand() {
        float[] r = {1, 0, 0, 1, 1, 0};
        int[] prompt = {0, 0, 0, 0, 0, 0};
        int[] tree = {0, 0, 0, 1, 1, 1};
        // intra, tree 0: (1, 0, 0): μ = 1/3, deviations (2/3, −1/3, −1/3),
        //   Σd² = 4/9 + 1/9 + 1/9 = 2/3, σ = sqrt((2/3) / 2) = sqrt(1/3) = 0.57735027
        //   A = (2/3, −1/3, −1/3) / 0.57735127 = (1.1546985, −0.5773493, −0.5773493)
        // intra, tree 1: (1, 1, 0): μ = 2/3, deviations (1/3, 1/3, −2/3), same σ
        //   A = (0.5773493, 0.5773493, −1.1546985)
        float[] intra = {1.1546985f, -0.5773493f, -0.5773493f, 0.5773493f, 0.5773493f, -1.1546985f};
        // inter, all six leaves (1, 0, 0, 1, 1, 0): μ = 1/2, deviations ±1/2,
        //   Σd² = 6 · 1/4 = 1.5, σ = sqrt(1.5 / 5) = sqrt(0.3) = 0.54772256
        //   A = ±0.5 / 0.54772356 = ±0.9128693
        float[] inter = {0.9128693f, -0.9128693f, -0.9128693f, 0.9128693f, 0.9128693f, -0.9128693f};
        // sum: 1.1546985 + 0.9128693 = 2.0675678; −0.5773493 − 0.9128693 = −1.4902186;
        //      0.5773493 + 0.9128693 = 1.4902186; −1.1546985 − 0.9128693 = −2.0675678
        float[] sum = {2.0675678f, -1.4902186f, -1.4902186f, 1.4902186f, 1.4902186f, -2.0675678f};

        Advantages.TreeParts p = Advantages.treeGrpoParts(r, prompt, tree);
        assertArrayEquals(intra, p.intra(), 3e-7f);
        assertArrayEquals(inter, p.inter(), 3e-7f);
        assertArrayEquals(sum, p.advantages(), 5e-7f);
        assertArrayEquals(p.advantages(), Advantages.treeGrpo(r, prompt, tree), 0f);
        // the released code's structure: inter grouped by prompt, intra by tree, summed
        assertArrayEquals(p.inter(), Advantages.grpo(r, prompt, true), 0f);
        assertArrayEquals(p.intra(), Advantages.grpo(r, tree, true), 0f);
    }

    @Test
    void treeIdsLocalToAPromptDoNotMergeAcrossPrompts() {
        // two prompts, each with trees 0 and 1 (local ids): intra groups are (prompt, tree) pairs
        float[] r = {1, 0, 0, 1, /* prompt 8: */ 0, 0, 1, 1};
        int[] prompt = {5, 5, 5, 5, 8, 8, 8, 8};
        int[] tree = {0, 0, 1, 1, 0, 0, 1, 1};
        int[] pair = {0, 0, 1, 1, 2, 2, 3, 3};
        float[] expect = add(Advantages.grpo(r, prompt, true), Advantages.grpo(r, pair, true));
        assertArrayEquals(expect, Advantages.treeGrpo(r, prompt, tree), 0f);
        // prompt 8, tree 0 is (0, 0): intra 0; its inter is (0 − 0.5)/(σ + ε) with σ = sqrt(1/3)
        assertEquals(-0.8660239f, Advantages.treeGrpo(r, prompt, tree)[4], 2e-7f);
    }

    // ---- properties over random inputs ---------------------------------------------------------------

    @Test
    void grpoPropertiesOverRandomGroups() {
        long seed = seed();
        System.out.println("AdvantagesTest.grpoPropertiesOverRandomGroups seed=" + seed);
        Random rnd = new Random(seed);
        for (int trial = 0; trial < 200; trial++) {
            int groups = 1 + rnd.nextInt(20);
            int[] sizes = new int[groups];
            int n = 0;
            for (int g = 0; g < groups; g++) n += sizes[g] = 1 + rnd.nextInt(9);
            // shuffled group ids (sparse values), rewards as multiples of 1/64 so a shift by an integer is exact
            int[] ids = new int[n];
            float[] r = new float[n];
            int kind = rnd.nextInt(3);
            for (int g = 0, t = 0; g < groups; g++)
                for (int j = 0; j < sizes[g]; j++, t++) {
                    ids[t] = g * 1000 - 7;
                    r[t] = kind == 0 ? rnd.nextInt(2) : kind == 1 ? rnd.nextInt(129) / 64f - 1 : (rnd.nextInt(3) - 1) * 0.5f;
                }
            shuffle(rnd, ids, r);
            float[] a = Advantages.grpo(r, ids, true);
            float[] d = Advantages.grpo(r, ids, false);
            for (int g = 0; g < groups; g++) {
                int id = g * 1000 - 7;
                double sum = 0, sumD = 0, rs = 0;
                int cnt = 0;
                for (int t = 0; t < n; t++)
                    if (ids[t] == id) {
                        sum += a[t];
                        sumD += d[t];
                        rs += r[t];
                        cnt++;
                    }
                if (cnt == 1) continue;  // singleton: μ = 0 by definition, checked by hand above
                assertEquals(0.0, sum / cnt, 1e-6, "GRPO mean of group " + id + " seed=" + seed);
                assertEquals(0.0, sumD / cnt, 1e-6, "Dr.GRPO mean of group " + id + " seed=" + seed);
                double mu = rs / cnt, ssR = 0, ssA = 0;
                for (int t = 0; t < n; t++)
                    if (ids[t] == id) {
                        ssR += (r[t] - mu) * (r[t] - mu);
                        ssA += (double) a[t] * a[t];
                    }
                double sigma = Math.sqrt(ssR / (cnt - 1)), stdA = Math.sqrt(ssA / (cnt - 1));
                if (sigma > 0)  // unit unbiased std, up to the ε: σ / (σ + 1e-6)
                    assertEquals(sigma / (sigma + 1e-6), stdA, 1e-6, "std of group " + id + " seed=" + seed);
                else
                    assertEquals(0.0, stdA, 0.0);
            }
            // invariance to a constant added to one group's rewards (exact in float: dyadic values)
            int shifted = rnd.nextInt(groups) * 1000 - 7;
            float c = rnd.nextInt(2001) - 1000;
            float[] r2 = r.clone();
            for (int t = 0; t < n; t++) if (ids[t] == shifted) r2[t] += c;
            float[] a2 = Advantages.grpo(r2, ids, true), d2 = Advantages.grpo(r2, ids, false);
            for (int t = 0; t < n; t++) {
                boolean singleton = count(ids, ids[t]) == 1;
                if (singleton && ids[t] == shifted) continue;  // μ = 0 for a singleton: not shift-invariant by design
                assertEquals(a[t], a2[t], 1e-6f * (1 + Math.abs(a[t])), "shift invariance, seed=" + seed);
                assertEquals(d[t], d2[t], 1e-6f * (1 + Math.abs(d[t])), "Dr.GRPO shift invariance, seed=" + seed);
            }
        }
    }

    @Test
    void treeGrpoIsTheSumOfTwoGrpoCallsOverRandomForests() {
        long seed = seed();
        System.out.println("AdvantagesTest.treeGrpoIsTheSumOfTwoGrpoCalls seed=" + seed);
        Random rnd = new Random(seed);
        for (int trial = 0; trial < 100; trial++) {
            int prompts = 1 + rnd.nextInt(6), m = 1 + rnd.nextInt(4), k = 1 + rnd.nextInt(5);
            int n = prompts * m * k;
            float[] r = new float[n];
            int[] prompt = new int[n], tree = new int[n], pair = new int[n];
            for (int i = 0; i < n; i++) {
                prompt[i] = 100 + i / (m * k);
                tree[i] = (i / k) % m;  // local to the prompt
                pair[i] = i / k;        // globally unique tree
                r[i] = rnd.nextBoolean() ? rnd.nextInt(2) : (float) rnd.nextGaussian();
            }
            shuffle(rnd, r, prompt, tree, pair);
            float[] expect = add(Advantages.grpo(r, prompt, true), Advantages.grpo(r, pair, true));
            assertArrayEquals(expect, Advantages.treeGrpo(r, prompt, tree), 0f, "seed=" + seed);
            assertArrayEquals(expect, AdvantageEstimator.TREE_GRPO.compute(r, prompt, tree), 0f);
        }
    }

    // ---- names and errors ----------------------------------------------------------------------------

    @Test
    void estimatorsByName() {
        float[] r = {1, 0, 0.5f};
        int[] g = {1, 1, 2};
        assertArrayEquals(Advantages.grpo(r, g, true), AdvantageEstimator.byName("grpo").compute(r, g, null), 0f);
        assertArrayEquals(Advantages.grpo(r, g, false), AdvantageEstimator.byName("Dr.GRPO").compute(r, g, null), 0f);
        assertEquals(AdvantageEstimator.TREE_GRPO, AdvantageEstimator.byName("tree-grpo"));
        assertEquals(AdvantageEstimator.DR_GRPO, AdvantageEstimator.byName("dr_grpo"));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> AdvantageEstimator.byName("ppo"));
        assertTrue(e.getMessage().contains("ppo"));
    }

    @Test
    void badInputIsRejectedWithTheOffendingValue() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Advantages.grpo(new float[] {1, Float.NaN}, new int[] {0, 0}, true));
        assertTrue(e.getMessage().contains("rewards[1]"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> Advantages.grpo(new float[] {1, 2}, new int[] {0}, true));
        assertTrue(e.getMessage().contains("groupIds.length"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> Advantages.treeGrpo(new float[] {1}, new int[] {0}, null));
        assertTrue(e.getMessage().contains("treeIds"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> Advantages.grpo((float[]) null, new int[0], true));
        assertEquals(0, Advantages.grpo(new float[0], new int[0], true).length);
    }

    // ---- helpers ---------------------------------------------------------------------------------------

    static float[] add(float[] a, float[] b) {
        float[] s = new float[a.length];
        for (int i = 0; i < s.length; i++) s[i] = a[i] + b[i];
        return s;
    }

    static int count(int[] ids, int id) {
        int c = 0;
        for (int v : ids) if (v == id) c++;
        return c;
    }

    /** Applies one random permutation to all arrays (float[] or int[]). */
    static void shuffle(Random rnd, Object... arrays) {
        int n = java.lang.reflect.Array.getLength(arrays[0]);
        for (int i = n - 1; i > 0; i--) {
            int j = rnd.nextInt(i + 1);
            for (Object a : arrays) {
                Object tmp = java.lang.reflect.Array.get(a, i);
                java.lang.reflect.Array.set(a, i, java.lang.reflect.Array.get(a, j));
                java.lang.reflect.Array.set(a, j, tmp);
            }
        }
    }

    @Test
    void rlooByHandAndAgainstTheLeaveOneOutMean() {
        // group {1, 0, 0, 1}: A_0 = 1 − (0+0+1)/3 = 2/3, A_1 = 0 − 2/3; a group of one keeps R (verl)
        float[] a = Advantages.rloo(new float[] {1, 0, 0, 1, 5}, new int[] {7, 7, 7, 7, 9});
        assertArrayEquals(new float[] {2f / 3, -2f / 3, -2f / 3, 2f / 3, 5f}, a, 1e-6f);
        assertArrayEquals(a, AdvantageEstimator.RLOO.compute(new float[] {1, 0, 0, 1, 5}, new int[] {7, 7, 7, 7, 9}, null));
        long seed = seed();
        System.out.println("AdvantagesTest.rlooAgainstTheLeaveOneOutMean seed=" + seed);
        Random rnd = new Random(seed);
        for (int trial = 0; trial < 50; trial++) {
            int n = 1 + rnd.nextInt(40);
            float[] r = new float[n];
            int[] g = new int[n];
            for (int i = 0; i < n; i++) {
                r[i] = rnd.nextInt(4) == 0 ? rnd.nextInt(2) : (float) (rnd.nextGaussian() * 3);
                g[i] = rnd.nextInt(1 + rnd.nextInt(6)) * 13 - 20;
            }
            float[] got = Advantages.rloo(r, g);
            for (int i = 0; i < n; i++) {  // the definition: R_i minus the mean of the others of its group
                double others = 0;
                int k = 0;
                for (int j = 0; j < n; j++) if (j != i && g[j] == g[i]) { others += r[j]; k++; }
                double want = k == 0 ? r[i] : r[i] - others / k;
                assertEquals(want, got[i], 1e-5 * (1 + Math.abs(want)), "trial " + trial + " i " + i);
            }
        }
    }

    @Test
    void reinforcePlusPlusBaselineWhitensOverTokensAsVerl() {
        long seed = seed();
        System.out.println("AdvantagesTest.reinforcePlusPlusBaseline seed=" + seed);
        Random rnd = new Random(seed);
        for (int trial = 0; trial < 50; trial++) {
            int n = 2 + rnd.nextInt(30);
            float[] r = new float[n];
            int[] g = new int[n], len = new int[n];
            for (int i = 0; i < n; i++) {
                r[i] = rnd.nextInt(3) == 0 ? rnd.nextInt(2) : (float) rnd.nextGaussian();
                g[i] = rnd.nextInt(1 + rnd.nextInt(5));
                len[i] = rnd.nextInt(5) == 0 ? 0 : 1 + rnd.nextInt(40);
            }
            len[0] = Math.max(len[0], 2);
            // reference: expand every trajectory into its tokens and whiten them as verl's masked_whiten
            java.util.List<Double> tok = new java.util.ArrayList<>();
            double[] x = new double[n];
            for (int i = 0; i < n; i++) {
                double mu = 0;
                int c = 0;
                for (int j = 0; j < n; j++) if (g[j] == g[i]) { mu += r[j]; c++; }
                x[i] = r[i] - (c == 1 ? 0 : mu / c);
                for (int t = 0; t < len[i]; t++) tok.add(x[i]);
            }
            double m = 0;
            for (double v : tok) m += v;
            m /= tok.size() + 1e-8;
            double var = 0;
            for (double v : tok) var += (v - m) * (v - m);
            var = var / (tok.size() + 1e-8) * tok.size() / (tok.size() - 1.0);
            float[] got = AdvantageEstimator.REINFORCE_PLUS_PLUS_BASELINE.compute(r, g, null, len);
            for (int i = 0; i < n; i++) {
                double want = (x[i] - m) / Math.sqrt(var + 1e-8);
                assertEquals(want, got[i], 1e-4 * (1 + Math.abs(want)), "trial " + trial + " i " + i);
            }
        }
        // by hand, one token each: x = {0.5, −0.5} → mean 0, var (0.25 + 0.25)/2 · 2/1 = 0.5 → A = ±0.5/√0.5 = ±√0.5;
        // a group of one has μ = 0 (verl): x = R
        float[] a = Advantages.reinforcePlusPlusBaseline(new float[] {1, 0}, new int[] {0, 0}, null);
        assertArrayEquals(new float[] {(float) Math.sqrt(0.5), (float) -Math.sqrt(0.5)}, a, 1e-6f);
        // with 3 tokens on the first: mean = (1.5 − 0.5)/4 = 0.25; var = (3·0.0625 + 0.5625)/4 · 4/3 = 0.25 → A = {0.5, −1.5}
        a = Advantages.reinforcePlusPlusBaseline(new float[] {1, 0}, new int[] {0, 0}, new int[] {3, 1});
        assertArrayEquals(new float[] {0.5f, -1.5f}, a, 1e-6f);
        assertThrows(IllegalArgumentException.class, () -> Advantages.reinforcePlusPlusBaseline(new float[] {1}, new int[] {0}, new int[] {-1}));
        assertEquals(AdvantageEstimator.REINFORCE_PLUS_PLUS_BASELINE, AdvantageEstimator.byName("reinforce-plus-plus-baseline"));
        assertEquals(AdvantageEstimator.RLOO, AdvantageEstimator.byName("rloo"));
    }
}
