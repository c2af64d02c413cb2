package ai.arbor.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.kernels.ClipMode;
import ai.arbor.kernels.KlType;
import ai.arbor.kernels.LossAgg;
import ai.arbor.kernels.PolicyLossConfig;
import ai.arbor.kernels.PolicyLossResult;
import ai.arbor.rl.Recipe;
import ai.arbor.rl.TokenBatch;
import ai.arbor.torch.model.PolicyConfig;
import ai.arbor.torch.model.ReferencePolicy;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Test;

/**
 * Tree-packed training (docs/algorithms.md §9): the packed passes give the unpacked passes' loss, gradients and
 * log-probs. The reference is the unpacked trainer (one padded causal row per trajectory), itself tested
 * against independent references in {@link TrainerTest}; both run on policies with identical weights.
 */
@SuppressWarnings("try")
class PackedTrainingTest {
    static final int LIMIT = 37;

    /** A Qwen3-shaped model (q/k norms, q/k/v/o biases, head_dim ≠ d/heads, untied head, padded vocabulary). */
    static final PolicyConfig QWEN3 = new PolicyConfig(LIMIT + 3, 24, 2, 4, 2, 40, 96, 10_000.0, 1e-6, false, 11, 10, true, true, true, null);
    /** The project's character model's shape (tied embeddings, no biases, no q/k norm). */
    static final PolicyConfig CHAR = new PolicyConfig(LIMIT, 32, 2, 4, 2, 64, 96, 10_000.0, 1e-6, true, 5);

    /**
     * Random groups of trajectories sharing prefixes: per group a prompt, then a tree of segments (generated
     * tokens trained, tool observations between turns not), branching 1–3 per node to depth ≤ 3; some
     * trajectories end at an inner node (a strict prefix of others), one group's trajectories share nothing
     * (different first tokens), one trajectory is a duplicate. Every trajectory's generated tokens are rows.
     */
    static List<int[]> trees(Random rnd, List<boolean[]> masks) {
        List<int[]> out = new ArrayList<>();
        int groups = 2 + rnd.nextInt(2);
        for (int g = 0; g < groups; g++) {
            List<Integer> prompt = new ArrayList<>();
            int pl = 2 + rnd.nextInt(5);
            for (int i = 0; i < pl; i++) prompt.add(1 + rnd.nextInt(LIMIT - 1));
            List<Boolean> pm = new ArrayList<>();
            for (int i = 0; i < pl; i++) pm.add(false);
            grow(rnd, prompt, pm, 0, out, masks);
        }
        // a group with no sharing: chains with distinct first tokens
        for (int i = 0; i < 3; i++) {
            int len = 3 + rnd.nextInt(8);
            int[] t = new int[len];
            boolean[] m = new boolean[len];
            t[0] = LIMIT - 1 - i;
            for (int p = 1; p < len; p++) {
                t[p] = 1 + rnd.nextInt(LIMIT - 1);
                m[p] = p >= 2;
            }
            out.add(t);
            masks.add(m);
        }
        out.add(out.get(0).clone());   // a duplicate trajectory
        masks.add(masks.get(0).clone());
        return out;
    }

    private static void grow(Random rnd, List<Integer> path, List<Boolean> mask, int depth, List<int[]> out, List<boolean[]> masks) {
        // one turn: generated tokens, then (not at the last level) an observation
        List<Integer> p = new ArrayList<>(path);
        List<Boolean> m = new ArrayList<>(mask);
        int gen = 1 + rnd.nextInt(5);
        for (int i = 0; i < gen; i++) {
            p.add(1 + rnd.nextInt(LIMIT - 1));
            m.add(true);
        }
        int children = depth >= 3 ? 0 : 1 + rnd.nextInt(3);
        if (children == 0 || rnd.nextInt(4) == 0) {   // a trajectory ends here (with children too: a strict prefix)
            out.add(p.stream().mapToInt(Integer::intValue).toArray());
            boolean[] b = new boolean[m.size()];
            for (int i = 0; i < b.length; i++) b[i] = m.get(i);
            masks.add(b);
        }
        if (children == 0) return;
        int obs = rnd.nextInt(4);
        for (int i = 0; i < obs; i++) {
            p.add(1 + rnd.nextInt(LIMIT - 1));
            m.add(false);
        }
        for (int c = 0; c < children; c++) grow(rnd, p, m, depth + 1, out, masks);
    }

    /**
     * The trained rows of {@code seqs} with old log-probs = the policy's own perturbed by ±0.3 (some ratios
     * clipped), reference log-probs perturbed apart, per-trajectory advantages of both signs, weights in {0.5, 1}.
     */
    static TokenBatch batch(List<int[]> seqs, List<boolean[]> masks, Random rnd, PolicyConfig cfg) {
        List<Integer> seqId = new ArrayList<>(), pos = new ArrayList<>();
        for (int s = 0; s < seqs.size(); s++)
            for (int p = 1; p < seqs.get(s).length; p++)
                if (masks.get(s)[p]) {
                    seqId.add(s);
                    pos.add(p);
                }
        int n = seqId.size();
        int[] sid = seqId.stream().mapToInt(Integer::intValue).toArray(), ps = pos.stream().mapToInt(Integer::intValue).toArray();
        int[] label = new int[n], src = new int[seqs.size()];
        for (int k = 0; k < n; k++) label[k] = seqs.get(sid[k])[ps[k]];
        for (int s = 0; s < src.length; s++) src[s] = s;
        float[] w = new float[n], adv = new float[n], zero = new float[n];
        float[] seqAdv = new float[seqs.size()];
        for (int s = 0; s < seqAdv.length; s++) seqAdv[s] = (float) rnd.nextGaussian();
        for (int k = 0; k < n; k++) {
            w[k] = rnd.nextBoolean() ? 1f : 0.5f;
            adv[k] = seqAdv[sid[k]] * (1 + 0.2f * (float) rnd.nextGaussian());   // token-shaped, as AEPO's
        }
        TokenBatch b = new TokenBatch(seqs, src, sid, ps, label, null, zero, null, adv, w, null, null);
        try (ReferencePolicy p = ReferencePolicy.create(cfg)) {
            float[] lp = Trainer.score(p, b, 1f, 1 << 14, LIMIT).logprobs();
            float[] old = new float[n], ref = new float[n];
            for (int k = 0; k < n; k++) {
                old[k] = Math.min(0f, lp[k] + (float) (0.3 * (2 * rnd.nextDouble() - 1)));
                ref[k] = lp[k] + (float) (0.2 * rnd.nextGaussian());
            }
            return b.withOldLogprobs(old).withRefLogprobs(ref);
        }
    }

    /** Every recipe's loss, and the variants no recipe uses: the sequence aggregations, GSPO, CISPO, AEPO top-q, KL + entropy bonus. */
    static Map<String, PolicyLossConfig> losses() {
        Map<String, PolicyLossConfig> m = new LinkedHashMap<>();
        for (Recipe r : Recipe.values()) if (r.kind() == Recipe.Kind.POLICY_GRADIENT) m.put(r.name(), r.loss());
        m.put("seq-mean-token-mean+k3", PolicyLossConfig.builder().agg(LossAgg.SEQ_MEAN_TOKEN_MEAN).klType(KlType.K3).klCoef(0.1).entropyCoef(0.01).build());
        m.put("seq-mean-token-sum", PolicyLossConfig.builder().agg(LossAgg.SEQ_MEAN_TOKEN_SUM).dualClipC(3).build());
        m.put("seq-mean-token-sum-norm", PolicyLossConfig.builder().agg(LossAgg.SEQ_MEAN_TOKEN_SUM_NORM).build());
        m.put("gspo", PolicyLossConfig.gspo());
        m.put("cispo", PolicyLossConfig.cispo());
        m.put("aepo-top-q", PolicyLossConfig.aepo().toBuilder().aepoTopEntropyFraction(0.3).build());
        return m;
    }

    @Test
    void packedGradientsEqualUnpackedOnRandomTreesForEveryLoss() {
        long seed = ai.arbor.testing.Seeds.seed("PackedTrainingTest");
        Random rnd = new Random(seed);
        for (PolicyConfig cfg : new PolicyConfig[] {QWEN3, CHAR}) {
            // trees drawn again (from the same seeded stream) until they need several micro-batches: a small draw
            // (seed 59362833938744: 51 unique of 86 tokens) fits one, which would not test the split
            TokenBatch b;
            PackedPasses.Work work;
            int draws = 0;
            do {
                List<boolean[]> masks = new ArrayList<>();
                List<int[]> seqs = trees(rnd, masks);
                b = batch(seqs, masks, rnd, cfg);
                work = PackedPasses.work(b, cfg, 96, 64);
                assertTrue(++draws <= 50, "trees large enough for several micro-batches in 50 draws (seed " + seed + ")");
            } while (work.microBatches() < 2);
            assertTrue(work.uniqueTokens() < work.totalTokens(), "the trees share prefixes: " + work);
            assertTrue(work.microBatches() > 1, "several micro-batches: " + work);
            double worst = 0;
            for (Map.Entry<String, PolicyLossConfig> e : losses().entrySet()) {
                PolicyLossConfig loss = e.getValue();
                // AEPO's top-q entropy threshold is taken per kernel call, i.e. per micro-batch (packed or not): one
                // micro-batch each, so both see the whole batch's threshold
                int budget = loss.clipMode() == ClipMode.AEPO_STOP_GRADIENT && loss.aepoTopEntropyFraction() < 1 ? 1 << 14 : 96;
                try (ReferencePolicy p1 = ReferencePolicy.create(cfg); ReferencePolicy p2 = ReferencePolicy.create(cfg);
                     Trainer plain = new Trainer(p1, OptimConfig.adamW(1e-3), 10, budget, LIMIT).packing(false);
                     Trainer packed = new Trainer(p2, OptimConfig.adamW(1e-3), 10, budget, LIMIT).packing(true, 64);
                     PointerScope scope = new PointerScope()) {
                    String what = e.getKey() + " (" + (cfg == CHAR ? "char" : "qwen3") + ", seed " + seed + ")";
                    if (loss.selectsByEntropy()) {
                        loss = clearTopEntropyFraction(loss, p1, b);
                        what += " q " + loss.aepoTopEntropyFraction();
                    }
                    PolicyLossResult a = plain.policyBackward(b, loss), c = packed.policyBackward(b, loss);
                    // float32 sums of terms of both signs: 1e-5 relative plus 1e-7 absolute (the losses are O(1e-3 … 1))
                    assertEquals(a.loss(), c.loss(), 1e-7 + 1e-5 * Math.abs(a.loss()), what + " loss");
                    assertEquals(a.tokens(), c.tokens(), 0, what + " tokens");
                    assertEquals(a.clipFracHigh(), c.clipFracHigh(), 1e-9, what + " upper clip fraction");
                    assertEquals(a.entropyMean(), c.entropyMean(), 1e-5, what + " entropy mean");
                    worst = Math.max(worst, compareGradients(plain, packed, p1, what));
                }
            }
            System.out.printf("%s: %d trajectories, %d rows, %d unique of %d tokens, %d micro-batches; worst gradient rel. diff %.3g%n",
                    cfg == CHAR ? "char" : "qwen3", b.sequenceCount(), b.rows(), work.uniqueTokens(), work.totalTokens(), work.microBatches(), worst);
        }
    }

    /**
     * AEPO's top-q fraction moved to where the selection boundary has a clear gap: the packed and unpacked passes
     * compute each entropy to a few ulp apart, so two trained tokens whose entropies tie to that precision at the
     * boundary may be selected by one pass and not the other (a whole token's gradient apart: seed 13365635994839
     * at q 0.3). Takes the count k in [0.2 n, 0.4 n] of the n trained tokens with the widest gap between the k-th
     * largest entropy and the next (scored unpacked, one micro-batch) and q = (k − ½) / n, which selects those k.
     */
    private static PolicyLossConfig clearTopEntropyFraction(PolicyLossConfig loss, ReferencePolicy policy, TokenBatch b) {
        float[] h = Trainer.score(policy, b, (float) loss.temperature(), 1 << 14, LIMIT).entropies();
        float[] v = new float[h.length];
        int n = 0;
        for (int i = 0; i < h.length; i++) if (b.weight()[i] > 0) v[n++] = h[i];
        java.util.Arrays.sort(v, 0, n);
        int bestK = -1;
        double bestGap = -1;
        for (int k = Math.max(1, (int) (0.2 * n)); k <= Math.min(n - 1, (int) (0.4 * n)); k++) {
            double gap = (double) v[n - k] - v[n - k - 1];
            if (gap > bestGap) {
                bestGap = gap;
                bestK = k;
            }
        }
        assertTrue(bestK > 0 && bestGap > 1e-5, "a top-q boundary with a gap among " + n + " trained tokens (widest " + bestGap + ")");
        System.out.printf("  top-q: %d of %d trained tokens, entropy gap at the boundary %.3g%n", bestK, n, bestGap);
        return loss.toBuilder().aepoTopEntropyFraction((bestK - 0.5) / n).build();
    }

    /** The packed fused-linear path (hidden states gathered per pair, the LM head fused with the loss) against the unpacked logits path. */
    @Test
    void packedFusedLinearPathGivesTheUnpackedGradients() {
        long seed = ai.arbor.testing.Seeds.seed("PackedTrainingTest");
        Random rnd = new Random(seed);
        List<boolean[]> masks = new ArrayList<>();
        List<int[]> seqs = trees(rnd, masks);
        TokenBatch b = batch(seqs, masks, rnd, QWEN3);
        PolicyLossConfig loss = Recipe.TREE_GRPO.loss();
        try (ReferencePolicy p1 = ReferencePolicy.create(QWEN3); ReferencePolicy p2 = ReferencePolicy.create(QWEN3);
             Trainer plain = new Trainer(p1, OptimConfig.adamW(1e-3), 10, 96, LIMIT).packing(false).fusedLinearAbove(Long.MAX_VALUE);
             Trainer packed = new Trainer(p2, OptimConfig.adamW(1e-3), 10, 96, LIMIT).packing(true, 64).fusedLinearAbove(0);
             PointerScope scope = new PointerScope()) {
            PolicyLossResult a = plain.policyBackward(b, loss), c = packed.policyBackward(b, loss);
            assertEquals(a.loss(), c.loss(), 1e-7 + 1e-5 * Math.abs(a.loss()), "loss (seed " + seed + ")");
            compareGradients(plain, packed, p1, "fused linear (seed " + seed + ")");
        }
    }

    /** Per parameter ‖g_packed − g_plain‖ / ‖g_plain‖ ≤ 1e-5; returns the worst. */
    private static double compareGradients(Trainer plain, Trainer packed, ReferencePolicy named, String what) {
        double worst = 0;
        List<String> names = new ArrayList<>(named.namedParameters().keySet());
        for (int i = 0; i < plain.parameters().size(); i++) {
            float[] x = values(plain.parameters().get(i).grad()), y = values(packed.parameters().get(i).grad());
            double diff = 0, norm = 0;
            for (int k = 0; k < x.length; k++) {
                diff += ((double) x[k] - y[k]) * ((double) x[k] - y[k]);
                norm += (double) x[k] * x[k];
            }
            assertTrue(norm > 0, what + ": " + names.get(i) + " gets a gradient");
            double rel = Math.sqrt(diff / norm);
            worst = Math.max(worst, rel);
            assertTrue(rel <= 1e-5, what + ": " + names.get(i) + " packed vs unpacked gradient rel. diff " + rel);
        }
        return worst;
    }

    @Test
    void packedScoresEqualUnpacked() {
        long seed = ai.arbor.testing.Seeds.seed("PackedTrainingTest");
        Random rnd = new Random(seed);
        List<boolean[]> masks = new ArrayList<>();
        List<int[]> seqs = trees(rnd, masks);
        TokenBatch b = batch(seqs, masks, rnd, QWEN3);
        try (ReferencePolicy p = ReferencePolicy.create(QWEN3)) {
            Trainer.Scores a = Trainer.score(p, b, 0.7f, 96, LIMIT, false), c = Trainer.score(p, b, 0.7f, 96, LIMIT, true);
            for (int k = 0; k < b.rows(); k++) {
                assertEquals(a.logprobs()[k], c.logprobs()[k], 1e-5, "log-prob of row " + k + " (seed " + seed + ")");
                assertEquals(a.entropies()[k], c.entropies()[k], 1e-5, "entropy of row " + k + " (seed " + seed + ")");
            }
        }
    }

    /**
     * The masked forward itself: a hand-made pack of two branches [a b | c d] and [a b | e] (slots a b c d e, e's parent
     * b) gives, at every slot, the logits of the plain causal forward of its own path.
     */
    @Test
    void maskedForwardOfAHandMadePackEqualsEachPathsCausalForward() {
        try (ReferencePolicy p = ReferencePolicy.create(QWEN3); PointerScope scope = new PointerScope()) {
            long[] tok = {3, 7, 11, 13, 17}, pos = {0, 1, 2, 3, 2};
            int[] parent = {-1, 0, 1, 2, 1};
            byte[] mask = new byte[25];
            for (int q = 0; q < 5; q++) for (int k = q; k >= 0; k = parent[k]) mask[q * 5 + k] = 1;
            Tensor packed = p.forwardRows(Tensor.create(tok, 1, 5), Tensor.create(new long[] {0, 1, 2, 3, 4}, 5),
                    Tensor.create(pos, 1, 5), Tensor.create(mask, 1, 5, 5).to(ScalarType.Bool));
            float[] got = values(packed);
            float[] first = values(p.forward(new int[][] {{3, 7, 11, 13}})), second = values(p.forward(new int[][] {{3, 7, 17}}));
            int v = QWEN3.vocab();
            int[][] slotToPath = {{0, 0}, {0, 1}, {0, 2}, {0, 3}, {1, 2}};
            for (int s = 0; s < 5; s++) {
                float[] want = slotToPath[s][0] == 0 ? first : second;
                for (int j = 0; j < v; j++)
                    assertEquals(want[slotToPath[s][1] * v + j], got[s * v + j], 1e-5, "slot " + s + " logit " + j);
            }
        }
    }

    /**
     * Path attention, both forms (an explicit mask over each sequence's owned queries, and causal attention along
     * whole paths), on random trees: the logits at every unique slot equal the plain causal forward of a sequence
     * through it.
     */
    @Test
    void pathAttentionLogitsEqualEachSequencesCausalForward() {
        long seed = ai.arbor.testing.Seeds.seed("PackedTrainingTest");
        Random rnd = new Random(seed);
        List<boolean[]> masks = new ArrayList<>();
        List<int[]> seqs = trees(rnd, masks);
        TokenBatch b = batch(seqs, masks, rnd, QWEN3);
        try (ReferencePolicy p = ReferencePolicy.create(QWEN3); PointerScope scope = new PointerScope()) {
            for (ai.arbor.rl.TreePacking.MicroBatch mb : ai.arbor.rl.TreePacking.plan(b, 1 << 12, 1 << 12, ai.arbor.rl.TreePacking.Cost.tokensOnly())) {
                ai.arbor.rl.TreePacking.Packed pk = ai.arbor.rl.TreePacking.pack(b, mb);
                ai.arbor.rl.TreePacking.PathAttention a = pk.pathAttention();
                int u = a.tokens().length, v = QWEN3.vocab();
                long[] all = new long[u];
                for (int i = 0; i < u; i++) all[i] = i;
                byte[] mask = new byte[a.mask().length];
                for (int i = 0; i < mask.length; i++) mask[i] = (byte) (a.mask()[i] ? 1 : 0);
                Tensor tok = Tensor.create(a.tokens(), u), pos = Tensor.create(a.positions(), u), keys = Tensor.create(a.keyIndex(), a.keyIndex().length);
                float[] masked = values(p.forwardPathRows(new ReferencePolicy.PathBatch(tok, pos, Tensor.create(a.queryIndex(), a.queryIndex().length), keys,
                        Tensor.create(mask, a.sequences(), a.queries(), a.keys()).to(ScalarType.Bool), Tensor.create(a.scatter(), u), a.sequences()),
                        Tensor.create(all, u)));
                float[] causal = values(p.forwardPathRows(new ReferencePolicy.PathBatch(tok, pos, keys, keys, null, Tensor.create(a.causalScatter(), u),
                        a.sequences()), Tensor.create(all, u)));
                // per sequence of the micro-batch: its causal forward, compared at each of its slots
                boolean[] seen = new boolean[u];
                int[] compact = new int[pk.packs() * pk.width()];
                for (int i = 0, c = 0; i < compact.length; i++) compact[i] = pk.valid()[i] ? c++ : -1;
                for (int s = 0; s < pk.paths().length; s++) {
                    int[] t = pk.rows().sequences().get(s);
                    float[] want = values(p.forward(new int[][] {t}));
                    for (int d = 0; d < t.length; d++) {
                        int slot = compact[pk.paths()[s][d]];
                        seen[slot] = true;
                        for (int j = 0; j < v; j++) {
                            assertEquals(want[d * v + j], masked[slot * v + j], 1e-5, "masked form, slot " + slot + " (seed " + seed + ")");
                            assertEquals(want[d * v + j], causal[slot * v + j], 1e-5, "causal form, slot " + slot + " (seed " + seed + ")");
                        }
                    }
                }
                for (int i = 0; i < u; i++) assertTrue(seen[i], "every slot is on a path");
            }
        }
    }

    /** AUTO packs a batch only when its packed tokens are a small enough share of the unpacked ones for the model's width. */
    @Test
    void autoPacksOnlyWhereSharingIsLarge() {
        Random rnd = new Random(3);
        List<int[]> shared = new ArrayList<>(), apart = new ArrayList<>();
        List<boolean[]> m1 = new ArrayList<>(), m2 = new ArrayList<>();
        int[] prompt = new int[40];
        for (int i = 0; i < prompt.length; i++) prompt[i] = 1 + rnd.nextInt(LIMIT - 1);
        for (int c = 0; c < 8; c++) {   // 8 chains of a 40-token prompt + 5: 80 unique of 360 tokens (0.22)
            int[] t = java.util.Arrays.copyOf(prompt, 45);
            boolean[] m = new boolean[45];
            for (int i = 40; i < 45; i++) {
                t[i] = 1 + rnd.nextInt(LIMIT - 1);
                m[i] = true;
            }
            t[40] = 1 + c;   // the chains part at their first response token
            shared.add(t);
            m1.add(m);
            int[] u = t.clone();
            u[0] = 1 + c;    // the same chains with distinct first tokens: nothing shared
            apart.add(u);
            m2.add(m.clone());
        }
        TokenBatch a = batch(shared, m1, rnd, CHAR), b = batch(apart, m2, rnd, CHAR);
        assertEquals(80, PackedPasses.work(a, CHAR, 1 << 12, 2048).uniqueTokens());
        try (ReferencePolicy p = ReferencePolicy.create(CHAR); Trainer t = new Trainer(p, OptimConfig.adamW(1e-3), 10, 1 << 12, LIMIT)) {
            assertEquals(Trainer.Packing.AUTO, t.packing(), "the default");
            assertTrue(t.packs(a), "0.22 of the tokens: packed");
            assertTrue(!t.packs(b), "no sharing: not packed");
            assertTrue(!t.packing(Trainer.Packing.OFF, 2048).packs(a), "off");
            assertTrue(t.packing(Trainer.Packing.ALWAYS, 2048).packs(b), "always");
        }
    }

    static float[] values(Tensor t) {
        return TrainerTest.values(t.detach());
    }
}
