package ai.arbor.torch;

import ai.arbor.kernels.ClipMode;
import ai.arbor.kernels.Check;
import ai.arbor.kernels.DType;
import ai.arbor.kernels.Device;
import ai.arbor.kernels.KlType;
import ai.arbor.kernels.LogitsView;
import ai.arbor.kernels.LossAgg;
import ai.arbor.kernels.MemRef;
import ai.arbor.kernels.PolicyLoss;
import ai.arbor.kernels.PolicyLossConfig;
import ai.arbor.kernels.PolicyLossResult;
import java.nio.DoubleBuffer;
import java.util.List;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.ScalarOptional;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * Clipped policy-gradient losses (docs/algorithms.md §2; {@link PolicyLoss}) on PyTorch-preset tensors, with
 * no copy of the logits: one fused kernel pass computes the token statistics, the loss and
 * ∂loss/∂logits. CPU tensors go to the CPU kernels, CUDA tensors to the CUDA kernels on the tensor's
 * device and torch's current stream.
 *
 * <p>Typical use in a trainer step:
 * <pre>{@code
 * Tensor logits = policy.forward(inputIds);                  // [B, L, V], requires grad
 * TorchPolicyLoss.Output out = TorchPolicyLoss.forwardBackward(cfg, logits.detach(), labels,
 *         oldLogprob, advantages, mask, null, null, 0, false);
 * logits.backward(out.grad());                               // dL/dlogits, the logits' shape and dtype
 * log(out.result());                                         // loss and metrics (waits for the GPU)
 * }</pre>
 *
 * <p>Logits are [T, V] or [B, L, V] (float32, bfloat16, float16) with a contiguous last dimension;
 * other strides are fine ({@code logits[:, :-1, :]} gives one row block per batch element, all
 * handled in one call: the weights are computed once over all rows and the sums of the blocks are
 * added). Per-row inputs have the leading shape: labels int32/int64 (any value on masked rows),
 * old log-probs, advantages, reference log-probs and the mask as floating tensors (converted to
 * float32 when needed), sequence ids as integers (converted to int32) in [0, rows). CPU tensors are
 * validated like arrays; CUDA tensors cannot be scanned without a copy, so there an invalid mask or
 * sequence id makes the loss NaN and a bad label a NaN gradient row.
 */
public final class TorchPolicyLoss {
    private TorchPolicyLoss() {}

    /**
     * The outputs of {@link #forwardBackward}. The tensors are ready when the call returns (on CUDA
     * they are ordered on torch's current stream); {@link #result()} copies the 9 sums to the host.
     *
     * @param grad     ∂loss/∂logits with the logits' shape and dtype (the logits themselves when in place)
     * @param logprob  float32 log-probs of the labels, leading shape (0 on masked rows)
     * @param entropy  float32 entropies, leading shape (0 on masked rows)
     * @param sums     float64 [blocks, 9]: the kernels' sums per row block ({@code ARBOR_PL_S_*})
     * @param counts   float64 [4]: N, B, F and the normalizer used
     * @param config   the configuration used
     * @param aepoEntropyThreshold AEPO's entropy threshold (−∞ = every token)
     */
    public record Output(Tensor grad, Tensor logprob, Tensor entropy, Tensor sums, Tensor counts,
                         PolicyLossConfig config, float aepoEntropyThreshold) {
        /** The loss and its metrics (synchronizes with the device). */
        public PolicyLossResult result() {
            Tensor s = sums.cpu().contiguous(), c = counts.cpu().contiguous();
            long blocks = s.size(0);
            double[] all = new double[(int) (blocks * 9)], cnt = new double[4];
            ((DoubleBuffer) s.createBuffer()).get(all);
            ((DoubleBuffer) c.createBuffer()).get(cnt);
            double[] total = new double[9];
            for (int b = 0; b < blocks; b++)  // in block order: reproducible
                for (int k = 0; k < 9; k++) total[k] += all[b * 9 + k];
            return PolicyLossResult.fromSums(config, total, cnt[3], aepoEntropyThreshold);
        }
    }

    /**
     * The loss, its metrics and ∂loss/∂logits in one fused pass (plus one statistics pass for AEPO with
     * a top-entropy fraction q &lt; 1, whose threshold needs a host copy of the entropies).
     *
     * @param logits     [T, V] or [B, L, V]; not modified unless {@code inPlace}
     * @param labels     the sampled tokens, leading shape
     * @param oldLogprob behaviour-policy log-probs
     * @param advantages per-token advantages
     * @param mask       loss mask in [0, 1] (bool, integer or floating)
     * @param refLogprob reference log-probs, or null when the KL type is NONE
     * @param seqIds     row → sequence index in [0, rows), or null for token-mean
     * @param vocabLimit columns from here on are embedding padding; {@code <= 0} for none
     * @param inPlace    write the gradient over the logits (no [T, V] allocation at all); only when
     *                   nothing else needs the logits' values afterwards (autograd's saved tensors
     *                   included)
     */
    public static Output forwardBackward(PolicyLossConfig cfg, Tensor logits, Tensor labels, Tensor oldLogprob,
                                         Tensor advantages, Tensor mask, Tensor refLogprob, Tensor seqIds,
                                         long vocabLimit, boolean inPlace) {
        Check.notNull("cfg", cfg);
        List<TorchTensors.RowBlock> blocks = TorchTensors.rowBlocks(logits, vocabLimit);  // validates the logits first
        long rows = TorchTensors.rows(logits);
        // in place, every row is written: rows of different blocks must not share memory
        if (inPlace) TorchTensors.requireDisjointRows(logits, "logits (in place)");
        Device dev = TorchTensors.device(logits);
        long stream = TorchTensors.currentStream(dev);
        DType dt = TorchTensors.dtype(logits);
        long v = logits.size(logits.dim() - 1), limit = vocabLimit <= 0 ? v : vocabLimit;

        Tensor lab = TorchTensors.flat(labels, rows, "labels");
        DType lt = TorchTensors.dtype(lab, "labels");
        if (lt != DType.I32 && lt != DType.I64) throw new IllegalArgumentException("labels must be int32 or int64, got " + lt);
        Tensor old = TorchTensors.floats(oldLogprob, rows, "oldLogprob", TorchTensors.device(logits));
        Tensor adv = TorchTensors.floats(advantages, rows, "advantages", TorchTensors.device(logits));
        Tensor m = TorchTensors.floats(mask, rows, "mask", TorchTensors.device(logits));
        Tensor ref = cfg.klType() == KlType.NONE ? null : TorchTensors.floats(refLogprob, rows, "refLogprob", TorchTensors.device(logits));
        boolean seq = cfg.agg().needsSequences();
        Tensor ids = null;
        if (seq) {
            Check.notNull("seqIds (required for aggregation " + cfg.agg() + ")", seqIds);
            ids = int32Ids(TorchTensors.flat(seqIds, rows, "seqIds"));
            TorchTensors.requireDevice(ids, TorchTensors.device(logits), "seqIds");
        }
        long ns = seq ? Math.max(1, rows) : 0;  // ids are row indices at most
        if (cfg.clipMode().isGspo()) {
            // GSPO's per-sequence pre-pass (PolicyLoss.gspoAnchor) on host copies of O(rows) values, after one
            // statistics pass for the current log-probs; the anchors go back to the logits' device
            Tensor lp0 = TorchTokenStats.forward(logits, lab, (float) cfg.temperature(), m.gt(new Scalar(0.0)), vocabLimit).logprob();
            long[] idl = TorchTensors.hostLongs(ids);
            int[] idi = new int[idl.length];
            for (int r = 0; r < idi.length; r++) idi[r] = (int) idl[r];
            int n = Math.toIntExact(rows);
            float[] o2 = new float[n], a2 = new float[n];
            PolicyLoss.gspoAnchor(cfg.clipMode(), TorchTensors.hostFloats(lp0), TorchTensors.hostFloats(old), TorchTensors.hostFloats(adv),
                    TorchTensors.hostFloats(m), idi, o2, a2);
            old = TorchTensors.empty(logits, new long[] {rows}, ScalarType.Float);
            old.copy_(Tensor.create(o2, rows));
            adv = TorchTensors.empty(logits, new long[] {rows}, ScalarType.Float);
            adv.copy_(Tensor.create(a2, rows));
        }

        long[] lead = TorchTensors.leadingShape(logits);
        Tensor lp = TorchTensors.empty(logits, lead, ScalarType.Float);
        Tensor ent = TorchTensors.empty(logits, lead, ScalarType.Float);
        Tensor w = TorchTensors.empty(logits, new long[] {Math.max(rows, 0)}, ScalarType.Float);
        Tensor counts = TorchTensors.empty(logits, new long[] {4}, ScalarType.Double);
        Tensor sums = TorchTensors.empty(logits, new long[] {blocks.size(), 9}, ScalarType.Double);
        Tensor ws = TorchTensors.empty(logits, new long[] {PolicyLoss.workspaceBytes(rows, ns)}, ScalarType.Byte);
        MemRef wsRef = TorchTensors.mem(ws);
        PolicyLoss.weights(cfg, rows, TorchTensors.mem(m), ids == null ? null : TorchTensors.mem(ids), ns,
                TorchTensors.mem(w), TorchTensors.mem(counts), wsRef, stream);
        // the kernels check each row block on its own and would name a row of the block
        if (!dev.isCuda() && blocks.size() > 1) checkHostRows(lab, old, adv, m, ref, limit);

        float thr = Float.NEGATIVE_INFINITY;
        Tensor sel = null;
        if (cfg.selectsByEntropy()) {  // the threshold is a host scalar: one statistics pass, one copy
            sel = TorchTensors.flat(TorchTokenStats.forward(logits, null, (float) cfg.temperature(), null, vocabLimit)
                    .entropy(), rows, "entropy");
            thr = PolicyLoss.aepoEntropyThreshold(cfg.aepoTopEntropyFraction(), TorchTensors.hostFloats(sel), TorchTensors.hostFloats(m));
        }

        Tensor grad = inPlace ? logits : TorchTensors.empty(logits, sizes(logits), TorchTensors.scalarType(dt));
        MemRef gmem = inPlace ? null : TorchTensors.mem(grad);
        PolicyLoss.Inputs all = new PolicyLoss.Inputs(TorchTensors.mem(lab), lt, TorchTensors.mem(old),
                TorchTensors.mem(adv), TorchTensors.mem(m), ref == null ? null : TorchTensors.mem(ref),
                ids == null ? null : TorchTensors.mem(ids), ns, sel == null ? null : TorchTensors.mem(sel));
        PolicyLoss.RowOutputs outs = new PolicyLoss.RowOutputs(TorchTensors.mem(lp), TorchTensors.mem(ent), null, null);
        MemRef wRef = TorchTensors.mem(w), sumsRef = TorchTensors.mem(sums);
        for (int i = 0; i < blocks.size(); i++) {
            LogitsView view = blocks.get(i).view();
            long r0 = blocks.get(i).firstRow(), n = view.rows();
            LogitsView g = inPlace ? view
                    : new LogitsView(gmem.slice(Check.product("grad offset", r0 * v, dt.bytes()),
                            Check.product("grad bytes", LogitsView.elements(n, v, v), dt.bytes())), dt, n, v, v, limit);
            PolicyLoss.forwardBackwardAsync(cfg, thr, view, all.rows(r0, n), wRef.slice(4 * r0, 4 * n), g.data(), dt,
                    g.rowStride(), outs.rows(r0, n), sumsRef.slice(72L * i, 72), wsRef, stream);
        }
        return new Output(grad, lp, ent, sums, counts, cfg, thr);
    }

    /** Host per-row values of valid rows, named among all rows, with the kernels' messages. */
    private static void checkHostRows(Tensor lab, Tensor old, Tensor adv, Tensor m, Tensor ref, long limit) {
        long[] y = TorchTensors.hostLongs(lab);
        float[] o = TorchTensors.hostFloats(old), a = TorchTensors.hostFloats(adv), mk = TorchTensors.hostFloats(m);
        float[] rf = ref == null ? null : TorchTensors.hostFloats(ref);
        for (int r = 0; r < y.length; r++) {
            if (!(mk[r] > 0)) continue;  // the weights' pass has checked the mask values
            if (y[r] < 0 || y[r] >= limit) throw new IllegalArgumentException("labels[" + r + "] = " + y[r] + " is outside [0, " + limit + ")");
            if (!Float.isFinite(o[r])) throw new IllegalArgumentException("oldLogprob[" + r + "] = " + o[r] + " is not finite (valid row)");
            if (!Float.isFinite(a[r])) throw new IllegalArgumentException("advantages[" + r + "] = " + a[r] + " is not finite (valid row)");
            if (rf != null && !Float.isFinite(rf[r]))
                throw new IllegalArgumentException("refLogprob[" + r + "] = " + rf[r] + " is not finite (valid row)");
        }
    }

    /**
     * Sequence ids as int32 for the kernels. Floating and bool ids are rejected (a conversion would
     * truncate 1.7 to a valid 1); int64 ids that do not fit int32 would wrap into range (2^32 + 1 to 1),
     * so on the host they are named, and on CUDA they saturate to int32's limits, which the kernels
     * treat as out of range.
     */
    static Tensor int32Ids(Tensor ids) {
        TorchTensors.require("seqIds", ids);
        ScalarType s = ids.scalar_type().intern();
        if (ids.is_floating_point() || ids.is_complex() || s == ScalarType.Bool)
            throw new IllegalArgumentException("seqIds must be an integer tensor, got " + s);
        if (s == ScalarType.Int) return ids;
        if (s != ScalarType.Long) return ids.to(ScalarType.Int).contiguous();  // 8/16-bit: always fits
        if (!ids.is_cuda()) {
            long[] a = TorchTensors.hostLongs(ids);
            for (int r = 0; r < a.length; r++)
                if (a[r] != (int) a[r]) throw new IllegalArgumentException("seqIds[" + r + "] = " + a[r] + " does not fit int32");
            return ids.to(ScalarType.Int).contiguous();
        }
        return torch.clamp(ids, opt(Integer.MIN_VALUE), opt(Integer.MAX_VALUE)).to(ScalarType.Int).contiguous();
    }

    private static ScalarOptional opt(double v) {
        return new ScalarOptional(new Scalar(v));
    }

    private static long[] sizes(Tensor t) {
        long[] s = new long[(int) t.dim()];
        for (int i = 0; i < s.length; i++) s[i] = t.size(i);
        return s;
    }
}
