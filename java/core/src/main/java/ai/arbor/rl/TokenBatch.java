package ai.arbor.rl;

import ai.arbor.kernels.LossAgg;
import ai.arbor.rollout.Trajectory;
import java.util.Arrays;
import java.util.List;

/**
 * The trained tokens of one step in the layout the policy-loss kernel reads (docs/algorithms.md §2): one row
 * per trained token, the rows of a sequence adjacent and in position order, sequences in order. Every
 * per-token value the step decides is a column here, in the same index space from the estimator to the
 * kernel; the trainer hands the columns to the kernel as they are and builds the model inputs (padded tokens,
 * the logit row before each trained position) from {@link #sequences}, {@link #seqId} and {@link #position}.
 *
 * <p>Supervised batches ({@link #supervised}) carry only the token columns (log-probs, advantages, entropy,
 * post-tool flags null). Rollouts become a batch through {@link #of(List)} (the rollout's columns, no
 * advantages yet) — {@link StepPipeline} does that and adds a recipe's advantages; an embedding trainer with
 * its own estimator adds them with {@link #withAdvantages}. Policy-gradient batches carry behaviour log-probs,
 * old log-probs (the behaviour ones, or recomputed: {@link #withOldLogprobs}), advantages, loss weights and,
 * for a KL term, reference log-probs ({@link #withRefLogprobs}).
 *
 * @param sequences  per sequence, its tokens (prompt, then response)
 * @param source     per sequence, where it came from (the index of its trajectory in the scored list, or of
 *                   its supervised sequence)
 * @param seqId      per row, its sequence in [0, sequences.size()), non-decreasing
 * @param position   per row, the trained token's position in its sequence (≥ 1: the logits at position − 1
 *                   predict it)
 * @param label      per row, the trained token ({@code sequences[seqId][position]})
 * @param behaviour  per row, log π_behaviour of the token as the sampler reported it (tempered), or null
 * @param old        per row, log π_old (the ratio's denominator), or null
 * @param ref        per row, log π_ref (the KL term), or null
 * @param advantage  per row, the token advantage after filters and shaping, or null
 * @param weight     per row, the loss weight the kernel multiplies each token's loss by (its mask)
 * @param entropy    per row, the rollout's entropy of the token's distribution (0 where the backend gave
 *                   none), or null
 * @param postTool   per row, whether the token follows a tool observation (TAO-RL's M_post), or null
 */
public record TokenBatch(List<int[]> sequences, int[] source, int[] seqId, int[] position, int[] label, float[] behaviour,
                         float[] old, float[] ref, float[] advantage, float[] weight, float[] entropy, boolean[] postTool) {

    public TokenBatch {
        if (sequences == null || source == null || seqId == null || position == null || label == null || weight == null)
            throw new IllegalArgumentException("sequences, source, seqId, position, label and weight are required");
        sequences = List.copyOf(sequences);
        if (source.length != sequences.size())
            throw new IllegalArgumentException("source has " + source.length + " entries for " + sequences.size() + " sequences");
        int n = seqId.length;
        length("position", position.length, n);
        length("label", label.length, n);
        length("weight", weight.length, n);
        if (behaviour != null) length("behaviour", behaviour.length, n);
        if (old != null) length("old", old.length, n);
        if (ref != null) length("ref", ref.length, n);
        if (advantage != null) length("advantage", advantage.length, n);
        if (entropy != null) length("entropy", entropy.length, n);
        if (postTool != null) length("postTool", postTool.length, n);
        for (int k = 0; k < n; k++) {
            int s = seqId[k];
            if (s < 0 || s >= sequences.size() || (k > 0 && s < seqId[k - 1]))
                throw new IllegalArgumentException("seqId[" + k + "] = " + s + " is outside [0, " + sequences.size() + ") or decreasing");
            int[] toks = sequences.get(s);
            if (position[k] < 1 || position[k] >= toks.length || (k > 0 && s == seqId[k - 1] && position[k] <= position[k - 1]))
                throw new IllegalArgumentException("position[" + k + "] = " + position[k] + " is not a trainable, increasing position of sequence "
                        + s + " (length " + toks.length + ")");
            if (label[k] != toks[position[k]])
                throw new IllegalArgumentException("label[" + k + "] = " + label[k] + " is not token " + toks[position[k]] + " at that position");
            if (!(weight[k] >= 0) || Float.isInfinite(weight[k]))
                throw new IllegalArgumentException("weight[" + k + "] = " + weight[k] + " is not a finite weight >= 0");
            if (behaviour != null) logprob("behaviour", k, behaviour[k]);
            if (old != null) logprob("old", k, old[k]);
            if (ref != null && !Float.isFinite(ref[k])) throw new IllegalArgumentException("ref[" + k + "] = " + ref[k] + " is not finite");
            if (advantage != null && !Float.isFinite(advantage[k]))
                throw new IllegalArgumentException("advantage[" + k + "] = " + advantage[k] + " is not finite");
        }
    }

    private static void length(String name, int got, int rows) {
        if (got != rows) throw new IllegalArgumentException(name + " has " + got + " entries for " + rows + " rows");
    }

    private static void logprob(String name, int k, float v) {
        if (!(Float.isFinite(v) && v <= 1e-4f)) throw new IllegalArgumentException(name + "[" + k + "] = " + v + " is not a log-probability");
    }

    /** The trained positions of {@code batch} as a supervised token batch (weight 1 per trained token). */
    public static TokenBatch supervised(List<Sequence> batch) {
        int n = 0;
        for (Sequence s : batch) n += s.trainedTokens();
        int[] seq = new int[n], pos = new int[n], lab = new int[n], src = new int[batch.size()];
        List<int[]> toks = new java.util.ArrayList<>(batch.size());
        int k = 0;
        for (int i = 0; i < batch.size(); i++) {
            Sequence s = batch.get(i);
            toks.add(s.tokens());
            src[i] = i;
            for (int p = 0; p < s.length(); p++)
                if (s.mask()[p]) {
                    seq[k] = i;
                    pos[k] = p;
                    lab[k] = s.tokens()[p];
                    k++;
                }
        }
        float[] w = new float[n];
        Arrays.fill(w, 1f);
        return new TokenBatch(toks, src, seq, pos, lab, null, null, null, null, w, null, null);
    }

    /**
     * The generated tokens of {@code trajectories} as rows (prompt and tool observations are context, not rows):
     * behaviour and old log-probs = the sampler's, entropy (0 where the backend reported none), the post-tool
     * flag; weight 1; no advantages yet. Sequence {@code s} is {@code trajectories.get(s)}'s prompt and response.
     */
    public static TokenBatch of(List<Trajectory> trajectories) {
        int[] source = new int[trajectories.size()];
        for (int i = 0; i < source.length; i++) source[i] = i;
        return of(trajectories, source);
    }

    /** As {@link #of(List)}, sequence {@code s} recording {@code source[s]} as where it came from. */
    static TokenBatch of(List<Trajectory> trajectories, int[] source) {
        int n = 0;
        for (Trajectory t : trajectories) n += t.generatedTokens();
        List<int[]> sequences = new java.util.ArrayList<>(trajectories.size());
        int[] seqId = new int[n], position = new int[n], label = new int[n];
        float[] behaviour = new float[n], entropy = new float[n], weight = new float[n];
        boolean[] postTool = new boolean[n];
        int at = 0;
        for (int s = 0; s < trajectories.size(); s++) {
            Trajectory t = trajectories.get(s);
            int p0 = t.prompt().tokens().length;
            sequences.add(Sequence.of(t.prompt(), t).tokens());
            for (int q = 0; q < t.length(); q++) {
                if (!t.lossMask()[q]) continue;
                seqId[at] = s;
                position[at] = p0 + q;
                label[at] = t.tokens()[q];
                behaviour[at] = t.logprobs()[q];
                float h = t.entropies()[q];
                entropy[at] = Float.isFinite(h) ? h : 0;   // a backend without entropies: shaping sees 0
                postTool[at] = t.postTool()[q];
                weight[at] = 1f;
                at++;
            }
        }
        return new TokenBatch(sequences, source, seqId, position, label, behaviour, behaviour, null, null, weight, entropy, postTool);
    }

    /** This batch with token advantages (one per row). */
    public TokenBatch withAdvantages(float[] v) {
        if (v == null) throw new IllegalArgumentException("advantages must not be null");
        return new TokenBatch(sequences, source, seqId, position, label, behaviour, old, ref, v, weight, entropy, postTool);
    }

    /** Number of rows (trained tokens). */
    public int rows() {
        return seqId.length;
    }

    /** Number of sequences. */
    public int sequenceCount() {
        return sequences.size();
    }

    /** The length of sequence {@code s} (prompt + response). */
    public int length(int s) {
        return sequences.get(s).length;
    }

    /** First row of each sequence, and {@link #rows()} at the end ({@code sequenceCount() + 1} entries). */
    public int[] rowStarts() {
        int[] start = new int[sequences.size() + 1];
        for (int s : seqId) start[s + 1]++;
        for (int i = 0; i < sequences.size(); i++) start[i + 1] += start[i];
        return start;
    }

    /**
     * The aggregation's normalizer over this batch (docs/algorithms.md §2): trained tokens N = Σ weight (token-mean),
     * sequences with a row of weight &gt; 0 B (the sequence means), or the longest trained span F (Dr.GRPO's
     * token-sum-norm); at least 1. Micro-batches of this batch use it, so they add up to this batch's loss. Rows
     * of weight 0 (rejected by an off-policy correction) are not counted, as the kernel's own N and B do not.
     */
    public double normalizer(LossAgg agg) {
        return switch (agg) {
            case TOKEN_MEAN -> {
                double n = 0;
                for (float w : weight) n += w;
                yield Math.max(1, n);
            }
            case SEQ_MEAN_TOKEN_SUM, SEQ_MEAN_TOKEN_MEAN -> {
                boolean[] live = new boolean[sequences.size()];
                int b = 0;
                for (int k = 0; k < rows(); k++)
                    if (weight[k] > 0 && !live[seqId[k]]) {
                        live[seqId[k]] = true;
                        b++;
                    }
                yield Math.max(1, b);
            }
            case SEQ_MEAN_TOKEN_SUM_NORM -> {
                int f = 1;
                for (int k = 0; k < rows(); k++)
                    if (k + 1 == rows() || seqId[k + 1] != seqId[k]) {
                        int first = k;
                        while (first > 0 && seqId[first - 1] == seqId[k]) first--;
                        f = Math.max(f, position[k] - position[first] + 1);
                    }
                yield f;
            }
        };
    }

    /** This batch with other loss weights (e.g. 0 for rows an off-policy rejection removed). */
    public TokenBatch withWeights(float[] v) {
        if (v == null) throw new IllegalArgumentException("weights must not be null");
        return new TokenBatch(sequences, source, seqId, position, label, behaviour, old, ref, advantage, v, entropy, postTool);
    }

    /** This batch with other old log-probs (e.g. recomputed by a no-gradient forward). */
    public TokenBatch withOldLogprobs(float[] v) {
        return new TokenBatch(sequences, source, seqId, position, label, behaviour, v, ref, advantage, weight, entropy, postTool);
    }

    /** This batch with reference log-probs (the KL term). */
    public TokenBatch withRefLogprobs(float[] v) {
        return new TokenBatch(sequences, source, seqId, position, label, behaviour, old, v, advantage, weight, entropy, postTool);
    }

    /**
     * The rows of {@code seqs}, in that order, as a batch of their own (sequence ids renumbered 0, 1, …): a
     * mini-batch, or a micro-batch the kernel reads as it is.
     */
    public TokenBatch select(int[] seqs) {
        int[] start = rowStarts();
        int n = 0;
        for (int s : seqs) {
            if (s < 0 || s >= sequences.size()) throw new IllegalArgumentException("sequence " + s + " is outside [0, " + sequences.size() + ")");
            n += start[s + 1] - start[s];
        }
        int[] rowsOf = new int[n], ids = new int[n], src = new int[seqs.length];
        List<int[]> toks = new java.util.ArrayList<>(seqs.length);
        int k = 0;
        for (int i = 0; i < seqs.length; i++) {
            toks.add(sequences.get(seqs[i]));
            src[i] = source[seqs[i]];
            for (int r = start[seqs[i]]; r < start[seqs[i] + 1]; r++) {
                rowsOf[k] = r;
                ids[k++] = i;
            }
        }
        return new TokenBatch(toks, src, ids, pick(position, rowsOf), pick(label, rowsOf), pick(behaviour, rowsOf), pick(old, rowsOf),
                pick(ref, rowsOf), pick(advantage, rowsOf), pick(weight, rowsOf), pick(entropy, rowsOf), pick(postTool, rowsOf));
    }

    /** The rows of this batch that {@link #select select(seqs)} returns, in its order. */
    public int[] rowsOf(int[] seqs) {
        int[] start = rowStarts();
        int n = 0;
        for (int s : seqs) n += start[s + 1] - start[s];
        int[] out = new int[n];
        int k = 0;
        for (int s : seqs) for (int r = start[s]; r < start[s + 1]; r++) out[k++] = r;
        return out;
    }

    private static int[] pick(int[] v, int[] rows) {
        int[] o = new int[rows.length];
        for (int i = 0; i < rows.length; i++) o[i] = v[rows[i]];
        return o;
    }

    private static float[] pick(float[] v, int[] rows) {
        if (v == null) return null;
        float[] o = new float[rows.length];
        for (int i = 0; i < rows.length; i++) o[i] = v[rows[i]];
        return o;
    }

    private static boolean[] pick(boolean[] v, int[] rows) {
        if (v == null) return null;
        boolean[] o = new boolean[rows.length];
        for (int i = 0; i < rows.length; i++) o[i] = v[rows[i]];
        return o;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof TokenBatch b && sequences.size() == b.sequences.size()
                && java.util.stream.IntStream.range(0, sequences.size()).allMatch(i -> Arrays.equals(sequences.get(i), b.sequences.get(i)))
                && Arrays.equals(source, b.source) && Arrays.equals(seqId, b.seqId) && Arrays.equals(position, b.position)
                && Arrays.equals(label, b.label) && Arrays.equals(behaviour, b.behaviour) && Arrays.equals(old, b.old)
                && Arrays.equals(ref, b.ref) && Arrays.equals(advantage, b.advantage) && Arrays.equals(weight, b.weight)
                && Arrays.equals(entropy, b.entropy) && Arrays.equals(postTool, b.postTool);
    }

    @Override
    public int hashCode() {
        return 31 * Arrays.hashCode(seqId) + Arrays.hashCode(label);
    }

    @Override
    public String toString() {
        return "TokenBatch[" + sequences.size() + " sequences, " + rows() + " trained tokens]";
    }
}
