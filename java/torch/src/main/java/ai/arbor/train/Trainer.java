package ai.arbor.train;

import ai.arbor.kernels.LossAgg;
import ai.arbor.kernels.PolicyLossConfig;
import ai.arbor.kernels.PolicyLossResult;
import ai.arbor.torch.TorchPolicyLoss;
import ai.arbor.torch.TorchTensors;
import ai.arbor.torch.TorchTokenStats;
import ai.arbor.torch.model.ReferencePolicy;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.AdamW;
import org.bytedeco.pytorch.AdamWOptions;
import org.bytedeco.pytorch.BoolOptional;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorArrayRefOptional;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;

/**
 * The optimisation side of training: one optimizer step of supervised fine-tuning or of a clipped
 * policy-gradient loss over a batch of {@link Sequence}s, micro-batched, through the fused kernels.
 *
 * <p>A step: the batch is split into micro-batches of at most {@code microBatchTokens} padded tokens
 * (longest first, so padding is small). Per micro-batch the policy computes logits only at the rows that
 * predict a trained token ({@link ReferencePolicy#forwardRows}: position p − 1 for a trained token at p),
 * a contiguous {@code [N, V]} matrix the kernels read in place; the kernel writes ∂loss/∂logits and
 * {@code logits.backward(grad)} accumulates the parameter gradients. The loss is normalized over the whole
 * batch (its token count, sequence count or length, per the aggregation), so the accumulated gradient is
 * that of one big batch. Then the global gradient norm is clipped, the learning rate set from the schedule,
 * and AdamW steps.
 *
 * <ul>
 *   <li>{@link #sftStep}: cross entropy −Σ log p(y)/N over the trained tokens, through the token-statistics
 *       kernel ({@link TorchTokenStats}: log-prob forward, then the backward with ∂L/∂logprob = −1/N).</li>
 *   <li>{@link #policyStep}: the clipped surrogate of a {@link PolicyLossConfig} (PPO, clip-higher, dual-clip,
 *       AEPO; KL; entropy bonus; aggregation) through the fused policy-loss kernel ({@link TorchPolicyLoss}).</li>
 *   <li>{@link #score}: log-probs and entropies under any policy without gradients (recomputed old
 *       log-probs, reference log-probs for the KL).</li>
 * </ul>
 *
 * <p>Not thread-safe; runs on the caller's thread. The policy may be on CUDA: inputs are built on the host
 * and moved to the policy's device.
 */
@SuppressWarnings("try")
public final class Trainer implements AutoCloseable {
    private final ReferencePolicy policy;
    private final OptimConfig optim;
    private final long totalSteps;
    private final int microBatchTokens;
    private final int vocabLimit;
    private final TensorVector params;
    private final AdamW opt;
    private long step;

    /** SFT step result: mean cross entropy (nats per trained token) before the update. */
    public record SftStats(double loss, long tokens, int sequences, double gradNorm, double lr, double seconds) {}

    /**
     * Policy step result.
     *
     * @param loss     the loss and its metrics over the batch (token-weighted over the micro-batches), before the update
     * @param gradNorm global gradient norm before clipping
     */
    public record PolicyStats(PolicyLossResult loss, int sequences, double gradNorm, double lr, double seconds) {}

    /** Per sequence, per position: log-prob and entropy of the token there (NaN where not trained). */
    public record Scores(List<float[]> logprobs, List<float[]> entropies) {}

    /**
     * @param totalSteps       optimizer steps planned (for the learning-rate schedule)
     * @param microBatchTokens most padded tokens (sequences × longest length) per forward
     * @param vocabLimit       ids from here on are embedding padding (never trained or sampled); the
     *                         tokenizer's vocabulary size
     */
    public Trainer(ReferencePolicy policy, OptimConfig optim, long totalSteps, int microBatchTokens, int vocabLimit) {
        if (policy == null || optim == null) throw new IllegalArgumentException("policy and optim are required");
        if (totalSteps < 1) throw new IllegalArgumentException("totalSteps must be >= 1, got " + totalSteps);
        if (microBatchTokens < 1) throw new IllegalArgumentException("microBatchTokens must be >= 1, got " + microBatchTokens);
        if (vocabLimit < 1 || vocabLimit > policy.config().vocab())
            throw new IllegalArgumentException("vocabLimit must be in [1, " + policy.config().vocab() + "], got " + vocabLimit);
        this.policy = policy;
        this.optim = optim;
        this.totalSteps = totalSteps;
        this.microBatchTokens = microBatchTokens;
        this.vocabLimit = vocabLimit;
        this.params = policy.parameters();
        AdamWOptions o = new AdamWOptions(optim.lrAt(0, totalSteps));
        o.weight_decay().put(optim.weightDecay());
        o.eps().put(optim.eps());
        this.opt = new AdamW(params, o);
    }

    public ReferencePolicy policy() {
        return policy;
    }

    /** Optimizer steps taken. */
    public long steps() {
        return step;
    }

    /** The learning rate the next step will use. */
    public double lr() {
        return optim.lrAt(step, totalSteps);
    }

    // ---------------------------------------------------------------------------------------------
    // SFT
    // ---------------------------------------------------------------------------------------------

    /** One optimizer step of cross entropy on the trained tokens of {@code batch}. */
    public SftStats sftStep(List<Sequence> batch) {
        long t0 = System.nanoTime();
        double loss = sftBackward(batch);
        double[] nl = optimizerStep();
        return new SftStats(loss, trainedTokens(batch), batch.size(), nl[0], nl[1], (System.nanoTime() - t0) / 1e9);
    }

    /** Accumulates ∂(cross entropy)/∂parameters of {@code batch} (no step); returns the mean cross entropy. */
    double sftBackward(List<Sequence> batch) {
        long n = trainedTokens(batch);
        if (n == 0) throw new IllegalArgumentException("the batch has no trained token");
        double loss = 0;
        for (int[] mb : microBatches(batch, microBatchTokens)) {
            try (PointerScope scope = new PointerScope()) {
                Rows r = rows(batch, mb);
                if (r.count == 0) continue;
                Tensor logits = policy.forwardRows(r.tokens, r.rows);
                Tensor data = logits.detach();
                TorchTokenStats.Stats s = TorchTokenStats.forward(data, r.labels, 1f, null, vocabLimit);
                float[] lp = TorchTensors.hostFloats(s.logprob());
                for (float v : lp) loss -= v;
                // L = −Σ log p / N: ∂L/∂logprob = −1/N on every trained row
                float[] g = new float[r.count];
                Arrays.fill(g, (float) (-1.0 / n));
                Tensor grad = TorchTokenStats.backward(data, r.labels, 1f, null, vocabLimit, s, device(Tensor.create(g, r.count)), null);
                logits.backward(grad, new BoolOptional(), false, new TensorArrayRefOptional());
            }
        }
        return loss / n;
    }

    /** The parameters the optimizer updates (their {@code grad()} after a backward). */
    TensorVector parameters() {
        return params;
    }

    /** Drops accumulated gradients. */
    void zeroGrad() {
        opt.zero_grad();
    }

    /** The mean cross entropy of the trained tokens, without gradients. */
    public double sftLoss(List<Sequence> batch) {
        Scores s = score(policy, batch, 1f, microBatchTokens, vocabLimit);
        double sum = 0;
        long n = 0;
        for (int i = 0; i < batch.size(); i++) {
            boolean[] m = batch.get(i).mask();
            for (int p = 0; p < m.length; p++)
                if (m[p]) {
                    sum -= s.logprobs().get(i)[p];
                    n++;
                }
        }
        return n == 0 ? 0 : sum / n;
    }

    // ---------------------------------------------------------------------------------------------
    // policy gradient
    // ---------------------------------------------------------------------------------------------

    /**
     * One optimizer step of the clipped policy-gradient loss {@code cfg} on {@code batch} (every sequence
     * with old log-probs and advantages).
     *
     * @param refLogprobs per sequence, per position, the reference policy's log-probs (required when the
     *                    loss has a KL term; null otherwise)
     */
    public PolicyStats policyStep(List<Sequence> batch, PolicyLossConfig cfg, List<float[]> refLogprobs) {
        long t0 = System.nanoTime();
        PolicyLossResult r = policyLoss(batch, cfg, refLogprobs, true);
        double[] nl = optimizerStep();
        return new PolicyStats(r, batch.size(), nl[0], nl[1], (System.nanoTime() - t0) / 1e9);
    }

    /** The loss and metrics of {@code cfg} on {@code batch} without changing the weights (no gradients). */
    public PolicyLossResult policyLoss(List<Sequence> batch, PolicyLossConfig cfg, List<float[]> refLogprobs) {
        return policyLoss(batch, cfg, refLogprobs, false);
    }

    /** Accumulates the gradient of the policy loss (no step); returns the loss and metrics. */
    PolicyLossResult policyBackward(List<Sequence> batch, PolicyLossConfig cfg, List<float[]> refLogprobs) {
        return policyLoss(batch, cfg, refLogprobs, true);
    }

    private PolicyLossResult policyLoss(List<Sequence> batch, PolicyLossConfig cfg, List<float[]> refLogprobs, boolean backward) {
        if (cfg == null) throw new IllegalArgumentException("cfg must not be null");
        boolean kl = cfg.klType() != ai.arbor.kernels.KlType.NONE;
        if (kl && (refLogprobs == null || refLogprobs.size() != batch.size()))
            throw new IllegalArgumentException("the loss has a KL term: refLogprobs must give one array per sequence");
        for (Sequence s : batch)
            if (s.oldLogprobs() == null || s.advantages() == null)
                throw new IllegalArgumentException("policy-gradient sequences need old log-probs and advantages: " + s);
        PolicyLossConfig c = cfg.aggNormalizer() > 0 ? cfg : cfg.withAggNormalizer(normalizer(batch, cfg.agg()));
        double[] sums = new double[12];
        for (int[] mb : microBatches(batch, microBatchTokens)) {
            try (PointerScope scope = new PointerScope()) {
                Rows r = rows(batch, mb);
                if (r.count == 0) continue;
                float[] old = new float[r.count], adv = new float[r.count], ref = kl ? new float[r.count] : null, mask = new float[r.count];
                int[] seq = new int[r.count];
                for (int k = 0; k < r.count; k++) {
                    Sequence s = batch.get(mb[r.seqOfRow[k]]);
                    int p = r.posOfRow[k];
                    old[k] = s.oldLogprobs()[p];
                    adv[k] = s.advantages()[p];
                    if (kl) {
                        float v = refLogprobs.get(mb[r.seqOfRow[k]])[p];
                        if (!Float.isFinite(v)) throw new IllegalArgumentException("reference log-prob of sequence " + mb[r.seqOfRow[k]] + " at " + p + " is " + v);
                        ref[k] = v;
                    }
                    mask[k] = 1f;
                    seq[k] = r.seqOfRow[k];
                }
                Tensor logits = backward ? policy.forwardRows(r.tokens, r.rows) : noGradRows(r);
                TorchPolicyLoss.Output out = TorchPolicyLoss.forwardBackward(c, logits.detach(), r.labels, device(Tensor.create(old, r.count)),
                        device(Tensor.create(adv, r.count)), device(Tensor.create(mask, r.count)), kl ? device(Tensor.create(ref, r.count)) : null,
                        c.agg().needsSequences() ? device(Tensor.create(seq, r.count)) : null, vocabLimit, false);
                if (backward) logits.backward(out.grad(), new BoolOptional(), false, new TensorArrayRefOptional());
                PolicyLossResult pr = out.result();
                double w = pr.tokens();
                sums[0] += pr.loss();
                sums[1] += pr.pgLoss();
                sums[2] += pr.klLoss();
                sums[3] += pr.entropyLoss();
                sums[4] += w * pr.entropyMean();
                sums[5] += w * pr.clipFracHigh();
                sums[6] += w * pr.clipFracLow();
                sums[7] += w * pr.dualClipFrac();
                sums[8] += w * pr.approxKl();
                sums[9] += w;
            }
        }
        double w = Math.max(sums[9], 1e-300);
        return new PolicyLossResult(sums[0], sums[1], sums[2], sums[3], sums[4] / w, sums[5] / w, sums[6] / w, sums[7] / w, sums[8] / w,
                sums[9], c.aggNormalizer(), Float.NEGATIVE_INFINITY);
    }

    private Tensor noGradRows(Rows r) {
        try (NoGradGuard g = new NoGradGuard()) {
            return policy.forwardRows(r.tokens, r.rows);
        }
    }

    /**
     * The batch-wide normalizer of an aggregation (docs/algorithms.md §2): trained tokens N (token-mean),
     * sequences with a trained token B (the sequence means), or the longest response F (Dr.GRPO's
     * token-sum-norm), so micro-batches add up to the loss of the whole batch.
     */
    static double normalizer(List<Sequence> batch, LossAgg agg) {
        return switch (agg) {
            case TOKEN_MEAN -> Math.max(1, trainedTokens(batch));
            case SEQ_MEAN_TOKEN_SUM, SEQ_MEAN_TOKEN_MEAN -> Math.max(1, batch.stream().filter(s -> s.trainedTokens() > 0).count());
            case SEQ_MEAN_TOKEN_SUM_NORM -> {
                int f = 1;
                for (Sequence s : batch) {
                    int first = -1, last = -1;
                    for (int p = 0; p < s.length(); p++)
                        if (s.mask()[p]) {
                            if (first < 0) first = p;
                            last = p;
                        }
                    if (first >= 0) f = Math.max(f, last - first + 1);
                }
                yield f;
            }
        };
    }

    // ---------------------------------------------------------------------------------------------
    // scoring
    // ---------------------------------------------------------------------------------------------

    /**
     * Log-probs and entropies of the trained tokens of {@code batch} under {@code model} at
     * {@code temperature} (no gradients): old log-probs recomputed by the trainer, or a reference policy's.
     */
    public static Scores score(ReferencePolicy model, List<Sequence> batch, float temperature, int microBatchTokens, int vocabLimit) {
        List<float[]> lps = new ArrayList<>(batch.size()), ents = new ArrayList<>(batch.size());
        for (Sequence s : batch) {
            float[] a = new float[s.length()], b = new float[s.length()];
            Arrays.fill(a, Float.NaN);
            Arrays.fill(b, Float.NaN);
            lps.add(a);
            ents.add(b);
        }
        try (NoGradGuard g = new NoGradGuard()) {
            for (int[] mb : microBatches(batch, microBatchTokens)) {
                try (PointerScope scope = new PointerScope()) {
                    Rows r = rows(batch, mb, model);
                    if (r.count == 0) continue;
                    Tensor logits = model.forwardRows(r.tokens, r.rows);
                    TorchTokenStats.Stats st = TorchTokenStats.forward(logits, r.labels, temperature, null, vocabLimit);
                    float[] lp = TorchTensors.hostFloats(st.logprob()), h = TorchTensors.hostFloats(st.entropy());
                    for (int k = 0; k < r.count; k++) {
                        int i = mb[r.seqOfRow[k]];
                        lps.get(i)[r.posOfRow[k]] = lp[k];
                        ents.get(i)[r.posOfRow[k]] = h[k];
                    }
                }
            }
        }
        return new Scores(lps, ents);
    }

    // ---------------------------------------------------------------------------------------------
    // helpers
    // ---------------------------------------------------------------------------------------------

    /** Clips, sets the learning rate, steps, zeroes the gradients; returns {gradNorm, lr}. */
    private double[] optimizerStep() {
        double lr = optim.lrAt(step, totalSteps);
        double norm = torch.clip_grad_norm_(params, optim.maxGradNorm() > 0 ? optim.maxGradNorm() : Double.MAX_VALUE);
        var groups = opt.param_groups();
        for (long i = 0; i < groups.size(); i++) groups.get(i).options().set_lr(lr);
        opt.step();
        opt.zero_grad();
        step++;
        return new double[] {norm, lr};
    }

    static long trainedTokens(List<Sequence> batch) {
        long n = 0;
        for (Sequence s : batch) n += s.trainedTokens();
        return n;
    }

    /**
     * Splits sequence indices into micro-batches of at most {@code budget} padded tokens (count × longest),
     * longest sequences first; a sequence longer than the budget gets a micro-batch of its own.
     */
    static List<int[]> microBatches(List<Sequence> batch, int budget) {
        Integer[] order = new Integer[batch.size()];
        for (int i = 0; i < order.length; i++) order[i] = i;
        Arrays.sort(order, Comparator.comparingInt((Integer i) -> -batch.get(i).length()).thenComparingInt(i -> i));
        List<int[]> out = new ArrayList<>();
        List<Integer> cur = new ArrayList<>();
        int longest = 0;
        for (int i : order) {
            int len = batch.get(i).length();
            int l = Math.max(longest, len);
            if (!cur.isEmpty() && (long) l * (cur.size() + 1) > budget) {
                out.add(cur.stream().mapToInt(Integer::intValue).toArray());
                cur.clear();
                l = len;
            }
            cur.add(i);
            longest = l;
        }
        if (!cur.isEmpty()) out.add(cur.stream().mapToInt(Integer::intValue).toArray());
        return out;
    }

    /** A micro-batch's inputs: padded tokens [B, T], the logit rows to compute, their labels, and where each row came from. */
    private static final class Rows {
        Tensor tokens, rows, labels;
        int count;
        int[] seqOfRow, posOfRow;
    }

    private Rows rows(List<Sequence> batch, int[] mb) {
        return rows(batch, mb, policy);
    }

    private static Rows rows(List<Sequence> batch, int[] mb, ReferencePolicy model) {
        int t = 0, n = 0;
        for (int i : mb) {
            t = Math.max(t, batch.get(i).length());
            n += batch.get(i).trainedTokens();
        }
        long[] tok = new long[mb.length * t];
        long[] rows = new long[n], labels = new long[n];
        int[] seqOf = new int[n], posOf = new int[n];
        int k = 0;
        for (int b = 0; b < mb.length; b++) {
            Sequence s = batch.get(mb[b]);
            for (int p = 0; p < s.length(); p++) {
                tok[b * t + p] = s.tokens()[p];
                if (s.mask()[p]) {
                    rows[k] = (long) b * t + p - 1;   // the logits at p - 1 predict the token at p
                    labels[k] = s.tokens()[p];
                    seqOf[k] = b;
                    posOf[k] = p;
                    k++;
                }
            }
        }
        Rows r = new Rows();
        r.tokens = to(Tensor.create(tok, mb.length, t), model);
        r.rows = to(Tensor.create(rows, n), model);
        r.labels = to(Tensor.create(labels, n), model);
        r.count = n;
        r.seqOfRow = seqOf;
        r.posOfRow = posOf;
        return r;
    }

    private Tensor device(Tensor host) {
        return to(host, policy);
    }

    private static Tensor to(Tensor host, ReferencePolicy model) {
        return model.device().is_cpu() ? host : host.to(model.device(), host.scalar_type());
    }

    @Override
    public void close() {
        opt.close();
        params.close();
    }
}
