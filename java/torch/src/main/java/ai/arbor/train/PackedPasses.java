package ai.arbor.train;

import ai.arbor.kernels.PolicyLossConfig;
import ai.arbor.kernels.PolicyLossResult;
import ai.arbor.rl.TokenBatch;
import ai.arbor.rl.TreePacking;
import ai.arbor.torch.TorchFusedLinear;
import ai.arbor.torch.TorchPolicyLoss;
import ai.arbor.torch.TorchTensors;
import ai.arbor.torch.TorchTokenStats;
import ai.arbor.torch.model.PolicyConfig;
import ai.arbor.torch.model.ReferencePolicy;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.BoolOptional;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorArrayRefOptional;

/**
 * The tree-packed passes of the update (docs/algorithms.md §9, docs/training.md "Tree packing"): the policy
 * loss with its gradient, and the no-gradient log-prob passes (old and reference log-probs), over the
 * micro-batches of {@link TreePacking#plan}. Per micro-batch the policy runs once over the unique tokens
 * (position ids = depth; {@link ReferencePolicy#forwardPathRows}: projections and MLP once per unique token,
 * attention per sequence along its path, so never the square of a pack), the LM head only at the unique slots
 * that predict a trained token. The loss reads each distinct (logit row, label) once: token statistics over the
 * distinct rows, the O(T) per-token loss over the (trajectory, token) pairs — each with its own advantage, old
 * log-prob, weight and sequence id, so every loss (clip, dual clip, AEPO, GSPO, CISPO, KL, entropy bonus, every
 * aggregation) is the unpacked one — and one statistics backward over the distinct rows with the pairs' upstream
 * gradients summed per row (nothing of size [pairs, V]). Where no two pairs share a row, the fused kernel runs on
 * the rows as they are. A micro-batch whose packs are all single sequences runs the plain causal forward. The
 * fused-linear form (policies whose logits would not fit) gathers hidden states per pair instead: [pairs, d].
 *
 * <p>The scoring pass computes each unique token's log-prob and entropy once (a (slot, label) pair shared by k
 * trajectories is one kernel row) and copies it to the k rows.
 */
@SuppressWarnings("try")
final class PackedPasses {
    private PackedPasses() {}

    /**
     * Which sequences join a pack: every one that shares a prefix (within the pack size). Path attention costs what
     * the unpacked sequences' attention does, so joining always saves the shared tokens' work ({@link
     * TreePacking.Cost#of} models the dense-mask forward instead).
     */
    static final TreePacking.Cost COST = TreePacking.Cost.tokensOnly();

    /**
     * A packed micro-batch's sequences hold at most this many times the token budget unpacked: path attention
     * gathers keys and values per sequence, so this bounds its memory at that multiple of an unpacked micro-batch's.
     */
    static final long UNPACKED_PER_BUDGET = 4;

    /** {@link Trainer.Packing#AUTO}'s threshold: the largest packed / unpacked token ratio at which packing a model of width {@code dModel} pays. */
    static double worthRatio(int dModel) {
        return dModel >= 256 ? 0.9 : dModel >= 128 ? 0.7 : 0.45;
    }

    /** Whether packing {@code batch} is expected to save time ({@link #worthRatio}). */
    static boolean worthIt(TokenBatch batch, PolicyConfig cfg, int budget, int maxPack) {
        Work w = work(batch, cfg, budget, maxPack);
        return w.totalTokens() > 0 && w.uniqueTokens() <= worthRatio(cfg.dModel()) * w.totalTokens();
    }

    /** What the packed passes computed: tokens in the packs against tokens of the sequences unpacked. */
    record Work(long uniqueTokens, long totalTokens, int microBatches) {}

    /** A packed micro-batch's model inputs on the model's device. */
    private record Inputs(TreePacking.Packed packed, Tensor tokens, ReferencePolicy.PathBatch paths, Tensor logitRows, Tensor pairIndex,
                          Tensor labels, boolean chains, boolean identity) {}

    private static Inputs inputs(TokenBatch batch, TreePacking.MicroBatch mb, ReferencePolicy model) {
        TreePacking.Packed p = TreePacking.pack(batch, mb);
        boolean chains = true;
        for (int[] pack : mb.packs()) chains &= pack.length == 1;
        Tensor tok = null, rows;
        ReferencePolicy.PathBatch paths = null;
        if (chains) {   // every pack one sequence: the padded rows of the plain causal forward
            tok = to(Tensor.create(p.tokens(), p.packs(), p.width()), model);
            rows = to(Tensor.create(p.logitRows(), p.logitRows().length), model);
        } else {
            // causal attention along each whole path (the causal kernel, no mask); only the owned outputs are kept
            TreePacking.PathAttention a = p.pathAttention();
            Tensor keys = to(Tensor.create(a.keyIndex(), a.keyIndex().length), model);
            paths = new ReferencePolicy.PathBatch(to(Tensor.create(a.tokens(), a.tokens().length), model),
                    to(Tensor.create(a.positions(), a.positions().length), model), keys, keys, null,
                    to(Tensor.create(a.causalScatter(), a.causalScatter().length), model), a.sequences());
            rows = to(Tensor.create(a.logitRows(), a.logitRows().length), model);
        }
        long[] pair = p.pairIndex();
        boolean identity = pair.length == p.logitRows().length;
        for (int k = 0; identity && k < pair.length; k++) identity = pair[k] == k;
        long[] labels = new long[p.rows().rows()];
        for (int k = 0; k < labels.length; k++) labels[k] = p.rows().label()[k];
        return new Inputs(p, tok, paths, rows, to(Tensor.create(pair, pair.length), model), to(Tensor.create(labels, labels.length), model),
                chains, identity);
    }

    /** Logits at the unique predicting slots, [U, V]. */
    private static Tensor uniqueLogits(ReferencePolicy model, Inputs in) {
        return in.chains ? model.forwardRows(in.tokens, in.logitRows) : model.forwardPathRows(in.paths, in.logitRows);
    }

    /**
     * The policy loss of {@code c} (its normalizer set) over {@code batch}, packed; with {@code backward} its
     * gradient accumulates into the parameters. Each micro-batch's result goes to {@code sink}.
     */
    static Work policyLoss(ReferencePolicy policy, TokenBatch batch, PolicyLossConfig c, int budget, int maxPack, int vocabLimit,
                           long fusedLinearAboveBytes, boolean backward, Consumer<PolicyLossResult> sink) {
        boolean kl = c.klType() != ai.arbor.kernels.KlType.NONE;
        List<TreePacking.MicroBatch> plan = TreePacking.plan(batch, budget, maxPack, COST, UNPACKED_PER_BUDGET * budget);
        long unique = 0, total = 0;
        for (TreePacking.MicroBatch part : plan) {
            try (PointerScope scope = new PointerScope()) {
                Inputs in = inputs(batch, part, policy);
                TokenBatch mb = in.packed.rows();
                unique += in.packed.uniqueTokens();
                total += in.packed.totalTokens();
                int n = mb.rows();
                if (n == 0) continue;
                Tensor old = to(Tensor.create(mb.old(), n), policy), adv = to(Tensor.create(mb.advantage(), n), policy);
                Tensor w = to(Tensor.create(mb.weight(), n), policy);
                Tensor ref = kl ? to(Tensor.create(mb.ref(), n), policy) : null;
                Tensor seq = c.agg().needsSequences() || c.clipMode().isGspo() ? to(Tensor.create(mb.seqId(), n), policy) : null;
                if ((double) n * policy.config().vocab() * 4 > fusedLinearAboveBytes) {
                    Tensor h = backward ? pairHidden(policy, in) : noGrad(() -> pairHidden(policy, in));
                    Tensor lm = policy.lmHeadWeight();
                    TorchFusedLinear.Output out = TorchFusedLinear.forwardBackward(c, h.detach(), lm.detach(), in.labels, old, adv, w, ref, seq,
                            vocabLimit, backward, null, Trainer.fusedLinearChunks(policy, vocabLimit));
                    if (backward) {
                        h.backward(out.gradHidden(), new BoolOptional(), false, new TensorArrayRefOptional());
                        lm.backward(out.gradWeight(), new BoolOptional(), false, new TensorArrayRefOptional());
                    }
                    sink.accept(out.result());
                    continue;
                }
                if (in.identity) {   // no two pairs share a logit row: the fused kernel over the rows as they are
                    Tensor logits = backward ? uniqueLogits(policy, in) : noGrad(() -> uniqueLogits(policy, in));
                    TorchPolicyLoss.Output out = TorchPolicyLoss.forwardBackward(c, logits.detach(), in.labels, old, adv, w, ref, seq, vocabLimit, false);
                    if (backward) logits.backward(out.grad(), new BoolOptional(), false, new TensorArrayRefOptional());
                    sink.accept(out.result());
                    continue;
                }
                sink.accept(sharedRowsLoss(policy, in, mb, c, vocabLimit, backward));
            }
        }
        return new Work(unique, total, plan.size());
    }

    /** The distinct (logit row, label) pairs of a packed micro-batch's rows, and each row's pair. */
    private record UniquePairs(int count, long[] rowOf, long[] labelOf, int[] pairOf) {
        static UniquePairs of(long[] pairIndex, int[] labels, int vocab) {
            int n = labels.length;
            Map<Long, Integer> ids = new HashMap<>();
            int[] pairOf = new int[n];
            long[] rowOf = new long[n], labelOf = new long[n];
            int u = 0;
            for (int k = 0; k < n; k++) {
                long key = pairIndex[k] * (long) vocab + labels[k];
                Integer id = ids.get(key);
                if (id == null) {
                    ids.put(key, id = u);
                    rowOf[u] = pairIndex[k];
                    labelOf[u] = labels[k];
                    u++;
                }
                pairOf[k] = id;
            }
            return new UniquePairs(u, java.util.Arrays.copyOf(rowOf, u), java.util.Arrays.copyOf(labelOf, u), pairOf);
        }

        /** The logits of the distinct pairs, [count, V], from the unique slots' logits (autograd-tracked gather when needed). */
        Tensor logits(Tensor slots, ReferencePolicy model) {
            return count == slots.size(0) && ascending(rowOf, count) ? slots : slots.index_select(0, to(Tensor.create(rowOf, count), model));
        }
    }

    /**
     * The loss of a micro-batch whose (trajectory, token) pairs share logit rows, reading each distinct (row, label)
     * once: token statistics over the distinct rows, the O(T) per-pair loss over the pairs (each with its own
     * advantage, old log-prob, weight and sequence: the clip is not linear in A), the pairs' upstream gradients
     * summed per distinct row, and one statistics backward over the distinct rows — ∂L/∂z_row = (Σ ∂L/∂lp)(e_y − p)
     * + (Σ ∂L/∂H) ∂H/∂z, the sum over the pairs of each one's gradient, since they share z and y.
     */
    private static PolicyLossResult sharedRowsLoss(ReferencePolicy policy, Inputs in, TokenBatch mb, PolicyLossConfig c, int vocabLimit,
                                                   boolean backward) {
        int n = mb.rows();
        UniquePairs up = UniquePairs.of(in.packed.pairIndex(), mb.label(), policy.config().vocab());
        Tensor slots = backward ? uniqueLogits(policy, in) : noGrad(() -> uniqueLogits(policy, in));
        Tensor rows = backward ? up.logits(slots, policy) : noGrad(() -> up.logits(slots, policy));
        Tensor data = rows.detach(), labels = to(Tensor.create(up.labelOf(), up.count()), policy);
        float t = (float) c.temperature();
        TorchTokenStats.Stats st = TorchTokenStats.forward(data, labels, t, null, vocabLimit);
        float[] lpU = TorchTensors.hostFloats(st.logprob()), hU = TorchTensors.hostFloats(st.entropy());
        float[] lp = new float[n], h = new float[n], glp = new float[n], gh = new float[n];
        for (int k = 0; k < n; k++) {
            lp[k] = lpU[up.pairOf()[k]];
            h[k] = hU[up.pairOf()[k]];
        }
        boolean kl = c.klType() != ai.arbor.kernels.KlType.NONE;
        PolicyLossResult r = ai.arbor.kernels.PolicyLoss.loss(c, lp, h, mb.old(), mb.advantage(), mb.weight(), kl ? mb.ref() : null,
                c.agg().needsSequences() || c.clipMode().isGspo() ? mb.seqId() : null, null, glp, gh);
        if (backward) {
            float[] glpU = new float[up.count()], ghU = new float[up.count()];
            for (int k = 0; k < n; k++) {
                glpU[up.pairOf()[k]] += glp[k];
                ghU[up.pairOf()[k]] += gh[k];
            }
            Tensor grad = TorchTokenStats.backward(data, labels, t, null, vocabLimit, st, to(Tensor.create(glpU, up.count()), policy),
                    to(Tensor.create(ghU, up.count()), policy));
            rows.backward(grad, new BoolOptional(), false, new TensorArrayRefOptional());
        }
        return r;
    }

    /** Final hidden states of the loss rows, [N, D] (gathered from the unique predicting slots). */
    private static Tensor pairHidden(ReferencePolicy policy, Inputs in) {
        Tensor u;
        if (in.chains) {
            Tensor h = policy.hidden(in.tokens);
            u = h.reshape(h.size(0) * h.size(1), h.size(2)).index_select(0, in.logitRows);
        } else {
            u = policy.pathHidden(in.paths).index_select(0, in.logitRows);
        }
        return in.identity ? u : u.index_select(0, in.pairIndex);
    }

    /**
     * Per row of {@code batch}, the log-prob and entropy of its token under {@code model} at {@code temperature},
     * no gradients, packed: each unique (predicting slot, token) once.
     */
    static Trainer.Scores score(ReferencePolicy model, TokenBatch batch, float temperature, int budget, int maxPack, int vocabLimit) {
        float[] lps = new float[batch.rows()], ents = new float[batch.rows()];
        try (NoGradGuard g = new NoGradGuard()) {
            for (TreePacking.MicroBatch part : TreePacking.plan(batch, budget, maxPack, COST, UNPACKED_PER_BUDGET * budget)) {
                try (PointerScope scope = new PointerScope()) {
                    Inputs in = inputs(batch, part, model);
                    TokenBatch mb = in.packed.rows();
                    int n = mb.rows();
                    if (n == 0) continue;
                    // unique (logit row, label) pairs: a branch point's slot predicts one token per child
                    UniquePairs up = UniquePairs.of(in.packed.pairIndex(), mb.label(), model.config().vocab());
                    int[] tokenOf = up.pairOf();
                    Tensor logits = up.logits(uniqueLogits(model, in), model);
                    TorchTokenStats.Stats st = TorchTokenStats.forward(logits, to(Tensor.create(up.labelOf(), up.count()), model),
                            temperature, null, vocabLimit);
                    float[] lp = TorchTensors.hostFloats(st.logprob()), h = TorchTensors.hostFloats(st.entropy());
                    int[] rows = batch.rowsOf(in.packed.sequences());
                    for (int k = 0; k < n; k++) {
                        lps[rows[k]] = lp[tokenOf[k]];
                        ents[rows[k]] = h[tokenOf[k]];
                    }
                }
            }
        }
        return new Trainer.Scores(lps, ents);
    }

    /** Whether rowOf[0..u) is 0, 1, …, u − 1. */
    private static boolean ascending(long[] rowOf, int u) {
        for (int i = 0; i < u; i++) if (rowOf[i] != i) return false;
        return true;
    }

    /** The tokens computed per step, packed and unpacked, without running the model (for metrics and benchmarks). */
    static Work work(TokenBatch batch, PolicyConfig cfg, int budget, int maxPack) {
        long unique = 0, total = 0;
        List<TreePacking.MicroBatch> plan = TreePacking.plan(batch, budget, maxPack, COST, UNPACKED_PER_BUDGET * budget);
        for (TreePacking.MicroBatch mb : plan)
            for (int[] pack : mb.packs()) {
                int[] prev = null;
                for (int s : pack) {
                    int[] t = batch.sequences().get(s);
                    total += t.length;
                    int shared = 0;
                    if (prev != null) while (shared < Math.min(prev.length, t.length) && prev[shared] == t[shared]) shared++;
                    unique += t.length - shared;
                    prev = t;
                }
            }
        return new Work(unique, total, plan.size());
    }

    private static Tensor noGrad(java.util.function.Supplier<Tensor> body) {
        try (NoGradGuard g = new NoGradGuard()) {
            return body.get();
        }
    }

    private static Tensor to(Tensor host, ReferencePolicy model) {
        return model.device().is_cpu() ? host : host.to(model.device(), host.scalar_type());
    }
}
