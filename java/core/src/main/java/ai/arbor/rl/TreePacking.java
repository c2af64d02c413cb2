package ai.arbor.rl;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;

/**
 * Tree-packed layout of a {@link TokenBatch} for the update (docs/algorithms.md §9, docs/training.md "Tree
 * packing"): sequences that share a prefix — a Tree-GRPO tree, an ARPO/AEPO branch set, the n chains of one
 * prompt — become one packed sequence in which every node of their prefix trie appears once. A packed token
 * attends to itself and its ancestors only and sits at position id = its depth, so its hidden state, and the
 * logits it gives, equal those of every sequence that passes through it; the gradient of a loss read at
 * those logits is therefore the unpacked one.
 *
 * <p>The trie is built from the token sequences themselves (sorted, a sequence shares with its sorted
 * predecessor their longest common prefix), so it needs no rollout tree and finds every shared prefix, a
 * strict-prefix trajectory included. The loss rows stay the batch's rows — one per (trajectory, trained
 * token) pair, each with its own advantage, old/ref log-prob and weight — and each row references the unique
 * logit row that predicts it ({@link Packed#pairIndex}); a logit row shared by k pairs is computed once.
 *
 * <p>{@link #plan} groups the sequences into packs and the packs into micro-batches of at most {@code budget}
 * padded packed tokens (packs × longest pack), the same bound as the unpacked micro-batches; a sequence joins
 * the pack of its sorted predecessor only when the {@link Cost} model says the joined pack is cheaper than a
 * sequence of its own (the dense ancestor mask makes a pack's attention quadratic in its size, where causal
 * attention over a lone sequence is half that), and a pack never exceeds {@code maxPack} tokens. Torch-free.
 */
public final class TreePacking {
    private TreePacking() {}

    /**
     * The work model that decides whether a sequence joins a pack: {@code perToken} for a token's projections and
     * MLP, {@code perPair} for one (query, key) entry of attention. A lone sequence of length L costs
     * {@code perToken·L + perPair·L(L+1)/2} (causal), a pack of U tokens {@code perToken·U + perPair·U²} (the dense
     * ancestor mask). Only the ratio matters.
     */
    public record Cost(double perToken, double perPair) {
        public Cost {
            if (!(perToken > 0) || !(perPair >= 0) || Double.isInfinite(perToken) || Double.isInfinite(perPair))
                throw new IllegalArgumentException("cost must have perToken > 0 and perPair >= 0, got " + perToken + ", " + perPair);
        }

        /**
         * Forward multiply-adds of a decoder block stack: per token the q/k/v/o projections and the SwiGLU MLP, per
         * attention entry q·k and p·v over every query head.
         */
        public static Cost of(int dModel, int layers, int heads, int kvHeads, int headDim, int ffnDim) {
            double q = (double) heads * headDim, kv = (double) kvHeads * headDim;
            double perToken = layers * (dModel * (q + 2 * kv) + q * dModel + 3.0 * dModel * ffnDim);
            double perPair = layers * 2.0 * heads * headDim;
            return new Cost(perToken, perPair);
        }

        /** Always join when a prefix is shared (and the size allows): the mask's attention counted as free. */
        public static Cost tokensOnly() {
            return new Cost(1, 0);
        }

        double lone(int len) {
            return perToken * len + perPair * len * (len + 1.0) / 2;
        }

        double join(int packSize, int added) {
            double u = packSize, v = packSize + (double) added;
            return perToken * added + perPair * (v * v - u * u);
        }
    }

    /** One micro-batch: its packs, each the batch's sequence ids in the pack's (sorted) order. */
    public record MicroBatch(int[][] packs) {
        /** The micro-batch's sequences, pack after pack (the order of {@link Packed#rows()}'s sequences). */
        public int[] sequences() {
            return Arrays.stream(packs).flatMapToInt(Arrays::stream).toArray();
        }
    }

    /**
     * Packs and micro-batches for {@code batch}: packs of sequences sharing a prefix (at most {@code maxPack}
     * unique tokens unless one sequence is longer, joined only where {@code cost} says it saves work), then
     * micro-batches of at most {@code budget} packs × longest pack tokens (largest packs first; a pack over the
     * budget alone). Every sequence of the batch is in exactly one pack.
     */
    public static List<MicroBatch> plan(TokenBatch batch, int budget, int maxPack, Cost cost) {
        return plan(batch, budget, maxPack, cost, Long.MAX_VALUE);
    }

    /**
     * As {@link #plan(TokenBatch, int, int, Cost)}, a pack and a micro-batch also holding sequences of at most
     * {@code maxUnpacked} tokens in all (their unpacked length: what path attention gathers keys and values for),
     * unless one sequence is longer.
     */
    public static List<MicroBatch> plan(TokenBatch batch, int budget, int maxPack, Cost cost, long maxUnpacked) {
        if (batch == null || cost == null) throw new IllegalArgumentException("batch and cost are required");
        if (maxUnpacked < 1) throw new IllegalArgumentException("maxUnpacked must be >= 1, got " + maxUnpacked);
        if (budget < 1) throw new IllegalArgumentException("budget must be >= 1, got " + budget);
        if (maxPack < 1) throw new IllegalArgumentException("maxPack must be >= 1, got " + maxPack);
        int n = batch.sequenceCount();
        Integer[] order = new Integer[n];
        for (int i = 0; i < n; i++) order[i] = i;
        Arrays.sort(order, (a, b) -> {
            int c = Arrays.compare(batch.sequences().get(a), batch.sequences().get(b));
            return c != 0 ? c : Integer.compare(a, b);
        });
        List<int[]> packs = new ArrayList<>();
        List<Integer> sizes = new ArrayList<>();
        List<Long> totals = new ArrayList<>();
        List<Integer> cur = new ArrayList<>();
        int size = 0;
        long total = 0;
        int[] prev = null;
        for (int s : order) {
            int[] toks = batch.sequences().get(s);
            int shared = prev == null ? 0 : commonPrefix(prev, toks);
            int added = toks.length - shared;
            if (!cur.isEmpty() && shared > 0 && size + added <= maxPack && total + toks.length <= maxUnpacked
                    && cost.join(size, added) < cost.lone(toks.length)) {
                cur.add(s);
                size += added;
                total += toks.length;
            } else {
                if (!cur.isEmpty()) {
                    packs.add(cur.stream().mapToInt(Integer::intValue).toArray());
                    sizes.add(size);
                    totals.add(total);
                }
                cur = new ArrayList<>(List.of(s));
                size = toks.length;
                total = toks.length;
            }
            prev = toks;
        }
        if (!cur.isEmpty()) {
            packs.add(cur.stream().mapToInt(Integer::intValue).toArray());
            sizes.add(size);
            totals.add(total);
        }
        Integer[] byPack = new Integer[packs.size()];
        for (int i = 0; i < byPack.length; i++) byPack[i] = i;
        Arrays.sort(byPack, Comparator.comparingInt((Integer i) -> -sizes.get(i)).thenComparingInt(i -> i));
        List<MicroBatch> out = new ArrayList<>();
        List<int[]> mb = new ArrayList<>();
        int longest = 0;
        long unpacked = 0;
        for (int p : byPack) {
            int l = Math.max(longest, sizes.get(p));
            if (!mb.isEmpty() && ((long) l * (mb.size() + 1) > budget || unpacked + totals.get(p) > maxUnpacked)) {
                out.add(new MicroBatch(mb.toArray(new int[0][])));
                mb.clear();
                l = sizes.get(p);
                unpacked = 0;
            }
            mb.add(packs.get(p));
            longest = l;
            unpacked += totals.get(p);
        }
        if (!mb.isEmpty()) out.add(new MicroBatch(mb.toArray(new int[0][])));
        return out;
    }

    static int commonPrefix(int[] a, int[] b) {
        int m = Math.min(a.length, b.length), i = 0;
        while (i < m && a[i] == b[i]) i++;
        return i;
    }

    /**
     * The packed model inputs of one micro-batch and its loss rows.
     *
     * @param rows        the loss rows: {@code batch.select(sequences)} (one row per (trajectory, trained token)
     *                    pair, every column as in the unpacked batch)
     * @param sequences   the batch's sequence ids of {@link #rows}' sequences, in order
     * @param packs       packed sequences (the model's batch dimension)
     * @param width       slots per packed sequence (its longest; shorter ones padded)
     * @param tokens      [packs × width] token ids (0 in padding)
     * @param positions   [packs × width] position ids: a slot's depth on its own path (0 in padding)
     * @param parent      [packs × width] the slot of the parent node in the same pack, −1 for a root or padding
     * @param valid       [packs × width] whether a slot holds a token (false: padding)
     * @param logitRows   the flattened slots ({@code pack · width + slot}) whose logits predict a trained token,
     *                    ascending, each once
     * @param pairIndex   per row of {@link #rows}, its predicting slot as an index into {@link #logitRows}
     * @param uniqueTokens tokens in the packs (the nodes of the tries)
     * @param totalTokens  tokens of the sequences unpacked (Σ lengths)
     * @param paths        per sequence of {@link #rows}, the flattened slot of each of its positions
     * @param shared       per sequence of {@link #rows}, how many leading positions it shares with the sequence before
     *                     it in its pack (those slots belong to an earlier sequence; the rest are its own)
     */
    public record Packed(TokenBatch rows, int[] sequences, int packs, int width, long[] tokens, long[] positions, int[] parent,
                         boolean[] valid, long[] logitRows, long[] pairIndex, int uniqueTokens, int totalTokens, int[][] paths, int[] shared) {

        /**
         * The packed tokens as one flat row of unique tokens with attention along each sequence's path (the layout
         * {@code ReferencePolicy.forwardPathRows} reads): every unique slot is computed once, and attention runs per
         * sequence over the slots it owns (its positions from {@code shared} on) as queries and its whole path as
         * keys, causal in depth — so attention costs what the unpacked sequences' does, never the square of a pack.
         */
        public PathAttention pathAttention() {
            int slots = packs * width;
            int[] compact = new int[slots];
            Arrays.fill(compact, -1);
            int u = 0;
            for (int i = 0; i < slots; i++) if (valid[i]) compact[i] = u++;
            long[] tok = new long[u], pos = new long[u];
            for (int i = 0; i < slots; i++)
                if (valid[i]) {
                    tok[compact[i]] = tokens[i];
                    pos[compact[i]] = positions[i];
                }
            long[] rowsOut = new long[logitRows.length];
            for (int i = 0; i < rowsOut.length; i++) rowsOut[i] = compact[(int) logitRows[i]];
            List<Integer> owners = new ArrayList<>();
            int lq = 1, lk = 1;
            for (int i = 0; i < paths.length; i++)
                if (paths[i].length > shared[i]) {
                    owners.add(i);
                    lq = Math.max(lq, paths[i].length - shared[i]);
                    lk = Math.max(lk, paths[i].length);
                }
            int n = owners.size();
            long[] q = new long[Math.multiplyExact(n, lq)], k = new long[Math.multiplyExact(n, lk)], scatter = new long[u], causal = new long[u];
            boolean[] mask = new boolean[Math.multiplyExact(Math.multiplyExact(n, lq), lk)];
            for (int a = 0; a < n; a++) {
                int[] path = paths[owners.get(a)];
                int from = shared[owners.get(a)];
                for (int t = 0; t < path.length; t++) k[a * lk + t] = compact[path[t]];
                for (int j = 0; j < lq; j++) {
                    int depth = from + j;
                    boolean real = depth < path.length;
                    if (real) {
                        q[a * lq + j] = compact[path[depth]];
                        scatter[compact[path[depth]]] = (long) a * lq + j;
                        causal[compact[path[depth]]] = (long) a * lk + depth;
                    }
                    int base = (a * lq + j) * lk;
                    if (real) for (int t = 0; t <= depth; t++) mask[base + t] = true;
                    else mask[base] = true;   // a padding query reads key 0 (no empty softmax row); its output is dropped
                }
            }
            return new PathAttention(tok, pos, rowsOut, n, lq, lk, q, k, mask, scatter, causal);
        }

        /**
         * The ancestor mask, [packs × width × width] row-major: {@code mask[b][q][k]} is true iff slot k is q itself
         * or an ancestor of q in pack b (q reads k); a padding slot reads itself only (no empty softmax row).
         */
        public boolean[] mask() {
            boolean[] m = new boolean[Math.multiplyExact(Math.multiplyExact(packs, width), width)];
            for (int b = 0; b < packs; b++)
                for (int q = 0; q < width; q++) {
                    int base = (b * width + q) * width;
                    for (int k = q; k >= 0; k = parent[b * width + k]) m[base + k] = true;
                }
            return m;
        }
    }

    /**
     * The flat path-attention layout of a {@link Packed} micro-batch.
     *
     * @param tokens     [U] the unique tokens
     * @param positions  [U] their depths
     * @param logitRows  indices into [U] of the slots that predict a trained token (the order of {@link Packed#logitRows})
     * @param sequences  attention rows: the sequences that own at least one slot
     * @param queries    query slots per attention row (padded)
     * @param keys       key slots per attention row (padded)
     * @param queryIndex [sequences × queries] the owned slots (0 in padding)
     * @param keyIndex   [sequences × keys] the path's slots (0 in padding)
     * @param mask       [sequences × queries × keys] query j (depth shared + j) reads keys of depth ≤ its own
     * @param scatter    [U] per slot, its row in the flattened [sequences × queries] attention output
     * @param causalScatter [U] per slot, its row in the flattened [sequences × keys] output of causal attention over
     *                   each whole path (queries = keys = {@link #keyIndex}: the shared queries are recomputed in
     *                   attention only, and the causal kernel needs no mask)
     */
    public record PathAttention(long[] tokens, long[] positions, long[] logitRows, int sequences, int queries, int keys, long[] queryIndex,
                                long[] keyIndex, boolean[] mask, long[] scatter, long[] causalScatter) {}

    /** The packed layout of {@code mb}'s packs of {@code batch}. */
    public static Packed pack(TokenBatch batch, MicroBatch mb) {
        if (batch == null || mb == null) throw new IllegalArgumentException("batch and micro-batch are required");
        int packs = mb.packs().length;
        int[] size = new int[packs];
        int[][][] paths = new int[packs][][];
        int[][] sharedOf = new int[packs][];
        int total = 0;
        for (int b = 0; b < packs; b++) {
            int[] seqs = mb.packs()[b];
            if (seqs.length == 0) throw new IllegalArgumentException("pack " + b + " is empty");
            paths[b] = new int[seqs.length][];
            sharedOf[b] = new int[seqs.length];
            int[] prev = null;
            int[] prevPath = null;
            for (int j = 0; j < seqs.length; j++) {
                if (seqs[j] < 0 || seqs[j] >= batch.sequenceCount())
                    throw new IllegalArgumentException("sequence " + seqs[j] + " is outside [0, " + batch.sequenceCount() + ")");
                int[] toks = batch.sequences().get(seqs[j]);
                int shared = prev == null ? 0 : commonPrefix(prev, toks);
                int[] path = new int[toks.length];
                for (int p = 0; p < toks.length; p++) path[p] = p < shared ? prevPath[p] : size[b]++;
                paths[b][j] = path;
                sharedOf[b][j] = shared;
                prev = toks;
                prevPath = path;
                total += toks.length;
            }
        }
        int width = Arrays.stream(size).max().orElse(0);
        int slots = Math.multiplyExact(packs, width);
        long[] tokens = new long[slots], positions = new long[slots];
        int[] parent = new int[slots];
        boolean[] valid = new boolean[slots];
        Arrays.fill(parent, -1);
        for (int b = 0; b < packs; b++)
            for (int j = 0; j < paths[b].length; j++) {
                int[] toks = batch.sequences().get(mb.packs()[b][j]), path = paths[b][j];
                for (int p = 0; p < toks.length; p++) {
                    int at = b * width + path[p];
                    tokens[at] = toks[p];
                    positions[at] = p;
                    parent[at] = p == 0 ? -1 : path[p - 1];
                    valid[at] = true;
                }
            }
        int[] seqs = mb.sequences();
        TokenBatch rows = batch.select(seqs);
        // per selected sequence: its pack and path
        int[] packOf = new int[seqs.length], sharedWith = new int[seqs.length];
        int[][] pathOf = new int[seqs.length][], flatPaths = new int[seqs.length][];
        for (int b = 0, i = 0; b < packs; b++)
            for (int j = 0; j < paths[b].length; j++, i++) {
                packOf[i] = b;
                pathOf[i] = paths[b][j];
                sharedWith[i] = sharedOf[b][j];
                flatPaths[i] = new int[pathOf[i].length];
                for (int p = 0; p < pathOf[i].length; p++) flatPaths[i][p] = b * width + pathOf[i][p];
            }
        int n = rows.rows();
        long[] flat = new long[n];
        for (int k = 0; k < n; k++) {
            int s = rows.seqId()[k];
            flat[k] = (long) packOf[s] * width + pathOf[s][rows.position()[k] - 1];   // the slot at p − 1 predicts p
        }
        long[] unique = Arrays.stream(flat).distinct().sorted().toArray();
        long[] pair = new long[n];
        for (int k = 0; k < n; k++) pair[k] = Arrays.binarySearch(unique, flat[k]);
        return new Packed(rows, seqs, packs, width, tokens, positions, parent, valid, unique, pair, Arrays.stream(size).sum(), total,
                flatPaths, sharedWith);
    }
}
