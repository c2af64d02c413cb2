package ai.arbor.torch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.kernels.FusedLinear;
import ai.arbor.kernels.KlType;
import ai.arbor.kernels.LossAgg;
import ai.arbor.kernels.PolicyLossConfig;
import java.util.Random;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Test;

/**
 * {@link TorchFusedLinear} against libtorch autograd through {@code hidden.matmul(weight.t())} and
 * {@link EagerPolicyLoss} (log_softmax, gather, clamp, maximum ...): the loss, ∂loss/∂hidden and
 * ∂loss/∂weight, on [T, d] and [B, L, d] hidden states, masked rows, tied-embedding accumulation.
 */
class TorchFusedLinearTest {

    @Test
    void matchesLibtorchAutogradThroughTheProjection() {
        long seed = TorchTokenStatsTest.seed();
        System.out.println("TorchFusedLinearTest matchesLibtorchAutogradThroughTheProjection seed=" + seed);
        Random rnd = new Random(seed);
        PolicyLossConfig[] cfgs = {PolicyLossConfig.defaults(), PolicyLossConfig.treeGrpo().toBuilder().temperature(0.8).build(),
            PolicyLossConfig.grpoTcr().toBuilder().agg(LossAgg.SEQ_MEAN_TOKEN_MEAN).entropyCoef(0.01).build()};
        for (PolicyLossConfig cfg : cfgs) {
            int b = 1 + rnd.nextInt(3), l = 1 + rnd.nextInt(20), d = 1 + rnd.nextInt(40), v = 2 + rnd.nextInt(900);
            int rows = b * l;
            Tensor hidden = TorchTokenStatsTest.randn(rnd, 1f, b, l, d);
            Tensor weight = TorchTokenStatsTest.randn(rnd, (float) (2 / Math.sqrt(d)), v, d);
            TorchPolicyLossTest.Batch batch = TorchPolicyLossTest.batch(rnd, cfg, rows, v, false);
            Tensor mask = batch.mask().reshape(b, l), labels = batch.labels().reshape(b, l);
            // old log-probs from the real logits, so ratios are near 1 and some tokens clip
            Tensor h = hidden.detach().set_requires_grad(true), w = weight.detach().set_requires_grad(true);
            Tensor logits = h.matmul(w.t());
            Tensor loss = EagerPolicyLoss.loss(cfg, logits, labels, batch.old(), batch.adv(), mask,
                    cfg.klType() == KlType.NONE ? null : batch.ref(), batch.seqIds(), Float.NEGATIVE_INFINITY);
            loss.backward();
            TorchFusedLinear.Output out = TorchFusedLinear.forwardBackward(cfg, hidden, weight, labels, batch.old(),
                    batch.adv(), mask, batch.ref(), cfg.agg().needsSequences() ? batch.seqIds() : null, null,
                    new FusedLinear.Chunks(7, 64));
            String at = cfg + " B " + b + " L " + l + " d " + d + " V " + v;
            double ref = loss.item_double();
            assertTrue(Math.abs(out.result().loss() - ref) <= 1e-5 * (1 + Math.abs(ref)), at + ": loss " + out.result().loss() + " vs " + ref);
            assertEquals(3, out.gradHidden().dim());
            double eh = TorchPolicyLossTest.maxDiff(out.gradHidden(), h.grad()), mh = TorchPolicyLossTest.maxAbs(h.grad());
            double ew = TorchPolicyLossTest.maxDiff(out.gradWeight(), w.grad()), mw = TorchPolicyLossTest.maxAbs(w.grad());
            assertTrue(eh <= 1e-5 * mh + 1e-9, at + ": dh max diff " + eh + " (max " + mh + ")");
            assertTrue(ew <= 1e-5 * mw + 1e-9, at + ": dW max diff " + ew + " (max " + mw + ")");
        }
    }

    /**
     * bf16 and fp16 hidden states and weight on the CPU (a half-precision policy): libtorch autograd on their fp32 values
     * is the reference (the kernel widens them exactly); ∂loss/∂hidden comes back in the hidden states' dtype,
     * ∂loss/∂weight in fp32, and both reach half-precision leaves through {@code backward} as the trainer passes them.
     */
    @Test
    void halfPrecisionOnTheCpuMatchesAutogradOnTheFp32Values() {
        long seed = TorchTokenStatsTest.seed();
        System.out.println("TorchFusedLinearTest halfPrecisionOnTheCpuMatchesAutogradOnTheFp32Values seed=" + seed);
        Random rnd = new Random(seed);
        PolicyLossConfig cfg = PolicyLossConfig.treeGrpo().toBuilder().temperature(0.8).build();
        for (ScalarType half : new ScalarType[] {ScalarType.BFloat16, ScalarType.Half}) {
            int t = 37, d = 24, v = 700;
            Tensor hidden = TorchTokenStatsTest.randn(rnd, 1f, t, d).to(half);
            Tensor weight = TorchTokenStatsTest.randn(rnd, (float) (2 / Math.sqrt(d)), v, d).to(half);
            TorchPolicyLossTest.Batch batch = TorchPolicyLossTest.batch(rnd, cfg, t, v, false);
            Tensor h = hidden.to(ScalarType.Float).detach().set_requires_grad(true);
            Tensor w = weight.to(ScalarType.Float).detach().set_requires_grad(true);
            Tensor loss = EagerPolicyLoss.loss(cfg, h.matmul(w.t()), batch.labels(), batch.old(), batch.adv(), batch.mask(),
                    batch.ref(), null, Float.NEGATIVE_INFINITY);
            loss.backward();
            TorchFusedLinear.Output out = TorchFusedLinear.forwardBackward(cfg, hidden, weight, batch.labels(), batch.old(),
                    batch.adv(), batch.mask(), batch.ref(), null, null, new FusedLinear.Chunks(8, 128));
            String at = half.toString();
            double ref = loss.item_double();
            assertTrue(Math.abs(out.result().loss() - ref) <= 1e-5 * (1 + Math.abs(ref)), at + ": loss " + out.result().loss() + " vs " + ref);
            assertEquals(half, out.gradHidden().scalar_type().intern(), at + ": dh in the hidden states' dtype");
            assertEquals(ScalarType.Float, out.gradWeight().scalar_type().intern(), at + ": dW in fp32");
            double eh = TorchPolicyLossTest.maxDiff(out.gradHidden().to(ScalarType.Float), h.grad()), mh = TorchPolicyLossTest.maxAbs(h.grad());
            double ew = TorchPolicyLossTest.maxDiff(out.gradWeight(), w.grad()), mw = TorchPolicyLossTest.maxAbs(w.grad());
            assertTrue(eh <= 0x1p-8 * mh + 1e-9, at + ": dh max diff " + eh + " (max " + mh + "; one half rounding)");
            assertTrue(ew <= 1e-5 * mw + 1e-9, at + ": dW max diff " + ew + " (max " + mw + ")");
            // as the trainer applies them: into half-precision leaves
            Tensor hl = hidden.detach().set_requires_grad(true), wl = weight.detach().set_requires_grad(true);
            hl.backward(out.gradHidden(), new org.bytedeco.pytorch.BoolOptional(), false, new org.bytedeco.pytorch.TensorArrayRefOptional());
            wl.backward(out.gradWeight(), new org.bytedeco.pytorch.BoolOptional(), false, new org.bytedeco.pytorch.TensorArrayRefOptional());
            assertEquals(half, wl.grad().scalar_type().intern(), at + ": the weight's gradient in its dtype");
            assertTrue(TorchPolicyLossTest.maxDiff(wl.grad().to(ScalarType.Float), w.grad()) <= 0x1p-8 * mw + 1e-9, at + ": dW through backward");
        }
    }

    @Test
    void tiedEmbeddingGradientAccumulates() {
        Random rnd = new Random(TorchTokenStatsTest.seed());
        int t = 9, d = 5, v = 40;
        PolicyLossConfig cfg = PolicyLossConfig.defaults();
        Tensor hidden = TorchTokenStatsTest.randn(rnd, 1f, t, d), weight = TorchTokenStatsTest.randn(rnd, 0.5f, v, d);
        TorchPolicyLossTest.Batch batch = TorchPolicyLossTest.batch(rnd, cfg, t, v, false);
        TorchFusedLinear.Output fresh = TorchFusedLinear.forwardBackward(cfg, hidden, weight, batch.labels(), batch.old(),
                batch.adv(), batch.mask(), null, null, null, null);
        Tensor lookup = TorchTokenStatsTest.randn(rnd, 1f, v, d), acc = lookup.clone();
        TorchFusedLinear.Output into = TorchFusedLinear.forwardBackward(cfg, hidden, weight, batch.labels(), batch.old(),
                batch.adv(), batch.mask(), null, null, acc, null);
        assertTrue(into.gradWeight() == acc, "accumulates into the given tensor");
        double e = TorchPolicyLossTest.maxDiff(acc, lookup.add(fresh.gradWeight()));
        assertTrue(e <= 1e-6, "accumulated = lookup + head gradient, diff " + e);
    }

    @Test
    void badTensorsThrowNamingTheArgument() {
        Random rnd = new Random(1);
        PolicyLossConfig cfg = PolicyLossConfig.defaults();
        Tensor hidden = TorchTokenStatsTest.randn(rnd, 1f, 4, 3), weight = TorchTokenStatsTest.randn(rnd, 1f, 10, 3);
        TorchPolicyLossTest.Batch b = TorchPolicyLossTest.batch(rnd, cfg, 4, 10, false);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> TorchFusedLinear.forwardBackward(cfg,
                hidden, TorchTokenStatsTest.randn(rnd, 1f, 10, 4), b.labels(), b.old(), b.adv(), b.mask(), null, null, null, null));
        assertTrue(e.getMessage().contains("weight"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> TorchFusedLinear.forwardBackward(cfg, hidden,
                weight.to(ScalarType.Double), b.labels(), b.old(), b.adv(), b.mask(), null, null, null, null));
        assertTrue(e.getMessage().contains("weight"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> TorchFusedLinear.forwardBackward(cfg, hidden, weight,
                b.labels().narrow(0, 0, 3), b.old(), b.adv(), b.mask(), null, null, null, null));
        assertTrue(e.getMessage().contains("labels"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> TorchFusedLinear.forwardBackward(cfg, null, weight,
                b.labels(), b.old(), b.adv(), b.mask(), null, null, null, null));
        assertTrue(e.getMessage().contains("hidden"), e.getMessage());
    }
}
