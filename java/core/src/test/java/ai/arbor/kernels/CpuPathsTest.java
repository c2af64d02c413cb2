package ai.arbor.kernels;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.bindings.ArborCpu;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The CPU SIMD paths (scalar, AVX2, AVX-512: every one this machine has, forced in turn): the kernels'
 * vector exp against double {@code Math.exp} over the whole float range, the memory-floor loops
 * (arbor_cpu_stream_read / _copy) against plain Java, and the non-temporal gradient stores of large
 * backwards against the plain stores of small ones (bitwise). The row kernels themselves are checked on
 * every path by TokenStatsTest, PolicyLossTest and SamplerTest.
 */
class CpuPathsTest {

    static final float EXP_LO = -87.3365447505531f;

    @AfterEach
    void restore() {
        Kernels.forceCpuIsa(null);
        Kernels.setThreads(Runtime.getRuntime().availableProcessors());
    }

    static java.util.List<String> isas() {
        return Kernels.cpuIsas();
    }

    @Test
    void forcingAPathNamesItAndUnknownPathsAreRejected() {
        for (String isa : Kernels.cpuIsas()) {
            Kernels.forceCpuIsa(isa);
            assertEquals(isa, Backend.cpuIsa());
        }
        Kernels.forceCpuIsa(null);
        assertEquals(Kernels.cpuIsas().get(0), Backend.cpuIsa());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Kernels.forceCpuIsa("sse9"));
        assertTrue(e.getMessage().contains("sse9"), e.getMessage());
        assertEquals(ArborCpu.ERR_UNSUPPORTED, ArborCpu.arbor_cpu_force_isa("sse9"));
        System.out.println("CPU paths here: " + Kernels.cpuIsas());
    }

    /** ulps of |got - ref| in the float format at ref (denormal results: units of 2^-149). */
    static double ulps(float got, double ref) {
        float rf = (float) ref;
        double ulp = rf == 0 ? Math.scalb(1.0, -149) : Math.ulp(rf);
        return Math.abs(got - ref) / ulp;
    }

    /** Every 997th float bit pattern (4.3 M values) (both signs, every exponent, denormal inputs), plus the edges. */
    static float[] sweep() {
        float[] edges = {Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, Float.NaN, Float.intBitsToFloat(0x7fc00001),
            Float.intBitsToFloat(0xffc00000), 0f, -0f, Float.MIN_VALUE, -Float.MIN_VALUE,
            88.72283f, 88.722839f, Math.nextUp(88.722839f), 88.7229f, 89f, 100f, Float.MAX_VALUE,
            EXP_LO, Math.nextDown(EXP_LO), Math.nextUp(EXP_LO), -100f, -103.27893f, -103.97208f, -104f, -104.5f, -150f,
            -Float.MAX_VALUE, 0.34657359f, -0.34657359f, 1e-8f, -1e-8f};
        int step = 997;
        int count = (int) ((1L << 32) / step) + 1;
        float[] x = new float[count + edges.length];
        long b = 0;
        for (int i = 0; i < count; i++, b += step) x[i] = Float.intBitsToFloat((int) b);
        System.arraycopy(edges, 0, x, count, edges.length);
        return x;
    }

    /** The full-range exp: ≤ 1.5 ulp everywhere (denormal results included), +inf beyond ln FLT_MAX, 0 for -inf, NaN for NaN. */
    @ParameterizedTest(name = "{0}")
    @MethodSource("isas")
    void expMatchesDoubleOverTheWholeFloatRange(String isa) {
        Kernels.forceCpuIsa(isa);
        float[] x = sweep();
        float[] out = new float[x.length];
        Kernels.check(ArborCpu.arbor_cpu_exp(x, x.length, out, null), "exp");
        double worst = 0, worstDenormal = 0;
        float at = 0;
        for (int i = 0; i < x.length; i++) {
            double ref = Math.exp(x[i]);
            String where = isa + " exp(" + x[i] + ") = " + out[i] + ", double " + ref;
            if (Float.isNaN(x[i])) {
                assertTrue(Float.isNaN(out[i]), where);
                continue;
            }
            if ((float) ref == Float.POSITIVE_INFINITY) {
                // the double result rounds to +inf in fp32: overflow
                assertTrue(out[i] == Float.POSITIVE_INFINITY || ulps(out[i], ref) <= 1.5, where);
                continue;
            }
            double e = ulps(out[i], ref);
            assertTrue(e <= 1.5, where + ": " + e + " ulp");
            if (ref < Float.MIN_NORMAL) worstDenormal = Math.max(worstDenormal, e);
            else if (e > worst) {
                worst = e;
                at = x[i];
            }
        }
        assertEquals(Float.POSITIVE_INFINITY, exp1(isa, Float.POSITIVE_INFINITY));
        assertEquals(0, Float.floatToRawIntBits(exp1(isa, Float.NEGATIVE_INFINITY)), "exp(-inf) is exactly +0");
        assertEquals(1f, exp1(isa, 0f));
        assertEquals(Float.POSITIVE_INFINITY, exp1(isa, 88.7229f), "just above ln FLT_MAX");
        assertTrue(exp1(isa, 88.72283f) < Float.POSITIVE_INFINITY, "just below ln FLT_MAX");
        assertTrue(exp1(isa, -103.27893f) > 0f, "e^-103.27893 is the smallest denormal");
        assertEquals(0f, exp1(isa, -104f), "e^-104 rounds to 0");
        System.out.printf("exp %s: worst %.3f ulp at %s, denormal results %.3f ulp of 2^-149%n", isa, worst, at, worstDenormal);
    }

    /**
     * The bf16 store every kernel writes bf16 with (avx512-bf16: VCVTNEPS2BF16, which flushes denormal inputs, so a
     * vector holding one takes the software rounding): round to nearest, ties to even, NaN kept and quiet,
     * denormals kept, overflow to ±inf — against an independent rounding (the nearer of the two neighbouring
     * bf16 values, in exact double arithmetic) over every 997th bit pattern, a vector of ties and a vector with
     * one denormal lane among normal ones.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("isas")
    void bf16StoreRoundsToNearestEvenOverTheWholeFloatRange(String isa) {
        Kernels.forceCpuIsa(isa);
        float[] sweep = sweep();
        float[] x = new float[32 + sweep.length];
        for (int i = 0; i < 16; i++) x[i] = Float.intBitsToFloat(0x3f800000 + (i << 16) + 0x8000);   // ties, both parities
        for (int i = 16; i < 32; i++) x[i] = 1.5f + i * 0.001f;
        x[21] = Float.intBitsToFloat(0x00012345);    // one denormal lane (16..31 is one 16-lane vector)
        x[22] = -Float.intBitsToFloat(0x00008000);   // a tie between denormals: to the even one, -0
        System.arraycopy(sweep, 0, x, 32, sweep.length);
        short[] out = new short[x.length];
        Kernels.check(ArborCpu.arbor_cpu_to_bf16(x, x.length, out), "to_bf16");
        int denormals = 0;
        for (int i = 0; i < x.length; i++) {
            int got = out[i] & 0xffff, bits = Float.floatToRawIntBits(x[i]);
            if (Float.isNaN(x[i])) {
                assertTrue((got & 0x7f80) == 0x7f80 && (got & 0x7f) != 0 && (got & 0x40) != 0 && got >>> 15 == bits >>> 31,
                        isa + ": NaN " + Integer.toHexString(bits) + " -> " + Integer.toHexString(got));
                assertEquals(bits >>> 16 | 0x40, got, isa + ": NaN payload kept");
                continue;
            }
            if (Math.abs(x[i]) < Float.MIN_NORMAL && x[i] != 0) denormals++;
            assertEquals(bf16Nearest(x[i]), got, isa + ": " + x[i] + " (" + Integer.toHexString(bits) + ")");
        }
        assertEquals(0x3f82, out[1] & 0xffff, "1.0078125 (odd) + half an ulp: up to the even neighbour");
        assertEquals(0x3f80, out[0] & 0xffff, "1 + half an ulp, even: stays");
        assertTrue(denormals > 8000, denormals + " denormal inputs");
    }

    /** x to bf16 bits: the nearer of the two bf16 neighbours (truncation and the next one up), ties to an even mantissa. */
    static int bf16Nearest(float x) {
        int bits = Float.floatToRawIntBits(x), sign = bits & 0x80000000, mag = bits & 0x7fffffff;
        if (mag == 0x7f800000) return (bits >>> 16);
        int lo = mag & 0xffff0000, hi = lo + 0x10000;
        double v = Float.intBitsToFloat(mag), dLo = v - Float.intBitsToFloat(lo);
        double hiValue = hi == 0x7f800000 ? Math.scalb(1.0, 128) : Float.intBitsToFloat(hi);   // past FLT_MAX: bf16's inf
        double dHi = hiValue - v;
        int r = dLo < dHi ? lo : dLo > dHi ? hi : ((lo >>> 16) & 1) == 0 ? lo : hi;
        return (sign | r) >>> 16;
    }

    static float exp1(String isa, float x) {
        float[] out = new float[1];
        Kernels.check(ArborCpu.arbor_cpu_exp(new float[] {x}, 1, out, null), "exp");
        return out[0];
    }

    /**
     * The kernels' form (x ≤ 0): e^x within 1.5 ulp for x ≥ ln FLT_MIN, exactly 0 below it and for -inf
     * (so a -inf logit contributes nothing), NaN for NaN; dc = max(x, ln FLT_MIN), NaN for NaN.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("isas")
    void kernelExpFlushesBelowTheNormalRangeAndKeepsNaN(String isa) {
        Kernels.forceCpuIsa(isa);
        float[] all = sweep();
        int m = 0;
        for (float v : all) if (!(v > 0)) m++;
        float[] x = new float[m];
        m = 0;
        for (float v : all) if (!(v > 0)) x[m++] = v;
        float[] out = new float[m], dc = new float[m];
        Kernels.check(ArborCpu.arbor_cpu_exp(x, m, out, dc), "exp");
        double worst = 0;
        for (int i = 0; i < m; i++) {
            String where = isa + " exp_lo(" + x[i] + ") = " + out[i] + ", dc " + dc[i];
            if (Float.isNaN(x[i])) {
                assertTrue(Float.isNaN(out[i]) && Float.isNaN(dc[i]), where);
            } else if (x[i] < EXP_LO) {
                assertEquals(0, Float.floatToRawIntBits(out[i]), where);
                assertEquals(EXP_LO, dc[i], where);
            } else {
                double e = ulps(out[i], Math.exp(x[i]));
                assertTrue(e <= 1.5, where + ": " + e + " ulp");
                worst = Math.max(worst, e);
                assertEquals(Float.floatToRawIntBits(x[i]), Float.floatToRawIntBits(dc[i]), where);
            }
        }
        System.out.printf("kernel exp %s: worst %.3f ulp on [ln FLT_MIN, 0]%n", isa, worst);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("isas")
    void streamReadAndCopyAreTheSumAndTheCopy(String isa) {
        Kernels.forceCpuIsa(isa);
        long seed = Logits.seed();
        System.out.println("streamReadAndCopyAreTheSumAndTheCopy " + isa + " seed=" + seed);
        Random rnd = new Random(seed);
        for (int[] shape : new int[][] {{1, 1}, {3, 17}, {7, 1000}, {5, 32001}}) {
            int rows = shape[0], cols = shape[1];
            ByteBuffer src = ByteBuffer.allocateDirect(4 * rows * cols + 64).order(ByteOrder.nativeOrder());
            ByteBuffer dst = ByteBuffer.allocateDirect(4 * rows * cols + 64).order(ByteOrder.nativeOrder());
            int off = 4 * rnd.nextInt(16);  // misaligned starts: the copy's head/tail split
            float[] x = new float[rows * cols];
            for (int i = 0; i < x.length; i++) {
                x[i] = (float) rnd.nextGaussian();
                src.putFloat(off + 4 * i, x[i]);
            }
            ByteBuffer sums = ByteBuffer.allocateDirect(4 * rows).order(ByteOrder.nativeOrder());
            long a = MemRef.of(src).address() + off, d = MemRef.of(dst).address() + off;
            Kernels.check(ArborCpu.arbor_cpu_stream_read(a, rows, cols, MemRef.of(sums).address(), 2), "read");
            Kernels.check(ArborCpu.arbor_cpu_stream_copy(a, d, rows, cols, 2), "copy");
            for (int r = 0; r < rows; r++) {
                double s = 0, abs = 0;
                for (int j = 0; j < cols; j++) {
                    s += x[r * cols + j];
                    abs += Math.abs(x[r * cols + j]);
                }
                assertEquals(s, sums.getFloat(4 * r), 1e-6 * abs + 1e-6, isa + " row sum " + r + " of " + rows + "x" + cols);
            }
            for (int i = 0; i < x.length; i++)
                assertEquals(Float.floatToRawIntBits(x[i]), Float.floatToRawIntBits(dst.getFloat(off + 4 * i)), "copy " + i);
        }
        assertEquals(ArborCpu.ERR_ARG, ArborCpu.arbor_cpu_stream_read(0, 2, 5, 0, 1));
        assertEquals(ArborCpu.ERR_ARG, ArborCpu.arbor_cpu_stream_copy(0, 0, 1, 0, 1));
    }

    /**
     * A gradient of ≥ 16 MiB is written with non-temporal stores (after an aligning head), smaller ones
     * with plain stores: the same values, bitwise — out of place and in place, fp32 and bf16, 1 and 2
     * threads, with odd strides and padding so row starts take every alignment.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("isas")
    void streamedGradientStoresEqualPlainStores(String isa) {
        Kernels.forceCpuIsa(isa);
        long seed = Logits.seed();
        System.out.println("streamedGradientStoresEqualPlainStores " + isa + " seed=" + seed);
        Random rnd = new Random(seed);
        for (DType dt : new DType[] {DType.F32, DType.BF16}) {
            int vocab = 151936 + 1 + rnd.nextInt(6), stride = vocab + rnd.nextInt(3), limit = vocab - rnd.nextInt(4);
            int rows = (int) (16L * 1024 * 1024 / ((long) stride * dt.bytes())) + 2;
            float[] x = Logits.random(rnd, rows, vocab, stride, limit, true);
            int[] labels = new int[rows];
            float[] glp = new float[rows], gh = new float[rows];
            for (int r = 0; r < rows; r++) {
                labels[r] = rnd.nextInt(limit);
                glp[r] = (float) rnd.nextGaussian();
                gh[r] = (float) rnd.nextGaussian() * 0.1f;
            }
            ByteBuffer all = Logits.direct(x, dt);
            for (int threads : new int[] {1, 2}) {
                Kernels.setThreads(threads);
                for (boolean inPlace : new boolean[] {false, true}) {
                    ByteBuffer logits = copy(all);
                    ByteBuffer grad = inPlace ? logits : ByteBuffer.allocateDirect(all.capacity()).order(ByteOrder.nativeOrder());
                    backward(logits, grad, dt, dt, rows, vocab, stride, limit, labels, glp, gh, null, null);
                    // the same rows one at a time: each gradient well below the streaming size
                    for (int r = 0; r < rows; r += 1 + rnd.nextInt(7)) {
                        ByteBuffer one = ByteBuffer.allocateDirect(stride * dt.bytes()).order(ByteOrder.nativeOrder());
                        for (int j = 0; j < stride * dt.bytes(); j++) one.put(j, all.get(r * stride * dt.bytes() + j));
                        ByteBuffer g1 = inPlace ? one : ByteBuffer.allocateDirect(one.capacity()).order(ByteOrder.nativeOrder());
                        backward(one, g1, dt, dt, 1, vocab, stride, limit, new int[] {labels[r]}, new float[] {glp[r]},
                                new float[] {gh[r]}, null, null);
                        for (int j = 0; j < vocab * dt.bytes(); j++)
                            if (g1.get(j) != grad.get(r * stride * dt.bytes() + j))
                                assertEquals(g1.get(j), grad.get(r * stride * dt.bytes() + j),
                                        isa + " " + dt + " threads=" + threads + " inPlace=" + inPlace + " row " + r
                                                + " byte " + j + " (stride " + stride + ", limit " + limit + ")");
                    }
                }
            }
        }
    }

    /**
     * The bf16 gradient's rounding skips its NaN handling where every NaN that can reach it has zero low 16 bits
     * (bf16 logits; g_lp, g_H, lse and H not NaN). With saved statistics the kernel does not look for NaN logits,
     * so bf16 NaNs with every kind of payload (signalling, all ones, negative) reach it, in rows whose g_lp or g_H
     * is a NaN with a low payload half that the rounding alone would carry into the high half (the full rounding
     * then) and rows where they are not. Every bf16 gradient value — streamed (all rows at once, ≥ 16 MiB) and
     * plain (rows one at a time) — is the fp32 gradient of the same call rounded by the scalar conversion
     * (arbor_f32_to_bf16, checked above), bitwise. (It fails when the NaN test of g_lp and g_H is left out.)
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("isas")
    void bf16GradientIsTheRoundedFp32GradientWithEveryNaNPayload(String isa) {
        Kernels.forceCpuIsa(isa);
        long seed = Logits.seed();
        System.out.println("bf16GradientIsTheRoundedFp32GradientWithEveryNaNPayload " + isa + " seed=" + seed);
        Random rnd = new Random(seed);
        int vocab = 100003, stride = vocab + 1, limit = vocab;
        int rows = (int) (16L * 1024 * 1024 / (2L * stride)) + 2;
        ByteBuffer all = Logits.direct(Logits.random(rnd, rows, vocab, stride, limit, false), DType.BF16);
        short[] nanBits = {(short) 0x7f81, (short) 0xffff, (short) 0x7fc1, (short) 0xff81, (short) 0x7fc0, (short) 0x7fbf};
        for (int r = 0; r < rows; r++)  // written as bits: a conversion from float would quiet the signalling ones
            for (int i = 0; i < 40; i++) all.putShort(2 * (r * stride + rnd.nextInt(limit)), nanBits[rnd.nextInt(nanBits.length)]);
        int[] labels = new int[rows];
        float[] glp = new float[rows], gh = new float[rows], lse = new float[rows], ent = new float[rows];
        // low payload halves >= 0x8000: the rounding alone would carry into the high half (0x7fffffff to -0)
        float payloadNaN = Float.intBitsToFloat(0x7fffffff), negativePayloadNaN = Float.intBitsToFloat(0xffc1ffff);
        for (int r = 0; r < rows; r++) {
            labels[r] = rnd.nextInt(limit);
            glp[r] = r % 5 == 1 ? payloadNaN : (float) rnd.nextGaussian();
            gh[r] = r % 5 == 2 ? negativePayloadNaN : (float) rnd.nextGaussian() * 0.1f;
            lse[r] = 12f + (float) rnd.nextGaussian();
            ent[r] = 3f + (float) rnd.nextGaussian();
        }
        ByteBuffer g32 = ByteBuffer.allocateDirect(4 * rows * stride).order(ByteOrder.nativeOrder());
        ByteBuffer g16 = ByteBuffer.allocateDirect(2 * rows * stride).order(ByteOrder.nativeOrder());
        backward(all, g32, DType.BF16, DType.F32, rows, vocab, stride, limit, labels, glp, gh, lse, ent);
        backward(all, g16, DType.BF16, DType.BF16, rows, vocab, stride, limit, labels, glp, gh, lse, ent);
        int nans = 0;
        for (int r = 0; r < rows; r++) {
            ByteBuffer g1 = null;
            if (r % 7 == 3) {  // this row alone: plain stores
                ByteBuffer one = ByteBuffer.allocateDirect(2 * stride).order(ByteOrder.nativeOrder());
                for (int j = 0; j < 2 * stride; j++) one.put(j, all.get(2 * r * stride + j));
                g1 = ByteBuffer.allocateDirect(2 * stride).order(ByteOrder.nativeOrder());
                backward(one, g1, DType.BF16, DType.BF16, 1, vocab, stride, limit, new int[] {labels[r]},
                        new float[] {glp[r]}, new float[] {gh[r]}, new float[] {lse[r]}, new float[] {ent[r]});
            }
            for (int j = 0; j < vocab; j++) {
                float f = g32.getFloat(4 * (r * stride + j));
                short want = ArborCpu.arbor_f32_to_bf16(f);
                if (Float.isNaN(f)) nans++;
                short got = g16.getShort(2 * (r * stride + j));
                if (got != want)
                    assertEquals(Integer.toHexString(want & 0xffff), Integer.toHexString(got & 0xffff),
                            isa + " streamed row " + r + " column " + j + " (fp32 " + Integer.toHexString(Float.floatToRawIntBits(f)) + ")");
                if (g1 != null && g1.getShort(2 * j) != want)
                    assertEquals(Integer.toHexString(want & 0xffff), Integer.toHexString(g1.getShort(2 * j) & 0xffff),
                            isa + " plain row " + r + " column " + j + " (fp32 " + Integer.toHexString(Float.floatToRawIntBits(f)) + ")");
            }
        }
        assertTrue(nans > 20 * rows, nans + " NaN gradients");
    }

    /**
     * On AVX2 the statistics pass takes a bf16 chunk's max from its raw 16-bit words (the signed max of the words is
     * the largest non-negative value, else their signed min the largest negative one), not from widened values.
     * Rows of three chunks built bit by bit: random ones, all-negative ones with −0 and −inf among them, ones whose
     * largest value is +0 beside −0 and negatives, a chunk of −inf holding one NaN of either sign, a NaN in random
     * values, a chunk of nothing but a +inf. Each row's log-prob, entropy and log-sum-exp equal the fp32 kernel's on
     * the widened values (by value: a zero maximum's sign may differ), NaN rows NaN, on every CPU path.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("isas")
    void bf16ChunkMaximaFromRawWordsKeepTheStatisticsAndNaNRows(String isa) {
        Kernels.forceCpuIsa(isa);
        long seed = Logits.seed();
        System.out.println("bf16ChunkMaximaFromRawWordsKeepTheStatisticsAndNaNRows " + isa + " seed=" + seed);
        Random rnd = new Random(seed);
        int vocab = 2 * 2048 + 77, kinds = 7, rows = 3 * kinds;
        ByteBuffer xb = ByteBuffer.allocateDirect(2 * rows * vocab).order(ByteOrder.nativeOrder());
        float[] x = new float[rows * vocab];
        boolean[] nanRow = new boolean[rows];
        int[] labels = new int[rows];
        for (int r = 0; r < rows; r++) {
            int kind = r % kinds;
            for (int j = 0; j < vocab; j++) {
                short b = ArborCpu.arbor_f32_to_bf16((float) (rnd.nextGaussian() * 3));
                if (kind == 1 || kind == 2) b = ArborCpu.arbor_f32_to_bf16(-1f - (float) Math.abs(rnd.nextGaussian() * 3));
                if (kind == 1 && j % 97 == 5) b = (short) 0x8000;                           // -0: the largest negative
                if (kind == 1 && j % 89 == 7) b = (short) 0xff80;                           // -inf
                if (kind == 2 && j == 2048 + 300) b = 0;                                     // +0, the row's max ...
                if (kind == 2 && j % 101 == 3) b = (short) 0x8000;                          // ... beside -0
                if ((kind == 3 || kind == 4) && j >= 2048 && j < 4096) b = (short) 0xff80;  // a chunk of -inf ...
                if (kind == 3 && j == 3000) b = (short) 0x7fc1;                             // ... with a positive NaN
                if (kind == 4 && j == 3001) b = (short) 0xffc1;                             // ... with a negative NaN
                if (kind == 5 && j == 4100) b = (short) 0x7f81;                             // a signalling NaN
                if (kind == 6 && j >= 2048 && j < 4096) b = j == 2500 ? (short) 0x7f80 : (short) 0xff80;  // +inf alone
                xb.putShort(2 * (r * vocab + j), b);
                x[r * vocab + j] = Float.intBitsToFloat((b & 0xffff) << 16);
            }
            nanRow[r] = kind >= 3;
            labels[r] = kind == 2 ? 2048 + 300 : rnd.nextInt(vocab);
        }
        for (float t : new float[] {1f, 0.7f}) {
            float[] lp = new float[rows], h = new float[rows], lse = new float[rows];
            TokenStats.forward(x, rows, vocab, vocab, labels, t, null, lp, h, lse);
            ByteBuffer lb = Logits.direct(labels), lpb = Logits.directFloats(rows), hb = Logits.directFloats(rows),
                    lseb = Logits.directFloats(rows);
            TokenStats.forward(new LogitsView(MemRef.of(xb), DType.BF16, rows, vocab, vocab, vocab), MemRef.of(lb), DType.I32,
                    t, null, MemRef.of(lpb), MemRef.of(hb), MemRef.of(lseb), 0);
            float[][] want = {lp, h, lse}, got = {Logits.floats(lpb, rows), Logits.floats(hb, rows), Logits.floats(lseb, rows)};
            String[] names = {"logprob", "entropy", "lse"};
            for (int r = 0; r < rows; r++)
                for (int o = 0; o < 3; o++) {
                    String where = isa + " T=" + t + " row " + r + " (kind " + r % kinds + ") " + names[o];
                    assertEquals(nanRow[r], Float.isNaN(want[o][r]), where + ": the fp32 kernel's NaN rows");
                    if (nanRow[r]) assertTrue(Float.isNaN(got[o][r]), where + ": " + got[o][r]);
                    else assertEquals(want[o][r], got[o][r], 0f, where);
                }
        }
    }

    static ByteBuffer copy(ByteBuffer b) {
        ByteBuffer c = ByteBuffer.allocateDirect(b.capacity()).order(ByteOrder.nativeOrder());
        c.put(b.duplicate().clear());
        return c.clear();
    }

    /** TokenStats.backward at temperature 1.3; lse and ent (the saved statistics) both null to recompute them. */
    static void backward(ByteBuffer logits, ByteBuffer grad, DType dt, DType gradType, int rows, int vocab, int stride, int limit,
                         int[] labels, float[] glp, float[] gh, float[] lse, float[] ent) {
        ByteBuffer lb = ByteBuffer.allocateDirect(4 * rows).order(ByteOrder.nativeOrder());
        ByteBuffer g1 = ByteBuffer.allocateDirect(4 * rows).order(ByteOrder.nativeOrder());
        ByteBuffer g2 = ByteBuffer.allocateDirect(4 * rows).order(ByteOrder.nativeOrder());
        ByteBuffer sl = ByteBuffer.allocateDirect(4 * rows).order(ByteOrder.nativeOrder());
        ByteBuffer se = ByteBuffer.allocateDirect(4 * rows).order(ByteOrder.nativeOrder());
        for (int r = 0; r < rows; r++) {
            lb.putInt(4 * r, labels[r]);
            g1.putFloat(4 * r, glp[r]);
            g2.putFloat(4 * r, gh[r]);
            if (lse != null) {
                sl.putFloat(4 * r, lse[r]);
                se.putFloat(4 * r, ent[r]);
            }
        }
        LogitsView v = LogitsView.of(MemRef.of(logits), dt, rows, vocab).withRowStride(stride).withVocabLimit(limit);
        TokenStats.backward(v, MemRef.of(lb), DType.I32, 1.3f, null, lse == null ? null : MemRef.of(sl),
                lse == null ? null : MemRef.of(se), MemRef.of(g1), MemRef.of(g2), MemRef.of(grad), gradType, stride, 0);
    }
}
