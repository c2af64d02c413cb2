package ai.arbor.advantage;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.kernels.TokenAdvantages;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** Every filter reason exercised with its counts; the void-turn ordering; DAPO dynamic sampling. */
class FiltersTest {

    static ScoredTrajectory t(int group, float reward, int calls, int failed, boolean voidTurn, boolean truncated) {
        return new ScoredTrajectory(group, reward, calls, failed, voidTurn, truncated);
    }

    // index: group, reward, tool calls, failed, void turn, truncated
    static final List<ScoredTrajectory> MIX = List.of(
            t(1, 1f, 2, 2, false, false),      // 0: all tool calls failed
            t(1, 0f, 1, 0, false, false),      // 1: clean
            t(1, 0f, 0, 0, true, false),       // 2: void turn
            t(1, 1f, 3, 1, false, true),       // 3: truncated (one of three calls failed: not all)
            t(2, 1f, 0, 0, false, false),      // 4: group 2 = (1, 1): degenerate
            t(2, 1f, 1, 1, false, false),      // 5: degenerate AND all tool calls failed
            t(3, 0f, 0, 0, false, false),      // 6: singleton group: kept
            t(4, 0.5f, 0, 0, false, false),    // 7: group 4 = (0.5, 0.5004): population std 0.0002 < 1e-3
            t(4, 0.5004f, 0, 0, false, false), // 8
            t(5, 0.5f, 0, 0, false, false),    // 9: group 5 = (0.5, 0.503): std 0.0015 >= 1e-3, kept
            t(5, 0.503f, 0, 0, false, false),  // 10
            t(6, 0f, 0, 0, false, false));     // 11: no tool call at all: not "all failed"

    @Test
    void toolAwareFilterMasksTrajectoriesWhoseCallsAllFailed() {
        FilterResult r = new ToolAwareFilter().apply(MIX);
        assertEquals(2, r.count(FilterReason.ALL_TOOL_CALLS_FAILED));
        assertEquals(EnumSet.of(FilterReason.ALL_TOOL_CALLS_FAILED), r.reasons(0));
        assertEquals(EnumSet.of(FilterReason.ALL_TOOL_CALLS_FAILED), r.reasons(5));
        assertEquals(0f, r.weight(0));
        assertEquals(10, r.keptCount());
        assertEquals(2, r.excludedCount());
        // strength 0.3: weight 1 − 0.3 = 0.7, kept but scaled
        FilterResult soft = new ToolAwareFilter(0.3f).apply(MIX);
        assertEquals(0.7f, soft.weight(0), 1e-7f);
        assertEquals(12, soft.keptCount());
        assertEquals(2, soft.scaledCount());
        assertEquals(2, soft.count(FilterReason.ALL_TOOL_CALLS_FAILED));
        assertThrows(IllegalArgumentException.class, () -> new ToolAwareFilter(0f));
        assertThrows(IllegalArgumentException.class, () -> new ToolAwareFilter(1.5f));
    }

    @Test
    void degenerateGroupFilterDropsGroupsBelowTheStdThreshold() {
        FilterResult r = new DegenerateGroupFilter().apply(MIX);
        assertEquals(4, r.count(FilterReason.DEGENERATE_GROUP));  // groups 2 and 4, two trajectories each
        for (int i : new int[] {4, 5, 7, 8}) assertEquals(EnumSet.of(FilterReason.DEGENERATE_GROUP), r.reasons(i));
        for (int i : new int[] {0, 1, 2, 3, 6, 9, 10, 11}) assertTrue(r.isKept(i), "trajectory " + i);
        // singletons dropped when asked
        FilterResult strict = new DegenerateGroupFilter(1e-3, false).apply(MIX);
        assertEquals(6, strict.count(FilterReason.DEGENERATE_GROUP));  // + groups 3 and 6
        // threshold 0 drops nothing (std < 0 never holds), not even (1, 1)
        assertEquals(0, new DegenerateGroupFilter(0.0, true).apply(MIX).count(FilterReason.DEGENERATE_GROUP));
        assertTrue(new DegenerateGroupFilter().isDegenerate(new float[] {0f, 0f, 0f}));
        assertFalse(new DegenerateGroupFilter().isDegenerate(new float[] {0f, 1f}));
    }

    @Test
    void voidTurnAndOverlongFilters() {
        FilterResult v = new VoidTurnFilter().apply(MIX);
        assertEquals(1, v.count(FilterReason.VOID_TURN));
        assertEquals(EnumSet.of(FilterReason.VOID_TURN), v.reasons(2));
        assertEquals(11, v.keptCount());
        FilterResult o = new OverlongFilter().apply(MIX);
        assertEquals(1, o.count(FilterReason.TRUNCATED));
        assertEquals(EnumSet.of(FilterReason.TRUNCATED), o.reasons(3));
        assertEquals(0f, o.weight(3));
        // one switch with the rewards' DAPO overlong shaping
        ai.arbor.reward.OverlongShaping dapo = ai.arbor.reward.OverlongShaping.dapo(1000, 200);
        assertEquals(0, OverlongFilter.of(dapo).apply(MIX).count(FilterReason.TRUNCATED));
        assertEquals(1, OverlongFilter.of(dapo.withMaskTruncated(true)).apply(MIX).count(FilterReason.TRUNCATED));
    }

    /**
     * TAO-RL's release (remove_clip with min_n = 4): a group with fewer than 4 responses within the length limit is dropped
     * whole, a group with 4 or more keeps them and masks only its truncated ones.
     */
    @Test
    void taoRlDropsAGroupWithFewerThanFourResponsesWithinTheLimit() {
        List<ScoredTrajectory> g = List.of(
                t(1, 1f, 0, 0, false, false), t(1, 0f, 0, 0, false, false), t(1, 1f, 0, 0, false, false), t(1, 0f, 0, 0, false, true),
                t(1, 0f, 0, 0, false, true),                                     // group 1: 3 of 5 within the limit: dropped
                t(2, 1f, 0, 0, false, false), t(2, 0f, 0, 0, false, false), t(2, 0f, 0, 0, false, false), t(2, 1f, 0, 0, false, false),
                t(2, 1f, 0, 0, false, true),                                     // group 2: 4 of 5: kept, index 9 masked
                t(3, 1f, 0, 0, false, true), t(3, 0f, 0, 0, false, true));     // group 3: none within
        FilterResult r = OverlongFilter.taoRl().apply(g);
        assertArrayEquals(new boolean[] {false, false, false, false, false, true, true, true, true, false, false, false}, r.keepMask());
        assertEquals(5, r.count(FilterReason.TRUNCATED));
        assertEquals(3, r.count(FilterReason.FEW_WITHIN_LENGTH), "group 1's three responses within the limit");
        assertEquals(EnumSet.of(FilterReason.TRUNCATED), r.reasons(3));
        assertEquals(EnumSet.of(FilterReason.FEW_WITHIN_LENGTH), r.reasons(0));
        // the plain filter masks the truncated ones only
        assertEquals(7, new OverlongFilter().apply(g).keptCount());
        assertTrue(OverlongFilter.taoRl().dropsGroup(3) && !OverlongFilter.taoRl().dropsGroup(4) && !new OverlongFilter().dropsGroup(0));
        var e = assertThrows(IllegalArgumentException.class, () -> new OverlongFilter(true, -1));
        assertTrue(e.getMessage().contains("-1"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> new OverlongFilter(false, 4));
    }

    @Test
    void allFiltersTogetherCountEveryReasonAndDropNothingSilently() {
        TrajectoryFilter all = TrajectoryFilter.all(new ToolAwareFilter(), new DegenerateGroupFilter(), new VoidTurnFilter(),
                new OverlongFilter());
        FilterResult r = all.apply(MIX);
        assertEquals(Map.of(FilterReason.ALL_TOOL_CALLS_FAILED, 2, FilterReason.DEGENERATE_GROUP, 4, FilterReason.VOID_TURN, 1,
                FilterReason.TRUNCATED, 1, FilterReason.FEW_WITHIN_LENGTH, 0, FilterReason.OVERSAMPLED, 0), r.counts());
        assertEquals(7, r.excludedCount());  // 0, 2, 3, 4, 5, 7, 8 (5 has two reasons)
        assertEquals(5, r.keptCount());
        assertEquals(EnumSet.of(FilterReason.DEGENERATE_GROUP, FilterReason.ALL_TOOL_CALLS_FAILED), r.reasons(5));
        assertArrayEquals(new boolean[] {false, true, false, false, false, false, true, false, false, true, true, true}, r.keepMask());
        Map<String, Double> m = r.metrics("filter/");
        assertEquals(7.0, m.get("filter/excluded"));
        assertEquals(1.0, m.get("filter/void_turn"));
        assertEquals(4.0, m.get("filter/degenerate_group"));
        assertTrue(r.toString().contains("all_tool_calls_failed=2"), r.toString());
        assertNothingSilent(r);
    }

    @Test
    void nothingIsDroppedSilentlyOverRandomTrajectories() {
        long seed = AdvantagesTest.seed();
        System.out.println("FiltersTest.nothingIsDroppedSilently seed=" + seed);
        Random rnd = new Random(seed);
        TrajectoryFilter all = TrajectoryFilter.all(new ToolAwareFilter(0.5f + 0.5f * rnd.nextFloat()), new DegenerateGroupFilter(),
                new VoidTurnFilter(), new OverlongFilter());
        for (int trial = 0; trial < 50; trial++) {
            List<ScoredTrajectory> ts = new ArrayList<>();
            int n = rnd.nextInt(60);
            for (int i = 0; i < n; i++) {
                int calls = rnd.nextInt(4);
                ts.add(t(rnd.nextInt(8), rnd.nextInt(2), calls, calls == 0 ? 0 : rnd.nextInt(calls + 1), rnd.nextInt(6) == 0,
                        rnd.nextInt(7) == 0));
            }
            FilterResult r = all.apply(ts);
            assertNothingSilent(r);
            // each reason's count is exactly the trajectories with that property
            int failed = 0, voids = 0, trunc = 0;
            for (ScoredTrajectory x : ts) {
                failed += x.allToolCallsFailed() ? 1 : 0;
                voids += x.hasVoidTurn() ? 1 : 0;
                trunc += x.truncated() ? 1 : 0;
            }
            assertEquals(failed, r.count(FilterReason.ALL_TOOL_CALLS_FAILED), "seed=" + seed);
            assertEquals(voids, r.count(FilterReason.VOID_TURN), "seed=" + seed);
            assertEquals(trunc, r.count(FilterReason.TRUNCATED), "seed=" + seed);
            assertEquals(n, r.keptCount() + r.excludedCount());
        }
    }

    /** weight < 1 exactly when there is a reason; every excluded trajectory is counted under some reason. */
    static void assertNothingSilent(FilterResult r) {
        int withReason = 0;
        for (int i = 0; i < r.size(); i++) {
            assertEquals(r.weight(i) < 1f, !r.reasons(i).isEmpty(), "trajectory " + i);
            if (!r.reasons(i).isEmpty()) withReason++;
        }
        assertTrue(withReason >= r.excludedCount() + r.scaledCount());
        int sum = 0;
        for (int c : r.counts().values()) sum += c;
        assertTrue(sum >= withReason);
    }

    /**
     * SimpleTIR: a void-turn trajectory leaves the loss but stays in its group's statistics. Group rewards
     * (1, 0, 0, 1), the last with a void turn.
     */
    @Test
    void voidTurnTrajectoriesStillCountInTheirGroupStatistics() {
        List<ScoredTrajectory> g = List.of(t(0, 1f, 0, 0, false, false), t(0, 0f, 0, 0, false, false),
                t(0, 0f, 0, 0, false, false), t(0, 1f, 0, 0, true, false));
        FilterResult f = new VoidTurnFilter().apply(g);
        float[] a = f.applyTo(Advantages.grpo(g, true));
        // over all four: μ = 0.5, σ = sqrt(4 · 0.25 / 3) = 0.5773503, A = ±0.5 / (σ + 1e-6) = ±0.8660239;
        // the void trajectory's is then multiplied by 0
        assertArrayEquals(new float[] {0.8660239f, -0.8660239f, -0.8660239f, 0f}, a, 2e-7f);
        // the wrong order (dropping it before the statistics) would give μ = 1/3: (1.1546985, −0.5773493, −0.5773493)
        float[] wrong = Advantages.grpo(new float[] {1f, 0f, 0f}, new int[] {0, 0, 0}, true);
        assertEquals(1.1546985f, wrong[0], 3e-7f);
        assertTrue(Math.abs(wrong[0] - a[0]) > 0.2f);
        // its tokens leave the loss mask: trajectories of lengths 2, 1, 2, 3
        int[] seq = TokenAdvantages.seqIdsOf(2, 1, 2, 3);
        boolean[] lossMask = {true, false, true, true, true, true, true, true};
        assertArrayEquals(new boolean[] {true, false, true, true, true, false, false, false}, f.tokenMask(seq, lossMask));
    }

    // ---- DAPO dynamic sampling ------------------------------------------------------------------------

    static List<ScoredTrajectory> groups(int firstId, float[]... rewards) {
        List<ScoredTrajectory> ts = new ArrayList<>();
        for (int g = 0; g < rewards.length; g++)
            for (float r : rewards[g]) ts.add(ScoredTrajectory.of(firstId + g, r));
        return ts;
    }

    @Test
    void dynamicSamplingFillsTheBatchAndSaysHowManyPromptsToDraw() {
        DynamicSampling ds = new DynamicSampling(3);
        // round 1: (1,1) (0,0) (1,0) (0,0): one informative group of four
        DynamicSampling.Round r1 = ds.add(groups(0, new float[] {1, 1}, new float[] {0, 0}, new float[] {1, 0}, new float[] {0, 0}));
        assertEquals(4, r1.groups());
        assertEquals(1, r1.informative());
        assertEquals(1, r1.kept());
        assertEquals(0.25, r1.keepRate(), 0.0);
        // need 2 more, p̂ = (1 + 1) / (4 + 2) = 1/3: ⌈2 / (1/3)⌉ = 6 prompts
        assertEquals(6, r1.promptsToDraw());
        assertFalse(r1.full());
        // round 2: (1,0) (1,1) (0,1) (1,0) (0,0) (0.5,1): four informative; two fill the batch, two are extra
        DynamicSampling.Round r2 = ds.add(groups(10, new float[] {1, 0}, new float[] {1, 1}, new float[] {0, 1}, new float[] {1, 0},
                new float[] {0, 0}, new float[] {0.5f, 1}));
        assertEquals(4, r2.informative());
        assertEquals(3, r2.kept());
        assertTrue(r2.full());
        assertEquals(0, r2.promptsToDraw());
        assertEquals(0.5, ds.keepRate(), 0.0);
        DynamicSampling.Batch b = ds.batch();
        assertEquals(3, b.groups());
        assertEquals(6, b.trajectories().size());
        assertArrayEquals(new int[] {4, 5, 8, 9, 12, 13}, b.offeredIndex());  // groups 2, 10 and 12
        assertEquals(2, b.trajectories().get(0).groupId());
        assertEquals(12, b.trajectories().get(5).groupId());
        FilterResult f = b.offered();
        assertEquals(20, f.size());
        assertEquals(10, f.count(FilterReason.DEGENERATE_GROUP));  // groups 0, 1, 3, 11, 14
        assertEquals(4, f.count(FilterReason.OVERSAMPLED));        // groups 13, 15
        assertEquals(6, f.keptCount());
        assertNothingSilent(f);
        assertThrows(IllegalStateException.class, () -> ds.add(groups(20, new float[] {1, 0})));
    }

    @Test
    void dynamicSamplingGivesUpAfterMaxRounds() {
        DynamicSampling ds = new DynamicSampling(5, new DegenerateGroupFilter(), 1);
        DynamicSampling.Round r = ds.add(groups(0, new float[] {1, 0}, new float[] {1, 1}));
        assertFalse(r.full());
        assertTrue(ds.isExhausted());
        assertEquals(0, r.promptsToDraw());
        assertThrows(IllegalStateException.class, () -> ds.add(groups(5, new float[] {1, 0})));
        DynamicSampling.Batch b = ds.batch();  // a partial batch, reasons intact
        assertEquals(1, b.groups());
        assertEquals(2, b.trajectories().size());
        assertEquals(2, b.offered().count(FilterReason.DEGENERATE_GROUP));
    }

    @Test
    void promptsToDrawFormula() {
        assertEquals(20, DynamicSampling.promptsToDraw(10, 0, 0));  // no data yet: p̂ = 1/2
        assertEquals(6, DynamicSampling.promptsToDraw(2, 1, 4));    // p̂ = 1/3
        assertEquals(12, DynamicSampling.promptsToDraw(1, 0, 10));  // nothing informative yet: p̂ = 1/12
        assertEquals(0, DynamicSampling.promptsToDraw(0, 3, 4));
        assertEquals(4, DynamicSampling.promptsToDraw(3, 98, 98));  // p̂ = 99/100: ⌈3.03⌉
        assertThrows(IllegalArgumentException.class, () -> DynamicSampling.promptsToDraw(1, 5, 4));
    }

    @Test
    void scoredTrajectoryFromTheRewardsSummary() {
        ai.arbor.reward.TrajectorySummary s = new ai.arbor.reward.TrajectorySummary("x", 3, 3, 900, true);
        ScoredTrajectory t = ScoredTrajectory.of(7, -0.5f, s, false);
        assertEquals(new ScoredTrajectory(7, -0.5f, 3, 3, false, true), t);
        assertTrue(t.allToolCallsFailed());
    }

    @Test
    void summariesValidateTheirFields() {
        assertThrows(IllegalArgumentException.class, () -> t(0, Float.NaN, 0, 0, false, false));
        assertThrows(IllegalArgumentException.class, () -> t(0, 1f, 1, 2, false, false));
        assertThrows(IllegalArgumentException.class, () -> t(0, 1f, -1, 0, false, false));
        assertThrows(IllegalArgumentException.class, () -> FilterResult.builder(2).mark(0, FilterReason.VOID_TURN, 1f));
        assertThrows(IllegalArgumentException.class, () -> FilterResult.builder(2).mark(2, FilterReason.VOID_TURN, 0f));
        assertThrows(IllegalArgumentException.class, () -> FilterResult.keepAll(2).applyTo(new float[3]));
    }
}
