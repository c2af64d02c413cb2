package ai.arbor.torch.model;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeMap;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;

/**
 * Batched incremental decoding over a {@link KvCache}, with sequences that can be forked: the
 * engine a generator drives for chain rollouts (GRPO) and tree rollouts (Tree-GRPO, ARPO, AEPO),
 * where one trajectory's context is branched into many continuations.
 *
 * <p>Every live sequence has an id, its tokens, and a block table in the cache. One forward pass
 * ({@link #extend}) appends any number of new tokens to any subset of the sequences — different
 * lengths, different positions — and returns the logits after each sequence's last new token:
 * <ul>
 *   <li>{@link #prefill} starts new sequences from prompts;</li>
 *   <li>{@link #step} appends one token to each listed sequence (the decode loop);</li>
 *   <li>{@link #extend} appends several (a tool's observation tokens, a forced continuation);</li>
 *   <li>{@link #fork} makes k sequences sharing a prefix of an existing one — the prefix's keys and
 *       values are shared block by block, never recomputed (copy-on-write of at most one partly
 *       filled block per branch when it is first written);</li>
 *   <li>{@link #release} frees a finished sequence's blocks.</li>
 * </ul>
 *
 * <p>Ragged layout: the new tokens of all sequences are packed into one [N, D] matrix for the
 * per-token work (projections, MLP); attention gathers each sequence's blocks into a padded
 * [n, kvHeads, Lk, headDim] view and applies a mask that admits key position k for a query at
 * position p iff k ≤ p. Results equal decoding each sequence alone (tests check this to rounding).
 *
 * <p>Logits: each call returns a contiguous [n, V] tensor (row i for the i-th listed sequence) in the
 * policy's dtype on its device, for the sampling kernel to read in place. It is owned by this batch
 * and stays valid until the next prefill / step / extend or {@link #close()}; clone it to keep it.
 *
 * <p>To sample a new token at position p of a sequence whose logits for p were not kept (a tree
 * branch point in the middle of a trajectory), fork at p − 1 and {@link #step} the token at p − 1:
 * one position is recomputed, the prefix before it is shared.
 *
 * <p>Runs without autograd. Not thread-safe.
 */
@SuppressWarnings("try") // PointerScope and NoGradGuard act through their try blocks
public final class DecodeBatch implements AutoCloseable {

    private final ReferencePolicy policy;
    private final KvCache cache;
    private final TreeMap<Integer, Seq> seqs = new TreeMap<>();
    private int nextId;
    private Tensor logits;
    private boolean closed;

    /** One live sequence: its tokens and its block table (blocks.size == ceil(length / blockSize) or more). */
    private static final class Seq {
        final IntList tokens;
        final IntList blocks;

        Seq(IntList tokens, IntList blocks) {
            this.tokens = tokens;
            this.blocks = blocks;
        }

        int length() {
            return tokens.size;
        }
    }

    /**
     * The index tensors of one cached forward (built on the policy's device).
     *
     * @param tokens       [N] new token ids, sequence-major
     * @param positions    [N] their positions
     * @param slots        [N] cache slots they are written to
     * @param blocks       [n · maxBlocks] block tables, padded with each sequence's first block
     * @param mask         [n, 1, Lq, Lk] bool: query j of sequence i may read key k
     * @param queryScatter [N] index of each new token in the padded [n · Lq] query layout (unused when Lq = 1)
     * @param lastRows     [n] index in [N] of each sequence's last new token
     */
    record Plan(long sequences, long newTokens, long queryLength, long keyLength, Tensor tokens, Tensor positions,
                Tensor slots, Tensor blocks, Tensor mask, Tensor queryScatter, Tensor lastRows) {}

    DecodeBatch(ReferencePolicy policy, KvCache cache) {
        this.policy = policy;
        this.cache = cache;
    }

    /**
     * Starts one sequence per prompt (each non-empty) and runs them in one forward pass.
     *
     * @return the new sequence ids, in prompt order; {@link #logits()} has their next-token logits
     */
    public int[] prefill(List<int[]> prompts) {
        ensureOpen();
        if (prompts == null || prompts.isEmpty()) throw new IllegalArgumentException("prompts must be non-empty");
        for (int i = 0; i < prompts.size(); i++) checkTokens("prompt " + i, prompts.get(i), 0);
        int[] ids = new int[prompts.size()];
        for (int i = 0; i < ids.length; i++) ids[i] = newSequence(new IntList(), new IntList());
        try {
            extend(ids, prompts);
        } catch (RuntimeException e) {
            for (int id : ids) release(id);
            throw e;
        }
        return ids;
    }

    /**
     * Prefills {@code prompt} once and forks it into {@code copies} sequences (a GRPO group):
     * {@link #logits()} then has {@code copies} identical rows, one per returned id.
     */
    public int[] prefillShared(int[] prompt, int copies) {
        if (copies < 1) throw new IllegalArgumentException("copies must be >= 1, got " + copies);
        int first = prefill(List.of(prompt))[0];
        int[] ids = new int[copies];
        ids[0] = first;
        if (copies > 1) System.arraycopy(fork(first, copies - 1), 0, ids, 1, copies - 1);
        try (PointerScope scope = new PointerScope()) {
            Tensor rows = logits.index_select(0, Tensors.longs(new long[copies], policy.device()));
            replaceLogits(rows);
        }
        return ids;
    }

    /**
     * Appends one token to each listed sequence and returns the next-token logits [n, V].
     *
     * @param seqIds distinct live sequence ids
     * @param tokens {@code tokens[i]} is appended to {@code seqIds[i]}
     */
    public Tensor step(int[] seqIds, int[] tokens) {
        ensureOpen();
        if (seqIds == null || tokens == null) throw new IllegalArgumentException("seqIds and tokens must be non-null");
        if (seqIds.length != tokens.length)
            throw new IllegalArgumentException(seqIds.length + " sequence ids but " + tokens.length + " tokens");
        List<int[]> lists = new ArrayList<>(tokens.length);
        for (int t : tokens) lists.add(new int[] {t});
        return extend(seqIds, lists);
    }

    /** {@link #step(int[], int[])} over all live sequences in ascending id order ({@link #sequences()}). */
    public Tensor step(int[] tokensPerSequence) {
        return step(sequences(), tokensPerSequence);
    }

    /**
     * Appends {@code tokens.get(i)} (non-empty) to {@code seqIds[i]} for every i in one forward pass
     * and returns the logits [n, V] after each sequence's last appended token.
     */
    public Tensor extend(int[] seqIds, List<int[]> tokens) {
        ensureOpen();
        if (seqIds == null || tokens == null) throw new IllegalArgumentException("seqIds and tokens must be non-null");
        if (seqIds.length == 0) throw new IllegalArgumentException("no sequences given");
        if (seqIds.length != tokens.size())
            throw new IllegalArgumentException(seqIds.length + " sequence ids but " + tokens.size() + " token lists");
        Set<Integer> seen = new HashSet<>();
        Seq[] batch = new Seq[seqIds.length];
        for (int i = 0; i < seqIds.length; i++) {
            if (!seen.add(seqIds[i])) throw new IllegalArgumentException("sequence " + seqIds[i] + " listed twice");
            batch[i] = live(seqIds[i]);
            checkTokens("sequence " + seqIds[i], tokens.get(i), batch[i].length());
        }
        int bs = cache.blockSize(), n = seqIds.length;
        // 1. block tables: copy-on-write a shared partly filled block, allocate new ones
        for (int i = 0; i < n; i++) {
            Seq s = batch[i];
            int start = s.length(), end = start + tokens.get(i).length;
            for (int b = start / bs; b <= (end - 1) / bs; b++) {
                if (b < s.blocks.size) {
                    if (cache.refCount(s.blocks.get(b)) > 1) s.blocks.set(b, cache.copyOnWrite(s.blocks.get(b)));
                } else {
                    s.blocks.add(cache.allocate());
                }
            }
        }
        // 2. index arrays
        int total = 0, lq = 0, maxBlocks = 0;
        for (int i = 0; i < n; i++) {
            int len = tokens.get(i).length;
            total += len;
            lq = Math.max(lq, len);
            maxBlocks = Math.max(maxBlocks, (batch[i].length() + len + bs - 1) / bs);
        }
        int lk = maxBlocks * bs;
        long[] tok = new long[total], pos = new long[total], slot = new long[total], scatter = new long[total];
        long[] blockIdx = new long[n * maxBlocks], lastRows = new long[n], queryPos = new long[n * lq];
        int r = 0;
        for (int i = 0; i < n; i++) {
            Seq s = batch[i];
            int[] add = tokens.get(i);
            int start = s.length();
            for (int j = 0; j < add.length; j++, r++) {
                int p = start + j;
                tok[r] = add[j];
                pos[r] = p;
                slot[r] = (long) s.blocks.get(p / bs) * bs + p % bs;
                scatter[r] = (long) i * lq + j;
                queryPos[i * lq + j] = p;
            }
            // padded query rows read key 0..last: harmless, their output is dropped
            for (int j = add.length; j < lq; j++) queryPos[i * lq + j] = start + add.length - 1;
            lastRows[i] = r - 1;
            int used = (start + add.length + bs - 1) / bs;
            for (int b = 0; b < maxBlocks; b++) blockIdx[i * maxBlocks + b] = s.blocks.get(b < used ? b : 0);
        }
        // 3. forward
        Tensor out;
        try (NoGradGuard guard = new NoGradGuard(); PointerScope scope = new PointerScope()) {
            var dev = policy.device();
            Tensor keyPos = torch.arange(new org.bytedeco.pytorch.Scalar(lk), Tensors.options(torch.ScalarType.Long, dev))
                    .view(1, 1, 1, lk);
            Tensor mask = keyPos.le(Tensors.longs(queryPos, new long[] {n, 1, lq, 1}, dev));
            Plan plan = new Plan(n, total, lq, lk, Tensors.longs(tok, dev), Tensors.longs(pos, dev), Tensors.longs(slot, dev),
                    Tensors.longs(blockIdx, dev), mask, lq == 1 ? null : Tensors.longs(scatter, dev), Tensors.longs(lastRows, dev));
            out = policy.forwardCached(cache, plan);
            out.retainReference();
        }
        // 4. commit the new tokens only once the forward succeeded
        for (int i = 0; i < n; i++) batch[i].tokens.addAll(tokens.get(i));
        setLogits(out);
        return logits;
    }

    /** {@code k} new sequences sharing all of {@code seqId}'s tokens (and cache). */
    public int[] fork(int seqId, int k) {
        return fork(seqId, live(seqId).length(), k);
    }

    /**
     * {@code k} new sequences holding the first {@code position} tokens of {@code seqId}, sharing its
     * cache blocks for them (no recomputation). {@code seqId} itself is unchanged.
     */
    public int[] fork(int seqId, int position, int k) {
        ensureOpen();
        Seq parent = live(seqId);
        if (k < 1) throw new IllegalArgumentException("k must be >= 1, got " + k);
        if (position < 0 || position > parent.length())
            throw new IllegalArgumentException("fork position " + position + " outside [0, " + parent.length()
                    + "] of sequence " + seqId);
        int shared = (position + cache.blockSize() - 1) / cache.blockSize();
        int[] ids = new int[k];
        for (int c = 0; c < k; c++) {
            IntList blocks = new IntList();
            for (int b = 0; b < shared; b++) {
                cache.retain(parent.blocks.get(b));
                blocks.add(parent.blocks.get(b));
            }
            IntList toks = new IntList();
            toks.addAll(parent.tokens.data, position);
            ids[c] = newSequence(toks, blocks);
        }
        return ids;
    }

    /** Frees {@code seqId}'s blocks (those no other sequence shares) and forgets it. */
    public void release(int seqId) {
        ensureOpen();
        Seq s = live(seqId);
        for (int b = 0; b < s.blocks.size; b++) cache.release(s.blocks.get(b));
        seqs.remove(seqId);
    }

    /** The logits [n, V] of the last prefill / step / extend (owned by this batch). */
    public Tensor logits() {
        ensureOpen();
        if (logits == null) throw new IllegalStateException("no forward has run yet");
        return logits;
    }

    /** Live sequence ids in ascending order. */
    public int[] sequences() {
        return seqs.keySet().stream().mapToInt(Integer::intValue).toArray();
    }

    /** Number of live sequences. */
    public int size() {
        return seqs.size();
    }

    /** Tokens of {@code seqId} so far. */
    public int[] tokens(int seqId) {
        Seq s = live(seqId);
        return Arrays.copyOf(s.tokens.data, s.tokens.size);
    }

    /** Number of tokens of {@code seqId} (its next position). */
    public int length(int seqId) {
        return live(seqId).length();
    }

    /** The underlying cache (for its block accounting). */
    public KvCache cache() {
        return cache;
    }

    @Override
    public void close() {
        if (closed) return;
        closed = true;
        if (logits != null) logits.close();
        logits = null;
        seqs.clear();
        cache.close();
    }

    // ------------------------------------------------------------------ internals

    private int newSequence(IntList tokens, IntList blocks) {
        int id = nextId++;
        seqs.put(id, new Seq(tokens, blocks));
        return id;
    }

    private Seq live(int seqId) {
        Seq s = seqs.get(seqId);
        if (s == null) throw new IllegalArgumentException("no live sequence " + seqId);
        return s;
    }

    private void checkTokens(String what, int[] add, int length) {
        if (add == null || add.length == 0) throw new IllegalArgumentException(what + ": no tokens to append");
        int vocab = policy.config().vocab(), max = policy.config().maxSeq();
        if ((long) length + add.length > max)
            throw new IllegalArgumentException(what + ": length " + length + " + " + add.length + " exceeds maxSeq " + max);
        for (int t : add)
            if (t < 0 || t >= vocab) throw new IllegalArgumentException(what + ": token id " + t + " outside [0, " + vocab + ")");
    }

    /** Replaces the batch's logits with a new tensor created inside the caller's scope. */
    private void replaceLogits(Tensor rows) {
        rows.retainReference();
        setLogits(rows);
    }

    private void setLogits(Tensor owned) {
        if (logits != null) logits.close();
        logits = owned;
    }

    private void ensureOpen() {
        if (closed) throw new IllegalStateException("decode batch is closed");
    }

    /** A growable int array (no boxing in the decode loop). */
    private static final class IntList {
        int[] data = new int[8];
        int size;

        int get(int i) {
            if (i >= size) throw new IndexOutOfBoundsException(i + " >= " + size);
            return data[i];
        }

        void set(int i, int v) {
            data[i] = v;
        }

        void add(int v) {
            if (size == data.length) data = Arrays.copyOf(data, size * 2);
            data[size++] = v;
        }

        void addAll(int[] values) {
            addAll(values, values.length);
        }

        void addAll(int[] values, int count) {
            if (size + count > data.length) data = Arrays.copyOf(data, Math.max(size + count, data.length * 2));
            System.arraycopy(values, 0, data, size, count);
            size += count;
        }
    }
}
