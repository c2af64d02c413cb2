package ai.arbor;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import ai.arbor.kernels.Backend;
import ai.arbor.kernels.CudaBuffer;
import ai.arbor.kernels.DType;
import ai.arbor.kernels.LogitsView;
import ai.arbor.kernels.MemRef;
import ai.arbor.kernels.TokenStats;
import ai.arbor.torch.TorchTokenStats;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.bytedeco.pytorch.BoolOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorArrayRefOptional;
import org.junit.jupiter.api.Test;

/** The README's usage examples, verbatim where possible, with their stated results asserted. */
class ReadmeExamplesTest {

    @Test
    void tokenStatsExamples() {
        float[] logits = {2f, 1f, 0.1f,    0f, 0f, 0f};   // 2 rows, vocab 3
        int[] labels = {0, 2};
        float[] logprob = new float[2], entropy = new float[2];
        TokenStats.forward(logits, 2, 3, labels, 1.0f, logprob, entropy);
        assertArrayEquals(new float[] {-0.4170f, -1.0986f}, logprob, 1e-4f);
        assertArrayEquals(new float[] {0.8467f, 1.0986f}, entropy, 1e-4f);

        float[] grad = new float[6];                       // d(−Σ logprob)/dlogits = softmax − onehot
        TokenStats.backward(logits, 2, 3, labels, 1.0f, new float[] {-1f, -1f}, null, grad);
        assertEquals(Math.exp(-0.4170) - 1, grad[0], 1e-4);
        assertEquals(1.0 / 3, grad[3], 1e-6);

        int rows = 4, vocab = 8;
        ByteBuffer x = ByteBuffer.allocateDirect(rows * vocab * 2).order(ByteOrder.nativeOrder());  // bf16 bits
        ByteBuffer y = ByteBuffer.allocateDirect(rows * 4).order(ByteOrder.nativeOrder());          // labels
        ByteBuffer lp = ByteBuffer.allocateDirect(rows * 4).order(ByteOrder.nativeOrder());
        ByteBuffer h = ByteBuffer.allocateDirect(rows * 4).order(ByteOrder.nativeOrder());
        ByteBuffer lse = ByteBuffer.allocateDirect(rows * 4).order(ByteOrder.nativeOrder());
        LogitsView view = LogitsView.of(MemRef.of(x), DType.BF16, rows, vocab).withVocabLimit(5);
        TokenStats.forward(view, MemRef.of(y), DType.I32, 1.0f, null, MemRef.of(lp), MemRef.of(h), MemRef.of(lse), 0);
        for (int r = 0; r < rows; r++) {
            assertEquals(-Math.log(5), lp.getFloat(4 * r), 1e-6);
            assertEquals(Math.log(5), h.getFloat(4 * r), 1e-6);
        }

        if (Backend.CUDA.isAvailable()) {
            try (CudaBuffer dx = CudaBuffer.of(logits, 0); CudaBuffer dy = CudaBuffer.of(labels, 0);
                 CudaBuffer dlp = CudaBuffer.allocate(2 * 4, 0)) {
                TokenStats.forward(LogitsView.of(dx.ref(), DType.F32, 2, 3), dy.ref(), DType.I32, 1.0f, null,
                        dlp.ref(), null, null, /* cudaStream */ 0);
                dlp.copyTo(logprob);
            }
            assertArrayEquals(new float[] {-0.4170f, -1.0986f}, logprob, 1e-4f);
        } else {
            System.out.println(Backend.CUDA.unavailableReason());
        }

        Tensor t = Tensor.create(logits, 2, 3).set_requires_grad(true);
        Tensor yt = Tensor.create(new long[] {0, 2}, 2);
        TorchTokenStats.Stats s = TorchTokenStats.forward(t, yt, 1.0f, null, 0);
        Tensor gLogprob = Tensor.create(new float[] {-1f, -1f}, 2);
        Tensor g = TorchTokenStats.backward(t, yt, 1.0f, null, 0, s, gLogprob, null);
        t.backward(g, new BoolOptional(), false, new TensorArrayRefOptional());   // t.grad() == grad
        assertEquals(grad[0], t.grad().select(0, 0).select(0, 0).item_float(), 1e-6);
        assertEquals(0.0, t.grad().sub(g).abs().max().item_double(), 0.0);
    }
}
