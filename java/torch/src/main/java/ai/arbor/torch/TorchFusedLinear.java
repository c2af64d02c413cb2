package ai.arbor.torch;

import ai.arbor.kernels.Check;
import ai.arbor.kernels.DType;
import ai.arbor.kernels.Device;
import ai.arbor.kernels.FusedLinear;
import ai.arbor.kernels.KlType;
import ai.arbor.kernels.PolicyLoss;
import ai.arbor.kernels.PolicyLossConfig;
import ai.arbor.kernels.PolicyLossResult;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * {@link FusedLinear} on PyTorch-preset tensors: the policy loss of {@code logits = hidden·weightᵀ} and
 * its gradients with respect to the final hidden states and the LM-head weight, without the
 * {@code [rows, vocab]} logits — for policies whose logits would not fit (docs/kernels.md, "Fused linear").
 *
 * <p>Use in a trainer step, where the policy exposes its final hidden states and LM-head weight:
 * <pre>{@code
 * Tensor hidden = policy.hidden(inputIds);                   // [B, L, d], requires grad
 * TorchFusedLinear.Output out = TorchFusedLinear.forwardBackward(cfg, hidden.detach(), head.weight(),
 *         labels, oldLogprob, advantages, mask, null, null, null);
 * hidden.backward(out.gradHidden());                         // the body's parameters (and a tied embedding's lookup)
 * head.weight().grad().add_(out.gradWeight());               // the head (tied: the same tensor; accumulates)
 * }</pre>
 *
 * <p>{@code hidden} is {@code [T, d]} or any {@code [..., d]} (copied to a contiguous [rows, d] only when
 * it is not contiguous), {@code weight} {@code [V, d]} with a contiguous last dimension; both float32, or
 * bfloat16 on CUDA. Per-row inputs as {@link TorchPolicyLoss}. Gradients are float32 (the hidden
 * gradient is converted to the hidden states' dtype). CPU tensors run the CPU kernel (OpenBLAS),
 * CUDA tensors cuBLAS on torch's current stream; the call returns when the result is known.
 */
public final class TorchFusedLinear {
    private TorchFusedLinear() {}

    /**
     * @param gradHidden ∂loss/∂hidden, hidden's shape and dtype
     * @param gradWeight ∂loss/∂weight, float32 {@code [V, d]} (the given accumulator when one was passed)
     * @param logprob    float32 log-probs of the labels, hidden's leading shape (0 on masked rows)
     * @param entropy    float32 entropies, hidden's leading shape (0 on masked rows)
     */
    public record Output(Tensor gradHidden, Tensor gradWeight, Tensor logprob, Tensor entropy, PolicyLossResult result) {}

    /**
     * The loss, its metrics and both gradients (see the class comment).
     *
     * @param gradWeightInto float32 {@code [V, d]} contiguous tensor on the weight's device to add
     *                       ∂loss/∂weight into (tied embeddings: the embedding's gradient), or null for a new one
     * @param chunks         tile sizes, or null for the device's default
     */
    public static Output forwardBackward(PolicyLossConfig cfg, Tensor hidden, Tensor weight, Tensor labels,
                                         Tensor oldLogprob, Tensor advantages, Tensor mask, Tensor refLogprob,
                                         Tensor seqIds, Tensor gradWeightInto, FusedLinear.Chunks chunks) {
        return forwardBackward(cfg, hidden, weight, labels, oldLogprob, advantages, mask, refLogprob, seqIds, 0, true,
                gradWeightInto, chunks);
    }

    /**
     * As {@link #forwardBackward(PolicyLossConfig, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor,
     * Tensor, FusedLinear.Chunks)} with a padded vocabulary (weight rows ≥ {@code vocabLimit} are never read;
     * ≤ 0 = all of them) and, with {@code gradients = false}, the loss and per-row outputs only (one product
     * instead of four; the gradient fields are null).
     */
    public static Output forwardBackward(PolicyLossConfig cfg, Tensor hidden, Tensor weight, Tensor labels,
                                         Tensor oldLogprob, Tensor advantages, Tensor mask, Tensor refLogprob,
                                         Tensor seqIds, long vocabLimit, boolean gradients, Tensor gradWeightInto,
                                         FusedLinear.Chunks chunks) {
        Check.notNull("cfg", cfg);
        TorchTensors.require("hidden", hidden);
        TorchTensors.require("weight", weight);
        if (hidden.dim() < 2) throw new IllegalArgumentException("hidden must be [..., d], got " + hidden.dim() + " dims");
        if (weight.dim() != 2) throw new IllegalArgumentException("weight must be [V, d], got " + weight.dim() + " dims");
        long d = hidden.size(hidden.dim() - 1), v = weight.size(0);
        if (weight.size(1) != d)
            throw new IllegalArgumentException("weight is [" + v + ", " + weight.size(1) + "] but hidden's last dim is " + d);
        if (weight.stride(1) != 1) throw new IllegalArgumentException("weight's last dimension must be contiguous");
        DType dt = TorchTensors.dtype(hidden, "hidden");
        if (TorchTensors.dtype(weight, "weight") != dt)
            throw new IllegalArgumentException("weight is " + TorchTensors.dtype(weight) + " but hidden is " + dt);
        Device dev = TorchTensors.device(hidden);
        TorchTensors.requireDevice(weight, dev, "weight");
        long rows = hidden.numel() / Math.max(1, d);
        Tensor h = TorchTensors.flat(hidden, rows * d, "hidden").reshape(rows, d);
        long stream = TorchTensors.currentStream(dev);

        Tensor lab = TorchTensors.flat(labels, rows, "labels");
        DType lt = TorchTensors.dtype(lab, "labels");
        if (lt != DType.I32 && lt != DType.I64) throw new IllegalArgumentException("labels must be int32 or int64, got " + lt);
        TorchTensors.requireDevice(lab, dev, "labels");
        Tensor old = TorchTensors.floats(oldLogprob, rows, "oldLogprob", dev);
        Tensor adv = TorchTensors.floats(advantages, rows, "advantages", dev);
        Tensor m = TorchTensors.floats(mask, rows, "mask", dev);
        Tensor ref = cfg.klType() == KlType.NONE ? null : TorchTensors.floats(refLogprob, rows, "refLogprob", dev);
        Tensor ids = null;
        if (cfg.agg().needsSequences()) {
            Check.notNull("seqIds (required for aggregation " + cfg.agg() + ")", seqIds);
            ids = TorchTensors.flat(seqIds, rows, "seqIds").to(ScalarType.Int).contiguous();
            TorchTensors.requireDevice(ids, dev, "seqIds");
        }
        long ns = ids == null ? 0 : Math.max(1, rows);

        Tensor gh = gradients ? TorchTensors.empty(hidden, new long[] {rows, d}, ScalarType.Float) : null;
        Tensor gw = null;
        if (!gradients) {
            if (gradWeightInto != null) throw new IllegalArgumentException("gradWeightInto needs gradients = true");
        } else if (gradWeightInto != null) {
            TorchTensors.require("gradWeightInto", gradWeightInto);
            TorchTensors.requireDevice(gradWeightInto, dev, "gradWeightInto");
            if (gradWeightInto.scalar_type().intern() != ScalarType.Float || !gradWeightInto.is_contiguous()
                    || gradWeightInto.dim() != 2 || gradWeightInto.size(0) != v || gradWeightInto.size(1) != d)
                throw new IllegalArgumentException("gradWeightInto must be a contiguous float32 [" + v + ", " + d + "] tensor");
            gw = gradWeightInto;
        } else {
            gw = TorchTensors.empty(hidden, new long[] {v, d}, ScalarType.Float);
        }
        long[] lead = TorchTensors.leadingShape(hidden);
        Tensor lp = TorchTensors.empty(hidden, lead, ScalarType.Float), ent = TorchTensors.empty(hidden, lead, ScalarType.Float);
        long limit = vocabLimit <= 0 ? v : vocabLimit;
        FusedLinear.Linear lin = new FusedLinear.Linear(TorchTensors.mem(h), TorchTensors.mem(weight), dt, rows, d, d, v,
                weight.stride(0), limit);
        PolicyLoss.Inputs in = new PolicyLoss.Inputs(TorchTensors.mem(lab), lt, TorchTensors.mem(old), TorchTensors.mem(adv),
                TorchTensors.mem(m), ref == null ? null : TorchTensors.mem(ref), ids == null ? null : TorchTensors.mem(ids),
                ns, null);
        PolicyLossResult r = FusedLinear.forwardBackward(cfg, lin, in, gh == null ? null : TorchTensors.mem(gh), d,
                gw == null ? null : TorchTensors.mem(gw), d, gradWeightInto != null,
                new PolicyLoss.RowOutputs(TorchTensors.mem(lp), TorchTensors.mem(ent), null, null), chunks, stream);
        Tensor ghOut = gh == null ? null : gh.reshape(sizes(hidden));
        if (ghOut != null && dt != DType.F32) ghOut = ghOut.to(TorchTensors.scalarType(dt));
        return new Output(ghOut, gw, lp, ent, r);
    }

    private static long[] sizes(Tensor t) {
        long[] s = new long[(int) t.dim()];
        for (int i = 0; i < s.length; i++) s[i] = t.size(i);
        return s;
    }
}
