package ai.arbor.torch;

import ai.arbor.testing.Gpu;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.kernels.Backend;
import ai.arbor.kernels.SampleResult;
import ai.arbor.kernels.Sampler;
import ai.arbor.kernels.SamplingParams;
import java.nio.FloatBuffer;
import java.nio.LongBuffer;
import java.util.Random;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Test;

/** Sampling on tensors: the same draws as the array form, statistics as libtorch computes them. */
class TorchSamplerTest {

    static float[] floats(Tensor t) {
        Tensor c = t.to(ScalarType.Float).contiguous();
        float[] a = new float[(int) c.numel()];
        FloatBuffer b = c.createBuffer();
        b.get(a);
        return a;
    }

    static long[] longs(Tensor t) {
        Tensor c = t.contiguous();
        long[] a = new long[(int) c.numel()];
        LongBuffer b = c.createBuffer();
        b.get(a);
        return a;
    }

    @Test
    void drawsEqualTheArrayFormAndStatisticsEqualLibtorch() {
        long seed = TorchTokenStatsTest.seed();
        System.out.println("TorchSamplerTest seed=" + seed);
        Random rnd = new Random(seed);
        int b = 9, v = 1031;
        SamplingParams params = SamplingParams.temperature(0.8f).withTopP(0.9f);
        for (ScalarType st : new ScalarType[] {ScalarType.Float, ScalarType.BFloat16}) {
            Tensor logits = TorchTokenStatsTest.randn(rnd, 2f, b, v).to(st);
            float[] seen = floats(logits);  // the values the kernel reads
            long[] keys = rnd.longs(b).toArray(), steps = new long[b];
            for (int r = 0; r < b; r++) steps[r] = rnd.nextInt(1 << 20);
            TorchSampler.Sample s = TorchSampler.sample(logits, params, 5, Tensor.create(keys, b), Tensor.create(steps, b));
            SampleResult a = Sampler.sample(seen, b, v, v, params, 5, keys, steps, null);
            long[] tok = longs(s.tokens());
            for (int r = 0; r < b; r++) assertEquals(a.tokens()[r], tok[r], st + " row " + r);
            assertArrayEquals(a.logprob(), floats(s.logprob()), st + ": logprob");
            assertArrayEquals(a.entropy(), floats(s.entropy()), st + ": entropy");
            assertArrayEquals(a.logprobSampled(), floats(s.logprobSampled()), st + ": logprobSampled");
            // libtorch: log_softmax(x / T) at the drawn token, and -sum p log p
            Tensor lp = torch.log_softmax(logits.to(ScalarType.Float).div(new org.bytedeco.pytorch.Scalar(0.8f)), -1);
            Tensor ref = torch.gather(lp, -1, s.tokens().unsqueeze(-1)).squeeze(-1);
            Tensor ent = lp.exp().mul(lp).sum(new long[] {-1}, false, new ScalarTypeOptional()).neg();
            assertTrue(TorchTokenStatsTest.maxDiff(s.logprob(), ref) < 2e-5, st + " logprob vs torch");
            assertTrue(TorchTokenStatsTest.maxDiff(s.entropy(), ent) < 2e-5, st + " entropy vs torch");
        }
    }

    @Test
    void lastPositionOfABatchOfSequencesIsAStridedViewWithoutCopy() {
        Random rnd = new Random(3);
        int b = 4, l = 6, v = 257;
        Tensor full = TorchTokenStatsTest.randn(rnd, 1.5f, b, l, v);
        Tensor last = full.select(1, l - 1);  // [B, V], row stride L*V
        TorchSampler.Sample s = TorchSampler.sample(last, SamplingParams.temperature(1f), 11, 2);
        TorchSampler.Sample c = TorchSampler.sample(last.contiguous(), SamplingParams.temperature(1f), 11, 2);
        assertArrayEquals(longs(c.tokens()), longs(s.tokens()));
        assertArrayEquals(floats(c.logprob()), floats(s.logprob()));
        assertEquals(ScalarType.Long, s.tokens().scalar_type().intern());
        assertEquals(b, s.tokens().size(0));
    }

    @Test
    void perRowParametersMaskAndVocabLimit() {
        Random rnd = new Random(4);
        int b = 5, v = 40;
        Tensor logits = TorchTokenStatsTest.randn(rnd, 1f, b, v);
        float[] x = floats(logits);
        Tensor temps = Tensor.create(new float[] {0f, 1f, 0.5f, 2f, 1f}, b);
        Tensor ks = Tensor.create(new int[] {0, 3, 0, 1, 0}, b);
        Tensor mask = Tensor.create(new int[] {1, 1, 0, 1, 1}, b).to(ScalarType.Bool);
        TorchSampler.Sample s = TorchSampler.sample(logits, SamplingParams.temperature(1f), 8, 3, null, null, temps, ks,
                null, null, mask, 30);
        long[] t = longs(s.tokens());
        int argmax0 = 0;
        for (int j = 1; j < 30; j++) if (x[j] > x[argmax0]) argmax0 = j;
        assertEquals(argmax0, t[0], "row 0 is greedy");
        assertEquals(-1, t[2], "row 2 is masked");
        int argmax3 = 0;
        for (int j = 1; j < 30; j++) if (x[3 * v + j] > x[3 * v + argmax3]) argmax3 = j;
        assertEquals(argmax3, t[3], "row 3 has top-k 1");
        for (long tok : t) assertTrue(tok < 30, "vocabLimit 30 respected: " + tok);
        SampleResult a = Sampler.sample(x, b, v, 30, new SamplingParams[] {SamplingParams.greedy(),
            SamplingParams.temperature(1f).withTopK(3), SamplingParams.temperature(0.5f),
            SamplingParams.temperature(2f).withTopK(1), SamplingParams.temperature(1f)}, 8,
                new long[] {0, 1, 2, 3, 4}, new long[] {3, 3, 3, 3, 3}, new boolean[] {true, true, false, true, true});
        for (int r = 0; r < b; r++) assertEquals(a.tokens()[r], t[r], "row " + r);
    }

    @Test
    void rejectsWrongShapesAndTypes() {
        Tensor x3 = TorchTokenStatsTest.randn(new Random(1), 1f, 2, 3, 5);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> TorchSampler.sample(x3, SamplingParams.temperature(1f), 1, 0));
        assertTrue(e.getMessage().contains("[B, V]"), e.getMessage());
        Tensor x = TorchTokenStatsTest.randn(new Random(1), 1f, 2, 5);
        e = assertThrows(IllegalArgumentException.class, () -> TorchSampler.sample(x, SamplingParams.temperature(1f), 1,
                Tensor.create(new int[] {1, 2}, 2), Tensor.create(new long[] {0, 0}, 2)));
        assertTrue(e.getMessage().contains("keys must be int64"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> TorchSampler.sample(x, SamplingParams.temperature(1f), 1,
                Tensor.create(new long[] {1, 2, 3}, 3), Tensor.create(new long[] {0, 0}, 2)));
        assertTrue(e.getMessage().contains("keys must have 2 elements"), e.getMessage());
    }

    @Test
    void cudaTensorsDrawTheCpuTokens() {
        Gpu.assume(Backend.CUDA.isAvailable(), Backend.CUDA::unavailableReason);
        Gpu.assume(torch.cuda_is_available(), "this PyTorch build has no CUDA (use the GPU build of the preset)");
        Random rnd = new Random(9);
        Tensor logits = TorchTokenStatsTest.randn(rnd, 3f, 64, 32000).to(ScalarType.BFloat16);
        SamplingParams p = new SamplingParams(0.9f, 50, 0.95f, 0f);
        TorchSampler.Sample cpu = TorchSampler.sample(logits, p, 1, 2);
        TorchSampler.Sample gpu = TorchSampler.sample(logits.cuda(), p, 1, 2);
        assertArrayEquals(longs(cpu.tokens()), longs(gpu.tokens().cpu()));
    }
}
