package ai.arbor.kernels;

import ai.arbor.testing.Gpu;

import java.util.Random;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * CUDA token statistics vs the double reference through the Java API and device memory. Skipped with
 * the reason where no GPU or driver exists (the kernels are still compiled by every build with nvcc,
 * and cuda-kernels/gpu-check.sh checks them without a JVM).
 */
class TokenStatsCudaTest {

    @BeforeEach
    void needsCuda() {
        Gpu.assume(Backend.CUDA.isAvailable(), Backend.CUDA::unavailableReason);
    }

    @Test
    void cudaMatchesReference() {
        long seed = Logits.seed();
        System.out.println("TokenStatsCudaTest seed=" + seed);
        Random rnd = new Random(seed);
        for (DType dt : new DType[] {DType.F32, DType.BF16, DType.F16}) {
            int rows = 37, vocab = 3001, stride = 3008, limit = 2999;
            float t = 0.7f;
            float[] x = Logits.random(rnd, rows, vocab, stride, limit, true);
            int[] labels = rnd.ints(rows, 0, limit).toArray();
            double[] seen = Logits.asSeen(x, dt);
            double[][] ref = Logits.refForward(seen, rows, vocab, stride, limit, Logits.toLong(labels), t, null);
            float[] lp = new float[rows], h = new float[rows];
            try (CudaBuffer dx = dt == DType.F32 ? CudaBuffer.of(x, 0) : CudaBuffer.of(toHalf(x, dt), 0);
                 CudaBuffer dl = CudaBuffer.of(labels, 0);
                 CudaBuffer dlp = CudaBuffer.allocate(4L * rows, 0);
                 CudaBuffer dh = CudaBuffer.allocate(4L * rows, 0)) {
                LogitsView v = new LogitsView(dx.ref(), dt, rows, vocab, stride, limit);
                TokenStats.forward(v, dl.ref(), DType.I32, t, null, dlp.ref(), dh.ref(), null, 0);
                dlp.copyTo(lp);
                dh.copyTo(h);
            }
            for (int r = 0; r < rows; r++) {
                double tol = 4e-5 * (1 + Math.log(limit)) + 2e-6 * Logits.maxAbs(seen, r, stride, limit, t);
                TokenStatsTest.close(ref[1][r], lp[r], tol, dt + " cuda logprob row " + r);
                TokenStatsTest.close(ref[2][r], h[r], tol, dt + " cuda entropy row " + r);
            }
        }
    }

    static short[] toHalf(float[] x, DType dt) {
        short[] s = new short[x.length];
        for (int i = 0; i < x.length; i++)
            s[i] = dt == DType.BF16 ? ai.arbor.bindings.ArborCpu.arbor_f32_to_bf16(x[i]) : ai.arbor.bindings.ArborCpu.arbor_f32_to_f16(x[i]);
        return s;
    }
}
