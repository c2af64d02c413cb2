package ai.arbor.torch;

import ai.arbor.kernels.Check;
import ai.arbor.kernels.DType;
import ai.arbor.kernels.MemRef;
import ai.arbor.kernels.TokenStats;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * Token statistics (docs/algorithms.md §1) on PyTorch-preset tensors, with no copy of the logits: CPU
 * tensors go to the CPU kernels, CUDA tensors to the CUDA kernels on the tensor's device and torch's
 * current stream.
 *
 * <p>Logits are [T, V] or [B, L, V] (float32, bfloat16 or float16) with a contiguous last dimension;
 * other strides are fine (e.g. {@code logits[:, :-1, :]}). Labels (int32/int64) and the optional row
 * mask (bool/uint8) have the leading shape; outputs are float32 tensors of the leading shape.
 *
 * <p>Typical use in a trainer, with {@code L} a function of logprob and entropy:
 * <pre>{@code
 * TorchTokenStats.Stats s = TorchTokenStats.forward(logits, labels, 1f, mask, 0);
 * // ... compute dL/dlogprob and dL/dentropy per token ...
 * Tensor grad = TorchTokenStats.backward(logits, labels, 1f, mask, 0, s, gLogprob, gEntropy);
 * logits.backward(grad);   // grad has the logits' shape and dtype
 * }</pre>
 */
public final class TorchTokenStats {
    private TorchTokenStats() {}

    /** Per-row outputs of the forward (float32, leading shape of the logits). */
    public record Stats(Tensor logprob, Tensor entropy, Tensor lse) {}

    /**
     * @param labels     int32/int64 labels, or null (then {@code logprob} is not computed and is null)
     * @param rowMask    bool/uint8 mask (false = masked: outputs 0), or null
     * @param vocabLimit columns from here on are padding; {@code <= 0} for none
     */
    public static Stats forward(Tensor logits, Tensor labels, float temperature, Tensor rowMask, long vocabLimit) {
        long rows = TorchTensors.rows(logits);
        long[] shape = TorchTensors.leadingShape(logits);
        var blocks = TorchTensors.rowBlocks(logits, vocabLimit);
        Tensor lab = labels == null ? null : TorchTensors.flat(labels, rows, "labels");
        Tensor mask = rowMask == null ? null : TorchTensors.flat(rowMask, rows, "rowMask");
        DType lt = lab == null ? DType.I64 : TorchTensors.dtype(lab);
        checkMask(mask);
        Tensor logprob = lab == null ? null : TorchTensors.empty(logits, shape, ScalarType.Float);
        Tensor entropy = TorchTensors.empty(logits, shape, ScalarType.Float);
        Tensor lse = TorchTensors.empty(logits, shape, ScalarType.Float);
        long stream = TorchTensors.currentStream(TorchTensors.device(logits));
        for (TorchTensors.RowBlock b : blocks) {
            long r0 = b.firstRow(), n = b.view().rows();
            TokenStats.forward(b.view(), rowsOf(lab, lt, r0, n), lt, temperature, rowsOf(mask, DType.U8, r0, n),
                    rowsOf(logprob, DType.F32, r0, n), rowsOf(entropy, DType.F32, r0, n), rowsOf(lse, DType.F32, r0, n),
                    stream);
        }
        return new Stats(logprob, entropy, lse);
    }

    /**
     * ∂L/∂logits from per-row upstream gradients, as a new tensor with the logits' shape and dtype (ready
     * for {@code logits.backward(grad)}).
     *
     * @param saved       the forward's outputs (its lse and entropy are reused), or null to recompute
     * @param gradLogprob ∂L/∂logprob (leading shape, float32), or null for 0 (labels may then be null)
     * @param gradEntropy ∂L/∂entropy, or null for 0
     */
    public static Tensor backward(Tensor logits, Tensor labels, float temperature, Tensor rowMask, long vocabLimit,
                                  Stats saved, Tensor gradLogprob, Tensor gradEntropy) {
        Tensor grad = TorchTensors.empty(logits, sizes(logits), TorchTensors.scalarType(TorchTensors.dtype(logits)));
        backwardInto(logits, labels, temperature, rowMask, vocabLimit, saved, gradLogprob, gradEntropy, grad);
        return grad;
    }

    /**
     * As {@link #backward}, writing into {@code grad} — a tensor with the logits' shape, float32 or the
     * logits' dtype, contiguous last dimension. {@code grad} may be {@code logits} itself (in place) when
     * nothing else needs the logits afterwards.
     */
    public static void backwardInto(Tensor logits, Tensor labels, float temperature, Tensor rowMask, long vocabLimit,
                                    Stats saved, Tensor gradLogprob, Tensor gradEntropy, Tensor grad) {
        long rows = TorchTensors.rows(logits);
        Check.notNull("grad", grad);
        if (grad.dim() != logits.dim())
            throw new IllegalArgumentException("grad must have the logits' shape");
        for (long d = 0; d < logits.dim(); d++)
            if (grad.size(d) != logits.size(d))
                throw new IllegalArgumentException("grad size " + grad.size(d) + " != logits size " + logits.size(d) + " in dim " + d);
        var blocks = TorchTensors.rowBlocks(logits, vocabLimit);
        var gblocks = TorchTensors.rowBlocks(grad, vocabLimit);
        if (blocks.size() != gblocks.size())
            throw new IllegalArgumentException("grad's strides split rows differently from the logits'; use a contiguous grad");
        Tensor lab = labels == null ? null : TorchTensors.flat(labels, rows, "labels");
        Tensor mask = rowMask == null ? null : TorchTensors.flat(rowMask, rows, "rowMask");
        Tensor glp = gradLogprob == null ? null : floats(gradLogprob, rows, "gradLogprob");
        Tensor gh = gradEntropy == null ? null : floats(gradEntropy, rows, "gradEntropy");
        Tensor lse = saved == null ? null : floats(saved.lse(), rows, "saved.lse");
        Tensor ent = saved == null ? null : floats(saved.entropy(), rows, "saved.entropy");
        if (glp != null && lab == null) throw new IllegalArgumentException("labels are required with gradLogprob");
        DType lt = lab == null ? DType.I64 : TorchTensors.dtype(lab);
        checkMask(mask);
        long stream = TorchTensors.currentStream(TorchTensors.device(logits));
        for (int i = 0; i < blocks.size(); i++) {
            var b = blocks.get(i);
            var g = gblocks.get(i).view();
            if (g.rows() != b.view().rows() || gblocks.get(i).firstRow() != b.firstRow())
                throw new IllegalArgumentException("grad's strides split rows differently from the logits'; use a contiguous grad");
            long r0 = b.firstRow(), n = b.view().rows();
            TokenStats.backward(b.view(), rowsOf(lab, lt, r0, n), lt, temperature, rowsOf(mask, DType.U8, r0, n),
                    rowsOf(lse, DType.F32, r0, n), rowsOf(ent, DType.F32, r0, n), rowsOf(glp, DType.F32, r0, n),
                    rowsOf(gh, DType.F32, r0, n), g.data(), g.dtype(), g.rowStride(), stream);
        }
    }

    private static long[] sizes(Tensor t) {
        long[] s = new long[(int) t.dim()];
        for (int i = 0; i < s.length; i++) s[i] = t.size(i);
        return s;
    }

    private static Tensor floats(Tensor t, long n, String name) {
        Tensor f = TorchTensors.flat(t, n, name);
        if (TorchTensors.dtype(f) != DType.F32) throw new IllegalArgumentException(name + " must be float32, got " + TorchTensors.dtype(f));
        return f;
    }

    private static void checkMask(Tensor mask) {
        if (mask != null && TorchTensors.dtype(mask) != DType.U8)
            throw new IllegalArgumentException("rowMask must be bool or uint8, got " + TorchTensors.dtype(mask));
    }

    /** Rows [r0, r0 + n) of a flat per-row tensor of {@code type}, or null. */
    private static MemRef rowsOf(Tensor flat, DType type, long r0, long n) {
        if (flat == null) return null;
        DType actual = TorchTensors.dtype(flat);
        if (actual != type && !(type == DType.I64 && actual == DType.I32))
            throw new IllegalArgumentException("expected " + type + " tensor, got " + actual);
        MemRef m = TorchTensors.mem(flat);
        long es = actual.bytes();
        return m.slice(r0 * es, n * es);
    }
}
