package ai.arbor.kernels;

import ai.arbor.bindings.ArborCpu;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Random;

/** Test data for kernels over logits: random matrices with the hard cases mixed in, and dtype helpers. */
final class Logits {
    private Logits() {}

    /** Every dtype paired with every CPU SIMD path of this machine ({@link Kernels#cpuIsas()}), for
     * {@code @MethodSource("ai.arbor.kernels.Logits#dtypesTimesCpuIsas")}. */
    static java.util.stream.Stream<org.junit.jupiter.params.provider.Arguments> dtypesTimesCpuIsas() {
        return java.util.Arrays.stream(new DType[] {DType.F32, DType.BF16, DType.F16}).flatMap(d ->
                Kernels.cpuIsas().stream().map(isa -> org.junit.jupiter.params.provider.Arguments.of(d, isa)));
    }

    /** Seed from -Darbor.seed or the clock; printed by the caller. */
    static long seed() {
        return ai.arbor.testing.Seeds.seed();
    }

    /**
     * A [rows, stride] matrix: N(0, scale²) values, with (per row, at random) some -inf entries inside
     * the vocabulary, rows of ±1e4 logits, and junk (NaN, +inf, 1e30) in the padding columns
     * [vocabLimit, stride) that the kernels must never read.
     */
    static float[] random(Random rnd, int rows, int vocab, int stride, int vocabLimit, boolean specials) {
        float[] x = new float[rows * stride];
        for (int r = 0; r < rows; r++) {
            int kind = specials ? rnd.nextInt(6) : 0;
            float scale = kind == 1 ? 1e4f : (kind == 2 ? 0.01f : 3f);
            for (int j = 0; j < stride; j++) {
                float v;
                if (j >= vocabLimit) v = j % 3 == 0 ? Float.NaN : (j % 3 == 1 ? Float.POSITIVE_INFINITY : 1e30f);
                else v = (float) (rnd.nextGaussian() * scale);
                x[r * stride + j] = v;
            }
            if (kind == 3 && vocabLimit > 1) {  // a few -inf, never all
                for (int k = 0; k < Math.max(1, vocabLimit / 7); k++) x[r * stride + rnd.nextInt(vocabLimit - 1) + 1] = Float.NEGATIVE_INFINITY;
                x[r * stride] = 0.5f;
            }
            if (kind == 4 && vocabLimit > 1) {  // all -inf but one: a point mass
                int keep = rnd.nextInt(vocabLimit);
                for (int j = 0; j < vocabLimit; j++) if (j != keep) x[r * stride + j] = Float.NEGATIVE_INFINITY;
            }
        }
        return x;
    }

    /** Values rounded to {@code t} and back (what a kernel reading {@code t} sees). */
    static double[] asSeen(float[] x, DType t) {
        double[] d = new double[x.length];
        for (int i = 0; i < x.length; i++) {
            float v = x[i];
            if (t == DType.BF16) v = ArborCpu.arbor_bf16_to_f32(ArborCpu.arbor_f32_to_bf16(v));
            else if (t == DType.F16) v = ArborCpu.arbor_f16_to_f32(ArborCpu.arbor_f32_to_f16(v));
            d[i] = v;
        }
        return d;
    }

    /** A direct buffer holding {@code x} converted to {@code t}. */
    static ByteBuffer direct(float[] x, DType t) {
        ByteBuffer b = ByteBuffer.allocateDirect(Math.max(1, x.length * t.bytes())).order(ByteOrder.nativeOrder());
        for (float v : x) {
            if (t == DType.F32) b.putFloat(v);
            else if (t == DType.BF16) b.putShort(ArborCpu.arbor_f32_to_bf16(v));
            else b.putShort(ArborCpu.arbor_f32_to_f16(v));
        }
        return b.clear();
    }

    static ByteBuffer directFloats(int n) {
        return ByteBuffer.allocateDirect(Math.max(1, 4 * n)).order(ByteOrder.nativeOrder());
    }

    static ByteBuffer direct(int[] x) {
        ByteBuffer b = ByteBuffer.allocateDirect(Math.max(1, 4 * x.length)).order(ByteOrder.nativeOrder());
        for (int v : x) b.putInt(v);
        return b.clear();
    }

    static ByteBuffer direct(long[] x) {
        ByteBuffer b = ByteBuffer.allocateDirect(Math.max(1, 8 * x.length)).order(ByteOrder.nativeOrder());
        for (long v : x) b.putLong(v);
        return b.clear();
    }

    static ByteBuffer direct(byte[] x) {
        ByteBuffer b = ByteBuffer.allocateDirect(Math.max(1, x.length));
        b.put(x);
        return b.clear();
    }

    static float[] floats(ByteBuffer b, int n) {
        float[] out = new float[n];
        b.duplicate().order(ByteOrder.nativeOrder()).asFloatBuffer().get(out);
        return out;
    }

    static float[] read(ByteBuffer b, DType t, int n) {
        float[] out = new float[n];
        ByteBuffer d = b.duplicate().order(ByteOrder.nativeOrder());
        for (int i = 0; i < n; i++) {
            if (t == DType.F32) out[i] = d.getFloat(4 * i);
            else if (t == DType.BF16) out[i] = ArborCpu.arbor_bf16_to_f32(d.getShort(2 * i));
            else out[i] = ArborCpu.arbor_f16_to_f32(d.getShort(2 * i));
        }
        return out;
    }

    /** Double-precision reference forward: {lse, logprob, entropy} per row. */
    static double[][] refForward(double[] x, int rows, int vocab, int stride, int limit, long[] labels, double t, byte[] mask) {
        double[] lp = new double[rows], h = new double[rows], l = new double[rows];
        ArborCpu.arbor_ref_token_stats_fwd(x, rows, vocab, stride, limit, labels, t, mask, lp, h, l);
        return new double[][] {l, lp, h};
    }

    static long[] toLong(int[] a) {
        long[] l = new long[a.length];
        for (int i = 0; i < a.length; i++) l[i] = a[i];
        return l;
    }

    /** max_j |z_j| over the finite logits of row r (for magnitude-aware tolerances). */
    static double maxAbs(double[] x, int r, int stride, int limit, double t) {
        double m = 0;
        for (int j = 0; j < limit; j++) {
            double v = x[r * stride + j];
            if (Double.isFinite(v)) m = Math.max(m, Math.abs(v / t));
        }
        return m;
    }
}
