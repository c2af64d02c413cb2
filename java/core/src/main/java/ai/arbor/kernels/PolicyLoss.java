package ai.arbor.kernels;

import static ai.arbor.kernels.Check.addr;

import ai.arbor.bindings.ArborCpu;
import ai.arbor.bindings.ArborCuda;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import org.bytedeco.javacpp.BytePointer;

/**
 * Clipped policy-gradient losses fused with token statistics (docs/algorithms.md §2 and §1): from logits,
 * labels, old log-probs, advantages and a loss mask, the loss, its metrics and ∂loss/∂logits, ready
 * for {@code logits.backward(grad)}.
 *
 * <p>Per token t (a row of logits), z = logits / temperature, logprob = z_label − logsumexp(z),
 * H = entropy of softmax(z), δ = clamp(logprob − oldLogprob, −20, 20), r = e^δ:
 * <pre>
 *   loss = Σ_t w_t · ( ℓ_clip(r_t, A_t) + β·KL_t − c_H·H_t )
 * </pre>
 * with the surrogate ℓ_clip of {@link ClipMode} (PPO / clip-higher, dual-clip, AEPO's stop-gradient
 * clip), the KL estimator of {@link KlType} and the aggregation weights w_t of {@link LossAgg}; see
 * {@link PolicyLossConfig} and {@link PolicyLossResult} for every definition, and
 * {@code docs/policy-loss.md} for the derivation of the gradients.
 *
 * <p>Two paths with the same results: {@link #forwardBackward fused} — one kernel per row computes
 * the statistics, the loss terms and writes ∂loss/∂logits while the row is in cache (one read of the
 * logits, a re-read from cache, one write; optionally in place; extra memory O(rows)) — and
 * {@link #forwardBackwardComposable composable} — {@link TokenStats#forward}, then
 * {@link #loss the O(T) loss} over the per-row values, then {@link TokenStats#backward} with the
 * per-row upstream gradients. On the CPU both give the same bits; the sums are reduced from per-row
 * partials in row order, so results are identical for every thread count.
 *
 * <p>Inputs, validated before any native call ({@link IllegalArgumentException} naming the value):
 * mask values are finite and in [0, 1] (soft masks allowed; 0 = not trained); on valid rows (mask
 * &gt; 0) labels are in [0, vocabLimit) and old log-probs, advantages and reference log-probs are finite;
 * {@code seqIds} (row → sequence index in [0, rows); rows of a sequence need not be adjacent) are
 * required by the sequence-mean aggregations, where every valid row needs one (masked rows may carry
 * a negative id). Masked rows are not read and get a zero gradient row; their labels may be −100.
 *
 * <p>AEPO with a top-entropy fraction q &lt; 1 needs an entropy threshold before any gradient is
 * written: it is the ⌈q·N⌉-th largest entropy among the N valid tokens
 * ({@link #aepoEntropyThreshold}), taken from {@code selectEntropy} when the caller gives it, else
 * from an extra token-statistics pass over the logits (entropy only; one more read). The default
 * (q = 1, the released code) selects every token and needs neither.
 */
public final class PolicyLoss {
    private PolicyLoss() {}

    // ---------------------------------------------------------------------------------------------
    // Java arrays
    // ---------------------------------------------------------------------------------------------

    /**
     * Fused forward + backward over a row-major {@code [rows, vocab]} array.
     *
     * @param logits        {@code rows * vocab} logits
     * @param labels        {@code rows} labels (the sampled tokens) in [0, vocab) on valid rows
     * @param oldLogprob    {@code rows} behaviour-policy log-probs
     * @param advantages    {@code rows} advantages
     * @param mask          {@code rows} loss-mask values in [0, 1]
     * @param refLogprob    {@code rows} reference log-probs; null when the KL type is NONE
     * @param seqIds        {@code rows} row → sequence indices; null for token-mean
     * @param gradLogitsOut {@code rows * vocab} receives ∂loss/∂logits; may be {@code logits} itself
     *                      (the gradient is then written in place)
     */
    public static PolicyLossResult forwardBackward(PolicyLossConfig cfg, float[] logits, int rows, int vocab,
                                                   int[] labels, float[] oldLogprob, float[] advantages, float[] mask,
                                                   float[] refLogprob, int[] seqIds, float[] gradLogitsOut) {
        return forwardBackward(cfg, logits, rows, vocab, vocab, labels, oldLogprob, advantages, mask, refLogprob, seqIds,
                null, gradLogitsOut);
    }

    /**
     * As {@link #forwardBackward(PolicyLossConfig, float[], int, int, int[], float[], float[], float[], float[], int[], float[])}
     * with a padded vocabulary (columns ≥ {@code vocabLimit} are absent; their gradient is 0) and,
     * for AEPO with q &lt; 1, the entropies to select by ({@code selectEntropy}, {@code rows} values;
     * null = from an extra statistics pass).
     */
    public static PolicyLossResult forwardBackward(PolicyLossConfig cfg, float[] logits, int rows, int vocab,
                                                   int vocabLimit, int[] labels, float[] oldLogprob, float[] advantages,
                                                   float[] mask, float[] refLogprob, int[] seqIds,
                                                   float[] selectEntropy, float[] gradLogitsOut) {
        Prepared p = prepareArrays(cfg, logits, rows, vocab, vocabLimit, labels, oldLogprob, advantages, mask,
                refLogprob, seqIds, selectEntropy, gradLogitsOut);
        float[] sel = selectEntropy;
        float thr = Float.NEGATIVE_INFINITY;
        if (cfg.selectsByEntropy()) {
            if (sel == null) {  // the extra statistics pass (entropy only)
                sel = new float[rows];
                TokenStats.forward(logits, rows, vocab, vocabLimit, null, (float) cfg.temperature(), p.rowMask, null,
                        sel, null);
            }
            thr = aepoEntropyThreshold(cfg.aepoTopEntropyFraction(), sel, mask);
        }
        Anchored an = new Anchored(oldLogprob, advantages);
        if (cfg.clipMode().isGspo()) {  // the per-sequence pre-pass needs the log-probs: one statistics pass
            float[] lp0 = new float[rows];
            TokenStats.forward(logits, rows, vocab, vocabLimit, labels, (float) cfg.temperature(), p.rowMask, lp0, null, null);
            an = Anchored.of(cfg, lp0, oldLogprob, advantages, mask, seqIds);
        }
        double[] sums = new double[PolicyLossResult.NUM_SUMS];
        int rc;
        try (ArborCpu.PolicyLossParams params = cfg.params(thr)) {
            rc = ArborCpu.arbor_cpu_policy_loss_fused_f32(params, logits, rows, vocab, vocab, vocabLimit, labels,
                    ArborCpu.I32, an.old(), an.adv(), mask, p.weights, refLogprob(cfg, refLogprob),
                    cfg.selectsByEntropy() ? sel : null, null, null, null, null, gradLogitsOut, ArborCpu.F32, vocab,
                    sums, 0L, 0L, Kernels.threads());
        }
        Kernels.check(rc, "policy loss (fused)");
        return PolicyLossResult.fromSums(cfg, sums, p.counts[PolicyLossResult.C_NORMALIZER], thr);
    }

    /**
     * The composable path over arrays — {@link TokenStats#forward}, {@link #loss}, {@link TokenStats#backward}
     * (three calls, two reads of the logits, per-row temporaries) — with the arguments and results of
     * the fused {@link #forwardBackward(PolicyLossConfig, float[], int, int, int[], float[], float[], float[], float[], int[], float[])}.
     */
    public static PolicyLossResult forwardBackwardComposable(PolicyLossConfig cfg, float[] logits, int rows, int vocab,
                                                             int[] labels, float[] oldLogprob, float[] advantages,
                                                             float[] mask, float[] refLogprob, int[] seqIds,
                                                             float[] gradLogitsOut) {
        Prepared p = prepareArrays(cfg, logits, rows, vocab, vocab, labels, oldLogprob, advantages, mask, refLogprob,
                seqIds, null, gradLogitsOut);
        float t = (float) cfg.temperature();
        float[] lp = new float[rows], h = new float[rows], lse = new float[rows];
        TokenStats.forward(logits, rows, vocab, vocab, labels, t, p.rowMask, lp, h, lse);
        float thr = cfg.selectsByEntropy() ? aepoEntropyThreshold(cfg.aepoTopEntropyFraction(), h, mask)
                : Float.NEGATIVE_INFINITY;
        float[] glp = new float[rows], gh = new float[rows];
        double[] sums = new double[PolicyLossResult.NUM_SUMS];
        int rc;
        try (ArborCpu.PolicyLossParams params = cfg.params(thr)) {
            Anchored an = Anchored.of(cfg, lp, oldLogprob, advantages, mask, seqIds);
            rc = ArborCpu.arbor_cpu_policy_loss(params, rows, lp, h, an.old(), an.adv(), mask, p.weights,
                    refLogprob(cfg, refLogprob), null, glp, gh, sums, 0L, 0L, Kernels.threads());
        }
        Kernels.check(rc, "policy loss");
        TokenStats.backward(logits, rows, vocab, vocab, labels, t, p.rowMask, lse, h, glp, gh, gradLogitsOut);
        return PolicyLossResult.fromSums(cfg, sums, p.counts[PolicyLossResult.C_NORMALIZER], thr);
    }

    /**
     * The O(T) loss over per-row values (the middle of the composable path): from log-probs and
     * entropies (e.g. of {@link TokenStats#forward}), the loss and the per-row upstream gradients
     * ∂loss/∂logprob and ∂loss/∂entropy for {@link TokenStats#backward}.
     *
     * @param logprob        {@code rows} log-probs of the labels
     * @param entropy        {@code rows} entropies; may be null when entropyCoef = 0 and no AEPO selection
     *                       needs them (the entropy outputs are then NaN)
     * @param selectEntropy  for AEPO with q &lt; 1: the values to select by (null = {@code entropy})
     * @param gradLogprobOut {@code rows} outputs, or null
     * @param gradEntropyOut {@code rows} outputs, or null
     */
    public static PolicyLossResult loss(PolicyLossConfig cfg, float[] logprob, float[] entropy, float[] oldLogprob,
                                        float[] advantages, float[] mask, float[] refLogprob, int[] seqIds,
                                        float[] selectEntropy, float[] gradLogprobOut, float[] gradEntropyOut) {
        Check.notNull("cfg", cfg);
        Check.notNull("logprob", logprob);
        int rows = logprob.length;
        int numSeqs = checkRowInputs(cfg, rows, oldLogprob, advantages, mask, refLogprob, seqIds);
        Check.lengthOrNull("entropy", entropy, rows);
        Check.lengthOrNull("selectEntropy", selectEntropy, rows);
        Check.lengthOrNull("gradLogprobOut", gradLogprobOut, rows);
        Check.lengthOrNull("gradEntropyOut", gradEntropyOut, rows);
        String[] inNames = {"logprob", "entropy", "oldLogprob", "advantages", "mask", "refLogprob", "selectEntropy"};
        float[][] ins = {logprob, entropy, oldLogprob, advantages, mask, refLogprob, selectEntropy};
        Check.notSame("gradLogprobOut", gradLogprobOut, "gradEntropyOut", gradEntropyOut);
        for (int i = 0; i < ins.length; i++) {
            Check.notSame("gradLogprobOut", gradLogprobOut, inNames[i], ins[i]);
            Check.notSame("gradEntropyOut", gradEntropyOut, inNames[i], ins[i]);
        }
        float[] sel = selectEntropy != null ? selectEntropy : entropy;
        if (entropy == null && cfg.entropyCoef() != 0)
            throw new IllegalArgumentException("entropy is required when entropyCoef != 0 (got " + cfg.entropyCoef() + ")");
        if (cfg.selectsByEntropy() && sel == null)
            throw new IllegalArgumentException("AEPO with aepoTopEntropyFraction " + cfg.aepoTopEntropyFraction()
                    + " < 1 needs entropy or selectEntropy");
        for (int r = 0; r < rows; r++)
            if (mask[r] > 0 && !Float.isFinite(logprob[r]) && logprob[r] != Float.NEGATIVE_INFINITY)
                throw new IllegalArgumentException("logprob[" + r + "] = " + logprob[r] + " on a valid row");
        float[] weights = new float[rows];
        double[] counts = weights(cfg, rows, mask, seqIds, numSeqs, weights);
        float thr = cfg.selectsByEntropy() ? aepoEntropyThreshold(cfg.aepoTopEntropyFraction(), sel, mask)
                : Float.NEGATIVE_INFINITY;
        double[] sums = new double[PolicyLossResult.NUM_SUMS];
        int rc;
        try (ArborCpu.PolicyLossParams params = cfg.params(thr)) {
            Anchored an = Anchored.of(cfg, logprob, oldLogprob, advantages, mask, seqIds);
            rc = ArborCpu.arbor_cpu_policy_loss(params, rows, logprob, entropy, an.old(), an.adv(), mask, weights,
                    refLogprob(cfg, refLogprob), cfg.selectsByEntropy() ? sel : null, gradLogprobOut, gradEntropyOut,
                    sums, 0L, 0L, Kernels.threads());
        }
        Kernels.check(rc, "policy loss");
        return PolicyLossResult.fromSums(cfg, sums, counts[PolicyLossResult.C_NORMALIZER], thr);
    }

    /**
     * GSPO's per-sequence pre-pass (docs/algorithms.md §8; verl {@code compute_policy_loss_gspo}): for each
     * valid row t of sequence i, {@code oldOut[t] = logprob[t] − mean_i}, mean_i = Σ_{u∈i} m_u·(lp_u − old_u)
     * / max(Σ_{u∈i} m_u, 1) (unclamped δ, verl's {@code clamp(min=1)} of the length), so that the kernel's
     * lp − old is the sequence's mean log-ratio in value with gradient 1 w.r.t. the token's own log-prob
     * (the token form s_{i,t} = sg(s_i)·π/sg(π)). For {@link ClipMode#GSPO_SEQUENCE} also
     * {@code advOut[t] = Σ_{u∈i} m_u A_u / Σ_{u∈i} m_u} (the sequence's advantage); for the token form
     * {@code advOut} gets the advantages unchanged. Masked rows are copied unchanged (not read by the
     * kernels). Sums in double.
     *
     * @param logprob the current policy's log-probs (of the same logits the kernel then reads)
     * @param seqIds  row → sequence index in [0, rows) on every valid row
     */
    public static void gspoAnchor(ClipMode mode, float[] logprob, float[] oldLogprob, float[] advantages, float[] mask,
                                  int[] seqIds, float[] oldOut, float[] advOut) {
        Check.notNull("mode", mode);
        if (!mode.isGspo()) throw new IllegalArgumentException("gspoAnchor is GSPO's pre-pass, not " + mode + "'s");
        Check.notNull("logprob", logprob);
        int rows = logprob.length;
        for (Object[] a : new Object[][] {{"oldLogprob", oldLogprob}, {"advantages", advantages}, {"mask", mask},
                {"oldOut", oldOut}, {"advOut", advOut}})
            Check.length((String) a[0], (float[]) a[1], rows);
        Check.notNull("seqIds (GSPO averages over sequences)", seqIds);
        Check.length("seqIds", seqIds, rows);
        double[] sd = new double[rows], sm = new double[rows], sa = new double[rows];
        for (int r = 0; r < rows; r++) {
            float m = mask[r];
            if (!(m > 0)) continue;
            int id = seqIds[r];
            if (id < 0 || id >= rows)
                throw new IllegalArgumentException("seqIds[" + r + "] = " + id + " on a valid row is outside [0, rows = " + rows + ")");
            sd[id] += (double) m * ((double) logprob[r] - oldLogprob[r]);
            sm[id] += m;
            sa[id] += (double) m * advantages[r];
        }
        boolean seqForm = mode == ClipMode.GSPO_SEQUENCE;
        for (int r = 0; r < rows; r++) {
            if (!(mask[r] > 0)) {
                oldOut[r] = oldLogprob[r];
                advOut[r] = advantages[r];
                continue;
            }
            int id = seqIds[r];
            oldOut[r] = (float) (logprob[r] - sd[id] / Math.max(sm[id], 1.0));
            advOut[r] = seqForm ? (float) (sa[id] / sm[id]) : advantages[r];
        }
    }

    /** GSPO's inputs after the pre-pass (old anchors and, for the sequence form, sequence advantages). */
    private record Anchored(float[] old, float[] adv) {
        static Anchored of(PolicyLossConfig cfg, float[] lp, float[] old, float[] adv, float[] mask, int[] seqIds) {
            if (!cfg.clipMode().isGspo()) return new Anchored(old, adv);
            float[] o = new float[lp.length], a = new float[lp.length];
            gspoAnchor(cfg.clipMode(), lp, old, adv, mask, seqIds, o, a);
            return new Anchored(o, a);
        }
    }

    /** The memory forms do not run GSPO's pre-pass (it needs the log-probs on the host). */
    private static void noGspoInMemory(PolicyLossConfig cfg) {
        if (cfg.clipMode().isGspo())
            throw new IllegalArgumentException(cfg.clipMode() + " through memory: compute the anchors with gspoAnchor and "
                    + "call the stages (forwardBackwardAsync / lossAsync) with them, or use the array forms or TorchPolicyLoss");
    }

    /**
     * AEPO's entropy threshold for the top fraction {@code q} of valid tokens: the ⌈q·N⌉-th largest
     * {@code entropy[t]} among the N rows with {@code mask[t] > 0}. Tokens with entropy ≥ the
     * threshold are selected (ties included, so slightly more than ⌈q·N⌉ may be). q = 1 (or no valid
     * token) gives −∞: every token.
     */
    public static float aepoEntropyThreshold(double q, float[] entropy, float[] mask) {
        if (!(q > 0 && q <= 1)) throw new IllegalArgumentException("q must be in (0, 1], got " + q);
        Check.notNull("entropy", entropy);
        Check.length("mask", mask, entropy.length);
        if (q == 1) return Float.NEGATIVE_INFINITY;
        float[] v = new float[entropy.length];
        int n = 0;
        for (int i = 0; i < entropy.length; i++) if (mask[i] > 0) v[n++] = entropy[i];
        if (n == 0) return Float.NEGATIVE_INFINITY;
        Arrays.sort(v, 0, n);
        int k = (int) Math.max(1, Math.min(n, Math.ceil(q * n - 1e-9)));
        return v[n - k];
    }

    /**
     * Bytes of workspace the memory forms need for {@code rows} rows and sequence ids in
     * [0, numSeqs): the native kernels' scratch plus per-row weights and selection entropies and the
     * sums — O(rows + numSeqs), nothing of size [rows, vocab].
     */
    public static long workspaceBytes(long rows, long numSeqs) {
        Check.nonNegative("rows", rows);
        Check.nonNegative("numSeqs", numSeqs);
        long nb = ArborCpu.arbor_policy_loss_workspace_bytes(rows, numSeqs);
        if (nb < 0) throw new IllegalArgumentException("workspace for rows " + rows + ", numSeqs " + numSeqs + " overflows");
        return Layout.of(nb, rows).total;
    }

    // ---------------------------------------------------------------------------------------------
    // Memory (host or CUDA), no copy
    // ---------------------------------------------------------------------------------------------

    /**
     * Per-row inputs in memory, all on the logits' device.
     *
     * @param labels        {@code rows} labels of {@code labelType} (I32 or I64); not read by {@link #loss}
     * @param oldLogprob    {@code rows} fp32
     * @param advantages    {@code rows} fp32
     * @param mask          {@code rows} fp32 in [0, 1]
     * @param refLogprob    {@code rows} fp32, or null when the KL type is NONE
     * @param seqIds        {@code rows} int32 sequence indices in [0, numSeqs), or null for token-mean
     * @param numSeqs       bound of the sequence indices (e.g. the batch size, or rows); 0 without seqIds
     * @param selectEntropy {@code rows} fp32 entropies for AEPO's selection (q &lt; 1), or null
     */
    public record Inputs(MemRef labels, DType labelType, MemRef oldLogprob, MemRef advantages, MemRef mask,
                         MemRef refLogprob, MemRef seqIds, long numSeqs, MemRef selectEntropy) {
        public Inputs {
            Check.nonNegative("numSeqs", numSeqs);
        }

        /** Inputs without sequence ids or selection entropies (token-mean). */
        public static Inputs of(MemRef labels, DType labelType, MemRef oldLogprob, MemRef advantages, MemRef mask,
                                MemRef refLogprob) {
            return new Inputs(labels, labelType, oldLogprob, advantages, mask, refLogprob, null, 0, null);
        }

        /** The rows [r0, r0 + n) of every per-row input (for row blocks of one batch). */
        public Inputs rows(long r0, long n) {
            return new Inputs(slice(labels, labelType == null ? 8 : labelType.bytes(), r0, n), labelType,
                    slice(oldLogprob, 4, r0, n), slice(advantages, 4, r0, n), slice(mask, 4, r0, n),
                    slice(refLogprob, 4, r0, n), slice(seqIds, 4, r0, n), numSeqs, slice(selectEntropy, 4, r0, n));
        }

        private static MemRef slice(MemRef m, long elem, long r0, long n) {
            return m == null ? null : m.slice(Check.product("row offset", r0, elem), Check.product("rows", n, elem));
        }
    }

    /** Optional per-row fp32 outputs ({@code rows} values each; any may be null). */
    public record RowOutputs(MemRef logprob, MemRef entropy, MemRef gradLogprob, MemRef gradEntropy) {
        /** The rows [r0, r0 + n). */
        public RowOutputs rows(long r0, long n) {
            return new RowOutputs(Inputs.slice(logprob, 4, r0, n), Inputs.slice(entropy, 4, r0, n),
                    Inputs.slice(gradLogprob, 4, r0, n), Inputs.slice(gradEntropy, 4, r0, n));
        }
    }

    /**
     * Fused forward + backward over logits in memory: writes ∂loss/∂logits into {@code gradLogits}, a
     * {@code [rows, vocab]} matrix of {@code gradType} (F32 or the logits' dtype) with row stride
     * {@code gradRowStride}; it may be the logits' own memory (same dtype and stride: in place).
     * Host memory runs on the CPU kernels ({@link Kernels#threads()} threads); CUDA memory on the
     * CUDA kernels on {@code cudaStream}. The call returns the result, so on CUDA it waits for the
     * stream (use the stages {@link #weights} and {@link #forwardBackwardAsync} to stay asynchronous).
     * Host inputs are scanned and validated; device inputs cannot be: there an invalid mask or
     * sequence id makes the loss NaN and a bad label a NaN row.
     *
     * @param rowOut    optional per-row outputs, or null
     * @param workspace {@link #workspaceBytes} bytes on the logits' device, 8-byte aligned, or null to
     *                  allocate one for the call
     */
    public static PolicyLossResult forwardBackward(PolicyLossConfig cfg, LogitsView logits, Inputs in,
                                                   MemRef gradLogits, DType gradType, long gradRowStride,
                                                   RowOutputs rowOut, MemRef workspace, long cudaStream) {
        Check.notNull("cfg", cfg);
        Check.notNull("logits", logits);
        Check.notNull("in", in);
        Check.live("logits", logits.data());
        noGspoInMemory(cfg);
        long rows = logits.rows();
        Device dev = logits.device();
        long ns = cfg.agg().needsSequences() ? in.numSeqs() : 0;
        checkNumSeqs(cfg, rows, ns);  // before the workspace is sized by it
        Check.sameDevice(dev, new String[] {"mask", "gradLogits", "workspace"}, in.mask(), gradLogits, workspace);  // before it is allocated
        try (Scratch ws = Scratch.of(workspace, rows, ns, dev)) {
            Layout l = ws.layout;
            weights(cfg, rows, in.mask(), in.seqIds(), ns, ws.at(l.weights, 4 * rows), ws.at(l.counts, 32), ws.ref,
                    cudaStream);
            float thr = Float.NEGATIVE_INFINITY;
            MemRef sel = in.selectEntropy();
            if (cfg.selectsByEntropy()) {
                if (sel == null) {  // the extra statistics pass (entropy only)
                    sel = ws.at(l.sel, 4 * rows);
                    TokenStats.forward(logits, null, null, (float) cfg.temperature(), null, null, sel, null, cudaStream);
                }
                thr = aepoEntropyThreshold(cfg.aepoTopEntropyFraction(),
                        readFloats(in.selectEntropy() != null ? "selectEntropy" : "entropy", sel, rows, cudaStream),
                        readFloats("mask", in.mask(), rows, cudaStream));
            }
            Inputs inSel = new Inputs(in.labels(), in.labelType(), in.oldLogprob(), in.advantages(), in.mask(),
                    in.refLogprob(), in.seqIds(), in.numSeqs(), sel);
            forwardBackwardAsync(cfg, thr, logits, inSel, ws.at(l.weights, 4 * rows), gradLogits, gradType,
                    gradRowStride, rowOut, ws.at(l.sums, 72), ws.ref, cudaStream);
            return ws.result(cfg, thr, cudaStream);
        }
    }

    /**
     * The O(T) loss over per-row values in memory (host or CUDA; see {@link #loss(PolicyLossConfig,
     * float[], float[], float[], float[], float[], float[], int[], float[], float[], float[])}).
     * {@code in.labels} is not read. Returns after the work is done (CUDA: waits for the stream).
     */
    public static PolicyLossResult loss(PolicyLossConfig cfg, long rows, MemRef logprob, MemRef entropy, Inputs in,
                                        MemRef gradLogprob, MemRef gradEntropy, MemRef workspace, long cudaStream) {
        Check.notNull("cfg", cfg);
        Check.notNull("in", in);
        Check.notNull("logprob", logprob);
        Check.nonNegative("rows", rows);
        noGspoInMemory(cfg);
        Device dev = logprob.device();
        long ns = cfg.agg().needsSequences() ? in.numSeqs() : 0;
        checkNumSeqs(cfg, rows, ns);  // before the workspace is sized by it
        Check.sameDevice(dev, "logprob", new String[] {"entropy", "oldLogprob", "advantages", "mask", "gradLogprob", "gradEntropy",
                "workspace"}, entropy, in.oldLogprob(), in.advantages(), in.mask(), gradLogprob, gradEntropy, workspace);
        try (Scratch ws = Scratch.of(workspace, rows, ns, dev)) {
            Layout l = ws.layout;
            weights(cfg, rows, in.mask(), in.seqIds(), ns, ws.at(l.weights, 4 * rows), ws.at(l.counts, 32), ws.ref,
                    cudaStream);
            float thr = Float.NEGATIVE_INFINITY;
            if (cfg.selectsByEntropy()) {
                MemRef sel = in.selectEntropy() != null ? in.selectEntropy() : entropy;
                if (sel == null)
                    throw new IllegalArgumentException("AEPO with aepoTopEntropyFraction " + cfg.aepoTopEntropyFraction()
                            + " < 1 needs entropy or selectEntropy");
                thr = aepoEntropyThreshold(cfg.aepoTopEntropyFraction(),
                        readFloats(in.selectEntropy() != null ? "selectEntropy" : "entropy", sel, rows, cudaStream),
                        readFloats("mask", in.mask(), rows, cudaStream));
            }
            lossAsync(cfg, thr, rows, logprob, entropy, in, ws.at(l.weights, 4 * rows), gradLogprob, gradEntropy,
                    ws.at(l.sums, 72), ws.ref, cudaStream);
            return ws.result(cfg, thr, cudaStream);
        }
    }

    // ---- stages (asynchronous on CUDA; the caller owns every buffer) ------------------------------

    /**
     * Stage 1, O(T): the aggregation weights w_t of {@link LossAgg} into {@code weightsOut} ({@code rows}
     * fp32) and the batch counts into {@code countsOut} (4 fp64: N = Σ m, B, F, the normalizer used).
     * Compute them once per batch, over all its rows, before the loss stages of its row blocks.
     *
     * @param seqIds    {@code rows} int32 in [0, numSeqs) (required by the SEQ_MEAN modes, else ignored)
     * @param workspace at least {@link #workspaceBytes}{@code (rows, numSeqs)} bytes, 8-byte aligned;
     *                  may be null on the host
     */
    public static void weights(PolicyLossConfig cfg, long rows, MemRef mask, MemRef seqIds, long numSeqs,
                               MemRef weightsOut, MemRef countsOut, MemRef workspace, long cudaStream) {
        Check.notNull("cfg", cfg);
        Check.nonNegative("rows", rows);
        Check.fits("mask", mask, rows, DType.F32);
        Device dev = mask.device();
        boolean seq = cfg.agg().needsSequences();
        long ns = seq ? numSeqs : 0;
        if (seq) {
            if (seqIds == null) throw new IllegalArgumentException("seqIds are required for aggregation " + cfg.agg());
            Check.fits("seqIds", seqIds, rows, DType.I32);
        }
        checkNumSeqs(cfg, rows, ns);
        Check.fits("weightsOut", weightsOut, rows, DType.F32);
        Check.fits("countsOut", countsOut, PolicyLossResult.NUM_COUNTS, DType.I64);
        long need = nativeWorkspace(rows, ns);
        checkWorkspace(workspace, need, dev);
        Check.sameDevice(dev, new String[] {"seqIds", "weightsOut", "countsOut"}, seq ? seqIds : null, weightsOut, countsOut);
        Check.overlaps().in("mask", mask, rows, DType.F32).in("seqIds", seq ? seqIds : null, rows, DType.I32)
                .out("weightsOut", weightsOut, rows, DType.F32).out("countsOut", countsOut, PolicyLossResult.NUM_COUNTS, DType.I64)
                .outBytes("workspace", workspace, need).check();
        if (!dev.isCuda() && rows > 0) {  // host: scan the values, naming the first bad one
            int n = Math.toIntExact(rows);
            ByteBuffer m = host(mask, 4L * n), ids = seq ? host(seqIds, 4L * n) : null;
            for (int r = 0; r < n; r++) {
                float v = m.getFloat(4 * r);
                if (!(v >= 0 && v <= 1))
                    throw new IllegalArgumentException("mask[" + r + "] = " + v + " is not a finite value in [0, 1]");
                if (ids != null) {
                    int id = ids.getInt(4 * r);
                    if (id >= numSeqs || (id < 0 && v > 0))
                        throw new IllegalArgumentException("seqIds[" + r + "] = " + id + " (mask " + v
                                + ") is outside [0, numSeqs = " + numSeqs + ")");
                }
            }
        }
        long mk = mask.address(), ids = seq ? seqIds.address() : 0L, w = weightsOut.address(), c = countsOut.address();
        long wsa = addr(workspace), wsb = workspace == null ? 0 : workspace.bytes();
        int agg = cfg.agg().code();
        double norm = cfg.aggNormalizer();
        int rc = dev.isCuda()
                ? Kernels.onCudaDevice(dev.index(), () -> ArborCuda.arbor_cuda_policy_loss_weights(mk, ids, rows, ns, agg,
                        norm, w, c, wsa, wsb, cudaStream))
                : ArborCpu.arbor_cpu_policy_loss_weights(mk, ids, rows, ns, agg, norm, w, c, wsa, wsb, Kernels.threads());
        Check.keepAlive(mask, seqIds, weightsOut, countsOut, workspace);
        Kernels.check(rc, "policy loss weights");
    }

    /**
     * Stage 2, fused: as {@link #forwardBackward(PolicyLossConfig, LogitsView, Inputs, MemRef, DType, long,
     * RowOutputs, MemRef, long)} for rows whose weights stage 1 computed, writing the 9 fp64 sums of
     * these rows into {@code sumsOut} ({@link PolicyLossResult#fromSums}; sums of row blocks add up).
     * Asynchronous on CUDA.
     *
     * @param aepoEntropyThreshold AEPO's selection threshold ({@link #aepoEntropyThreshold}; −∞ = all)
     * @param weights              {@code rows} fp32 weights of stage 1
     * @param workspace            at least {@link #workspaceBytes}{@code (rows, 0)} bytes; may be null on the host
     */
    public static void forwardBackwardAsync(PolicyLossConfig cfg, float aepoEntropyThreshold, LogitsView logits,
                                            Inputs in, MemRef weights, MemRef gradLogits, DType gradType,
                                            long gradRowStride, RowOutputs rowOut, MemRef sumsOut, MemRef workspace,
                                            long cudaStream) {
        Check.notNull("cfg", cfg);
        Check.notNull("logits", logits);
        Check.notNull("in", in);
        Check.live("logits", logits.data());
        long rows = logits.rows();
        Device dev = logits.device();
        checkStageInputs(cfg, aepoEntropyThreshold, in, rows, dev, logits.vocabLimit(), weights, sumsOut, workspace);
        Check.notNull("gradType", gradType);
        if (gradType != DType.F32 && gradType != logits.dtype())
            throw new IllegalArgumentException("gradType must be F32 or the logits' dtype " + logits.dtype() + ", got " + gradType);
        if (gradRowStride < logits.vocab())
            throw new IllegalArgumentException("gradRowStride must be >= vocab (" + logits.vocab() + "), got " + gradRowStride);
        Check.fits("gradLogits", gradLogits, LogitsView.elements(rows, logits.vocab(), gradRowStride), gradType);
        if (gradLogits.address() == logits.data().address()
                && (gradType != logits.dtype() || gradRowStride != logits.rowStride()))
            throw new IllegalArgumentException("in-place gradient must have the logits' dtype and row stride");
        RowOutputs ro = checkRowOutputs(rowOut, rows, dev);
        Check.sameDevice(dev, new String[] {"gradLogits"}, gradLogits);
        stageOverlaps(cfg, in, rows, true, weights, sumsOut, workspace).in("logits", logits)
                .outMatrix("gradLogits", gradLogits, rows, logits.vocab(), gradRowStride, gradType, "logits")
                .out("rowOut.logprob", ro.logprob(), rows, DType.F32).out("rowOut.entropy", ro.entropy(), rows, DType.F32)
                .out("rowOut.gradLogprob", ro.gradLogprob(), rows, DType.F32)
                .out("rowOut.gradEntropy", ro.gradEntropy(), rows, DType.F32).check();
        long x = logits.data().address(), v = logits.vocab(), s = logits.rowStride(), vl = logits.vocabLimit();
        long lab = in.labels().address();
        int lt = in.labelType().code();
        long old = in.oldLogprob().address(), adv = in.advantages().address(), m = in.mask().address();
        long w = weights.address(), ref = cfg.klType() == KlType.NONE ? 0L : addr(in.refLogprob());
        long sel = cfg.selectsByEntropy() ? addr(in.selectEntropy()) : 0L;
        long lp = addr(ro.logprob()), h = addr(ro.entropy()), glp = addr(ro.gradLogprob()), gh = addr(ro.gradEntropy());
        long g = gradLogits.address(), sums = sumsOut.address();
        long wsa = addr(workspace), wsb = workspace == null ? 0 : workspace.bytes();
        int gt = gradType.code();
        int rc;
        try (ArborCpu.PolicyLossParams p = cfg.params(aepoEntropyThreshold)) {
            if (dev.isCuda()) {
                rc = Kernels.onCudaDevice(dev.index(), () -> switch (logits.dtype()) {
                    case F32 -> ArborCuda.arbor_cuda_policy_loss_fused_f32(p, x, rows, v, s, vl, lab, lt, old, adv, m, w, ref, sel, lp, h, glp, gh, g, gt, gradRowStride, sums, wsa, wsb, cudaStream);
                    case BF16 -> ArborCuda.arbor_cuda_policy_loss_fused_bf16(p, x, rows, v, s, vl, lab, lt, old, adv, m, w, ref, sel, lp, h, glp, gh, g, gt, gradRowStride, sums, wsa, wsb, cudaStream);
                    default -> ArborCuda.arbor_cuda_policy_loss_fused_f16(p, x, rows, v, s, vl, lab, lt, old, adv, m, w, ref, sel, lp, h, glp, gh, g, gt, gradRowStride, sums, wsa, wsb, cudaStream);
                });
            } else {
                int t = Kernels.threads();
                rc = switch (logits.dtype()) {
                    case F32 -> ArborCpu.arbor_cpu_policy_loss_fused_f32(p, x, rows, v, s, vl, lab, lt, old, adv, m, w, ref, sel, lp, h, glp, gh, g, gt, gradRowStride, sums, wsa, wsb, t);
                    case BF16 -> ArborCpu.arbor_cpu_policy_loss_fused_bf16(p, x, rows, v, s, vl, lab, lt, old, adv, m, w, ref, sel, lp, h, glp, gh, g, gt, gradRowStride, sums, wsa, wsb, t);
                    default -> ArborCpu.arbor_cpu_policy_loss_fused_f16(p, x, rows, v, s, vl, lab, lt, old, adv, m, w, ref, sel, lp, h, glp, gh, g, gt, gradRowStride, sums, wsa, wsb, t);
                };
            }
        }
        Check.keepAlive(logits, in, weights, gradLogits, ro, sumsOut, workspace);
        Kernels.check(rc, "policy loss (fused)");
    }

    /**
     * Stage 2, composable: the O(T) loss over per-row log-probs and entropies (see
     * {@link #loss(PolicyLossConfig, long, MemRef, MemRef, Inputs, MemRef, MemRef, MemRef, long)}), writing
     * the per-row upstream gradients and the 9 fp64 sums into {@code sumsOut}. Asynchronous on CUDA.
     */
    public static void lossAsync(PolicyLossConfig cfg, float aepoEntropyThreshold, long rows, MemRef logprob,
                                 MemRef entropy, Inputs in, MemRef weights, MemRef gradLogprob, MemRef gradEntropy,
                                 MemRef sumsOut, MemRef workspace, long cudaStream) {
        Check.notNull("cfg", cfg);
        Check.notNull("in", in);
        Check.nonNegative("rows", rows);
        Check.fits("logprob", logprob, rows, DType.F32);
        Device dev = logprob.device();
        checkStageInputs(cfg, aepoEntropyThreshold, in, rows, dev, 0, weights, sumsOut, workspace);
        Check.fitsOrNull("entropy", entropy, rows, DType.F32);
        Check.fitsOrNull("gradLogprob", gradLogprob, rows, DType.F32);
        Check.fitsOrNull("gradEntropy", gradEntropy, rows, DType.F32);
        Check.sameDevice(dev, "logprob", new String[] {"entropy", "gradLogprob", "gradEntropy"}, entropy, gradLogprob, gradEntropy);
        stageOverlaps(cfg, in, rows, false, weights, sumsOut, workspace).in("logprob", logprob, rows, DType.F32)
                .in("entropy", entropy, rows, DType.F32).out("gradLogprob", gradLogprob, rows, DType.F32)
                .out("gradEntropy", gradEntropy, rows, DType.F32).check();
        if (entropy == null && cfg.entropyCoef() != 0)
            throw new IllegalArgumentException("entropy is required when entropyCoef != 0 (got " + cfg.entropyCoef() + ")");
        if (cfg.selectsByEntropy() && in.selectEntropy() == null && entropy == null)
            throw new IllegalArgumentException("AEPO with aepoTopEntropyFraction " + cfg.aepoTopEntropyFraction()
                    + " < 1 needs entropy or selectEntropy");
        long lp = logprob.address(), h = addr(entropy), old = in.oldLogprob().address();
        long adv = in.advantages().address(), m = in.mask().address(), w = weights.address();
        long ref = cfg.klType() == KlType.NONE ? 0L : addr(in.refLogprob());
        long sel = cfg.selectsByEntropy() ? addr(in.selectEntropy()) : 0L;
        long glp = addr(gradLogprob), gh = addr(gradEntropy), sums = sumsOut.address();
        long wsa = addr(workspace), wsb = workspace == null ? 0 : workspace.bytes();
        int rc;
        try (ArborCpu.PolicyLossParams p = cfg.params(aepoEntropyThreshold)) {
            if (dev.isCuda())
                rc = Kernels.onCudaDevice(dev.index(), () -> ArborCuda.arbor_cuda_policy_loss(p, rows, lp, h, old, adv, m, w,
                        ref, sel, glp, gh, sums, wsa, wsb, cudaStream));
            else
                rc = ArborCpu.arbor_cpu_policy_loss(p, rows, lp, h, old, adv, m, w, ref, sel, glp, gh, sums, wsa, wsb,
                        Kernels.threads());
        }
        Check.keepAlive(logprob, entropy, in, weights, gradLogprob, gradEntropy, sumsOut, workspace);
        Kernels.check(rc, "policy loss");
    }

    // ---------------------------------------------------------------------------------------------
    // Validation and helpers
    // ---------------------------------------------------------------------------------------------

    /** Per-row weights and the boolean row mask of an array call. */
    record Prepared(float[] weights, double[] counts, boolean[] rowMask) {}

    private static Prepared prepareArrays(PolicyLossConfig cfg, float[] logits, int rows, int vocab, int vocabLimit,
                                          int[] labels, float[] oldLogprob, float[] advantages, float[] mask,
                                          float[] refLogprob, int[] seqIds, float[] selectEntropy, float[] gradLogitsOut) {
        Check.notNull("cfg", cfg);
        Check.nonNegative("rows", rows);
        Check.positive("vocab", vocab);
        if (vocabLimit < 1 || vocabLimit > vocab)
            throw new IllegalArgumentException("vocabLimit must be in [1, " + vocab + "], got " + vocabLimit);
        int n = Check.arrayProduct("rows * vocab", rows, vocab);
        Check.length("logits", logits, n);
        Check.length("gradLogitsOut", gradLogitsOut, n);
        // in place over the logits is allowed; the per-row inputs are read while the gradient is written
        String[] names = {"oldLogprob", "advantages", "mask", "refLogprob", "selectEntropy"};
        float[][] ins = {oldLogprob, advantages, mask, refLogprob, selectEntropy};
        for (int i = 0; i < ins.length; i++) Check.notSame("gradLogitsOut", gradLogitsOut, names[i], ins[i]);
        return prepareRows(cfg, rows, vocabLimit, labels, oldLogprob, advantages, mask, refLogprob, seqIds, selectEntropy);
    }

    /** Validates the per-row arrays of a loss call (values included) and computes the weights (also FusedLinear). */
    static Prepared prepareRows(PolicyLossConfig cfg, int rows, int vocabLimit, int[] labels, float[] oldLogprob,
                                float[] advantages, float[] mask, float[] refLogprob, int[] seqIds,
                                float[] selectEntropy) {
        int numSeqs = checkRowInputs(cfg, rows, oldLogprob, advantages, mask, refLogprob, seqIds);
        Check.length("labels", labels, rows);
        boolean[] rowMask = new boolean[rows];
        for (int r = 0; r < rows; r++) rowMask[r] = mask[r] > 0;
        Check.labels("labels", labels, rowMask, vocabLimit);
        Check.lengthOrNull("selectEntropy", selectEntropy, rows);
        float[] weights = new float[rows];
        double[] counts = weights(cfg, rows, mask, seqIds, numSeqs, weights);
        return new Prepared(weights, counts, rowMask);
    }

    /** Validates the per-row arrays; returns the number of sequences (max id + 1, at least 1; 0 without seqIds). */
    private static int checkRowInputs(PolicyLossConfig cfg, int rows, float[] oldLogprob, float[] advantages,
                                      float[] mask, float[] refLogprob, int[] seqIds) {
        Check.length("oldLogprob", oldLogprob, rows);
        Check.length("advantages", advantages, rows);
        Check.length("mask", mask, rows);
        for (int r = 0; r < rows; r++)
            if (!(mask[r] >= 0 && mask[r] <= 1))
                throw new IllegalArgumentException("mask[" + r + "] = " + mask[r] + " is not a finite value in [0, 1]");
        if (cfg.klType() != KlType.NONE) {
            if (refLogprob == null)
                throw new IllegalArgumentException("refLogprob is required for KL type " + cfg.klType());
            Check.length("refLogprob", refLogprob, rows);
        }
        for (int r = 0; r < rows; r++) {
            if (!(mask[r] > 0)) continue;
            if (!Float.isFinite(oldLogprob[r]))
                throw new IllegalArgumentException("oldLogprob[" + r + "] = " + oldLogprob[r] + " is not finite (valid row)");
            if (!Float.isFinite(advantages[r]))
                throw new IllegalArgumentException("advantages[" + r + "] = " + advantages[r] + " is not finite (valid row)");
            if (cfg.klType() != KlType.NONE && !Float.isFinite(refLogprob[r]))
                throw new IllegalArgumentException("refLogprob[" + r + "] = " + refLogprob[r] + " is not finite (valid row)");
        }
        if (!cfg.agg().needsSequences()) return 0;
        if (seqIds == null) throw new IllegalArgumentException("seqIds are required for aggregation " + cfg.agg());
        Check.length("seqIds", seqIds, rows);
        int max = -1;
        for (int r = 0; r < rows; r++) {
            int id = seqIds[r];
            if (id >= rows)
                throw new IllegalArgumentException("seqIds[" + r + "] = " + id + " is outside [0, rows = " + rows
                        + "): sequence ids are indices");
            if (id < 0 && mask[r] > 0)
                throw new IllegalArgumentException("seqIds[" + r + "] = " + id + " on a valid row (mask " + mask[r]
                        + "): every trained token needs a sequence index in [0, " + rows + ")");
            max = Math.max(max, id);
        }
        return Math.max(1, max + 1);  // at least 1: the kernels size their per-sequence arrays by it
    }

    static float[] refLogprob(PolicyLossConfig cfg, float[] ref) {
        return cfg.klType() == KlType.NONE ? null : ref;
    }

    private static double[] weights(PolicyLossConfig cfg, int rows, float[] mask, int[] seqIds, int numSeqs,
                                    float[] weightsOut) {
        double[] counts = new double[PolicyLossResult.NUM_COUNTS];
        boolean seq = cfg.agg().needsSequences();
        int rc = ArborCpu.arbor_cpu_policy_loss_weights(mask, seq ? seqIds : null, rows, seq ? numSeqs : 0,
                cfg.agg().code(), cfg.aggNormalizer(), weightsOut, counts, 0L, 0L, Kernels.threads());
        Kernels.check(rc, "policy loss weights");
        return counts;
    }

    /** Validates a stage's per-row memory (sizes, devices; on the host also the values). */
    static void checkStageInputs(PolicyLossConfig cfg, float thr, Inputs in, long rows, Device dev,
                                         long vocabLimit, MemRef weights, MemRef sumsOut, MemRef workspace) {
        if (Float.isNaN(thr)) throw new IllegalArgumentException("aepoEntropyThreshold must not be NaN");
        boolean needLabels = vocabLimit > 0;
        if (needLabels) {
            if (in.labelType() != DType.I32 && in.labelType() != DType.I64)
                throw new IllegalArgumentException("labelType must be I32 or I64, got " + in.labelType());
            Check.fits("labels", in.labels(), rows, in.labelType());
        }
        Check.fits("oldLogprob", in.oldLogprob(), rows, DType.F32);
        Check.fits("advantages", in.advantages(), rows, DType.F32);
        Check.fits("mask", in.mask(), rows, DType.F32);
        Check.fits("weights", weights, rows, DType.F32);
        Check.fits("sumsOut", sumsOut, PolicyLossResult.NUM_SUMS, DType.I64);
        boolean kl = cfg.klType() != KlType.NONE;
        if (kl) {
            if (in.refLogprob() == null)
                throw new IllegalArgumentException("refLogprob is required for KL type " + cfg.klType());
            Check.fits("refLogprob", in.refLogprob(), rows, DType.F32);
        }
        boolean sel = cfg.selectsByEntropy();
        if (sel) Check.fitsOrNull("selectEntropy", in.selectEntropy(), rows, DType.F32);
        checkWorkspace(workspace, nativeWorkspace(rows, 0), dev);
        Check.sameDevice(dev, new String[] {"labels", "oldLogprob", "advantages", "mask", "refLogprob", "selectEntropy",
                "weights", "sumsOut"}, needLabels ? in.labels() : null, in.oldLogprob(), in.advantages(), in.mask(),
                kl ? in.refLogprob() : null, sel ? in.selectEntropy() : null, weights, sumsOut);
        if (dev.isCuda() || rows == 0) return;
        // Host memory: scan the values like the array forms do.
        int n = Math.toIntExact(rows);
        ByteBuffer mask = host(in.mask(), 4L * n), old = host(in.oldLogprob(), 4L * n), adv = host(in.advantages(), 4L * n);
        ByteBuffer ref = kl ? host(in.refLogprob(), 4L * n) : null;
        ByteBuffer lab = needLabels ? host(in.labels(), (long) in.labelType().bytes() * n) : null;
        for (int r = 0; r < n; r++) {
            float m = mask.getFloat(4 * r);
            if (!(m >= 0 && m <= 1))
                throw new IllegalArgumentException("mask[" + r + "] = " + m + " is not a finite value in [0, 1]");
            if (!(m > 0)) continue;
            if (lab != null) {
                long y = in.labelType() == DType.I32 ? lab.getInt(4 * r) : lab.getLong(8 * r);
                if (y < 0 || y >= vocabLimit)
                    throw new IllegalArgumentException("labels[" + r + "] = " + y + " is outside [0, " + vocabLimit + ")");
            }
            float o = old.getFloat(4 * r), a = adv.getFloat(4 * r);
            if (!Float.isFinite(o)) throw new IllegalArgumentException("oldLogprob[" + r + "] = " + o + " is not finite (valid row)");
            if (!Float.isFinite(a)) throw new IllegalArgumentException("advantages[" + r + "] = " + a + " is not finite (valid row)");
            if (ref != null && !Float.isFinite(ref.getFloat(4 * r)))
                throw new IllegalArgumentException("refLogprob[" + r + "] = " + ref.getFloat(4 * r) + " is not finite (valid row)");
        }
        Check.keepAlive(in);
    }

    /** numSeqs of a sequence-mean aggregation is in [1, max(1, rows)] (ids are row indices at most). */
    static void checkNumSeqs(PolicyLossConfig cfg, long rows, long ns) {
        if (cfg.agg().needsSequences() && (ns < 1 || ns > Math.max(1, rows)))
            throw new IllegalArgumentException("numSeqs must be in [1, rows = " + rows + "], got " + ns);
    }

    /** The per-row inputs, weights, sums and the kernel's workspace of a loss stage, for the overlap check. */
    static Check.Overlaps stageOverlaps(PolicyLossConfig cfg, Inputs in, long rows, boolean labels, MemRef weights,
                                                MemRef sumsOut, MemRef workspace) {
        return Check.overlaps().in("labels", labels ? in.labels() : null, rows, labels ? in.labelType() : DType.U8)
                .in("oldLogprob", in.oldLogprob(), rows, DType.F32).in("advantages", in.advantages(), rows, DType.F32)
                .in("mask", in.mask(), rows, DType.F32).in("weights", weights, rows, DType.F32)
                .in("refLogprob", cfg.klType() != KlType.NONE ? in.refLogprob() : null, rows, DType.F32)
                .in("selectEntropy", cfg.selectsByEntropy() ? in.selectEntropy() : null, rows, DType.F32)
                .out("sumsOut", sumsOut, PolicyLossResult.NUM_SUMS, DType.I64)
                .outBytes("workspace", workspace, nativeWorkspace(rows, 0));
    }

    private static RowOutputs checkRowOutputs(RowOutputs rowOut, long rows, Device dev) {
        RowOutputs ro = rowOut == null ? new RowOutputs(null, null, null, null) : rowOut;
        Check.fitsOrNull("rowOut.logprob", ro.logprob(), rows, DType.F32);
        Check.fitsOrNull("rowOut.entropy", ro.entropy(), rows, DType.F32);
        Check.fitsOrNull("rowOut.gradLogprob", ro.gradLogprob(), rows, DType.F32);
        Check.fitsOrNull("rowOut.gradEntropy", ro.gradEntropy(), rows, DType.F32);
        Check.sameDevice(dev, new String[] {"rowOut.logprob", "rowOut.entropy", "rowOut.gradLogprob", "rowOut.gradEntropy"},
                ro.logprob(), ro.entropy(), ro.gradLogprob(), ro.gradEntropy());
        return ro;
    }

    private static long nativeWorkspace(long rows, long numSeqs) {
        long nb = ArborCpu.arbor_policy_loss_workspace_bytes(rows, numSeqs);
        if (nb < 0) throw new IllegalArgumentException("workspace for rows " + rows + ", numSeqs " + numSeqs + " overflows");
        return nb;
    }

    /** A stage's workspace: null on the host (the kernel allocates), else large enough, aligned, on the device. */
    private static void checkWorkspace(MemRef workspace, long need, Device dev) {
        if (workspace == null) {
            if (dev.isCuda()) throw new IllegalArgumentException("a workspace is required on " + dev);
            return;
        }
        if (!workspace.device().equals(dev))
            throw new IllegalArgumentException("workspace is on " + workspace.device() + " but the data is on " + dev);
        if (workspace.bytes() < need)
            throw new IllegalArgumentException("workspace needs " + need + " bytes but holds " + workspace.bytes());
        if (workspace.address() % 8 != 0)
            throw new IllegalArgumentException("workspace must be 8-byte aligned, address " + workspace.address());
        Check.live("workspace", workspace);
    }

    /** A view of host memory (the memory stays owned by {@code ref}'s owner). */
    private static ByteBuffer host(MemRef ref, long bytes) {
        return hostBytes(ref.address(), bytes);
    }

    private static ByteBuffer hostBytes(long start, long size) {
        if (size == 0) return ByteBuffer.allocate(0);
        // A pointer object over memory it does not own (nothing is freed when it is collected).
        return new BytePointer() {
            {
                address = start;
                limit = size;
                capacity = size;
            }
        }.asByteBuffer().order(ByteOrder.nativeOrder());
    }

    /** {@code n} floats of {@code ref} (host or device; a device read waits for the stream). */
    static float[] readFloats(String name, MemRef ref, long n, long stream) {
        float[] out = new float[Math.toIntExact(n)];
        if (n == 0) return out;
        Check.fits(name, ref, n, DType.F32);
        if (ref.device().isCuda()) {
            try (org.bytedeco.javacpp.FloatPointer h = new org.bytedeco.javacpp.FloatPointer(n)) {
                Kernels.onCudaDevice(ref.device().index(), () -> {
                    Kernels.check(ArborCuda.arbor_cuda_stream_synchronize(stream), "cudaStreamSynchronize");
                    Kernels.check(ArborCuda.arbor_cuda_memcpy_dtoh(h.address(), ref.address(), 4 * n), "cudaMemcpy");
                    return 0;
                });
                h.get(out);
            }
        } else {
            host(ref, 4 * n).asFloatBuffer().get(out);
        }
        Check.keepAlive(ref);
        return out;
    }

    /** Offsets in the convenience forms' workspace: [native][weights][sel][sums 9 f64][counts 4 f64]. */
    static final class Layout {
        long nativeBytes, weights, sel, sums, counts, total;

        static Layout of(long nativeBytes, long rows) {
            Layout l = new Layout();
            l.nativeBytes = nativeBytes;
            l.weights = align8(nativeBytes);
            l.sel = align8(l.weights + 4 * rows);
            l.sums = align8(l.sel + 4 * rows);
            l.counts = l.sums + 8L * PolicyLossResult.NUM_SUMS;
            l.total = l.counts + 8L * PolicyLossResult.NUM_COUNTS;
            return l;
        }

        private static long align8(long v) {
            return (v + 7) / 8 * 8;
        }
    }

    /** The workspace of one convenience call: the caller's, or one allocated (and freed) here. */
    static final class Scratch implements AutoCloseable {
        final MemRef ref;
        final Layout layout;
        final Device dev;
        private final AutoCloseable owned;

        private Scratch(MemRef ref, Layout layout, Device dev, AutoCloseable owned) {
            this.ref = ref;
            this.layout = layout;
            this.dev = dev;
            this.owned = owned;
        }

        static Scratch of(MemRef given, long rows, long ns, Device dev) {
            Check.nonNegative("rows", rows);
            Layout l = Layout.of(nativeWorkspace(rows, ns), rows);
            if (given != null) {
                if (!given.device().equals(dev))
                    throw new IllegalArgumentException("workspace is on " + given.device() + " but the logits are on " + dev);
                if (given.bytes() < l.total)
                    throw new IllegalArgumentException("workspace needs " + l.total + " bytes (workspaceBytes(" + rows + ", "
                            + ns + ")) but holds " + given.bytes());
                if (given.address() % 8 != 0)
                    throw new IllegalArgumentException("workspace must be 8-byte aligned, address " + given.address());
                return new Scratch(given.slice(0, l.total), l, dev, null);
            }
            if (dev.isCuda()) {
                CudaBuffer b = CudaBuffer.allocate(l.total, dev.index());
                return new Scratch(b.ref(), l, dev, b);
            }
            BytePointer p = new BytePointer(l.total);
            return new Scratch(MemRef.owned(p.address(), l.total, Device.CPU, p), l, dev, p);
        }

        MemRef at(long offset, long bytes) {
            return ref.slice(offset, bytes);
        }

        /** The result from the sums and counts in the workspace (a device read waits for the stream). */
        PolicyLossResult result(PolicyLossConfig cfg, float thr, long stream) {
            double[] v = readDoubles(at(layout.sums, 8L * (PolicyLossResult.NUM_SUMS + PolicyLossResult.NUM_COUNTS)),
                    PolicyLossResult.NUM_SUMS + PolicyLossResult.NUM_COUNTS, stream);
            double[] sums = Arrays.copyOf(v, PolicyLossResult.NUM_SUMS);
            return PolicyLossResult.fromSums(cfg, sums, v[PolicyLossResult.NUM_SUMS + PolicyLossResult.C_NORMALIZER], thr);
        }

        @Override
        public void close() {
            if (owned == null) return;
            try {
                owned.close();  // cudaFree waits for the device, so no kernel still uses the memory
            } catch (RuntimeException e) {
                throw e;
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }
    }

    /** {@code n} doubles of {@code ref} (host or device; a device read waits for the stream). */
    static double[] readDoubles(MemRef ref, int n, long stream) {
        double[] v = new double[n];
        if (ref.device().isCuda()) {
            try (org.bytedeco.javacpp.DoublePointer h = new org.bytedeco.javacpp.DoublePointer(n)) {
                Kernels.onCudaDevice(ref.device().index(), () -> {
                    Kernels.check(ArborCuda.arbor_cuda_stream_synchronize(stream), "cudaStreamSynchronize");
                    Kernels.check(ArborCuda.arbor_cuda_memcpy_dtoh(h.address(), ref.address(), 8L * n), "cudaMemcpy");
                    return 0;
                });
                h.get(v);
            }
        } else {
            host(ref, 8L * n).asDoubleBuffer().get(v);
        }
        Check.keepAlive(ref);
        return v;
    }
}
