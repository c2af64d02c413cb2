package ai.arbor.kernels;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.bindings.ArborCpu;
import ai.arbor.testing.Gpu;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Token-level advantages: the native kernels against a hand-computed 10-token example and against the
 * Java double reference over random batches.
 *
 * <p>Tolerance: the kernel evaluates the reference's expression in double and rounds once to fp32; its μ
 * and scale come from a chunked summation instead of an index-order one (≈1e-16 relative apart). So per
 * token |kernel − reference| ≤ 1e-6 · |A| · (1 + |coef · Ĥ|) — a few fp32 ulps — and the set of shaped
 * tokens, every count and τ agree exactly.
 */
class TokenAdvantagesTest {

    @AfterEach
    void restore() {
        Kernels.setThreads(Runtime.getRuntime().availableProcessors());
    }

    // ---- the 10-token example ------------------------------------------------------------------------

    // Two trajectories: tokens 0..5 belong to trajectory 0 (A = 1), tokens 6..9 to trajectory 1 (A = −0.5).
    // Token 3 is a tool observation (masked; its entropy is NaN to prove it is never read).
    static final float[] A = {1.0f, -0.5f};
    static final int[] IDS = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1};
    static final boolean[] MASK = {true, true, true, false, true, true, true, true, true, true};
    static final float[] H = {0.0f, 0.5f, 1.0f, Float.NaN, 1.5f, 2.0f, 1.0f, 0.5f, 1.5f, 1.0f};
    // M_post: tokens 4, 5 (turn after the observation at 3) and 8, 9 (a later post-tool turn of trajectory 1)
    static final boolean[] POST = {false, false, false, false, true, true, false, false, true, true};
    // Over the 9 valid tokens: ΣH = 0 + .5 + 1 + 1.5 + 2 + 1 + .5 + 1.5 + 1 = 9, μ = 1;
    // deviations (−1, −.5, 0, ·, .5, 1, 0, −.5, .5, 0), Σd² = 1 + .25 + .25 + 1 + .25 + .25 = 3,
    // unbiased var = 3 / 8 = 0.375, std = 0.61237244, scale = 1 / sqrt(0.375 + 1e-8) = 1.6329931,
    // so Ĥ = d · 1.6329931: (−1.6329931, −0.8164966, 0, ·, 0.8164966, 1.6329931, 0, −0.8164966, 0.8164966, 0).
    static final double STD = 0.61237244, SCALE = 1.6329931;

    @Test
    void broadcastOnTenTokens() {
        TokenAdvantages.Result r = TokenAdvantages.compute(A, IDS, MASK, null, null, TokenShaping.broadcast());
        assertArrayEquals(new float[] {1, 1, 1, 0, 1, 1, -0.5f, -0.5f, -0.5f, -0.5f}, r.advantages(), 0f);
        assertEquals(9, r.stats().validTokens());
        assertEquals(0, r.stats().shapedTokens());
        assertTrue(Double.isNaN(r.stats().entropyMean()));
    }

    @Test
    void aepoOnTenTokens() {
        // Ã = A (1 + 0.2 Ĥ): token 0: 1 − 0.2·1.6329931 = 0.6734014; token 1: 1 − 0.2·0.8164966 = 0.8367007;
        // token 2: 1; token 4: 1.1632993; token 5: 1.3265986; token 6: −0.5; token 7: −0.5·0.8367007 = −0.4183503;
        // token 8: −0.5·1.1632993 = −0.5816497; token 9: −0.5; masked token 3: 0.
        float[] expect = {0.6734014f, 0.8367007f, 1.0f, 0f, 1.1632993f, 1.3265986f, -0.5f, -0.4183503f, -0.5816497f, -0.5f};
        TokenAdvantages.Result r = TokenAdvantages.compute(A, IDS, MASK, H, null, TokenShaping.aepo());
        assertArrayEquals(expect, r.advantages(), 2e-7f);
        ShapingStats s = r.stats();
        assertEquals(9, s.validTokens());
        assertEquals(9, s.shapedTokens());
        assertEquals(1.0, s.entropyMean(), 1e-12);
        assertEquals(STD, s.entropyStd(), 1e-8);
        assertEquals(SCALE, s.scale(), 1e-7);
        assertTrue(Double.isNaN(s.threshold()));
        assertReferenceAgrees(A, IDS, 0, MASK, H, null, TokenShaping.aepo(), r);
    }

    @Test
    void taoRlOnTenTokensForSeveralTopFractions() {
        // candidates (valid ∧ M_post): tokens 4 (H 1.5), 5 (2.0), 8 (1.5), 9 (1.0); n_post = 4, sorted 2.0, 1.5, 1.5, 1.0
        // q = 0.5: k = 2, τ = 1.5, selected H ≥ 1.5: tokens 5, 4 and 8 (the tie at τ is selected too)
        //   token 4: 1 · (1 + 0.01 · 0.8164966) = 1.0081650; token 5: 1 + 0.01 · 1.6329931 = 1.0163299;
        //   token 8: −0.5 · 1.0081650 = −0.5040825; everything else keeps A.
        TokenAdvantages.Result r = TokenAdvantages.compute(A, IDS, MASK, H, POST, TokenShaping.taoRl(0.01f, 0.5));
        assertArrayEquals(new float[] {1, 1, 1, 0, 1.0081650f, 1.0163299f, -0.5f, -0.5f, -0.5040825f, -0.5f}, r.advantages(), 2e-7f);
        assertEquals(4, r.stats().postToolTokens());
        assertEquals(3, r.stats().shapedTokens());
        assertEquals(1.5, r.stats().threshold(), 0.0);
        assertReferenceAgrees(A, IDS, 0, MASK, H, POST, TokenShaping.taoRl(0.01f, 0.5), r);

        // q = 0.25: k = 1, τ = 2.0: only token 5
        r = TokenAdvantages.compute(A, IDS, MASK, H, POST, TokenShaping.taoRl(0.01f, 0.25));
        assertArrayEquals(new float[] {1, 1, 1, 0, 1, 1.0163299f, -0.5f, -0.5f, -0.5f, -0.5f}, r.advantages(), 2e-7f);
        assertEquals(1, r.stats().shapedTokens());
        assertEquals(2.0, r.stats().threshold(), 0.0);

        // q = 0.2 (paper default): k = ⌈0.8⌉ = 1, as q = 0.25
        assertArrayEquals(r.advantages(), TokenAdvantages.compute(A, IDS, MASK, H, POST, TokenShaping.taoRl()).advantages(), 0f);

        // q = 1.0 (released code): all four candidates; token 9 has Ĥ = 0, so its value stays −0.5
        r = TokenAdvantages.compute(A, IDS, MASK, H, POST, TokenShaping.taoRl(0.01f, 1.0));
        assertArrayEquals(new float[] {1, 1, 1, 0, 1.0081650f, 1.0163299f, -0.5f, -0.5f, -0.5040825f, -0.5f}, r.advantages(), 2e-7f);
        assertEquals(4, r.stats().shapedTokens());
        assertEquals(1.0, r.stats().threshold(), 0.0);
        assertReferenceAgrees(A, IDS, 0, MASK, H, POST, TokenShaping.taoRl(0.01f, 1.0), r);
    }

    @Test
    void paddedLayoutEqualsFlat() {
        // the same batch as [2, 6]: trajectory 1 padded with two masked tokens (junk entropy never read)
        float[] h = {0.0f, 0.5f, 1.0f, Float.NaN, 1.5f, 2.0f, 1.0f, 0.5f, 1.5f, 1.0f, Float.NaN, 99f};
        boolean[] m = {true, true, true, false, true, true, true, true, true, true, false, false};
        boolean[] p = {false, false, false, false, true, true, false, false, true, true, true, true};
        for (TokenShaping s : new TokenShaping[] {TokenShaping.broadcast(), TokenShaping.aepo(), TokenShaping.taoRl(0.01f, 0.5)}) {
            TokenAdvantages.Result flat = TokenAdvantages.compute(A, IDS, MASK, H, POST, s);
            TokenAdvantages.Result pad = TokenAdvantages.computePadded(A, 6, m, h, p, s);
            assertArrayEquals(flat.advantages(), java.util.Arrays.copyOf(pad.advantages(), 10), 0f, s.toString());
            assertEquals(0f, pad.advantages()[10]);
            assertEquals(0f, pad.advantages()[11]);
            assertEquals(flat.stats(), pad.stats());
        }
    }

    // ---- native vs the Java reference over random batches ----------------------------------------------

    @Test
    void matchesJavaReferenceOverRandomBatches() {
        long seed = ai.arbor.testing.Seeds.seed();
        System.out.println("TokenAdvantagesTest.matchesJavaReferenceOverRandomBatches seed=" + seed);
        Random rnd = new Random(seed);
        double worst = 0;
        for (int trial = 0; trial < 60; trial++) {
            Batch b = Batch.random(rnd, trial < 50 ? 1 + rnd.nextInt(40) : 100 + rnd.nextInt(300), 1 + rnd.nextInt(trial < 50 ? 50 : 400));
            TokenShaping s = randomShaping(rnd);
            TokenAdvantages.Result r = b.run(s);
            worst = Math.max(worst, assertReferenceAgrees(b.adv, b.ids, b.seqLen, b.mask, b.entropy, b.post, s, r));
        }
        System.out.printf("  worst error / tolerance = %.3f%n", worst);
    }

    @Test
    void nativeDoubleReferenceEqualsJavaReference() {
        // the C++ reference is the GPU harness's oracle (cuda-kernels/test/check_advantages.cu): tie it to this one
        long seed = ai.arbor.testing.Seeds.seed();
        System.out.println("TokenAdvantagesTest.nativeDoubleReferenceEqualsJavaReference seed=" + seed);
        Random rnd = new Random(seed);
        for (int trial = 0; trial < 30; trial++) {
            Batch b = Batch.random(rnd, 1 + rnd.nextInt(30), 1 + rnd.nextInt(60));
            TokenShaping s = randomShaping(rnd);
            double[] adv = toDouble(b.adv), h = toDouble(b.entropy);
            TokenAdvantagesReference.Result ref = TokenAdvantagesReference.compute(adv, b.ids, b.seqLen, b.mask, h, b.post, s);
            int n = ref.advantages().length;
            double[] out = new double[n], stats = new double[8];
            long[] ids = null;
            if (b.ids != null) {
                ids = new long[n];
                for (int t = 0; t < n; t++) ids[t] = b.ids[t];
            }
            int rc = ArborCpu.arbor_ref_token_advantages(adv, adv.length, ids, n, b.ids == null ? b.seqLen : 0,
                    bytes(b.mask), h, bytes(b.post), s.mode().code(), s.coef(), s.topFraction(), out, stats);
            assertEquals(0, rc);
            for (int t = 0; t < n; t++)
                if (!(Math.abs(ref.advantages()[t] - out[t]) <= 1e-12 * (1 + Math.abs(out[t]))))
                    throw new AssertionError("token " + t + ": " + out[t] + " vs " + ref.advantages()[t] + " seed=" + seed);
            assertStatsAgree(ref.stats(), ShapingStats.of(stats), s);
        }
    }

    @Test
    void bitwiseIdenticalForEveryThreadCount() {
        long seed = ai.arbor.testing.Seeds.seed();
        System.out.println("TokenAdvantagesTest.bitwiseIdenticalForEveryThreadCount seed=" + seed);
        Random rnd = new Random(seed);
        // ≈ 150k tokens: several 16k-token chunks, so 2+ threads really split the reductions
        Batch b = Batch.random(rnd, 300, 1000);
        for (TokenShaping s : new TokenShaping[] {TokenShaping.aepo(), TokenShaping.taoRl(0.01f, 0.3)}) {
            Kernels.setThreads(1);
            TokenAdvantages.Result one = b.run(s);
            for (int threads : new int[] {2, 3, 7}) {
                Kernels.setThreads(threads);
                TokenAdvantages.Result r = b.run(s);
                assertArrayEquals(one.advantages(), r.advantages(), 0f, threads + " threads, seed=" + seed);
                assertEquals(Double.doubleToRawLongBits(one.stats().entropyMean()), Double.doubleToRawLongBits(r.stats().entropyMean()));
                assertEquals(Double.doubleToRawLongBits(one.stats().entropyStd()), Double.doubleToRawLongBits(r.stats().entropyStd()));
                assertEquals(one.stats(), r.stats());
            }
        }
    }

    // ---- memory entry points -----------------------------------------------------------------------------

    @Test
    void directBuffersEqualArraysWithInt64Ids() {
        int n = IDS.length;
        ByteBuffer adv = floats(A), h = floats(H), out = ByteBuffer.allocateDirect(4 * n).order(ByteOrder.nativeOrder());
        ByteBuffer ids = ByteBuffer.allocateDirect(8 * n).order(ByteOrder.nativeOrder());
        for (int id : IDS) ids.putLong(id);
        ids.clear();
        ByteBuffer mask = ByteBuffer.allocateDirect(n).put(bytes(MASK)).clear();
        ByteBuffer post = ByteBuffer.allocateDirect(n).put(bytes(POST)).clear();
        ByteBuffer stats = ByteBuffer.allocateDirect(64).order(ByteOrder.nativeOrder());
        TokenShaping s = TokenShaping.taoRl(0.01f, 0.5);
        TokenAdvantages.compute(MemRef.of(adv), 2, MemRef.of(ids), DType.I64, n, 0, MemRef.of(mask), MemRef.of(h),
                MemRef.of(post), s, MemRef.of(out), MemRef.of(stats), 0);
        float[] got = new float[n];
        out.asFloatBuffer().get(got);
        TokenAdvantages.Result arr = TokenAdvantages.compute(A, IDS, MASK, H, POST, s);
        assertArrayEquals(arr.advantages(), got, 0f);
        double[] st = new double[8];
        stats.asDoubleBuffer().get(st);
        assertEquals(arr.stats(), ShapingStats.of(st));
    }

    @Test
    void memoryEntryNamesBadIdsAndEntropiesBeforeTheKernelRuns() {
        int n = 4;
        ByteBuffer adv = floats(new float[] {1f, 2f}), out = ByteBuffer.allocateDirect(4 * n).order(ByteOrder.nativeOrder());
        ByteBuffer ids = ByteBuffer.allocateDirect(4 * n).order(ByteOrder.nativeOrder());
        for (int id : new int[] {0, 1, 2, 1}) ids.putInt(id);  // 2 is out of range
        ids.clear();
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> TokenAdvantages.compute(MemRef.of(adv), 2,
                MemRef.of(ids), DType.I32, n, 0, null, null, null, TokenShaping.broadcast(), MemRef.of(out), null, 0));
        assertTrue(e.getMessage().contains("seqIds[2] = 2 is outside [0, 2)"), e.getMessage());
        ids.putInt(8, 1);
        ByteBuffer h = floats(new float[] {1f, Float.POSITIVE_INFINITY, 0.5f, 2f});
        ByteBuffer stats = ByteBuffer.allocateDirect(64).order(ByteOrder.nativeOrder());
        e = assertThrows(IllegalArgumentException.class, () -> TokenAdvantages.compute(MemRef.of(adv), 2, MemRef.of(ids), DType.I32,
                n, 0, null, MemRef.of(h), null, TokenShaping.aepo(), MemRef.of(out), MemRef.of(stats), 0));
        assertTrue(e.getMessage().contains("entropy[1] = Infinity is not finite"), e.getMessage());
        for (int t = 0; t < n; t++) assertEquals(0f, out.getFloat(4 * t));  // host memory: nothing ran
    }

    @Test
    void memoryEntryValidatesBeforeNativeCode() {
        ByteBuffer f = floats(new float[8]);
        MemRef ref = MemRef.of(f);
        assertThrows(IllegalArgumentException.class, () -> TokenAdvantages.compute(ref, 2, null, null, 8, 3, null, ref, null,
                TokenShaping.broadcast(), ref, null, 0), "2 * 3 != 8");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> TokenAdvantages.compute(ref, 2, null, null, 8, 4,
                null, ref, null, TokenShaping.aepo(), ref, null, 0));
        assertTrue(e.getMessage().contains("stats"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> TokenAdvantages.compute(ref, 2, null, null, 9, 0,
                null, null, null, TokenShaping.broadcast(), ref, null, 0));
        assertTrue(e.getMessage().contains("seqLen"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> TokenAdvantages.compute(ref, 2, null, null, 16, 8,
                null, null, null, TokenShaping.broadcast(), ref, null, 0));
        assertTrue(e.getMessage().contains("out needs"), e.getMessage());
        MemRef fakeCuda = MemRef.cuda(1L << 20, 1 << 10, 0);  // never dereferenced: rejected first
        e = assertThrows(IllegalArgumentException.class, () -> TokenAdvantages.compute(ref, 2, null, null, 8, 4, null, fakeCuda,
                null, TokenShaping.broadcast(), ref, null, 0));
        assertTrue(e.getMessage().contains("entropy is on cuda:0"), e.getMessage());
    }

    @Test
    void arrayEntryRejectsBadValuesNamingThem() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> TokenAdvantages.compute(A, new int[] {0, 2}, null, null, null, TokenShaping.broadcast()));
        assertTrue(e.getMessage().contains("seqIds[1] = 2"), e.getMessage());
        // a masked token's id is not read
        assertArrayEquals(new float[] {1f, 0f}, TokenAdvantages.compute(A, new int[] {0, 2}, new boolean[] {true, false}, null, null,
                TokenShaping.broadcast()).advantages(), 0f);
        e = assertThrows(IllegalArgumentException.class,
                () -> TokenAdvantages.compute(A, new int[] {0, 1}, null, new float[] {1f, Float.NaN}, null, TokenShaping.aepo()));
        assertTrue(e.getMessage().contains("entropy[1] = NaN"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> TokenAdvantages.compute(A, new int[] {0, 1}, null, null, null, TokenShaping.aepo()));
        assertTrue(e.getMessage().contains("entropies"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> TokenShaping.taoRl(0.01f, 0.0));
        assertThrows(IllegalArgumentException.class, () -> TokenShaping.taoRl(0.01f, 1.5));
        assertThrows(IllegalArgumentException.class, () -> TokenShaping.aepo(Float.NaN));
        assertEquals(TokenShaping.taoRl(), TokenShaping.byName("TAO-RL"));
    }

    @Test
    void edgeCasesNoValidTokenAndOneValidToken() {
        TokenAdvantages.Result r = TokenAdvantages.compute(A, new int[] {0, 1}, new boolean[] {false, false}, new float[] {1, 2},
                new boolean[] {true, true}, TokenShaping.taoRl());
        assertArrayEquals(new float[] {0f, 0f}, r.advantages(), 0f);
        assertEquals(0, r.stats().validTokens());
        assertTrue(Double.isNaN(r.stats().entropyMean()));
        // one valid token: var = 0, Ĥ = 0, so Ã = A; it is still counted as shaped
        r = TokenAdvantages.compute(A, new int[] {1}, null, new float[] {3f}, new boolean[] {true}, TokenShaping.taoRl());
        assertArrayEquals(new float[] {-0.5f}, r.advantages(), 0f);
        assertEquals(0.0, r.stats().entropyStd(), 0.0);
        assertEquals(1, r.stats().shapedTokens());
        assertEquals(0, TokenAdvantages.compute(A, new int[0], null, new float[0], null, TokenShaping.aepo()).advantages().length);
    }

    @Test
    void topCountRoundsProductsThatAreIntegers() {
        assertEquals(2, TokenAdvantagesReference.topCount(0.2, 10));
        assertEquals(3, TokenAdvantagesReference.topCount(0.3, 10));
        assertEquals(3, TokenAdvantagesReference.topCount(0.21, 10));
        assertEquals(1, TokenAdvantagesReference.topCount(0.001, 10));
        assertEquals(10, TokenAdvantagesReference.topCount(1.0, 10));
        assertEquals(0, TokenAdvantagesReference.topCount(0.5, 0));
        assertEquals(2, TokenAdvantagesReference.topCount((float) 0.2, 10), "q given as a float still counts 2 of 10");
    }

    @Test
    void postToolFlagsFromRoles() {
        byte O = TokenAdvantages.ROLE_OTHER, As = TokenAdvantages.ROLE_ASSISTANT, T = TokenAdvantages.ROLE_TOOL;
        // trajectory 0: prompt, assistant, tool, tool, assistant, assistant, tool, assistant
        // trajectory 1 interleaved: prompt, assistant, user (OTHER), assistant — no tool, never flagged
        int[] ids = {0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 0, 1};
        byte[] roles = {O, O, As, T, As, T, As, O, As, T, As, As};
        boolean[] expect = {false, false, false, false, false, false, true, false, true, false, true, false};
        assertArrayEquals(expect, TokenAdvantages.postToolFlags(ids, roles));
        // tool → OTHER → assistant: not post-tool (the template tokens should have been labelled TOOL)
        assertArrayEquals(new boolean[] {false, false, false}, TokenAdvantages.postToolFlags(new int[3], new byte[] {T, O, As}));
        assertThrows(IllegalArgumentException.class, () -> TokenAdvantages.postToolFlags(new int[] {0}, new byte[] {7}));
        assertArrayEquals(new int[] {0, 0, 0, 2, 2}, TokenAdvantages.seqIdsOf(3, 0, 2));
    }

    @Test
    void cudaKernelEqualsCpuKernel() {
        Gpu.assume(Backend.CUDA.isAvailable(), Backend.CUDA::unavailableReason);
        long seed = ai.arbor.testing.Seeds.seed();
        System.out.println("TokenAdvantagesTest.cudaKernelEqualsCpuKernel seed=" + seed);
        Random rnd = new Random(seed);
        for (int trial = 0; trial < 10; trial++) {
            Batch b = Batch.random(rnd, 1 + rnd.nextInt(200), 1 + rnd.nextInt(300));
            TokenShaping s = randomShaping(rnd);
            TokenAdvantages.Result cpu = b.run(s);
            int n = cpu.advantages().length;
            try (CudaBuffer adv = CudaBuffer.of(b.adv, 0); CudaBuffer h = CudaBuffer.of(b.entropy, 0);
                 CudaBuffer mask = CudaBuffer.of(bytes(b.mask), 0); CudaBuffer post = CudaBuffer.of(bytes(b.post), 0);
                 CudaBuffer ids = b.ids == null ? null : CudaBuffer.of(b.ids, 0);
                 CudaBuffer out = CudaBuffer.allocate(4L * Math.max(1, n), 0); CudaBuffer stats = CudaBuffer.allocate(64, 0)) {
                TokenAdvantages.compute(adv.ref(), b.adv.length, ids == null ? null : ids.ref(), DType.I32, n, b.seqLen,
                        mask.ref(), h.ref(), post.ref(), s, out.ref(), stats.ref(), 0);
                float[] got = new float[n];
                out.copyTo(got);
                TokenAdvantagesReference.Result ref = TokenAdvantagesReference.compute(toDouble(b.adv), b.ids, b.seqLen, b.mask,
                        toDouble(b.entropy), b.post, s);
                for (int t = 0; t < n; t++)
                    if (!(Math.abs(cpu.advantages()[t] - got[t]) <= tolerance(ref, b, s, t)))
                        throw new AssertionError("token " + t + ": cuda " + got[t] + " vs cpu " + cpu.advantages()[t] + " seed=" + seed);
                double[] st = new double[8];
                ByteBuffer hostStats = ByteBuffer.allocateDirect(64).order(ByteOrder.nativeOrder());
                ai.arbor.bindings.ArborCuda.arbor_cuda_memcpy_dtoh(MemRef.of(hostStats).address(), stats.ref().address(), 64);
                hostStats.asDoubleBuffer().get(st);
                assertStatsAgree(cpu.stats(), ShapingStats.of(st), s);
            }
        }
    }

    // ---- helpers ---------------------------------------------------------------------------------------

    /** A random batch: flat (interleaved trajectories, masks) or padded, with ties in some entropies. */
    static final class Batch {
        float[] adv, entropy;
        int[] ids;      // null = padded
        int seqLen;     // padded row length
        boolean[] mask, post;

        static Batch random(Random rnd, int nSeqs, int maxLen) {
            Batch b = new Batch();
            b.adv = new float[nSeqs];
            for (int s = 0; s < nSeqs; s++) b.adv[s] = (float) rnd.nextGaussian();
            int[] len = new int[nSeqs];
            for (int s = 0; s < nSeqs; s++) len[s] = 1 + rnd.nextInt(maxLen);
            int n;
            if (rnd.nextInt(3) == 0) {  // padded
                b.seqLen = maxLen;
                n = nSeqs * maxLen;
                b.mask = new boolean[n];
                for (int s = 0; s < nSeqs; s++)
                    for (int j = 0; j < len[s]; j++) b.mask[s * maxLen + j] = rnd.nextInt(6) != 0;
            } else {
                b.ids = TokenAdvantages.seqIdsOf(len);
                n = b.ids.length;
                for (int i = n - 1; i > 0; i--) {  // interleave the trajectories
                    int j = rnd.nextInt(i + 1), tmp = b.ids[i];
                    b.ids[i] = b.ids[j];
                    b.ids[j] = tmp;
                }
                b.mask = new boolean[n];
                for (int t = 0; t < n; t++) b.mask[t] = rnd.nextInt(5) != 0;
            }
            boolean ties = rnd.nextBoolean();
            b.entropy = new float[n];
            b.post = new boolean[n];
            for (int t = 0; t < n; t++) {
                b.entropy[t] = ties ? 0.25f * rnd.nextInt(6) : (float) Math.abs(rnd.nextGaussian() * 2);
                if (!b.mask[t] && rnd.nextInt(4) == 0) b.entropy[t] = Float.NaN;  // masked tokens are never read
                b.post[t] = rnd.nextInt(3) == 0;
            }
            return b;
        }

        TokenAdvantages.Result run(TokenShaping s) {
            return ids != null ? TokenAdvantages.compute(adv, ids, mask, entropy, post, s)
                    : TokenAdvantages.computePadded(adv, seqLen, mask, entropy, post, s);
        }
    }

    static TokenShaping randomShaping(Random rnd) {
        return switch (rnd.nextInt(4)) {
            case 0 -> TokenShaping.broadcast();
            case 1 -> TokenShaping.aepo((float) (rnd.nextDouble() * 0.5));
            case 2 -> TokenShaping.taoRl(0.01f, 1.0);
            default -> TokenShaping.taoRl((float) (rnd.nextDouble() * 0.1), new double[] {0.2, 0.25, 0.3, 0.05, 0.5}[rnd.nextInt(5)]);
        };
    }

    /** 1e-6 · |A| · (1 + |coef · Ĥ|) for token t (0 for masked tokens: exact zeros required). */
    static double tolerance(TokenAdvantagesReference.Result ref, Batch b, TokenShaping s, int t) {
        if (!b.mask[t]) return 0.0;
        int seq = b.ids != null ? b.ids[t] : t / b.seqLen;
        double hHat = Double.isFinite(ref.stats().entropyMean()) ? Math.abs((b.entropy[t] - ref.stats().entropyMean()) * ref.stats().scale()) : 0;
        return 1e-6 * Math.abs(b.adv[seq]) * (1 + Math.abs(s.coef()) * hHat);
    }

    /** Asserts kernel = reference (tolerance above; counts and τ exactly); returns the worst error / tolerance. */
    static double assertReferenceAgrees(float[] adv, int[] ids, int seqLen, boolean[] mask, float[] h, boolean[] post,
                                        TokenShaping s, TokenAdvantages.Result r) {
        TokenAdvantagesReference.Result ref = TokenAdvantagesReference.compute(toDouble(adv), ids, seqLen, mask, h == null ? null : toDouble(h), post, s);
        Batch b = new Batch();
        b.adv = adv;
        b.ids = ids;
        b.seqLen = seqLen;
        b.mask = mask != null ? mask : filled(r.advantages().length);
        b.entropy = h;
        double worst = 0;
        for (int t = 0; t < ref.advantages().length; t++) {
            double tol = h == null ? 0.0 : tolerance(ref, b, s, t);
            double err = Math.abs(ref.advantages()[t] - r.advantages()[t]);
            if (!(err <= tol))
                throw new AssertionError("token " + t + ": kernel " + r.advantages()[t] + " vs reference " + ref.advantages()[t] + " (" + s + ")");
            if (tol > 0) worst = Math.max(worst, err / tol);
        }
        assertStatsAgree(ref.stats(), r.stats(), s);
        return worst;
    }

    /**
     * Counts and τ exactly; μ, std and scale to 1e-9 relative (NaN where the other is NaN) — the reference
     * sums up to 10^5–10^6 terms in index order, so its own relative error can pass 1e-12.
     */
    static void assertStatsAgree(ShapingStats e, ShapingStats k, TokenShaping s) {
        assertEquals(e.validTokens(), k.validTokens());
        assertEquals(e.postToolTokens(), k.postToolTokens());
        assertEquals(e.shapedTokens(), k.shapedTokens(), "shaped tokens (" + s + ")");
        assertEquals(e.threshold(), k.threshold(), 0.0, "τ (" + s + ")");
        assertEquals(e.nonFiniteEntropy(), k.nonFiniteEntropy());
        agree("entropy mean", e.entropyMean(), k.entropyMean(), s);
        agree("entropy std", e.entropyStd(), k.entropyStd(), s);
        agree("scale", e.scale(), k.scale(), s);
    }

    /** {@code k} equals {@code e} to 1e-9 relative, or both are NaN (a batch with no valid entropy has no mean). */
    private static void agree(String what, double e, double k, TokenShaping s) {
        if (Double.isNaN(e) || Double.isNaN(k)) {
            assertTrue(Double.isNaN(e) && Double.isNaN(k), what + ": reference " + e + ", kernel " + k + " (" + s + ")");
            return;
        }
        assertEquals(e, k, 1e-9 * (1 + Math.abs(e)), what + " (" + s + ")");
    }

    static boolean[] filled(int n) {
        boolean[] m = new boolean[n];
        java.util.Arrays.fill(m, true);
        return m;
    }

    static double[] toDouble(float[] a) {
        double[] d = new double[a.length];
        for (int i = 0; i < a.length; i++) d[i] = a[i];
        return d;
    }

    static byte[] bytes(boolean[] b) {
        if (b == null) return null;
        byte[] r = new byte[b.length];
        for (int i = 0; i < b.length; i++) r[i] = (byte) (b[i] ? 1 : 0);
        return r;
    }

    static ByteBuffer floats(float[] a) {
        ByteBuffer b = ByteBuffer.allocateDirect(Math.max(1, 4 * a.length)).order(ByteOrder.nativeOrder());
        for (float v : a) b.putFloat(v);
        return b.clear();
    }
}
