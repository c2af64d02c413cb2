package ai.arbor.torch;

import ai.arbor.testing.Gpu;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.advantage.Advantages;
import ai.arbor.kernels.ShapingStats;
import ai.arbor.kernels.TokenAdvantages;
import ai.arbor.kernels.TokenShaping;
import ai.arbor.kernels.Backend;
import java.util.Random;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Test;

/** Tensor entry points of the advantages against the array API (itself tested against hand cases and references). */
class TorchAdvantagesTest {

    static float[] read(Tensor t) {
        float[] a = new float[(int) t.numel()];
        t.to(ScalarType.Float).cpu().contiguous().data_ptr_float().get(a);
        return a;
    }

    static Tensor bools(boolean[] b, long... shape) {
        int[] a = new int[b.length];
        for (int i = 0; i < a.length; i++) a[i] = b[i] ? 1 : 0;
        return Tensor.create(a, shape).to(ScalarType.Bool);
    }

    @Test
    void sequenceEstimatorsOnTensors() {
        float[] r = {1, 0, 0, 1, 1, 0};
        int[] prompt = {3, 3, 3, 3, 3, 3}, tree = {0, 0, 0, 1, 1, 1};
        Tensor rt = Tensor.create(r, 6);
        Tensor pt = Tensor.create(new long[] {3, 3, 3, 3, 3, 3}, 6), tt = Tensor.create(tree, 6);
        assertArrayEquals(Advantages.grpo(r, prompt, true), read(TorchAdvantages.grpo(rt, pt, true)), 0f);
        assertArrayEquals(Advantages.grpo(r, prompt, false), read(TorchAdvantages.grpo(rt, pt, false)), 0f);
        // the worked Tree-GRPO example, 2 trees × 3 leaves: sums 2.0675678, −1.4902186, … (AdvantagesTest works them out by hand)
        float[] tg = read(TorchAdvantages.treeGrpo(rt, pt, tt));
        assertArrayEquals(Advantages.treeGrpo(r, prompt, tree), tg, 0f);
        assertEquals(2.0675678f, tg[0], 5e-7f);
        assertThrows(IllegalArgumentException.class, () -> TorchAdvantages.grpo(rt, Tensor.create(new long[] {1, 2}, 2), true));
        assertThrows(IllegalArgumentException.class, () -> TorchAdvantages.grpo(rt, Tensor.create(r, 6), true));
    }

    @Test
    void paddedAndFlatTokenAdvantagesEqualTheArrayApi() {
        long seed = System.nanoTime();
        System.out.println("TorchAdvantagesTest seed=" + seed);
        Random rnd = new Random(seed);
        int b = 5, l = 13, n = b * l;
        float[] adv = new float[b], h = new float[n];
        boolean[] mask = new boolean[n], post = new boolean[n];
        for (int s = 0; s < b; s++) adv[s] = (float) rnd.nextGaussian();
        for (int t = 0; t < n; t++) {
            h[t] = (float) Math.abs(rnd.nextGaussian());
            mask[t] = rnd.nextInt(4) != 0;
            post[t] = rnd.nextInt(3) == 0;
        }
        for (TokenShaping s : new TokenShaping[] {TokenShaping.broadcast(), TokenShaping.aepo(), TokenShaping.taoRl(0.01f, 0.3)}) {
            TokenAdvantages.Result expect = TokenAdvantages.computePadded(adv, l, mask, h, post, s);
            TorchAdvantages.Result got = TorchAdvantages.tokenAdvantages(Tensor.create(adv, b), bools(mask, b, l),
                    Tensor.create(h, b, l), bools(post, b, l), s);
            assertEquals(2, got.advantages().dim());
            assertEquals(l, got.advantages().size(1));
            assertArrayEquals(expect.advantages(), read(got.advantages()), 0f, s.toString());
            assertEquals(expect.stats(), got.readStats());
            // flat: the same tokens with int64 ids and a uint8 mask
            long[] ids = new long[n];
            for (int t = 0; t < n; t++) ids[t] = t / l;
            TorchAdvantages.Result flat = TorchAdvantages.tokenAdvantagesFlat(Tensor.create(adv, b), Tensor.create(ids, n),
                    bools(mask, n).to(ScalarType.Byte), Tensor.create(h, n), bools(post, n), s);
            assertArrayEquals(expect.advantages(), read(flat.advantages()), 0f, s.toString());
        }
        // bf16 entropies are converted to float32 first: the result is the array API on the rounded values
        Tensor hb = Tensor.create(h, b, l).to(ScalarType.BFloat16);
        float[] hRounded = read(hb);
        TokenAdvantages.Result expect = TokenAdvantages.computePadded(adv, l, mask, hRounded, post, TokenShaping.aepo());
        ShapingStats st = TorchAdvantages.tokenAdvantages(Tensor.create(adv, b), bools(mask, b, l), hb, null, TokenShaping.aepo()).readStats();
        assertEquals(expect.stats().entropyMean(), st.entropyMean(), 0.0);
    }

    @Test
    void badTensorsAreRejected() {
        Tensor adv = Tensor.create(new float[] {1f, 2f}, 2);
        Tensor mask = bools(new boolean[] {true, true, true, true}, 2, 2);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> TorchAdvantages.tokenAdvantages(adv, mask, null, null, TokenShaping.aepo()));
        assertTrue(e.getMessage().contains("entrop"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> TorchAdvantages.tokenAdvantages(Tensor.create(new float[] {1f}, 1), mask,
                null, null, TokenShaping.broadcast()));
        assertTrue(e.getMessage().contains("B = 2"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> TorchAdvantages.tokenAdvantages(adv, mask,
                Tensor.create(new float[] {1f, 2f, 3f}, 3), null, TokenShaping.aepo()));
        assertTrue(e.getMessage().contains("entropy must have 4 elements"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> TorchAdvantages.tokenAdvantagesFlat(adv,
                Tensor.create(new float[] {0f, 1f}, 2), null, null, null, TokenShaping.broadcast()));
        assertTrue(e.getMessage().contains("seqIds must be int32 or int64"), e.getMessage());
    }

    @Test
    void cudaTensorsRunOnTheCudaKernel() {
        Gpu.assume(Backend.CUDA.isAvailable(), Backend.CUDA::unavailableReason);
        int b = 64, l = 257, n = b * l;
        Random rnd = new Random(7);
        float[] adv = new float[b], h = new float[n];
        boolean[] mask = new boolean[n], post = new boolean[n];
        for (int s = 0; s < b; s++) adv[s] = (float) rnd.nextGaussian();
        for (int t = 0; t < n; t++) {
            h[t] = (float) Math.abs(rnd.nextGaussian());
            mask[t] = rnd.nextInt(4) != 0;
            post[t] = rnd.nextInt(3) == 0;
        }
        TokenShaping s = TokenShaping.taoRl(0.01f, 0.2);
        TokenAdvantages.Result cpu = TokenAdvantages.computePadded(adv, l, mask, h, post, s);
        TorchAdvantages.Result gpu = TorchAdvantages.tokenAdvantages(Tensor.create(adv, b).cuda(), bools(mask, b, l).cuda(),
                Tensor.create(h, b, l).cuda(), bools(post, b, l).cuda(), s);
        assertTrue(gpu.advantages().is_cuda());
        float[] got = read(gpu.advantages());
        for (int t = 0; t < n; t++) assertEquals(cpu.advantages()[t], got[t], 1e-6f * (1 + Math.abs(cpu.advantages()[t])));
        assertEquals(cpu.stats().shapedTokens(), gpu.readStats().shapedTokens());
        assertEquals(cpu.stats().threshold(), gpu.readStats().threshold(), 0.0);
    }
}
