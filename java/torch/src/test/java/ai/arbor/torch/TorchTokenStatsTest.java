package ai.arbor.torch;

import ai.arbor.testing.Gpu;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.kernels.Backend;
import java.util.Random;
import org.bytedeco.pytorch.BoolOptional;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorArrayRefOptional;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Test;

/** Token statistics on tensors against libtorch's own log_softmax-based math and autograd. */
class TorchTokenStatsTest {

    static long seed() {
        return ai.arbor.testing.Seeds.seed();
    }

    static Tensor randn(Random rnd, float scale, long... shape) {
        long n = 1;
        for (long s : shape) n *= s;
        float[] a = new float[(int) n];
        for (int i = 0; i < a.length; i++) a[i] = (float) (rnd.nextGaussian() * scale);
        return Tensor.create(a, shape);
    }

    static Tensor labels(Random rnd, int vocab, long... shape) {
        long n = 1;
        for (long s : shape) n *= s;
        long[] a = new long[(int) n];
        for (int i = 0; i < a.length; i++) a[i] = rnd.nextInt(vocab);
        return Tensor.create(a, shape);
    }

    /** Reference with torch ops: logprob = log_softmax(x/T)[y], entropy = −Σ p log p. */
    static Tensor[] torchStats(Tensor logits, Tensor labels, float t) {
        Tensor lp = torch.log_softmax(logits.to(ScalarType.Float).div(new org.bytedeco.pytorch.Scalar(t)), -1);
        Tensor logprob = torch.gather(lp, -1, labels.unsqueeze(-1)).squeeze(-1);
        Tensor entropy = lp.exp().mul(lp).sum(new long[] {-1}, false, new ScalarTypeOptional()).neg();
        return new Tensor[] {logprob, entropy};
    }

    static double maxDiff(Tensor a, Tensor b) {
        return a.to(ScalarType.Float).sub(b.to(ScalarType.Float)).abs().max().item_double();
    }

    @Test
    void matchesLibtorchLogSoftmaxOnContiguousAndStridedViews() {
        long seed = seed();
        System.out.println("TorchTokenStatsTest seed=" + seed);
        Random rnd = new Random(seed);
        int b = 3, l = 7, v = 1031;
        Tensor full = randn(rnd, 2f, b, l + 1, v);
        Tensor lab = labels(rnd, v, b, l);
        // [B, L, V] view with the last position dropped: rows are not evenly spaced (per-batch blocks)
        Tensor view = full.narrow(1, 0, l);
        TorchTokenStats.Stats s = TorchTokenStats.forward(view, lab, 0.8f, null, 0);
        Tensor[] ref = torchStats(view, lab, 0.8f);
        assertEquals(b, s.logprob().size(0));
        assertEquals(l, s.logprob().size(1));
        assertTrue(maxDiff(s.logprob(), ref[0]) < 2e-5, "logprob vs torch: " + maxDiff(s.logprob(), ref[0]));
        assertTrue(maxDiff(s.entropy(), ref[1]) < 2e-5, "entropy vs torch: " + maxDiff(s.entropy(), ref[1]));
        // the same rows, copied contiguous, give the same bits
        TorchTokenStats.Stats c = TorchTokenStats.forward(view.contiguous(), lab, 0.8f, null, 0);
        assertEquals(0.0, maxDiff(s.logprob(), c.logprob()));
        assertEquals(0.0, maxDiff(s.entropy(), c.entropy()));
        // [T, V] with a row stride (every other row)
        Tensor t2 = randn(rnd, 1f, 10, v).narrow(1, 0, v - 3);
        Tensor lab2 = labels(rnd, v - 3, 10);
        TorchTokenStats.Stats s2 = TorchTokenStats.forward(t2, lab2, 1f, null, 0);
        Tensor[] ref2 = torchStats(t2, lab2, 1f);
        assertTrue(maxDiff(s2.logprob(), ref2[0]) < 2e-5);
        assertTrue(maxDiff(s2.entropy(), ref2[1]) < 2e-5);
    }

    @Test
    void backwardMatchesLibtorchAutograd() {
        long seed = seed();
        System.out.println("backwardMatchesLibtorchAutograd seed=" + seed);
        Random rnd = new Random(seed);
        int t = 13, v = 517;
        for (ScalarType st : new ScalarType[] {ScalarType.Float, ScalarType.BFloat16}) {
            Tensor logits = randn(rnd, 3f, t, v).to(st);
            Tensor lab = labels(rnd, v, t);
            Tensor glp = randn(rnd, 1f, t), gh = randn(rnd, 1f, t);
            // autograd on the torch formulation
            Tensor x = logits.to(ScalarType.Float).detach().set_requires_grad(true);
            Tensor[] ref = torchStats(x, lab, 1.3f);
            ref[0].mul(glp).sum().add(ref[1].mul(gh).sum()).backward();
            Tensor expected = x.grad();
            TorchTokenStats.Stats s = TorchTokenStats.forward(logits, lab, 1.3f, null, 0);
            Tensor grad = TorchTokenStats.backward(logits, lab, 1.3f, null, 0, s, glp, gh);
            assertEquals(st, grad.scalar_type().intern(), "grad has the logits' dtype");
            double tol = st == ScalarType.Float ? 2e-5 : 2e-2;  // bf16 output: 8-bit mantissa
            double d = maxDiff(grad, expected);
            assertTrue(d < tol, st + " grad vs autograd: max diff " + d);
        }
    }

    @Test
    void maskedRowsAndInt32LabelsAndBoolMask() {
        Random rnd = new Random(7);
        int t = 6, v = 40;
        Tensor logits = randn(rnd, 1f, t, v);
        Tensor lab = Tensor.create(new int[] {1, 2, 3, 4, 5, 6}, t);
        Tensor mask = Tensor.create(new int[] {1, 0, 1, 0, 1, 1}, t).to(ScalarType.Bool);
        TorchTokenStats.Stats s = TorchTokenStats.forward(logits, lab, 1f, mask, 0);
        Tensor[] ref = torchStats(logits, lab.to(ScalarType.Long), 1f);
        float[] lp = new float[t];
        s.logprob().contiguous().createBuffer().rewind();
        java.nio.FloatBuffer fb = s.logprob().contiguous().createBuffer();
        fb.get(lp);
        for (int r = 0; r < t; r++) {
            float expected = (r == 1 || r == 3) ? 0f : ref[0].select(0, r).item_float();
            assertEquals(expected, lp[r], 2e-5, "row " + r);
        }
    }

    @Test
    void nonContiguousLastDimensionIsRejected() {
        Tensor x = randn(new Random(1), 1f, 8, 5).transpose(0, 1);  // [5, 8] with stride (1, 5)
        Tensor lab = Tensor.create(new long[] {0, 1, 2, 3, 4}, 5);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> TorchTokenStats.forward(x, lab, 1f, null, 0));
        assertTrue(e.getMessage().contains("contiguous"), e.getMessage());
        Tensor badLabels = Tensor.create(new long[] {0, 1, 2}, 3);
        assertThrows(IllegalArgumentException.class, () -> TorchTokenStats.forward(x.contiguous(), badLabels, 1f, null, 0));
    }

    @Test
    void cudaTensorsUseTheCudaKernels() {
        Gpu.assume(Backend.CUDA.isAvailable(), Backend.CUDA::unavailableReason);
        Gpu.assume(torch.cuda_is_available(), "this PyTorch build has no CUDA (use the GPU build of the preset)");
        Random rnd = new Random(3);
        Tensor logits = randn(rnd, 2f, 64, 32000).cuda();
        Tensor lab = labels(rnd, 32000, 64).cuda();
        TorchTokenStats.Stats s = TorchTokenStats.forward(logits, lab, 1f, null, 0);
        Tensor[] ref = torchStats(logits, lab, 1f);
        assertTrue(maxDiff(s.logprob(), ref[0]) < 1e-4);
        assertTrue(maxDiff(s.entropy(), ref[1]) < 1e-4);
    }
}
