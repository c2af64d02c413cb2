package ai.arbor.torch;

import ai.arbor.kernels.Check;
import ai.arbor.kernels.DType;
import ai.arbor.kernels.MemRef;
import ai.arbor.kernels.TokenStats;
import java.util.List;
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
        var blocks = TorchTensors.rowBlocks(logits, vocabLimit);  // validates the logits first
        long rows = TorchTensors.rows(logits);
        long[] shape = TorchTensors.leadingShape(logits);
        Tensor lab = labels == null ? null : TorchTensors.flat(labels, rows, "labels");
        Tensor mask = rowMask == null ? null : TorchTensors.flat(rowMask, rows, "rowMask");
        DType lt = labelType(lab);
        checkMask(mask);
        checkLabels(logits, lab, lt, mask, blocks);
        Tensor logprob = lab == null ? null : TorchTensors.empty(logits, shape, ScalarType.Float);
        Tensor entropy = TorchTensors.empty(logits, shape, ScalarType.Float);
        Tensor lse = TorchTensors.empty(logits, shape, ScalarType.Float);
        long stream = TorchTensors.currentStream(TorchTensors.device(logits));
        for (TorchTensors.RowBlock b : blocks) {
            long r0 = b.firstRow(), n = b.view().rows();
            TokenStats.forward(b.view(), rowsOf("labels", lab, lt, r0, n), lt, temperature, rowsOf("rowMask", mask, DType.U8, r0, n),
                    rowsOf("logprob", logprob, DType.F32, r0, n), rowsOf("entropy", entropy, DType.F32, r0, n),
                    rowsOf("lse", lse, DType.F32, r0, n), stream);
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
        TorchTensors.rowBlocks(logits, vocabLimit);  // names bad logits before they are used to shape grad
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
        var blocks = TorchTensors.rowBlocks(logits, vocabLimit);  // validates the logits first
        long rows = TorchTensors.rows(logits);
        TorchTensors.require("grad", grad);
        if (grad.dim() != logits.dim())
            throw new IllegalArgumentException("grad must have the logits' shape: " + grad.dim() + " dims, logits have " + logits.dim());
        for (long d = 0; d < logits.dim(); d++)
            if (grad.size(d) != logits.size(d))
                throw new IllegalArgumentException("grad size " + grad.size(d) + " != logits size " + logits.size(d) + " in dim " + d);
        var gblocks = TorchTensors.rowBlocks(grad, vocabLimit, "grad");
        // rows of different blocks are not checked against each other by the kernels' per-call overlap check
        TorchTensors.requireDisjointRows(grad, "grad");
        TorchTensors.requireDisjointOrSame(grad, "grad", logits, "logits");
        if (!sameSplit(blocks, gblocks)) {  // e.g. x[:, :-1, :] logits and a contiguous grad: one block per batch element for both
            blocks = perBatch(logits, vocabLimit, "logits");
            gblocks = perBatch(grad, vocabLimit, "grad");
        }
        Tensor lab = labels == null ? null : TorchTensors.flat(labels, rows, "labels");
        Tensor mask = rowMask == null ? null : TorchTensors.flat(rowMask, rows, "rowMask");
        Tensor glp = gradLogprob == null ? null : floats(gradLogprob, rows, "gradLogprob");
        Tensor gh = gradEntropy == null ? null : floats(gradEntropy, rows, "gradEntropy");
        Tensor lse = saved == null ? null : floats(saved.lse(), rows, "saved.lse");
        Tensor ent = saved == null ? null : floats(saved.entropy(), rows, "saved.entropy");
        if (glp != null && lab == null) throw new IllegalArgumentException("labels are required with gradLogprob");
        DType lt = labelType(lab);
        checkMask(mask);
        if (glp != null) checkLabels(logits, lab, lt, mask, blocks);
        long stream = TorchTensors.currentStream(TorchTensors.device(logits));
        for (int i = 0; i < blocks.size(); i++) {
            var b = blocks.get(i);
            var g = gblocks.get(i).view();
            long r0 = b.firstRow(), n = b.view().rows();
            TokenStats.backward(b.view(), rowsOf("labels", lab, lt, r0, n), lt, temperature, rowsOf("rowMask", mask, DType.U8, r0, n),
                    rowsOf("saved.lse", lse, DType.F32, r0, n), rowsOf("saved.entropy", ent, DType.F32, r0, n),
                    rowsOf("gradLogprob", glp, DType.F32, r0, n), rowsOf("gradEntropy", gh, DType.F32, r0, n), g.data(), g.dtype(),
                    g.rowStride(), stream);
        }
    }

    private static boolean sameSplit(List<TorchTensors.RowBlock> a, List<TorchTensors.RowBlock> b) {
        if (a.size() != b.size()) return false;
        for (int i = 0; i < a.size(); i++)
            if (a.get(i).firstRow() != b.get(i).firstRow() || a.get(i).view().rows() != b.get(i).view().rows()) return false;
        return true;
    }

    /** One [L, V] block per batch element of [B, L, V] {@code t} (a [T, V] tensor is always one block). */
    private static List<TorchTensors.RowBlock> perBatch(Tensor t, long vocabLimit, String name) {
        List<TorchTensors.RowBlock> out = new java.util.ArrayList<>();
        long l = t.size(1);
        for (long i = 0; i < t.size(0); i++)
            out.add(new TorchTensors.RowBlock(TorchTensors.rowBlocks(t.select(0, i), vocabLimit, name).get(0).view(), i * l));
        return out;
    }

    private static long[] sizes(Tensor t) {
        long[] s = new long[(int) t.dim()];
        for (int i = 0; i < s.length; i++) s[i] = t.size(i);
        return s;
    }

    private static Tensor floats(Tensor t, long n, String name) {
        Tensor f = TorchTensors.flat(t, n, name);
        DType d = TorchTensors.dtype(f, name);
        if (d != DType.F32) throw new IllegalArgumentException(name + " must be float32, got " + d);
        return f;
    }

    private static void checkMask(Tensor mask) {
        if (mask != null && TorchTensors.dtype(mask, "rowMask") != DType.U8)
            throw new IllegalArgumentException("rowMask must be bool or uint8, got " + TorchTensors.dtype(mask));
    }

    private static DType labelType(Tensor lab) {
        if (lab == null) return DType.I64;
        DType lt = TorchTensors.dtype(lab, "labels");
        if (lt != DType.I32 && lt != DType.I64) throw new IllegalArgumentException("labels must be int32 or int64, got " + lt);
        return lt;
    }

    /**
     * Host labels of valid rows in [0, vocabLimit), naming the row among all rows: the kernels check each
     * row block on its own, so with a strided [B, L, V] view they would name a row of the block.
     */
    private static void checkLabels(Tensor logits, Tensor lab, DType lt, Tensor mask, List<TorchTensors.RowBlock> blocks) {
        if (lab == null || blocks.size() <= 1 || TorchTensors.device(logits).isCuda()) return;
        long rows = TorchTensors.rows(logits);
        Check.hostLabels("labels", TorchTensors.mem(lab), lt, rows, mask == null ? null : TorchTensors.mem(mask),
                blocks.get(0).view().vocabLimit());
    }

    /** Rows [r0, r0 + n) of a flat per-row tensor of {@code type}, or null. */
    private static MemRef rowsOf(String name, Tensor flat, DType type, long r0, long n) {
        if (flat == null) return null;
        DType actual = TorchTensors.dtype(flat, name);
        if (actual != type && !(type == DType.I64 && actual == DType.I32))
            throw new IllegalArgumentException(name + " must be " + TorchTensors.torchName(type) + ", got " + actual);
        MemRef m = TorchTensors.mem(flat);
        long es = actual.bytes();
        return m.slice(r0 * es, n * es);
    }
}
