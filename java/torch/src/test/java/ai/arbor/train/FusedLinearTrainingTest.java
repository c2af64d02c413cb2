package ai.arbor.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.kernels.FusedLinear;
import ai.arbor.kernels.LossAgg;
import ai.arbor.kernels.PolicyLossConfig;
import ai.arbor.kernels.PolicyLossResult;
import ai.arbor.rl.TokenBatch;
import ai.arbor.torch.model.ReferencePolicy;
import org.bytedeco.javacpp.PointerScope;
import org.junit.jupiter.api.Test;

/**
 * The trainer's fused linear path ({@link Trainer#fusedLinearAbove} 0: hidden states + LM-head weight →
 * {@code TorchFusedLinear}) gives the loss and every parameter gradient of the logits path
 * ({@code Long.MAX_VALUE}: logits → fused policy loss → autograd), on the reference policy with tied
 * embeddings (the head's gradient and the lookup's add up in one tensor).
 */
class FusedLinearTrainingTest {

    @Test
    void fusedLinearPathEqualsTheLogitsPath() {
        TrainerTest.threads();
        assertTrue(TrainerTest.CFG.tiedEmbeddings(), "the test covers tied embeddings");
        TokenBatch b = TrainerTest.withAdvantages(TrainerTest.batch(), 11);
        for (PolicyLossConfig cfg : new PolicyLossConfig[] {PolicyLossConfig.builder().dualClipC(3).temperature(0.8).build(),
                PolicyLossConfig.grpoTcr().toBuilder().agg(LossAgg.SEQ_MEAN_TOKEN_MEAN).entropyCoef(0.01).build()}) {
            try (ReferencePolicy p1 = ReferencePolicy.create(TrainerTest.CFG); ReferencePolicy p2 = ReferencePolicy.create(TrainerTest.CFG);
                 Trainer logits = new Trainer(p1, OptimConfig.adamW(1e-3), 10, 64, TrainerTest.TOK.vocabSize()).fusedLinearAbove(Long.MAX_VALUE);
                 Trainer fused = new Trainer(p2, OptimConfig.adamW(1e-3), 10, 64, TrainerTest.TOK.vocabSize()).fusedLinearAbove(0);
                 PointerScope scope = new PointerScope()) {
                PolicyLossResult a = logits.policyBackward(b, cfg), f = fused.policyBackward(b, cfg);
                assertEquals(a.loss(), f.loss(), 1e-5 * (1 + Math.abs(a.loss())), cfg + " loss");
                assertEquals(a.tokens(), f.tokens(), 0);
                assertEquals(a.loss(), fused.policyLoss(b, cfg).loss(), 1e-5 * (1 + Math.abs(a.loss())), cfg + " loss without gradients");
                double rel = relativeGradientDiff(logits, fused);
                assertTrue(rel < 1e-5, cfg + ": fused linear gradient equals the logits path's, rel. diff " + rel);
            }
        }
    }

    /**
     * The trainer's CPU tiles: 256 rows × the vocabulary while that tile (and, for a bf16 policy, the head weight the
     * kernel widens to fp32) fits in 256 MiB, the default tiles beyond; the device's default on CUDA.
     */
    @Test
    void wholeVocabularyTilesWhileTileAndWidenedWeightFit() {
        assertEquals(FusedLinear.Chunks.wholeVocabulary(256, 151936), Trainer.fusedLinearChunks(false, false, 1024, 151936));
        assertEquals(null, Trainer.fusedLinearChunks(false, false, 1024, 262145));           // 256 x V x 4 > 256 MiB
        assertEquals(FusedLinear.Chunks.wholeVocabulary(256, 151936), Trainer.fusedLinearChunks(false, true, 64, 151936));
        // bf16 Qwen3-0.6B: 148.4 MiB of tile + 593.5 MiB of widened W
        assertEquals(null, Trainer.fusedLinearChunks(false, true, 1024, 151936));
        // V 200000: tile 204,800,000 bytes; d 79 adds 63,200,000 (268,000,000 <= 2^28), d 80 adds 64,000,000 (over)
        assertEquals(FusedLinear.Chunks.wholeVocabulary(256, 200000), Trainer.fusedLinearChunks(false, true, 79, 200000));
        assertEquals(null, Trainer.fusedLinearChunks(false, true, 80, 200000));
        assertEquals(FusedLinear.Chunks.wholeVocabulary(256, 200000), Trainer.fusedLinearChunks(false, false, 80, 200000));
        assertEquals(null, Trainer.fusedLinearChunks(true, false, 64, 1000));
    }

    /**
     * A bf16 policy on the CPU: the fused path (bf16 hidden states and head weight, widened by the kernel) against the
     * logits path of the same bf16 policy — the loss within one bf16 rounding (the logits path rounds the logits to
     * bf16; the fused one keeps them fp32), every parameter gradient within a few.
     */
    @Test
    void bf16PolicyOnTheCpuTakesTheFusedPath() {
        TrainerTest.threads();
        TokenBatch b = TrainerTest.withAdvantages(TrainerTest.batch(), 11);
        PolicyLossConfig cfg = PolicyLossConfig.defaults();
        try (ReferencePolicy p1 = ReferencePolicy.create(TrainerTest.CFG, "cpu", org.bytedeco.pytorch.global.torch.ScalarType.BFloat16);
             ReferencePolicy p2 = ReferencePolicy.create(TrainerTest.CFG, "cpu", org.bytedeco.pytorch.global.torch.ScalarType.BFloat16);
             Trainer logits = new Trainer(p1, OptimConfig.adamW(1e-3), 10, 64, TrainerTest.TOK.vocabSize()).fusedLinearAbove(Long.MAX_VALUE);
             Trainer fused = new Trainer(p2, OptimConfig.adamW(1e-3), 10, 64, TrainerTest.TOK.vocabSize()).fusedLinearAbove(0);
             PointerScope scope = new PointerScope()) {
            PolicyLossResult a = logits.policyBackward(b, cfg), f = fused.policyBackward(b, cfg);
            System.out.printf("bf16 policy: loss %.6f (logits path) vs %.6f (fused)%n", a.loss(), f.loss());
            assertEquals(a.loss(), f.loss(), 0x1p-8 * (1 + Math.abs(a.loss())), "loss (one bf16 rounding)");
            double rel = relativeGradientDiff(logits, fused);
            System.out.printf("bf16 policy: gradients' max diff %.3g of their max%n", rel);
            // bf16 parameters' gradients: each a bf16 rounding (2^-8) of sums through a few bf16 layers (seen: 0.55 %)
            assertTrue(rel < 0.02, "fused linear gradient near the logits path's, rel. diff " + rel);
        }
    }

    /** Max |difference| of every parameter gradient of the two trainers, over the first one's max |gradient| (a real one). */
    private static double relativeGradientDiff(Trainer a, Trainer b) {
        double max = 0, scale = 0;
        for (int i = 0; i < a.parameters().size(); i++) {
            float[] x = TrainerTest.values(a.parameters().get(i).grad()), y = TrainerTest.values(b.parameters().get(i).grad());
            for (int k = 0; k < x.length; k++) {
                max = Math.max(max, Math.abs(x[k] - y[k]));
                scale = Math.max(scale, Math.abs(x[k]));
            }
        }
        assertTrue(scale > 1e-6, "a real gradient");
        return max / scale;
    }
}
