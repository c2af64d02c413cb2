package ai.arbor.train;

import ai.arbor.dist.GradientSync;
import ai.arbor.kernels.FusedLinear;
import ai.arbor.kernels.KlType;
import ai.arbor.kernels.PolicyLossConfig;
import ai.arbor.kernels.PolicyLossResult;
import ai.arbor.torch.TorchFusedLinear;
import ai.arbor.torch.TorchPolicyLoss;
import ai.arbor.torch.TorchTensors;
import ai.arbor.torch.TorchTokenStats;
import ai.arbor.rl.Sequence;
import ai.arbor.rl.TokenBatch;
import ai.arbor.torch.model.ReferencePolicy;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.AdamW;
import org.bytedeco.pytorch.AdamWOptions;
import org.bytedeco.pytorch.BoolOptional;
import org.bytedeco.pytorch.DeviceOptional;
import org.bytedeco.pytorch.InputArchive;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.OutputArchive;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorArrayRefOptional;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * The gradient step of training: one optimizer step of supervised fine-tuning or of a clipped
 * policy-gradient loss over a {@link TokenBatch}, micro-batched, through the fused kernels
 * (docs/algorithms.md §2, §12).
 *
 * <p>A step: the batch's sequences are split into micro-batches of at most {@code microBatchTokens} padded
 * tokens (longest first, so padding is small); a micro-batch is {@link TokenBatch#select the batch's rows of
 * its sequences}, whose columns the kernel reads as they are. Per micro-batch the policy computes logits only
 * at the rows that predict a trained token ({@link ReferencePolicy#forwardRows}: position p − 1 for a trained
 * token at p), a contiguous {@code [N, V]} matrix the kernels read in place; the kernel writes ∂loss/∂logits
 * and {@code logits.backward(grad)} accumulates the parameter gradients. The loss is normalized over the
 * whole batch ({@link TokenBatch#normalizer}), so the accumulated gradient is that of one big batch. Then the
 * global gradient norm is clipped, the learning rate set from the schedule, and AdamW steps.
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
    /** Micro-batches whose fp32 logits would exceed this many bytes use the fused linear loss. */
    private long fusedLinearAboveBytes = DEFAULT_FUSED_LINEAR_ABOVE_BYTES;
    /** Tree packing of the policy-loss passes (docs/training.md "Tree packing"); {@link Packing#AUTO} by default. */
    private Packing packing = Packing.AUTO;
    private int maxPackTokens = DEFAULT_MAX_PACK_TOKENS;

    /** When the policy-loss passes are tree-packed. */
    public enum Packing {
        /** Never: one padded causal row per trajectory. */
        OFF,
        /**
         * Where it is measured to save time (bench/RESULTS.md "Tree-packed update"): when the packed tokens are at most
         * {@link PackedPasses#worthRatio} of the unpacked ones — 0.45 below d = 128, 0.7 below d = 256, 0.9 from there
         * on (at d = 64 per-operator overhead and attention dominate, so only large sharing pays).
         */
        AUTO,
        /** Always. */
        ALWAYS
    }

    /** Default of {@link #packing(boolean, int)}'s pack size. */
    public static final int DEFAULT_MAX_PACK_TOKENS = 2048;

    /**
     * Default of {@link #fusedLinearAbove}: 1 GiB of fp32 logits (e.g. 1766 rows at a 151936-token
     * vocabulary). Below it the logits path is as fast or faster (three products instead of four).
     */
    public static final long DEFAULT_FUSED_LINEAR_ABOVE_BYTES = 1L << 30;
    private final TensorVector params;
    private final AdamW opt;
    private long step;
    /** Data-parallel training's hook (null: one process). */
    private GradientSync sync;

    /** SFT step result: mean cross entropy (nats per trained token) before the update. */
    public record SftStats(double loss, long tokens, int sequences, double gradNorm, double lr, double seconds) {}

    /**
     * Policy step result.
     *
     * @param loss     the loss and its metrics over the batch (token-weighted over the micro-batches), before the update
     * @param gradNorm global gradient norm before clipping
     */
    public record PolicyStats(PolicyLossResult loss, int sequences, double gradNorm, double lr, double seconds) {}

    /** Per row of a token batch: the log-prob and entropy of its token. */
    public record Scores(float[] logprobs, float[] entropies) {}

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

    /**
     * Trains data-parallel with the other ranks of {@code sync} (null: alone): broadcasts rank 0's weights now; then
     * each step's loss is normalized over the global batch, the gradients are summed over the ranks before clipping,
     * and the reported losses are the global ones (docs/distributed.md). Every rank must call the same steps.
     */
    public Trainer dataParallel(GradientSync sync) {
        this.sync = sync;
        if (sync != null) sync.broadcastParameters(params);
        return this;
    }

    /** Σ over the ranks of a count ({@code n} alone). */
    public long globalSum(long n) {
        return sync == null ? n : Math.round(sync.sum(n)[0]);
    }

    /** The max over the ranks of a count ({@code n} alone). */
    public long globalMax(long n) {
        return sync == null ? n : Math.round(sync.max(n));
    }

    /**
     * The fused linear kernel's tiles for this policy: on the CPU, 256 rows × the whole vocabulary when that tile is at
     * most 256 MiB (V ≤ 262144) — pass 2 then reuses pass 1's logits, three products instead of four (0.85× the
     * time of the default tiles at V 151936, for a 148 MiB tile; bench/RESULTS.md "Fused linear"); else, and on
     * CUDA, the device's default. A bf16 or fp16 policy's head weight is widened to fp32 by the CPU kernel (all of it
     * once with such tiles: V × d × 4 bytes), which counts against the same 256 MiB.
     */
    static FusedLinear.Chunks fusedLinearChunks(ReferencePolicy policy, long vocabLimit) {
        return fusedLinearChunks(policy.device().is_cuda(), policy.dtype().intern() != ScalarType.Float,
                policy.config().dModel(), vocabLimit);
    }

    /** As {@link #fusedLinearChunks(ReferencePolicy, long)} for a policy on CUDA or not, in fp32 or not, of width d. */
    static FusedLinear.Chunks fusedLinearChunks(boolean cuda, boolean widened, long d, long vocabLimit) {
        if (cuda) return null;
        long bytes = 4L * WHOLE_VOCABULARY_ROWS * vocabLimit + (widened ? 4L * vocabLimit * d : 0);
        if (bytes > (256L << 20)) return null;
        return FusedLinear.Chunks.wholeVocabulary(WHOLE_VOCABULARY_ROWS, vocabLimit);
    }

    private static final long WHOLE_VOCABULARY_ROWS = 256;

    /**
     * The policy loss of a micro-batch whose fp32 logits ({@code rows × V × 4} bytes) would exceed
     * {@code bytes} is computed from the final hidden states and the LM-head weight by the fused linear
     * kernel ({@link TorchFusedLinear}), which never holds the logits; 0 = always, {@link Long#MAX_VALUE}
     * = never. Default {@link #DEFAULT_FUSED_LINEAR_ABOVE_BYTES}.
     */
    public Trainer fusedLinearAbove(long bytes) {
        if (bytes < 0) throw new IllegalArgumentException("fusedLinearAbove must be >= 0, got " + bytes);
        this.fusedLinearAboveBytes = bytes;
        return this;
    }

    /**
     * Tree packing of the policy loss and of {@link #score(ReferencePolicy, TokenBatch, float, int, int, boolean)}
     * (docs/algorithms.md §9): sequences sharing a prefix run as one packed sequence (ancestor mask, position ids
     * = depth), each shared token computed once, the gradient the unpacked one; a sequence joins a pack only where
     * that saves work, packs hold at most {@code maxPackTokens} tokens. {@code on}: {@link Packing#ALWAYS}, else
     * {@link Packing#OFF}; the default is {@link Packing#AUTO}.
     */
    public Trainer packing(boolean on, int maxPackTokens) {
        return packing(on ? Packing.ALWAYS : Packing.OFF, maxPackTokens);
    }

    /** {@link #packing(boolean, int)} with the current pack size. */
    public Trainer packing(boolean on) {
        return packing(on, maxPackTokens);
    }

    /** The packing mode, and the most unique tokens of one pack. */
    public Trainer packing(Packing mode, int maxPackTokens) {
        if (mode == null) throw new IllegalArgumentException("packing mode is null");
        if (maxPackTokens < 1) throw new IllegalArgumentException("maxPackTokens must be >= 1, got " + maxPackTokens);
        this.packing = mode;
        this.maxPackTokens = maxPackTokens;
        return this;
    }

    /** The packing mode. */
    public Packing packing() {
        return packing;
    }

    /** Whether the passes over {@code batch} are packed (the mode; for {@link Packing#AUTO} the batch's sharing and the model's width). */
    public boolean packs(TokenBatch batch) {
        return switch (packing) {
            case OFF -> false;
            case ALWAYS -> true;
            case AUTO -> PackedPasses.worthIt(batch, policy.config(), microBatchTokens, maxPackTokens);
        };
    }

    /**
     * What the packed update computes for {@code batch} (metrics of a step; empty when packing is off):
     * {@code pack/unique_tokens} forwarded, {@code pack/total_tokens} the unpacked passes would forward, their ratio.
     */
    public java.util.Map<String, Object> packingMetrics(TokenBatch batch) {
        java.util.Map<String, Object> m = new java.util.LinkedHashMap<>();
        if (packing == Packing.OFF) return m;
        PackedPasses.Work w = PackedPasses.work(batch, policy.config(), microBatchTokens, maxPackTokens);
        m.put("pack/unique_tokens", w.uniqueTokens());
        m.put("pack/total_tokens", w.totalTokens());
        m.put("pack/ratio", w.totalTokens() == 0 ? 1.0 : (double) w.uniqueTokens() / w.totalTokens());
        m.put("pack/used", packs(batch) ? 1 : 0);
        return m;
    }

    /** The most tokens of one packed sequence. */
    public int maxPackTokens() {
        return maxPackTokens;
    }

    /** Optimizer steps taken. */
    public long steps() {
        return step;
    }

    /**
     * Writes the optimizer's state — AdamW's moments and per-parameter step counts, libtorch's archive — to
     * {@code file} (a checkpoint's; {@link Checkpoint} syncs and renames it). The weights are saved apart.
     */
    void saveOptimizer(Path file) {
        try (OutputArchive archive = new OutputArchive()) {
            opt.save(archive);
            archive.save_to(file.toString());
        }
    }

    /** Restores the state {@link #saveOptimizer} wrote, and the count of optimizer steps taken ({@code steps}, for the schedule). */
    void loadOptimizer(Path file, long steps) {
        if (steps < 0 || steps > totalSteps) throw new IllegalArgumentException("steps must be in [0, " + totalSteps + "], got " + steps);
        try (InputArchive archive = new InputArchive(); DeviceOptional device = new DeviceOptional(policy.device())) {
            archive.load_from(file.toString(), device);   // the moments on the parameters' device
            opt.load(archive);
        }
        step = steps;
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
        return sftStep(TokenBatch.supervised(batch));
    }

    /** One optimizer step of cross entropy on the rows of {@code batch}. */
    public SftStats sftStep(TokenBatch batch) {
        long t0 = System.nanoTime();
        double loss = sftBackward(batch);
        double[] nl = optimizerStep();
        return new SftStats(loss, globalSum(batch.rows()), (int) globalSum(batch.sequenceCount()), nl[0], nl[1], (System.nanoTime() - t0) / 1e9);
    }

    /** Accumulates ∂(cross entropy)/∂parameters of {@code batch} (no step); returns the mean cross entropy. */
    double sftBackward(TokenBatch batch) {
        long n = globalSum(batch.rows());   // the global count: each rank's loss is its share of the one-process loss
        if (n == 0) throw new IllegalArgumentException("the batch has no trained token");
        double loss = 0;
        for (int[] seqs : microBatches(batch, microBatchTokens)) {
            try (PointerScope scope = new PointerScope()) {
                TokenBatch mb = batch.select(seqs);
                Inputs in = inputs(mb, policy);
                Tensor logits = policy.forwardRows(in.tokens, in.rows);
                Tensor data = logits.detach();
                TorchTokenStats.Stats s = TorchTokenStats.forward(data, in.labels, 1f, null, vocabLimit);
                float[] lp = TorchTensors.hostFloats(s.logprob());
                for (float v : lp) loss -= v;
                // L = −Σ log p / N: ∂L/∂logprob = −1/N on every trained row
                float[] g = new float[mb.rows()];
                Arrays.fill(g, (float) (-1.0 / n));
                Tensor grad = TorchTokenStats.backward(data, in.labels, 1f, null, vocabLimit, s, device(Tensor.create(g, mb.rows())), null);
                logits.backward(grad, new BoolOptional(), false, new TensorArrayRefOptional());
            }
        }
        return (sync == null ? loss : sync.sum(loss)[0]) / n;
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
        TokenBatch b = TokenBatch.supervised(batch);
        if (b.rows() == 0) return 0;
        double sum = 0;
        for (float v : score(policy, b, 1f, microBatchTokens, vocabLimit).logprobs()) sum -= v;
        return sum / b.rows();
    }

    // ---------------------------------------------------------------------------------------------
    // policy gradient
    // ---------------------------------------------------------------------------------------------

    /**
     * One optimizer step of the clipped policy-gradient loss {@code cfg} on {@code batch} (old log-probs and
     * advantages required; reference log-probs when the loss has a KL term).
     */
    public PolicyStats policyStep(TokenBatch batch, PolicyLossConfig cfg) {
        long t0 = System.nanoTime();
        PolicyLossResult r = policyLoss(batch, cfg, true);
        double[] nl = optimizerStep();
        return new PolicyStats(r, batch.sequenceCount(), nl[0], nl[1], (System.nanoTime() - t0) / 1e9);
    }

    /** The loss and metrics of {@code cfg} on {@code batch} without changing the weights (no gradients). */
    public PolicyLossResult policyLoss(TokenBatch batch, PolicyLossConfig cfg) {
        return policyLoss(batch, cfg, false);
    }

    /** Accumulates the gradient of the policy loss (no step); returns the loss and metrics. */
    PolicyLossResult policyBackward(TokenBatch batch, PolicyLossConfig cfg) {
        return policyLoss(batch, cfg, true);
    }

    private PolicyLossResult policyLoss(TokenBatch batch, PolicyLossConfig cfg, boolean backward) {
        if (cfg == null || batch == null) throw new IllegalArgumentException("batch and cfg must not be null");
        boolean kl = cfg.klType() != KlType.NONE;
        if (kl && batch.ref() == null) throw new IllegalArgumentException("the loss has a KL term: the batch needs reference log-probs");
        if (batch.old() == null || batch.advantage() == null)
            throw new IllegalArgumentException("policy-gradient batches need old log-probs and advantages: " + batch);
        PolicyLossConfig c = cfg.aggNormalizer() > 0 ? cfg
                : cfg.withAggNormalizer(sync != null && backward ? sync.normalizer(batch, cfg.agg()) : batch.normalizer(cfg.agg()));
        LossSums sums = new LossSums();
        if (packs(batch)) {
            PackedPasses.policyLoss(policy, batch, c, microBatchTokens, maxPackTokens, vocabLimit, fusedLinearAboveBytes, backward, sums::add);
            return sync != null && backward ? sums.global(sync, c.aggNormalizer()) : sums.result(c.aggNormalizer());
        }
        for (int[] seqs : microBatches(batch, microBatchTokens)) {
            try (PointerScope scope = new PointerScope()) {
                TokenBatch mb = batch.select(seqs);
                if (mb.rows() == 0) continue;
                Inputs in = inputs(mb, policy);
                int n = mb.rows();
                if ((double) n * policy.config().vocab() * 4 > fusedLinearAboveBytes) {
                    sums.add(fusedLinearLoss(c, mb, in, backward, kl));
                    continue;
                }
                Tensor logits = backward ? policy.forwardRows(in.tokens, in.rows) : noGradRows(in);
                TorchPolicyLoss.Output out = TorchPolicyLoss.forwardBackward(c, logits.detach(), in.labels, device(Tensor.create(mb.old(), n)),
                        device(Tensor.create(mb.advantage(), n)), device(Tensor.create(mb.weight(), n)), kl ? device(Tensor.create(mb.ref(), n)) : null,
                        c.agg().needsSequences() ? device(Tensor.create(mb.seqId(), n)) : null, vocabLimit, false);
                if (backward) logits.backward(out.grad(), new BoolOptional(), false, new TensorArrayRefOptional());
                sums.add(out.result());
            }
        }
        return sync != null && backward ? sums.global(sync, c.aggNormalizer()) : sums.result(c.aggNormalizer());
    }

    /** The micro-batches' results: the loss terms add up (one normalizer), the per-token means are token-weighted. */
    private static final class LossSums {
        double loss, pgLoss, klLoss, entropyLoss, entropyMean, clipFracHigh, clipFracLow, dualClipFrac, approxKl, tokens;

        void add(PolicyLossResult r) {
            double w = r.tokens();
            loss += r.loss();
            pgLoss += r.pgLoss();
            klLoss += r.klLoss();
            entropyLoss += r.entropyLoss();
            entropyMean += w * r.entropyMean();
            clipFracHigh += w * r.clipFracHigh();
            clipFracLow += w * r.clipFracLow();
            dualClipFrac += w * r.dualClipFrac();
            approxKl += w * r.approxKl();
            tokens += w;
        }

        /** {@link #result} over every rank's micro-batches (the data-parallel step's metrics). */
        PolicyLossResult global(GradientSync sync, double normalizer) {
            double[] g = sync.sum(loss, pgLoss, klLoss, entropyLoss, entropyMean, clipFracHigh, clipFracLow, dualClipFrac, approxKl, tokens);
            LossSums all = new LossSums();
            all.loss = g[0]; all.pgLoss = g[1]; all.klLoss = g[2]; all.entropyLoss = g[3]; all.entropyMean = g[4];
            all.clipFracHigh = g[5]; all.clipFracLow = g[6]; all.dualClipFrac = g[7]; all.approxKl = g[8]; all.tokens = g[9];
            return all.result(normalizer);
        }

        PolicyLossResult result(double normalizer) {
            double w = Math.max(tokens, 1e-300);
            return new PolicyLossResult(loss, pgLoss, klLoss, entropyLoss, entropyMean / w, clipFracHigh / w, clipFracLow / w,
                    dualClipFrac / w, approxKl / w, tokens, normalizer, Float.NEGATIVE_INFINITY);
        }
    }

    /**
     * One micro-batch through the fused linear kernel: hidden states at the trained rows → loss and
     * ∂loss/∂hidden, ∂loss/∂W_lm; {@code hidden.backward} and {@code W_lm.backward} accumulate them into
     * the parameters' gradients (for tied embeddings both reach the embedding matrix).
     */
    private PolicyLossResult fusedLinearLoss(PolicyLossConfig c, TokenBatch mb, Inputs in, boolean backward, boolean kl) {
        int n = mb.rows();
        Tensor h;
        if (backward) {
            h = rowsOfHidden(in);
        } else {
            try (NoGradGuard g = new NoGradGuard()) {
                h = rowsOfHidden(in);
            }
        }
        Tensor w = policy.lmHeadWeight();
        TorchFusedLinear.Output out = TorchFusedLinear.forwardBackward(c, h.detach(), w.detach(), in.labels,
                device(Tensor.create(mb.old(), n)), device(Tensor.create(mb.advantage(), n)), device(Tensor.create(mb.weight(), n)),
                kl ? device(Tensor.create(mb.ref(), n)) : null, c.agg().needsSequences() ? device(Tensor.create(mb.seqId(), n)) : null,
                vocabLimit, backward, null, fusedLinearChunks(policy, vocabLimit));
        if (backward) {
            h.backward(out.gradHidden(), new BoolOptional(), false, new TensorArrayRefOptional());
            w.backward(out.gradWeight(), new BoolOptional(), false, new TensorArrayRefOptional());  // a leaf: adds into its grad
        }
        return out.result();
    }

    /** Final hidden states at the micro-batch's trained rows, [rows, D]. */
    private Tensor rowsOfHidden(Inputs in) {
        Tensor h = policy.hidden(in.tokens);
        return h.reshape(h.size(0) * h.size(1), h.size(2)).index_select(0, in.rows);
    }

    private Tensor noGradRows(Inputs in) {
        try (NoGradGuard g = new NoGradGuard()) {
            return policy.forwardRows(in.tokens, in.rows);
        }
    }

    // ---------------------------------------------------------------------------------------------
    // scoring
    // ---------------------------------------------------------------------------------------------

    /**
     * Log-probs and entropies of the rows of {@code batch} under {@code model} at {@code temperature} (no
     * gradients): old log-probs recomputed by the trainer, or a reference policy's.
     */
    public static Scores score(ReferencePolicy model, TokenBatch batch, float temperature, int microBatchTokens, int vocabLimit) {
        return score(model, batch, temperature, microBatchTokens, vocabLimit, false);
    }

    /** As {@link #score(ReferencePolicy, TokenBatch, float, int, int)}, tree-packed when {@code pack} (each unique token scored once). */
    public static Scores score(ReferencePolicy model, TokenBatch batch, float temperature, int microBatchTokens, int vocabLimit, boolean pack) {
        if (pack) return PackedPasses.score(model, batch, temperature, microBatchTokens, DEFAULT_MAX_PACK_TOKENS, vocabLimit);
        float[] lps = new float[batch.rows()], ents = new float[batch.rows()];
        try (NoGradGuard g = new NoGradGuard()) {
            for (int[] seqs : microBatches(batch, microBatchTokens)) {
                try (PointerScope scope = new PointerScope()) {
                    TokenBatch mb = batch.select(seqs);
                    if (mb.rows() == 0) continue;
                    Inputs in = inputs(mb, model);
                    Tensor logits = model.forwardRows(in.tokens, in.rows);
                    TorchTokenStats.Stats st = TorchTokenStats.forward(logits, in.labels, temperature, null, vocabLimit);
                    float[] lp = TorchTensors.hostFloats(st.logprob()), h = TorchTensors.hostFloats(st.entropy());
                    int[] rows = batch.rowsOf(seqs);
                    for (int k = 0; k < rows.length; k++) {
                        lps[rows[k]] = lp[k];
                        ents[rows[k]] = h[k];
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
        if (sync != null) sync.allReduceGradients(params);   // Σ over the ranks: the one-process gradient
        double norm = torch.clip_grad_norm_(params, optim.maxGradNorm() > 0 ? optim.maxGradNorm() : Double.MAX_VALUE);
        var groups = opt.param_groups();
        for (long i = 0; i < groups.size(); i++) groups.get(i).options().set_lr(lr);
        opt.step();
        opt.zero_grad();
        step++;
        return new double[] {norm, lr};
    }

    /**
     * Splits the batch's sequences into micro-batches of at most {@code budget} padded tokens (count × longest),
     * longest sequences first; a sequence longer than the budget gets a micro-batch of its own.
     */
    static List<int[]> microBatches(TokenBatch batch, int budget) {
        Integer[] order = new Integer[batch.sequenceCount()];
        for (int i = 0; i < order.length; i++) order[i] = i;
        Arrays.sort(order, Comparator.comparingInt((Integer i) -> -batch.length(i)).thenComparingInt(i -> i));
        List<int[]> out = new ArrayList<>();
        List<Integer> cur = new ArrayList<>();
        int longest = 0;
        for (int i : order) {
            int len = batch.length(i);
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

    /** A micro-batch's model inputs: padded tokens [B, T], the logit rows that predict its trained tokens, their labels. */
    private record Inputs(Tensor tokens, Tensor rows, Tensor labels) {}

    private static Inputs inputs(TokenBatch mb, ReferencePolicy model) {
        int t = 0;
        for (int s = 0; s < mb.sequenceCount(); s++) t = Math.max(t, mb.length(s));
        long[] tok = new long[mb.sequenceCount() * t];
        for (int b = 0; b < mb.sequenceCount(); b++) {
            int[] s = mb.sequences().get(b);
            for (int p = 0; p < s.length; p++) tok[b * t + p] = s[p];
        }
        int n = mb.rows();
        long[] rows = new long[n], labels = new long[n];
        for (int k = 0; k < n; k++) {
            rows[k] = (long) mb.seqId()[k] * t + mb.position()[k] - 1;   // the logits at p - 1 predict the token at p
            labels[k] = mb.label()[k];
        }
        return new Inputs(to(Tensor.create(tok, mb.sequenceCount(), t), model), to(Tensor.create(rows, n), model), to(Tensor.create(labels, n), model));
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
