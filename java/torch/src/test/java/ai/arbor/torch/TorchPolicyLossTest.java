package ai.arbor.torch;

import ai.arbor.testing.Gpu;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.kernels.Backend;
import ai.arbor.kernels.ClipMode;
import ai.arbor.kernels.KlType;
import ai.arbor.kernels.LossAgg;
import ai.arbor.kernels.PolicyLoss;
import ai.arbor.kernels.PolicyLossConfig;
import ai.arbor.kernels.PolicyLossResult;
import java.util.Random;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Test;

/**
 * The fused policy-loss kernel on tensors against the same loss written with torch ops
 * ({@link EagerPolicyLoss#loss}: log_softmax, gather, exp, clamp, maximum/minimum, {@code detach}
 * for AEPO) and libtorch autograd's {@code logits.grad}, for every clip mode × KL type × aggregation.
 * Both sides are fp32; tokens sit 0.01 in log-ratio away from every kink (see PolicyLossTest).
 */
class TorchPolicyLossTest {

    /** A batch: logits [rows, vocab] and per-row tensors (float32 / int64 / int32). */
    record Batch(Tensor logits, Tensor labels, Tensor old, Tensor adv, Tensor mask, Tensor ref, Tensor seqIds) {}

    static Batch batch(Random rnd, PolicyLossConfig cfg, int rows, int vocab, boolean clampDraws) {
        float[] x = new float[rows * vocab];
        for (int i = 0; i < x.length; i++) x[i] = (float) (rnd.nextGaussian() * 2);
        long[] labels = new long[rows];
        int[] ids = new int[rows];
        float[] mask = new float[rows];
        int seq = 0, left = 1 + rnd.nextInt(6);
        for (int r = 0; r < rows; r++) {
            double u = rnd.nextDouble();
            mask[r] = u < 0.75 ? 1f : (u < 0.88 ? 0f : (float) (0.1 + 0.9 * rnd.nextDouble()));
            // GSPO's sequence form equals its kernel form when every sequence's mask sum is >= 1 (binary masks)
            if (cfg.clipMode() == ClipMode.GSPO_SEQUENCE && mask[r] > 0) mask[r] = 1f;
            if (left-- == 0) {
                seq++;
                left = rnd.nextInt(6);
            }
            ids[r] = mask[r] == 0 && rnd.nextBoolean() ? -1 : seq;
            labels[r] = mask[r] > 0 ? rnd.nextInt(vocab) : -100;
        }
        Tensor logits = Tensor.create(x, rows, vocab);
        // double log-probs of the labels, to place each token's log-ratio away from the kinks
        Tensor lsm = torch.log_softmax(logits.to(ScalarType.Double).div(new org.bytedeco.pytorch.Scalar((double) (float) cfg.temperature())), -1);
        double lo = Math.log(1 - (float) cfg.epsLow()), hi = Math.log(1 + (float) cfg.epsHigh()), lc = Math.log((float) cfg.dualClipC());
        float[] old = new float[rows], adv = new float[rows], ref = new float[rows];
        for (int r = 0; r < rows; r++) {
            if (mask[r] == 0) continue;  // zeros: unread
            double lp = lsm.select(0, r).select(0, labels[r]).item_double();
            double d;
            do {
                double u = rnd.nextDouble();
                d = u < 0.72 ? rnd.nextGaussian() * 0.35
                        : u < 0.87 ? (rnd.nextBoolean() ? 1 : -1) * (1.2 + 1.3 * rnd.nextDouble())
                        : u < 0.95 && clampDraws ? (rnd.nextBoolean() ? 1 : -1) * (20.5 + 4.5 * rnd.nextDouble()) : 0.0;
            } while (Math.abs(d - lo) < 0.01 || Math.abs(d - hi) < 0.01 || Math.abs(d - lc) < 0.01 || Math.abs(Math.abs(d) - 20) < 0.01);
            old[r] = (float) (lp - d);
            adv[r] = rnd.nextInt(10) == 0 ? 0f : (float) rnd.nextGaussian();
            double k;
            do {
                double u = rnd.nextDouble();
                k = u < 0.8 ? rnd.nextGaussian() * 0.5 : u < 0.9 ? 3 + 3 * rnd.nextDouble() : -12 - 3 * rnd.nextDouble();
            } while (Math.abs(k - 2.528) < 0.05 || Math.abs(k + 11.0) < 0.05);
            ref[r] = (float) (lp + k);
        }
        return new Batch(logits, Tensor.create(labels, rows), Tensor.create(old, rows), Tensor.create(adv, rows),
                Tensor.create(mask, rows), Tensor.create(ref, rows), Tensor.create(ids, rows));
    }

    static double maxAbs(Tensor t) {
        return t.to(ScalarType.Float).abs().max().item_double();
    }

    static double maxDiff(Tensor a, Tensor b) {
        return a.to(ScalarType.Float).sub(b.to(ScalarType.Float)).abs().max().item_double();
    }

    /**
     * Loss and logits.grad from libtorch autograd over {@link EagerPolicyLoss#loss}, in double on the logits' values: an
     * fp32 reference adds its own rounding to the kernels' (where the gradient is a small difference, KL's
     * 1 - e^{ref - lp} or a confident token's p - 1, the two fp32 errors together passed 2e-5 of the largest element
     * once in 300 seeds: 10343019817128).
     */
    static Tensor[] autograd(PolicyLossConfig cfg, Batch b, Tensor logits, float thr) {
        Tensor x = logits.detach().to(ScalarType.Double).set_requires_grad(true);
        Tensor loss = EagerPolicyLoss.loss(cfg, x, b.labels(), b.old(), b.adv(), b.mask(),
                cfg.klType() == KlType.NONE ? null : b.ref(), b.seqIds(), thr);
        loss.backward();
        return new Tensor[] {loss.detach(), x.grad()};
    }

    static Tensor seqIdsFor(PolicyLossConfig cfg, Batch b) {
        return cfg.agg().needsSequences() ? b.seqIds() : null;
    }

    @Test
    void everyModeMatchesLibtorchAutograd() {
        long seed = TorchTokenStatsTest.seed();
        System.out.println("TorchPolicyLossTest everyModeMatchesLibtorchAutograd seed=" + seed);
        Random rnd = new Random(seed);
        double worstLoss = 0, worstGrad = 0;
        for (ClipMode clip : ClipMode.values())
            for (KlType kl : KlType.values())
                for (LossAgg agg : LossAgg.values()) {
                    if (clip.isGspo() && agg != LossAgg.SEQ_MEAN_TOKEN_MEAN) continue;  // verl's GSPO aggregation only
                    PolicyLossConfig cfg = PolicyLossConfig.builder().clipMode(clip).klType(kl).agg(agg).epsHigh(0.28)
                            .dualClipC(clip.allowsDualClip() && rnd.nextBoolean() ? 3 : 0)
                            .klCoef(0.2).entropyCoef(rnd.nextBoolean() ? 0 : 0.02).temperature(rnd.nextBoolean() ? 1 : 0.8)
                            .build();
                    int rows = 1 + rnd.nextInt(40), vocab = 2 + rnd.nextInt(200);
                    Batch b = batch(rnd, cfg, rows, vocab, true);
                    TorchPolicyLoss.Output out = TorchPolicyLoss.forwardBackward(cfg, b.logits(), b.labels(), b.old(),
                            b.adv(), b.mask(), b.ref(), seqIdsFor(cfg, b), 0, false);
                    PolicyLossResult res = out.result();
                    Tensor[] ref = autograd(cfg, b, b.logits(), Float.NEGATIVE_INFINITY);
                    String w = cfg + " rows=" + rows + " vocab=" + vocab;
                    double lossRef = ref[0].item_double();
                    double lerr = Math.abs(res.loss() - lossRef) / (1e-5 * (1 + Math.abs(lossRef)));
                    assertTrue(lerr <= 1, w + ": loss " + res.loss() + " vs torch " + lossRef);
                    assertEquals(ScalarType.Float, out.grad().scalar_type().intern(), "grad has the logits' dtype");
                    double gerr = maxDiff(out.grad(), ref[1]) / (2e-5 * maxAbs(ref[1]) + 1e-8);
                    assertTrue(gerr <= 1, w + ": grad max diff " + maxDiff(out.grad(), ref[1]) + " (max |grad| " + maxAbs(ref[1]) + ")");
                    worstLoss = Math.max(worstLoss, lerr);
                    worstGrad = Math.max(worstGrad, gerr);
                }
        System.out.printf("  worst loss error / tol %.3f, grad %.3f%n", worstLoss, worstGrad);
    }

    @Test
    void aepoTopEntropyFractionMatchesDetachFormulation() {
        long seed = TorchTokenStatsTest.seed();
        System.out.println("aepoTopEntropyFractionMatchesDetachFormulation seed=" + seed);
        Random rnd = new Random(seed);
        PolicyLossConfig cfg = PolicyLossConfig.aepo().toBuilder().epsHigh(0.28).aepoTopEntropyFraction(0.25).build();
        Batch b = batch(rnd, cfg, 64, 97, false);
        // Make the selection matter whatever the seed: the valid token of lowest entropy (never among the top quarter)
        // gets ratio e^1.5 > 1 + ε_high with A = 1, so it is top-clipped, and the two clips differ on it. A random
        // batch has one ~99 % of the time: 2 of 300 seeds had none, and a CI run on 2026-12-07 drew one of those.
        Tensor logp = torch.log_softmax(b.logits().to(ScalarType.Double), -1);  // T = 1 (AEPO's default)
        Tensor h = logp.exp().mul(logp).sum(new long[] {-1}).neg()
                .add(b.mask().le(new Scalar(0.0)).to(ScalarType.Double).mul(new Scalar(1e9)));  // masked rows last
        long low = h.argmin().item_long();
        double lp = logp.select(0, low).select(0, b.labels().select(0, low).item_long()).item_double();
        b.mask().narrow(0, low, 1).fill_(new Scalar(1.0));
        b.old().narrow(0, low, 1).fill_(new Scalar((double) (float) (lp - 1.5)));
        b.adv().narrow(0, low, 1).fill_(new Scalar(1.0));
        TorchPolicyLoss.Output out = TorchPolicyLoss.forwardBackward(cfg, b.logits(), b.labels(), b.old(), b.adv(),
                b.mask(), null, null, 0, false);
        assertTrue(Float.isFinite(out.aepoEntropyThreshold()), "a real threshold for q = 0.25");
        assertTrue(h.select(0, low).item_double() < out.aepoEntropyThreshold(), "the forced token is selected out");
        // The threshold is the kernel's own entropy of the ⌈qN⌉-th token, which libtorch's entropy of that token may
        // miss by an ulp: compare at a threshold lowered by 1e-6 relative, so that token is selected on both sides
        // (no other token's entropy lies that close to it in a random batch).
        float thr = out.aepoEntropyThreshold();
        Tensor[] ref = autograd(cfg, b, b.logits(), thr - 1e-6f * (1 + Math.abs(thr)));
        assertEquals(ref[0].item_double(), out.result().loss(), 1e-5 * (1 + Math.abs(ref[0].item_double())));
        assertTrue(maxDiff(out.grad(), ref[1]) <= 2e-5 * maxAbs(ref[1]) + 1e-8, "AEPO top-q grad vs autograd");
        // and it differs from selecting every token (some selected-out token was top-clipped)
        Tensor[] all = autograd(cfg, b, b.logits(), Float.NEGATIVE_INFINITY);
        assertTrue(maxDiff(all[1], ref[1]) > 1e-6, "the selection matters in this batch");
    }

    @Test
    void stridedBatchViewsInPlaceAndBf16() {
        long seed = TorchTokenStatsTest.seed();
        System.out.println("stridedBatchViewsInPlaceAndBf16 seed=" + seed);
        Random rnd = new Random(seed);
        PolicyLossConfig cfg = PolicyLossConfig.treeGrpo().toBuilder().agg(LossAgg.SEQ_MEAN_TOKEN_MEAN).entropyCoef(0.01).build();
        int bsz = 3, len = 6, vocab = 131;
        Batch b = batch(rnd, cfg, bsz * len, vocab, false);
        // [B, L+1, V] with the last position dropped: rows not evenly spaced, one block per batch element
        Tensor full = TorchTokenStatsTest.randn(rnd, 1f, bsz, len + 1, vocab);
        Tensor view = full.narrow(1, 0, len);
        view.copy_(b.logits().reshape(bsz, len, vocab));
        Tensor lab = b.labels().reshape(bsz, len), ids = b.seqIds().reshape(bsz, len);
        TorchPolicyLoss.Output strided = TorchPolicyLoss.forwardBackward(cfg, view, lab, b.old().reshape(bsz, len),
                b.adv().reshape(bsz, len), b.mask().reshape(bsz, len), b.ref().reshape(bsz, len), ids, 0, false);
        assertEquals(bsz, strided.sums().size(0), "one sums row per block");
        TorchPolicyLoss.Output flat = TorchPolicyLoss.forwardBackward(cfg, b.logits(), b.labels(), b.old(), b.adv(),
                b.mask(), b.ref(), b.seqIds(), 0, false);
        PolicyLossResult rs = strided.result(), rf = flat.result();
        assertEquals(rf.loss(), rs.loss(), 1e-12 * (1 + Math.abs(rf.loss())), "block sums add up");
        assertEquals(rf.clipFracHigh(), rs.clipFracHigh(), 1e-15);
        assertEquals(0.0, maxDiff(strided.grad().reshape(bsz * len, vocab), flat.grad()), "same gradient bits");
        assertEquals(3, strided.grad().dim());
        Tensor[] ref = autograd(cfg, b, b.logits(), Float.NEGATIVE_INFINITY);
        assertTrue(maxDiff(flat.grad(), ref[1]) <= 2e-5 * maxAbs(ref[1]) + 1e-8, "grad vs autograd");
        // in place: the gradient overwrites the logits and equals the out-of-place one
        Tensor logits = b.logits().clone();
        TorchPolicyLoss.Output inPlace = TorchPolicyLoss.forwardBackward(cfg, logits, b.labels(), b.old(), b.adv(),
                b.mask(), b.ref(), b.seqIds(), 0, true);
        assertSame(logits, inPlace.grad());
        assertEquals(0.0, maxDiff(logits, flat.grad()));
        assertEquals(rf, inPlace.result());
        // bf16 logits: a bf16 gradient, the rounded fp32 one
        Tensor x16 = b.logits().to(ScalarType.BFloat16);
        TorchPolicyLoss.Output o16 = TorchPolicyLoss.forwardBackward(cfg, x16, b.labels(), b.old(), b.adv(), b.mask(),
                b.ref(), b.seqIds(), 0, false);
        assertEquals(ScalarType.BFloat16, o16.grad().scalar_type().intern());
        Tensor[] ref16 = autograd(cfg, b, x16, Float.NEGATIVE_INFINITY);
        assertTrue(maxDiff(o16.grad(), ref16[1]) <= 1e-2 * maxAbs(ref16[1]), "bf16 grad vs autograd on the bf16 values");
    }

    @Test
    void invalidInputsAreRejected() {
        PolicyLossConfig cfg = PolicyLossConfig.defaults();
        Batch b = batch(new Random(5), cfg, 4, 10, false);
        Tensor badMask = Tensor.create(new float[] {1f, 2f, 1f, 1f}, 4);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> TorchPolicyLoss.forwardBackward(cfg,
                b.logits(), b.labels(), b.old(), b.adv(), badMask, null, null, 0, false));
        assertTrue(e.getMessage().contains("mask[1] = 2.0"), e.getMessage());
        PolicyLossConfig seq = cfg.toBuilder().agg(LossAgg.SEQ_MEAN_TOKEN_SUM).build();
        e = assertThrows(IllegalArgumentException.class, () -> TorchPolicyLoss.forwardBackward(seq, b.logits(), b.labels(),
                b.old(), b.adv(), b.mask(), null, null, 0, false));
        assertTrue(e.getMessage().contains("seqIds"), e.getMessage());
        Tensor shortOld = Tensor.create(new float[] {0f, 0f}, 2);
        assertThrows(IllegalArgumentException.class, () -> TorchPolicyLoss.forwardBackward(cfg, b.logits(), b.labels(),
                shortOld, b.adv(), b.mask(), null, null, 0, false));
    }

    @Test
    void cudaTensorsUseTheCudaKernels() {
        Gpu.assume(Backend.CUDA.isAvailable(), Backend.CUDA::unavailableReason);
        Gpu.assume(torch.cuda_is_available(), "this PyTorch build has no CUDA (use the GPU build of the preset)");
        Random rnd = new Random(11);
        PolicyLossConfig cfg = PolicyLossConfig.treeGrpo().toBuilder().agg(LossAgg.SEQ_MEAN_TOKEN_MEAN).build();
        Batch b = batch(rnd, cfg, 64, 32000, true);
        Tensor x = b.logits().cuda();
        TorchPolicyLoss.Output out = TorchPolicyLoss.forwardBackward(cfg, x, b.labels().cuda(), b.old().cuda(),
                b.adv().cuda(), b.mask().cuda(), b.ref().cuda(), b.seqIds().cuda(), 0, false);
        Tensor[] ref = autograd(cfg, b, b.logits(), Float.NEGATIVE_INFINITY);
        assertEquals(ref[0].item_double(), out.result().loss(), 1e-4 * (1 + Math.abs(ref[0].item_double())));
        assertTrue(maxDiff(out.grad().cpu(), ref[1]) <= 1e-4 * maxAbs(ref[1]) + 1e-8);
        assertTrue(PolicyLoss.workspaceBytes(64, 64) > 0);
    }
}
