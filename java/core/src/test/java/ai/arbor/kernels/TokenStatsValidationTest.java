package ai.arbor.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.function.Supplier;
import org.bytedeco.javacpp.FloatPointer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/**
 * Every malformed call throws IllegalArgumentException naming the bad value, before native code runs,
 * and the JVM (and the kernels) keep working afterwards.
 */
class TokenStatsValidationTest {
    static final float[] X = {0f, 1f, 2f, 3f, 4f, 5f};  // [2, 3]
    static final int[] Y = {0, 2};

    static void rejects(String mustMention, Executable call) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, call);
        assertTrue(e.getMessage().contains(mustMention), () -> "message '" + e.getMessage() + "' should mention " + mustMention);
    }

    @Test
    void arrayFormsRejectBadArguments() {
        float[] out = new float[2];
        rejects("logits", () -> TokenStats.forward(null, 2, 3, Y, 1f, out, out));
        rejects("logits.length", () -> TokenStats.forward(new float[5], 2, 3, Y, 1f, out, out));
        rejects("rows", () -> TokenStats.forward(X, -1, 3, Y, 1f, out, out));
        rejects("vocab", () -> TokenStats.forward(X, 2, 0, Y, 1f, out, out));
        rejects("labels[1] = 3", () -> TokenStats.forward(X, 2, 3, new int[] {0, 3}, 1f, out, out));
        rejects("labels[0] = -1", () -> TokenStats.forward(X, 2, 3, new int[] {-1, 0}, 1f, out, out));
        rejects("labels.length", () -> TokenStats.forward(X, 2, 3, new int[] {0}, 1f, out, out));
        rejects("labels", () -> TokenStats.forward(X, 2, 3, null, 1f, out, null));
        rejects("temperature", () -> TokenStats.forward(X, 2, 3, Y, 0f, out, out));
        rejects("temperature", () -> TokenStats.forward(X, 2, 3, Y, Float.NaN, out, out));
        rejects("temperature", () -> TokenStats.forward(X, 2, 3, Y, Float.POSITIVE_INFINITY, out, out));
        rejects("temperature", () -> TokenStats.forward(X, 2, 3, Y, -1f, out, out));
        rejects("logprobOut.length", () -> TokenStats.forward(X, 2, 3, Y, 1f, new float[1], out));
        rejects("entropyOut.length", () -> TokenStats.forward(X, 2, 3, Y, 1f, out, new float[3]));
        rejects("vocabLimit", () -> TokenStats.forward(X, 2, 3, 4, Y, 1f, null, out, out, null));
        rejects("vocabLimit", () -> TokenStats.forward(X, 2, 3, 0, Y, 1f, null, out, out, null));
        rejects("labels[1] = 2", () -> TokenStats.forward(X, 2, 3, 2, Y, 1f, null, out, out, null));  // label in padding
        rejects("rowMask.length", () -> TokenStats.forward(X, 2, 3, 3, Y, 1f, new boolean[3], out, out, null));
        rejects("rows * vocab", () -> TokenStats.forward(X, 65536, 65536, Y, 1f, out, out));
        float[] g = new float[6];
        rejects("gradLogitsOut.length", () -> TokenStats.backward(X, 2, 3, Y, 1f, out, out, new float[5]));
        rejects("gradLogprob.length", () -> TokenStats.backward(X, 2, 3, Y, 1f, new float[3], out, g));
        rejects("labels[1] = 7", () -> TokenStats.backward(X, 2, 3, new int[] {0, 7}, 1f, out, null, g));
        rejects("lse and entropy", () -> TokenStats.backward(X, 2, 3, 3, Y, 1f, null, out, null, out, null, g));
        // labels of masked rows are not checked (e.g. -100 ignore labels)
        TokenStats.forward(X, 2, 3, 3, new int[] {-100, 1}, 1f, new boolean[] {false, true}, out, null, null);
        assertEquals(0f, out[0]);
    }

    @Test
    void memoryFormsRejectBadArguments() {
        ByteBuffer x = Logits.direct(X, DType.F32);
        MemRef xm = MemRef.of(x);
        MemRef lab = MemRef.of(Logits.direct(Y));
        MemRef out = MemRef.of(Logits.directFloats(2));
        LogitsView v = LogitsView.of(xm, DType.F32, 2, 3);
        rejects("logits needs 28 bytes", () -> LogitsView.of(xm, DType.F32, 2, 3).withRowStride(4));
        rejects("rowStride", () -> v.withRowStride(2));
        rejects("vocabLimit", () -> v.withVocabLimit(4));
        rejects("logits dtype", () -> LogitsView.of(xm, DType.I32, 2, 3));
        rejects("logits needs", () -> LogitsView.of(xm, DType.F32, 3, 3));
        rejects("overflows", () -> LogitsView.of(xm, DType.F32, Long.MAX_VALUE / 2, 3));
        rejects("labelType", () -> TokenStats.forward(v, lab, DType.F32, 1f, null, out, null, null, 0));
        rejects("labels needs 16 bytes", () -> TokenStats.forward(v, lab, DType.I64, 1f, null, out, null, null, 0));
        rejects("logprob needs", () -> TokenStats.forward(v, lab, DType.I32, 1f, null, out.slice(0, 4), null, null, 0));
        rejects("rowMask needs", () -> TokenStats.forward(v, lab, DType.I32, 1f, MemRef.of(Logits.direct(new byte[1])), out, null, null, 0));
        rejects("must be direct", () -> MemRef.of(ByteBuffer.allocate(8)));
        rejects("unknown capacity", () -> MemRef.of(new FloatPointer(4).capacity(0).limit(0)));
        rejects("on cuda:0", () -> TokenStats.forward(v, MemRef.cuda(4096, 8, 0), DType.I32, 1f, null, out, null, null, 0));
        // labels outside [0, vocabLimit) in host memory: scanned before the kernel runs, row and value named
        MemRef badLab = MemRef.of(Logits.direct(new int[] {0, 9}));
        rejects("labels[1] = 9 is outside [0, 3)", () -> TokenStats.forward(v, badLab, DType.I32, 1f, null, out, null, null, 0));
        MemRef g = MemRef.of(Logits.directFloats(6));
        rejects("gradType", () -> TokenStats.backward(v, lab, DType.I32, 1f, null, null, null, out, null, g, DType.BF16, 3, 0));
        rejects("gradRowStride", () -> TokenStats.backward(v, lab, DType.I32, 1f, null, null, null, out, null, g, DType.F32, 2, 0));
        rejects("gradLogits needs", () -> TokenStats.backward(v, lab, DType.I32, 1f, null, null, null, out, null, g, DType.F32, 4, 0));
        // in place needs the logits' own dtype and stride
        ByteBuffer wide = ByteBuffer.allocateDirect(4 * 8).order(ByteOrder.nativeOrder());
        LogitsView vw = new LogitsView(MemRef.of(wide), DType.F32, 2, 3, 4, 3);
        rejects("in-place", () -> TokenStats.backward(vw, lab, DType.I32, 1f, null, null, null, out, null, MemRef.of(wide), DType.F32, 3, 0));
    }

    @Test
    void kernelsStillWorkAfterRejectedCalls() {
        Supplier<float[]> run = () -> {
            float[] lp = new float[2];
            TokenStats.forward(X, 2, 3, Y, 1f, lp, null);
            return lp;
        };
        float[] before = run.get();
        for (int i = 0; i < 100; i++)
            assertThrows(IllegalArgumentException.class, () -> TokenStats.forward(X, 2, 3, new int[] {5, 5}, 1f, new float[2], null));
        float[] after = run.get();
        assertEquals(before[0], after[0]);
        assertEquals(-Math.log(1 + Math.exp(-1) + Math.exp(-2)) , after[1], 1e-6);
    }
}
