package ai.arbor.kernels;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.bindings.ArborCpu;
import java.nio.ByteBuffer;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * CPU token statistics against the scalar double-precision reference (native/src/reference.cpp).
 *
 * <p>Tolerances. The reference is evaluated on exactly the values the kernel reads (the logits rounded
 * to the input dtype), so the dtype changes the inputs, not the error budget: the kernel's error comes
 * from fp32 arithmetic only, for every dtype. Forward: |err| ≤ 2e-5·(1 + ln V) + 1e-6·max|z| (fp32 has
 * 2^-24 relative precision; max|z| covers the ±1e4 rows, where z itself carries ulp(z) error). Backward,
 * per element: |err| ≤ (|g_lp| + |g_H|·(1 + ln V))·(2e-5 + 1e-6·max|z|)/T.
 */
class TokenStatsTest {

    @AfterEach
    void restore() {
        Kernels.forceCpuIsa(null);
        Kernels.setThreads(Runtime.getRuntime().availableProcessors());
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("ai.arbor.kernels.Logits#dtypesTimesCpuIsas")
    void matchesDoubleReferenceOverRandomShapes(DType dtype, String isa) {
        Kernels.forceCpuIsa(isa);
        long seed = Logits.seed();
        System.out.println("TokenStatsTest " + dtype + " " + Backend.cpuIsa() + " seed=" + seed);
        Random rnd = new Random(seed);
        int[] vocabs = {1, 2, 3, 17, 1000, 32000, 151936};
        float[] temps = {0.5f, 1.0f, 1.7f};
        double worst = 0;
        for (int vocab : vocabs) {
            int cases = vocab >= 32000 ? 1 : 4;
            for (int c = 0; c < cases; c++) {
                int rows = vocab >= 32000 ? 1 + rnd.nextInt(3) : 1 + rnd.nextInt(c == 0 ? 512 : 40);
                int limit = vocab > 2 && rnd.nextBoolean() ? vocab - 1 - rnd.nextInt(Math.min(vocab - 1, 9)) : vocab;
                int stride = vocab + (rnd.nextBoolean() ? 0 : 1 + rnd.nextInt(13));
                float t = temps[rnd.nextInt(temps.length)];
                worst = Math.max(worst, runCase(rnd, rows, vocab, stride, limit, t, dtype, rnd.nextBoolean(), rnd.nextBoolean()));
            }
        }
        System.out.printf("  worst error / tolerance = %.3f%n", worst);
    }

    /** Runs forward and backward on one random case; returns the worst error as a fraction of its tolerance. */
    static double runCase(Random rnd, int rows, int vocab, int stride, int limit, float t, DType dtype, boolean masked,
                          boolean int64Labels) {
        String where = String.format("rows=%d vocab=%d stride=%d limit=%d T=%s %s", rows, vocab, stride, limit, t, dtype);
        float[] x = Logits.random(rnd, rows, vocab, stride, limit, true);
        int[] labels = new int[rows];
        byte[] mask = new byte[rows];
        for (int r = 0; r < rows; r++) {
            mask[r] = (byte) (masked && rnd.nextInt(4) == 0 ? 0 : 1);
            labels[r] = mask[r] == 0 ? -100 : rnd.nextInt(limit);
        }
        double[] seen = Logits.asSeen(x, dtype);
        double[][] ref = Logits.refForward(seen, rows, vocab, stride, limit, Logits.toLong(labels), t, mask);

        ByteBuffer xb = Logits.direct(x, dtype);
        ByteBuffer lb = int64Labels ? Logits.direct(Logits.toLong(labels)) : Logits.direct(labels);
        DType lt = int64Labels ? DType.I64 : DType.I32;
        ByteBuffer mb = Logits.direct(mask);
        ByteBuffer lpb = Logits.directFloats(rows), hb = Logits.directFloats(rows), lseb = Logits.directFloats(rows);
        LogitsView view = new LogitsView(MemRef.of(xb), dtype, rows, vocab, stride, limit);
        TokenStats.forward(view, MemRef.of(lb), lt, t, MemRef.of(mb), MemRef.of(lpb), MemRef.of(hb), MemRef.of(lseb), 0);
        float[] lse = Logits.floats(lseb, rows), lp = Logits.floats(lpb, rows), h = Logits.floats(hb, rows);

        double worst = 0;
        double logV = Math.log(limit);
        for (int r = 0; r < rows; r++) {
            double zmax = Logits.maxAbs(seen, r, stride, limit, t);
            double tol = 2e-5 * (1 + logV) + 1e-6 * zmax;
            worst = Math.max(worst, close(ref[0][r], lse[r], tol, where + " lse row " + r));
            worst = Math.max(worst, close(ref[1][r], lp[r], tol, where + " logprob row " + r));
            worst = Math.max(worst, close(ref[2][r], h[r], tol, where + " entropy row " + r));
        }

        // backward, into an fp32 gradient with the logits' stride; padding [vocab, stride) must stay untouched
        float[] glp = new float[rows], gh = new float[rows];
        for (int r = 0; r < rows; r++) {
            glp[r] = (float) rnd.nextGaussian();
            gh[r] = (float) rnd.nextGaussian();
        }
        double[] refGrad = new double[rows * stride];
        ArborCpu.arbor_ref_token_stats_bwd(seen, rows, vocab, stride, limit, Logits.toLong(labels), t, mask,
                toDouble(glp), toDouble(gh), refGrad);
        ByteBuffer gb = Logits.directFloats(rows * stride);
        gb.asFloatBuffer().put(filled(rows * stride, 7.25f));
        TokenStats.backward(view, MemRef.of(lb), lt, t, MemRef.of(mb), MemRef.of(lseb), MemRef.of(hb),
                MemRef.of(Logits.direct(glp, DType.F32)), MemRef.of(Logits.direct(gh, DType.F32)), MemRef.of(gb),
                DType.F32, stride, 0);
        float[] g = Logits.floats(gb, rows * stride);
        for (int r = 0; r < rows; r++) {
            double zmax = Logits.maxAbs(seen, r, stride, limit, t);
            double tol = (Math.abs(glp[r]) + Math.abs(gh[r]) * (1 + logV)) * (2e-5 + 1e-6 * zmax) / t;
            for (int j = 0; j < stride; j++) {
                int i = r * stride + j;
                if (j >= vocab) {
                    assertEquals(7.25f, g[i], where + ": gradient stride gap [" + r + "," + j + "] was written");
                } else {
                    worst = Math.max(worst, close(refGrad[i], g[i], tol, where + " grad [" + r + "," + j + "]"));
                }
            }
        }

        // recomputing lse/entropy inside the backward gives the same bits as passing the saved ones
        ByteBuffer gb2 = Logits.directFloats(rows * stride);
        gb2.asFloatBuffer().put(filled(rows * stride, 7.25f));
        TokenStats.backward(view, MemRef.of(lb), lt, t, MemRef.of(mb), null, null,
                MemRef.of(Logits.direct(glp, DType.F32)), MemRef.of(Logits.direct(gh, DType.F32)), MemRef.of(gb2),
                DType.F32, stride, 0);
        assertArrayEquals(g, Logits.floats(gb2, rows * stride), where + ": saved vs recomputed statistics");
        return worst;
    }

    /** |expected − actual| ≤ tol (infinities must match exactly); returns the error / tol. */
    static double close(double expected, float actual, double tol, String what) {
        if (Double.isNaN(expected) || Double.isInfinite(expected)) {
            assertEquals(expected, (double) actual, what);
            return 0;
        }
        double err = Math.abs(expected - actual);
        assertTrue(err <= tol, () -> what + ": expected " + expected + " got " + actual + " (|err| " + err + " > tol " + tol + ")");
        return err / tol;
    }

    static double[] toDouble(float[] a) {
        double[] d = new double[a.length];
        for (int i = 0; i < a.length; i++) d[i] = a[i];
        return d;
    }

    static float[] filled(int n, float v) {
        float[] a = new float[n];
        java.util.Arrays.fill(a, v);
        return a;
    }

    @Test
    void arrayFormMatchesReferenceAndHandComputedCase() {
        // Hand-computed: logits (0, ln 3) → p = (1/4, 3/4); label 1: logprob = ln(3/4);
        // H = −(1/4 ln 1/4 + 3/4 ln 3/4) = 0.5623351446188083.
        float[] logits = {0f, (float) Math.log(3)};
        float[] lp = new float[1], h = new float[1];
        TokenStats.forward(logits, 1, 2, new int[] {1}, 1f, lp, h);
        assertEquals(Math.log(0.75), lp[0], 1e-6);
        assertEquals(0.5623351446188083, h[0], 1e-6);
        // ∂logprob/∂z = e_y − p = (−1/4, 1/4); ∂H/∂z_j = −p_j (z_j − Σ p z): Σ p z = 3/4 ln 3
        float[] g = new float[2];
        TokenStats.backward(logits, 1, 2, new int[] {1}, 1f, new float[] {1f}, new float[] {0f}, g);
        assertEquals(-0.25, g[0], 1e-6);
        assertEquals(0.25, g[1], 1e-6);
        TokenStats.backward(logits, 1, 2, new int[] {1}, 1f, null, new float[] {1f}, g);
        double spz = 0.75 * Math.log(3);
        assertEquals(-0.25 * (0 - spz), g[0], 1e-6);
        assertEquals(-0.75 * (Math.log(3) - spz), g[1], 1e-6);
    }

    @Test
    void arrayFormEqualsMemoryFormBitwise() {
        long seed = Logits.seed();
        System.out.println("arrayFormEqualsMemoryFormBitwise seed=" + seed);
        Random rnd = new Random(seed);
        int rows = 37, vocab = 1001;
        float[] x = Logits.random(rnd, rows, vocab, vocab, vocab, true);
        int[] labels = rnd.ints(rows, 0, vocab).toArray();
        float[] lp = new float[rows], h = new float[rows];
        TokenStats.forward(x, rows, vocab, labels, 1.3f, lp, h);
        ByteBuffer lpb = Logits.directFloats(rows), hb = Logits.directFloats(rows);
        TokenStats.forward(LogitsView.of(MemRef.of(Logits.direct(x, DType.F32)), DType.F32, rows, vocab),
                MemRef.of(Logits.direct(labels)), DType.I32, 1.3f, null, MemRef.of(lpb), MemRef.of(hb), null, 0);
        assertArrayEquals(Logits.floats(lpb, rows), lp);
        assertArrayEquals(Logits.floats(hb, rows), h);
    }

    @Test
    void oneAndTwoThreadsAreBitwiseIdentical() {
        long seed = Logits.seed();
        System.out.println("oneAndTwoThreadsAreBitwiseIdentical seed=" + seed);
        Random rnd = new Random(seed);
        int rows = 301, vocab = 4099;  // large enough that the kernel really splits rows
        float[] x = Logits.random(rnd, rows, vocab, vocab, vocab, true);
        int[] labels = rnd.ints(rows, 0, vocab).toArray();
        float[] glp = new float[rows], gh = new float[rows];
        for (int r = 0; r < rows; r++) {
            glp[r] = (float) rnd.nextGaussian();
            gh[r] = (float) rnd.nextGaussian();
        }
        float[][] out = new float[2][];
        float[][] grads = new float[2][];
        for (int threads = 1; threads <= 2; threads++) {
            Kernels.setThreads(threads);
            float[] lp = new float[rows], h = new float[rows], l = new float[rows];
            TokenStats.forward(x, rows, vocab, vocab, labels, 0.9f, null, lp, h, l);
            float[] g = new float[rows * vocab];
            TokenStats.backward(x, rows, vocab, labels, 0.9f, glp, gh, g);
            out[threads - 1] = concat(lp, h, l);
            grads[threads - 1] = g;
        }
        assertArrayEquals(out[0], out[1], "forward, 1 vs 2 threads");
        assertArrayEquals(grads[0], grads[1], "backward, 1 vs 2 threads");
    }

    @ParameterizedTest
    @CsvSource({"F32", "BF16", "F16"})
    void backwardInPlaceEqualsOutOfPlace(DType dtype) {
        long seed = Logits.seed();
        System.out.println("backwardInPlaceEqualsOutOfPlace " + dtype + " seed=" + seed);
        Random rnd = new Random(seed);
        int rows = 23, vocab = 515, limit = 509;
        float[] x = Logits.random(rnd, rows, vocab, vocab, limit, false);
        int[] labels = rnd.ints(rows, 0, limit).toArray();
        ByteBuffer glp = Logits.direct(new float[rows], DType.F32), gh = Logits.directFloats(rows);
        for (int r = 0; r < rows; r++) {
            glp.putFloat(4 * r, (float) rnd.nextGaussian());
            gh.putFloat(4 * r, (float) rnd.nextGaussian());
        }
        ByteBuffer src = Logits.direct(x, dtype);
        LogitsView v = LogitsView.of(MemRef.of(src), dtype, rows, vocab).withVocabLimit(limit);
        ByteBuffer out = Logits.direct(new float[rows * vocab], dtype);
        TokenStats.backward(v, MemRef.of(Logits.direct(labels)), DType.I32, 1.1f, null, null, null, MemRef.of(glp),
                MemRef.of(gh), MemRef.of(out), dtype, vocab, 0);
        TokenStats.backward(v, MemRef.of(Logits.direct(labels)), DType.I32, 1.1f, null, null, null, MemRef.of(glp),
                MemRef.of(gh), MemRef.of(src), dtype, vocab, 0);
        assertArrayEquals(Logits.read(out, dtype, rows * vocab), Logits.read(src, dtype, rows * vocab));
    }

    @Test
    void halfPrecisionGradientOutputIsTheRoundedFp32Gradient() {
        long seed = Logits.seed();
        System.out.println("halfPrecisionGradientOutput seed=" + seed);
        Random rnd = new Random(seed);
        int rows = 9, vocab = 77;
        float[] x = Logits.random(rnd, rows, vocab, vocab, vocab, false);
        int[] labels = rnd.ints(rows, 0, vocab).toArray();
        ByteBuffer glp = Logits.direct(TokenStatsTest.filled(rows, 0.7f), DType.F32);
        ByteBuffer gh = Logits.direct(TokenStatsTest.filled(rows, -2f), DType.F32);
        for (DType dt : new DType[] {DType.BF16, DType.F16}) {
            ByteBuffer src = Logits.direct(x, dt);
            LogitsView v = LogitsView.of(MemRef.of(src), dt, rows, vocab);
            ByteBuffer g32 = Logits.directFloats(rows * vocab), g16 = Logits.direct(new float[rows * vocab], dt);
            TokenStats.backward(v, MemRef.of(Logits.direct(labels)), DType.I32, 0.5f, null, null, null, MemRef.of(glp), MemRef.of(gh),
                    MemRef.of(g32), DType.F32, vocab, 0);
            TokenStats.backward(v, MemRef.of(Logits.direct(labels)), DType.I32, 0.5f, null, null, null, MemRef.of(glp), MemRef.of(gh),
                    MemRef.of(g16), dt, vocab, 0);
            float[] a = Logits.floats(g32, rows * vocab);
            float[] rounded = Logits.read(Logits.direct(a, dt), dt, rows * vocab);
            assertArrayEquals(rounded, Logits.read(g16, dt, rows * vocab), dt + " gradient = fp32 gradient rounded once");
        }
    }

    @Test
    void edgeCasesHaveExactValues() {
        // vocab 1: a point mass, logprob 0, entropy 0, gradient 0
        float[] lp = new float[2], h = new float[2];
        TokenStats.forward(new float[] {3f, -1e4f}, 2, 1, new int[] {0, 0}, 1f, lp, h);
        assertArrayEquals(new float[] {0f, 0f}, lp);
        assertArrayEquals(new float[] {0f, 0f}, h);
        // all -inf but one: same, and no NaN anywhere in the gradient
        float ninf = Float.NEGATIVE_INFINITY;
        float[] x = {ninf, 2f, ninf, ninf};
        TokenStats.forward(x, 1, 4, new int[] {1}, 0.5f, lp = new float[1], h = new float[1]);
        assertEquals(0f, lp[0]);
        assertEquals(0f, h[0]);
        float[] g = new float[4];
        TokenStats.backward(x, 1, 4, new int[] {1}, 0.5f, new float[] {1f}, new float[] {1f}, g);
        assertArrayEquals(new float[] {0f, 0f, 0f, 0f}, g, 0f);
        // the label has probability 0: logprob −inf, gradient finite (∂logprob/∂z_y = 1 − 0 = 1, / T)
        TokenStats.forward(x, 1, 4, new int[] {0}, 0.5f, lp, h);
        assertEquals(ninf, lp[0]);
        TokenStats.backward(x, 1, 4, new int[] {0}, 0.5f, new float[] {1f}, null, g);
        assertArrayEquals(new float[] {2f, -2f, 0f, 0f}, g, 0f);
        // extreme logits: ±1e4 with p underflowing to exactly 0, no NaN
        float[] big = {1e4f, -1e4f, 1e4f - 1f};
        TokenStats.forward(big, 1, 3, new int[] {1}, 1f, lp, h);
        assertEquals(-2e4 - Math.log1p(Math.exp(-1)), lp[0], 2e-3);
        assertTrue(Float.isFinite(h[0]));
        // NaN in a valid row poisons that row only; masked rows are 0 and their label is not read
        float[] withNan = {0f, Float.NaN, 1f, 2f};
        float[] lse = new float[2];
        TokenStats.forward(withNan, 2, 2, 2, new int[] {0, 0}, 1f, null, lp = new float[2], h = new float[2], lse);
        assertTrue(Float.isNaN(lp[0]) && Float.isNaN(h[0]) && Float.isNaN(lse[0]));
        assertEquals(2 + Math.log1p(Math.exp(-1)), lse[1], 1e-6);
        TokenStats.forward(withNan, 2, 2, 2, new int[] {-100, 1}, 1f, new boolean[] {false, true}, lp, h, lse);
        assertArrayEquals(new float[] {0f, (float) -Math.log1p(Math.exp(-1))}, lp, 1e-6f);
    }

    @Test
    void referenceGradientMatchesCentralFiniteDifferences() {
        // The fp64 reference backward against finite differences of the fp64 reference forward, and
        // the fp32 kernel against the same differences: L = Σ_r g_lp[r]·logprob[r] + g_H[r]·H[r].
        long seed = Logits.seed();
        System.out.println("referenceGradientMatchesCentralFiniteDifferences seed=" + seed);
        Random rnd = new Random(seed);
        for (int c = 0; c < 6; c++) {
            int rows = 1 + rnd.nextInt(4), vocab = 1 + rnd.nextInt(40), limit = vocab - rnd.nextInt(Math.min(vocab, 3));
            double t = new double[] {0.5, 1.0, 1.7}[c % 3];
            double[] x = new double[rows * vocab];
            for (int i = 0; i < x.length; i++) x[i] = rnd.nextGaussian() * 2;
            long[] labels = new long[rows];
            double[] glp = new double[rows], gh = new double[rows];
            for (int r = 0; r < rows; r++) {
                labels[r] = rnd.nextInt(limit);
                glp[r] = rnd.nextGaussian();
                gh[r] = rnd.nextGaussian();
            }
            double[] grad = new double[x.length];
            ArborCpu.arbor_ref_token_stats_bwd(x, rows, vocab, vocab, limit, labels, t, null, glp, gh, grad);
            float[] xf = new float[x.length];
            for (int i = 0; i < x.length; i++) xf[i] = (float) x[i];
            float[] gk = new float[x.length];
            int[] labelsI = new int[rows];
            for (int r = 0; r < rows; r++) labelsI[r] = (int) labels[r];
            TokenStats.backward(xf, rows, vocab, limit, labelsI, (float) t, null, null, null, toFloat(glp), toFloat(gh), gk);
            for (int i = 0; i < x.length; i++) {
                double h = 1e-5, saved = x[i];
                x[i] = saved + h;
                double lPlus = loss(x, rows, vocab, limit, labels, t, glp, gh);
                x[i] = saved - h;
                double lMinus = loss(x, rows, vocab, limit, labels, t, glp, gh);
                x[i] = saved;
                double fd = (lPlus - lMinus) / (2 * h);
                assertEquals(fd, grad[i], 1e-7 * (1 + Math.abs(fd)), "reference grad vs FD at " + i);
                assertEquals(fd, gk[i], 2e-5 * (1 + Math.abs(fd)) / t, "kernel grad vs FD at " + i);
            }
        }
    }

    private static double loss(double[] x, int rows, int vocab, int limit, long[] labels, double t, double[] glp, double[] gh) {
        double[][] f = Logits.refForward(x, rows, vocab, vocab, limit, labels, t, null);
        double l = 0;
        for (int r = 0; r < rows; r++) l += glp[r] * f[1][r] + gh[r] * f[2][r];
        return l;
    }

    private static float[] toFloat(double[] a) {
        float[] f = new float[a.length];
        for (int i = 0; i < a.length; i++) f[i] = (float) a[i];
        return f;
    }

    private static float[] concat(float[]... parts) {
        int n = 0;
        for (float[] p : parts) n += p.length;
        float[] out = new float[n];
        int o = 0;
        for (float[] p : parts) {
            System.arraycopy(p, 0, out, o, p.length);
            o += p.length;
        }
        return out;
    }
}
