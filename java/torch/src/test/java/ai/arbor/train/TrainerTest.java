package ai.arbor.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.kernels.ClipMode;
import ai.arbor.kernels.KlType;
import ai.arbor.kernels.LossAgg;
import ai.arbor.kernels.PolicyLossConfig;
import ai.arbor.kernels.PolicyLossResult;
import ai.arbor.rl.Sequence;
import ai.arbor.rl.TokenBatch;
import ai.arbor.rollout.CharTokenizer;
import ai.arbor.torch.EagerPolicyLoss;
import ai.arbor.torch.TorchPolicyLoss;
import ai.arbor.torch.model.CpuThreads;
import ai.arbor.torch.model.PolicyConfig;
import ai.arbor.torch.model.ReferencePolicy;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The trainer's SFT and policy-gradient steps against an independent libtorch computation (full forward,
 * log_softmax, gather, {@link EagerPolicyLoss#loss}, autograd), micro-batching against one batch, and
 * the loss on a fixed batch going down after one step.
 */
@SuppressWarnings("try")
class TrainerTest {
    static final CharTokenizer TOK = CharTokenizer.ascii();
    static final PolicyConfig CFG = new PolicyConfig(TOK.vocabSize(), 32, 2, 4, 2, 64, 128, 10_000.0, 1e-6, true, 7);

    @BeforeAll
    static void threads() {
        CpuThreads.set(1);
    }

    /** Four prompt/response pairs of different lengths; the responses are trained, the prompts and an observation are not. */
    static List<Sequence> batch() {
        String[][] pairs = {
            {"Q: 12*3\n", "<python>print(12*3)</python>", " <result>\n36\n</result>", "\\boxed{36}"},
            {"Q: 7+8*2\n", "\\boxed{23}", "", ""},
            {"Q: 401*9-5\n", "<python>print(401*9-5)</python>", " <result>\n3604\n</result>", "\\boxed{3604}"},
            {"Q: 5*5\n", "\\boxed{25}", "", ""},
        };
        List<Sequence> out = new ArrayList<>();
        for (String[] p : pairs) {
            StringBuilder text = new StringBuilder();
            List<Boolean> mask = new ArrayList<>();
            mask.add(false);  // BOS
            for (int i = 0; i < p.length; i++) {
                text.append(p[i]);
                for (int k = 0; k < p[i].length(); k++) mask.add(i == 1 || i == 3);
            }
            int[] body = TOK.encode(text.toString());
            int[] tokens = new int[body.length + 1];
            tokens[0] = TOK.bosId();
            System.arraycopy(body, 0, tokens, 1, body.length);
            boolean[] m = new boolean[tokens.length];
            for (int i = 0; i < m.length; i++) m[i] = mask.get(i);
            out.add(Sequence.sft(tokens, m));
        }
        return out;
    }

    static float[] values(Tensor t) {
        Tensor c = t.to(ScalarType.Float).cpu().contiguous();
        float[] v = new float[(int) c.numel()];
        new FloatPointer(c.data_ptr()).capacity(v.length).get(v);
        return v;
    }

    /** The trained rows of every sequence from one full forward each: logits [N, V], labels, sequence index. */
    record Gathered(Tensor logits, long[] labels, int[] seq, int[] pos) {}

    static Gathered gather(ReferencePolicy p, List<Sequence> batch) {
        List<Tensor> parts = new ArrayList<>();
        List<Long> labels = new ArrayList<>();
        List<Integer> seq = new ArrayList<>(), pos = new ArrayList<>();
        for (int i = 0; i < batch.size(); i++) {
            Sequence s = batch.get(i);
            Tensor logits = p.forward(new int[][] {s.tokens()}).select(0, 0);   // [T, V]
            List<Long> rows = new ArrayList<>();
            for (int q = 1; q < s.length(); q++)
                if (s.mask()[q]) {
                    rows.add((long) q - 1);
                    labels.add((long) s.tokens()[q]);
                    seq.add(i);
                    pos.add(q);
                }
            long[] r = rows.stream().mapToLong(Long::longValue).toArray();
            parts.add(logits.index_select(0, Tensor.create(r, r.length)));
        }
        return new Gathered(torch.cat(new TensorVector(parts.toArray(new Tensor[0])), 0),
                labels.stream().mapToLong(Long::longValue).toArray(), seq.stream().mapToInt(Integer::intValue).toArray(),
                pos.stream().mapToInt(Integer::intValue).toArray());
    }

    /** Max |a − b| over every parameter gradient, relative to the largest gradient entry. */
    static double gradDiff(TensorVector ours, ReferencePolicy ref) {
        double max = 0, scale = 0;
        int i = 0;
        for (Map.Entry<String, Tensor> e : ref.namedParameters().entrySet()) {
            float[] a = values(ours.get(i++).grad()), b = values(e.getValue().grad());
            for (int k = 0; k < a.length; k++) {
                max = Math.max(max, Math.abs(a[k] - b[k]));
                scale = Math.max(scale, Math.abs(b[k]));
            }
        }
        assertTrue(scale > 1e-4, "reference gradient is not trivially zero: " + scale);
        return max / scale;
    }

    @Test
    void sftGradientEqualsLibtorchCrossEntropyAndOneStepLowersTheLoss() {
        List<Sequence> b = batch();
        try (ReferencePolicy p = ReferencePolicy.create(CFG); ReferencePolicy ref = ReferencePolicy.create(CFG);
             Trainer tr = new Trainer(p, OptimConfig.adamW(1e-2).withWeightDecay(0), 10, 1 << 14, TOK.vocabSize());
             PointerScope scope = new PointerScope()) {
            double before = tr.sftLoss(b);
            double ours = tr.sftBackward(TokenBatch.supervised(b));
            // reference: mean over trained tokens of −log_softmax(logits)[label], autograd
            Gathered g = gather(ref, b);
            Tensor lp = torch.log_softmax(g.logits(), -1).gather(1, Tensor.create(g.labels(), g.labels().length).unsqueeze(1));
            Tensor loss = lp.sum().neg().div(new org.bytedeco.pytorch.Scalar((double) g.labels().length));
            loss.backward();
            double expected = values(loss)[0];
            assertEquals(expected, ours, 1e-5, "reported SFT loss");
            assertEquals(expected, before, 1e-5, "no-gradient SFT loss");
            double diff = gradDiff(tr.parameters(), ref);
            assertTrue(diff < 1e-4, "parameter gradients equal autograd of cross entropy, rel. diff " + diff);
            tr.zeroGrad();

            Trainer.SftStats st = tr.sftStep(b);
            double after = tr.sftLoss(b);
            System.out.printf("SFT on the fixed batch: %.4f -> %.4f after one step (lr 1e-2)%n", before, after);
            assertEquals(before, st.loss(), 1e-5);
            assertEquals(b.stream().mapToInt(Sequence::trainedTokens).sum(), st.tokens());
            assertTrue(after < before - 0.05, "one AdamW step at lr 1e-2 lowers the loss of its batch: " + before + " -> " + after);
            assertEquals(1, tr.steps());
        }
    }

    /**
     * The trainer computes the LM head only at the rows that predict a trained token (the gathered final hidden
     * states); the full path computes logits at every position of every sequence, runs the same token-statistics
     * kernel over all of them with the untrained rows masked, and back-propagates the same −1/N. Every parameter's
     * gradient must agree within 1e-6 relative in norm (float32: the two LM-head matmuls differ only in their row count),
     * on a Qwen3-shaped model (q/k norms, attention biases, head_dim ≠ d/heads, untied head, padded vocabulary).
     */
    @Test
    void gatheredLmHeadRowsGiveTheFullForwardsGradients() {
        long seed = ai.arbor.testing.Seeds.seed("TrainerTest");
        int limit = TOK.vocabSize();
        PolicyConfig cfg = new PolicyConfig(limit + 7, 24, 2, 4, 2, 40, 128, 10_000.0, 1e-6, false, seed, 10, true, true, true, null);
        List<Sequence> b = batch();
        try (ReferencePolicy p = ReferencePolicy.create(cfg); ReferencePolicy ref = ReferencePolicy.create(cfg);
             Trainer tr = new Trainer(p, OptimConfig.adamW(1e-2).withWeightDecay(0), 10, 1 << 14, limit);
             PointerScope scope = new PointerScope()) {
            TokenBatch tb = TokenBatch.supervised(b);
            double gathered = tr.sftBackward(tb);
            // full path: one padded [B, T] forward, logits at all B·T positions
            int t = b.stream().mapToInt(Sequence::length).max().orElseThrow(), n = tb.rows();
            long[] tok = new long[b.size() * t], labels = new long[b.size() * t];
            boolean[] trained = new boolean[b.size() * t];
            for (int i = 0; i < b.size(); i++) {
                int[] s = b.get(i).tokens();
                for (int q = 0; q < s.length; q++) tok[i * t + q] = s[q];
                for (int q = 1; q < s.length; q++)
                    if (b.get(i).mask()[q]) {
                        labels[i * t + q - 1] = s[q];
                        trained[i * t + q - 1] = true;
                    }
            }
            Tensor logits = ref.forward(Tensor.create(tok, b.size(), t)).reshape(b.size() * t, cfg.vocab());
            assertEquals(b.size() * t, logits.size(0), "the full path computes every position");
            assertTrue(logits.size(0) > 2L * n, "most positions are untrained (prompt, observation, padding): " + n + " of " + logits.size(0));
            Tensor data = logits.detach();
            byte[] maskBytes = new byte[trained.length];
            float[] up = new float[trained.length];
            for (int k = 0; k < trained.length; k++) {
                maskBytes[k] = (byte) (trained[k] ? 1 : 0);
                up[k] = trained[k] ? (float) (-1.0 / n) : 0f;
            }
            Tensor mask = Tensor.create(maskBytes, trained.length).to(ScalarType.Byte);
            Tensor lab = Tensor.create(labels, labels.length);
            ai.arbor.torch.TorchTokenStats.Stats st = ai.arbor.torch.TorchTokenStats.forward(data, lab, 1f, mask, limit);
            double full = 0;
            float[] lp = values(st.logprob());
            for (int k = 0; k < lp.length; k++) if (trained[k]) full -= lp[k];
            full /= n;
            Tensor grad = ai.arbor.torch.TorchTokenStats.backward(data, lab, 1f, mask, limit, st, Tensor.create(up, up.length), null);
            logits.backward(grad, new org.bytedeco.pytorch.BoolOptional(), false, new org.bytedeco.pytorch.TensorArrayRefOptional());
            assertEquals(full, gathered, 1e-6 * Math.abs(full), "loss with and without the gather");
            // per parameter: ‖grad_gathered − grad_full‖ / ‖grad_full‖ (each entry's error is float32 rounding)
            int i = 0;
            double worst = 0;
            for (Map.Entry<String, Tensor> e : ref.namedParameters().entrySet()) {
                float[] a = values(tr.parameters().get(i++).grad()), w = values(e.getValue().grad());
                double diff = 0, norm = 0;
                for (int k = 0; k < a.length; k++) {
                    diff += ((double) a[k] - w[k]) * ((double) a[k] - w[k]);
                    norm += (double) w[k] * w[k];
                }
                assertTrue(norm > 0, e.getKey() + " gets a gradient");
                double rel = Math.sqrt(diff / norm);
                worst = Math.max(worst, rel);
                assertTrue(rel <= 1e-6, e.getKey() + ": gradient with vs without the gather, rel. diff " + rel);
            }
            System.out.printf("gathered %d of %d logit rows; loss %.6f vs %.6f; worst parameter gradient rel. diff %.3g over %d tensors%n",
                    n, logits.size(0), gathered, full, worst, i);
        }
    }

    @Test
    void microBatchesAddUpToTheWholeBatch() {
        TokenBatch b = withAdvantages(batch(), 3);
        PolicyLossConfig[] cfgs = {PolicyLossConfig.grpoTcr(), PolicyLossConfig.builder().agg(LossAgg.SEQ_MEAN_TOKEN_MEAN).build(),
            PolicyLossConfig.builder().agg(LossAgg.SEQ_MEAN_TOKEN_SUM_NORM).build()};
        for (PolicyLossConfig cfg : cfgs) {
            try (ReferencePolicy p1 = ReferencePolicy.create(CFG); ReferencePolicy p2 = ReferencePolicy.create(CFG);
                 Trainer whole = new Trainer(p1, OptimConfig.adamW(1e-3), 10, 1 << 14, TOK.vocabSize());
                 Trainer split = new Trainer(p2, OptimConfig.adamW(1e-3), 10, 1, TOK.vocabSize());   // one sequence per micro-batch
                 PointerScope scope = new PointerScope()) {
                assertEquals(1, Trainer.microBatches(b, 1 << 14).size());
                assertEquals(b.sequenceCount(), Trainer.microBatches(b, 1).size());
                PolicyLossResult a = whole.policyBackward(b, cfg), c = split.policyBackward(b, cfg);
                assertEquals(a.loss(), c.loss(), 1e-6, cfg.agg() + " loss");
                assertEquals(a.tokens(), c.tokens(), 0);
                double max = 0, scale = 0;
                for (int i = 0; i < whole.parameters().size(); i++) {
                    float[] x = values(whole.parameters().get(i).grad()), y = values(split.parameters().get(i).grad());
                    for (int k = 0; k < x.length; k++) {
                        max = Math.max(max, Math.abs(x[k] - y[k]));
                        scale = Math.max(scale, Math.abs(x[k]));
                    }
                }
                assertTrue(max / scale < 1e-5, cfg.agg() + ": micro-batched gradient equals one batch's, rel. diff " + max / scale);
            }
        }
    }

    /** Old log-probs = the policy's own (perturbed by up to ±0.4 so some ratios leave [1 − 0.2, 1 + 0.28] and are clipped), advantages ±1 per sequence. */
    static TokenBatch withAdvantages(List<Sequence> batch, long seed) {
        Random rnd = new Random(seed);
        TokenBatch b = TokenBatch.supervised(batch);
        float[] old = new float[b.rows()], adv = new float[b.rows()];
        try (ReferencePolicy p = ReferencePolicy.create(CFG)) {
            float[] lp = Trainer.score(p, b, 1f, 1 << 14, TOK.vocabSize()).logprobs();
            for (int k = 0; k < b.rows(); k++) {
                old[k] = Math.min(0f, lp[k] + (float) (0.8 * (rnd.nextDouble() - 0.5)));
                adv[k] = b.seqId()[k] % 2 == 0 ? 1f : -1f;
            }
        }
        return new TokenBatch(b.sequences(), b.source(), b.seqId(), b.position(), b.label(), old, old, null, adv, b.weight(), null, null);
    }

    @Test
    void policyGradientEqualsEagerLossAutogradAndOneStepLowersTheLoss() {
        TokenBatch b0 = withAdvantages(batch(), 5);
        PolicyLossConfig[] cfgs = {PolicyLossConfig.grpoTcr(), PolicyLossConfig.treeGrpo(), PolicyLossConfig.aepo(),
            PolicyLossConfig.builder().agg(LossAgg.SEQ_MEAN_TOKEN_MEAN).klType(KlType.K2).klCoef(0.05).entropyCoef(0.01).build()};
        for (PolicyLossConfig cfg : cfgs) {
            try (ReferencePolicy p = ReferencePolicy.create(CFG); ReferencePolicy ref = ReferencePolicy.create(CFG);
                 ReferencePolicy kl = ReferencePolicy.create(CFG.withSeed(99));
                 Trainer tr = new Trainer(p, OptimConfig.adamW(3e-3).withWeightDecay(0), 10, 64, TOK.vocabSize());
                 PointerScope scope = new PointerScope()) {
                float[] refLp = cfg.klType() == KlType.NONE ? null : Trainer.score(kl, b0, 1f, 1 << 14, TOK.vocabSize()).logprobs();
                TokenBatch b = refLp == null ? b0 : b0.withRefLogprobs(refLp);
                PolicyLossResult before = tr.policyLoss(b, cfg);
                PolicyLossResult ours = tr.policyBackward(b, cfg);
                assertEquals(before.loss(), ours.loss(), 1e-6);

                // reference: the whole batch's rows in one eager loss, autograd through the full forward
                Gathered g = gather(ref, batch());
                int n = g.labels().length;
                assertEquals(b.rows(), n, "the token batch has one row per trained token, in sequence and position order");
                float[] old = new float[n], adv = new float[n], mask = new float[n], refRow = new float[n];
                long[] seq = new long[n];
                for (int k = 0; k < n; k++) {
                    assertEquals(g.seq()[k], b.seqId()[k]);
                    assertEquals(g.pos()[k], b.position()[k]);
                    old[k] = b.old()[k];
                    adv[k] = b.advantage()[k];
                    mask[k] = 1f;
                    seq[k] = g.seq()[k];
                    if (refLp != null) refRow[k] = refLp[k];
                }
                Tensor loss = EagerPolicyLoss.loss(cfg, g.logits(), Tensor.create(g.labels(), n), Tensor.create(old, n), Tensor.create(adv, n),
                        Tensor.create(mask, n), refLp == null ? null : Tensor.create(refRow, n), Tensor.create(seq, n), Float.NEGATIVE_INFINITY);
                loss.backward();
                assertEquals(values(loss)[0], ours.loss(), 1e-5, cfg.clipMode() + "/" + cfg.agg() + " loss");
                double diff = gradDiff(tr.parameters(), ref);
                assertTrue(diff < 1e-4, cfg.clipMode() + "/" + cfg.agg() + ": gradient equals autograd of the eager loss, rel. diff " + diff);
                if (cfg.clipMode() != ClipMode.PPO || cfg.epsHigh() > cfg.epsLow())
                    assertTrue(ours.clipFracHigh() + ours.clipFracLow() > 0, "the ±0.4 perturbation clips some tokens");
                tr.zeroGrad();

                tr.policyStep(b, cfg);
                PolicyLossResult after = tr.policyLoss(b, cfg);
                System.out.printf("%s/%s on the fixed batch: %.4f -> %.4f after one step (lr 3e-3)%n", cfg.clipMode(), cfg.agg(), before.loss(),
                        after.loss());
                assertTrue(after.loss() < before.loss() - 0.02, cfg.clipMode() + ": one step lowers the loss: " + before.loss() + " -> " + after.loss());
            }
        }
    }

    @Test
    void learningRateScheduleAndValidation() {
        OptimConfig c = OptimConfig.adamW(1e-3).withWarmup(4).withSchedule(OptimConfig.Schedule.COSINE);
        assertEquals(0.25e-3, c.lrAt(0, 14), 1e-12);
        assertEquals(1e-3, c.lrAt(3, 14), 1e-12);
        assertEquals(1e-3, c.lrAt(4, 14), 1e-12);                            // cosine starts at the peak
        assertEquals(1e-3 * (0.1 + 0.45 * (1 + Math.cos(Math.PI * 4 / 9))), c.lrAt(8, 14), 1e-12);   // 4 of 9 decay steps: 0.62814e-3
        assertEquals(1e-4, c.lrAt(13, 14), 1e-12);                           // floor minLrRatio = 0.1 at the last step
        assertEquals(1e-3, OptimConfig.adamW(1e-3).lrAt(1000, 10), 0);      // constant
        assertThrows(IllegalArgumentException.class, () -> OptimConfig.adamW(0));
        assertThrows(IllegalArgumentException.class, () -> Sequence.sft(new int[] {1, 2}, new boolean[] {true, false}));
        IllegalArgumentException bad = assertThrows(IllegalArgumentException.class, () -> new TokenBatch(List.of(new int[] {1, 2}), new int[] {0},
                new int[] {0}, new int[] {1}, new int[] {2}, null, new float[] {0.5f}, null, new float[] {1f}, new float[] {1f}, null, null));
        assertTrue(bad.getMessage().contains("old[0] = 0.5"), bad.getMessage());
        try (ReferencePolicy p = ReferencePolicy.create(CFG); Trainer tr = new Trainer(p, OptimConfig.adamW(1e-3), 1, 64, TOK.vocabSize())) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> tr.policyStep(TokenBatch.supervised(batch()), PolicyLossConfig.treeGrpo()));
            assertTrue(e.getMessage().contains("KL"), e.getMessage());
            e = assertThrows(IllegalArgumentException.class, () -> tr.policyStep(TokenBatch.supervised(batch()), PolicyLossConfig.grpoTcr()));
            assertTrue(e.getMessage().contains("old log-probs"), e.getMessage());
        }
    }
}
