package ai.arbor.generate;

import ai.arbor.kernels.SamplingParams;
import ai.arbor.rollout.FinishReason;
import ai.arbor.rollout.Generation;
import ai.arbor.rollout.GenerationException;
import ai.arbor.rollout.GenerationLimits;
import ai.arbor.rollout.GenerationRequest;
import ai.arbor.rollout.Generator;
import ai.arbor.rollout.StopStrings;
import ai.arbor.rollout.TokenContext;
import ai.arbor.rollout.Tokenizer;
import ai.arbor.torch.TorchSampler;
import ai.arbor.torch.TorchTensors;
import ai.arbor.torch.model.DecodeBatch;
import ai.arbor.torch.model.ReferencePolicy;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;

/**
 * The rollout {@link Generator} over a local {@link ReferencePolicy}: every concurrent request — the
 * trajectories of a group, the branches of a tree — is decoded in one batch, one token per sequence per
 * forward, with the fused sampling kernel giving the token, its behaviour logprob and the entropy in one
 * pass over the logits ({@link TorchSampler}).
 *
 * <p><b>Prefix sharing.</b> When a generation finishes, its sequence (context + generated tokens) stays
 * in the KV cache, keyed by the request's {@link TokenContext}. A later request whose context descends
 * from a held one (the next turn of the same trajectory, or a tree expansion from one of its nodes)
 * forks that cache at the longest common prefix and computes only the new tokens (the observation, or
 * the tail after the branch point). Held sequences are evicted least-recently-used beyond
 * {@code heldCapacity}. After the policy's weights change, call {@link #invalidate()}: cached keys and
 * values of the old weights must not be reused.
 *
 * <p><b>Randomness.</b> Request r's token at generation step s is drawn from the kernel's Philox stream
 * (seed 0, key = the request's seed, step s): the same request gives the same tokens whatever else is in
 * the batch (docs/algorithms.md §10).
 *
 * <p><b>Logprobs.</b> {@link Generation#logprobs()} holds the log-probability of each token under the
 * tempered, untruncated distribution {@code log_softmax(logits / T)} — the quantity the trainer
 * recomputes for the importance ratio (docs/sampling.md explains why not the truncated one). With the
 * trainer's default top-p = 1 and no top-k the two coincide. Entropies are exact (of the tempered
 * distribution).
 *
 * <p>All model work happens on one decode thread (libtorch objects are confined to it); {@link #generate}
 * may be called from any thread.
 */
@SuppressWarnings("try")
public final class LocalGenerator implements Generator {

    /**
     * Sizing of the decode loop, and which entropy a generation reports.
     *
     * @param topKEntropy report ARPO / AEPO's per-token entropy estimate instead of the exact one for requests
     *                    with {@code topLogprobs > 0}: −Σ p·log p over the top-k alternatives plus the sampled token
     *                    when it is not among them (what vLLM's {@code logprobs=k} returns and the releases'
     *                    {@code vllm_rollout_with_tools.py} sums), so step entropies are measured as the releases
     *                    measure them; false (default): exact
     */
    public record Options(int maxBatch, int heldCapacity, int blockSize, int initialBlocks, boolean topKEntropy) {
        public Options(int maxBatch, int heldCapacity, int blockSize, int initialBlocks) {
            this(maxBatch, heldCapacity, blockSize, initialBlocks, false);
        }

        /** These options reporting the top-k entropy estimate (see {@link #topKEntropy}). */
        public Options withTopKEntropy(boolean on) {
            return new Options(maxBatch, heldCapacity, blockSize, initialBlocks, on);
        }

        public Options {
            if (maxBatch < 1) throw new IllegalArgumentException("maxBatch must be >= 1, got " + maxBatch);
            if (heldCapacity < 0) throw new IllegalArgumentException("heldCapacity must be >= 0, got " + heldCapacity);
            if (blockSize < 1) throw new IllegalArgumentException("blockSize must be >= 1, got " + blockSize);
            if (initialBlocks < 1) throw new IllegalArgumentException("initialBlocks must be >= 1, got " + initialBlocks);
        }

        /** 256 concurrent sequences, 512 held, 16-token blocks. */
        public static Options defaults() {
            return new Options(256, 512, 16, 1024);
        }
    }

    /** Counters for metrics and tests. */
    public record Stats(long requests, long generatedTokens, long prefilledTokens, long reusedTokens, long forwards) {}

    private final ReferencePolicy policy;
    private final Tokenizer tokenizer;
    private final Options options;
    private final int maxSeq;
    private final LinkedBlockingQueue<Object> inbox = new LinkedBlockingQueue<>();
    private final Thread thread;
    private volatile boolean closed;
    private volatile Stats stats = new Stats(0, 0, 0, 0, 0);
    private volatile String weightVersion = "0";

    // decode-thread state
    private DecodeBatch batch;
    private final List<Active> active = new ArrayList<>();
    private final LinkedHashMap<Long, Held> held = new LinkedHashMap<>(16, 0.75f, true);
    private long requests, generated, prefilled, reused, forwards;

    /**
     * A generation with, when the request asked for {@code topLogprobs > 0}, the top-k alternatives of
     * every generated position under the tempered distribution (ids and logprobs, best first); null
     * otherwise. Used by the completions server ({@code logprobs=N}).
     */
    public record Detailed(Generation generation, int[][] topIds, float[][] topLogprobs, String weightVersion) {
        public Detailed(Generation generation, int[][] topIds, float[][] topLogprobs) {
            this(generation, topIds, topLogprobs, null);
        }
    }

    /**
     * Receives each token of a generation as it is sampled (for streaming), on the decode thread: it must
     * be quick and must not block (hand the token to another thread). {@code topIds} / {@code topLogprobs}
     * are null unless the request asked for top-k alternatives.
     */
    public interface TokenListener {
        void token(int index, int token, float logprob, int[] topIds, float[] topLogprobs);
    }

    private static final class Active {
        final GenerationRequest request;
        final CompletableFuture<Detailed> future;
        final int[] context;
        int seq = -1;
        int[] out = new int[16];
        float[] lps = new float[16];
        float[] ents = new float[16];
        int n;
        int stopScanFrom;
        List<int[]> topIds;
        List<float[]> topLps;
        final TokenListener listener;
        Object groupOf;   // the group it was submitted in (null: alone)

        Active(GenerationRequest request, CompletableFuture<Detailed> future, TokenListener listener) {
            this.request = request;
            this.future = future;
            this.context = request.context().toArray();
            this.listener = listener;
        }

        void add(int token, float lp, float h) {
            if (n == out.length) {
                out = Arrays.copyOf(out, 2 * n);
                lps = Arrays.copyOf(lps, 2 * n);
                ents = Arrays.copyOf(ents, 2 * n);
            }
            out[n] = token;
            lps[n] = lp;
            ents[n] = h;
            n++;
        }
    }

    /** A finished sequence kept in the cache: its id in the decode batch and all of its tokens. */
    private record Held(int seq, int[] tokens) {}

    /**
     * Runs on the decode thread once no generation is active: {@code action} (null: none; e.g. copying new
     * weights into the policy), then every held sequence is dropped and {@code version}, when not null,
     * becomes the weight version of later generations.
     */
    private record Invalidate(CountDownLatch done, Runnable action, String version, Throwable[] failure) {
        Invalidate(CountDownLatch done) {
            this(done, null, null, new Throwable[1]);
        }
    }

    /** Requests admitted together (the n samples of one prompt): they share one prefill. */
    private record Group(List<Active> members) {}

    public LocalGenerator(ReferencePolicy policy, Tokenizer tokenizer, Options options) {
        if (policy == null || tokenizer == null || options == null) throw new IllegalArgumentException("policy, tokenizer and options are required");
        if (tokenizer.vocabSize() > policy.config().vocab())
            throw new IllegalArgumentException("tokenizer has " + tokenizer.vocabSize() + " ids but the policy's vocabulary is " + policy.config().vocab());
        this.policy = policy;
        this.tokenizer = tokenizer;
        this.options = options;
        this.maxSeq = policy.config().maxSeq();
        this.thread = new Thread(this::loop, "arbor-local-generator");
        this.thread.setDaemon(true);
        this.thread.start();
    }

    @Override
    public CompletableFuture<Generation> generate(GenerationRequest request) {
        return generateDetailed(request).thenApply(Detailed::generation);
    }

    /** As {@link #generate}, with the top-k alternatives of each position when the request asks for them. */
    public CompletableFuture<Detailed> generateDetailed(GenerationRequest request) {
        return generateGroup(List.of(request), null).get(0);
    }

    /**
     * Generates {@code requests} admitted together, in one admission step: requests with the same
     * {@link TokenContext} (the n samples of one prompt) share one prefill of it — its keys and values are
     * computed once and the other sequences fork that cache block by block ({@link DecodeBatch#fork}),
     * copying only a partly filled last block when a sample first writes into it. {@code listener}, when not
     * null, receives every token of request i as {@code listener(i).token(…)} as it is sampled.
     */
    public List<CompletableFuture<Detailed>> generateGroup(List<GenerationRequest> requests,
                                                           java.util.function.IntFunction<TokenListener> listener) {
        if (requests == null || requests.isEmpty()) throw new IllegalArgumentException("requests must not be empty");
        List<CompletableFuture<Detailed>> futures = new ArrayList<>();
        List<Active> members = new ArrayList<>();
        String error = null;
        for (GenerationRequest r : requests) {
            CompletableFuture<Detailed> f = new CompletableFuture<>();
            futures.add(f);
            try {
                validate(r);
            } catch (IllegalArgumentException e) {
                if (error == null) error = e.getMessage();
            }
            members.add(new Active(r, f, listener == null ? null : listener.apply(members.size())));
        }
        if (error != null || closed) {
            for (CompletableFuture<Detailed> f : futures)
                f.completeExceptionally(error != null ? new GenerationException(error, false, new IllegalArgumentException(error))
                        : new GenerationException("generator is closed"));
            return futures;
        }
        if (members.size() == 1) {
            inbox.add(members.get(0));
        } else {
            Object key = new Object();
            for (Active a : members) a.groupOf = key;
            inbox.add(new Group(members));
        }
        return futures;
    }

    /** The policy's context length (its positions): a context plus its generation never exceeds it. */
    public int maxSeq() {
        return maxSeq;
    }

    /** The weight version of new generations ("0" until {@link #updateWeights} sets one). */
    public String weightVersion() {
        return weightVersion;
    }

    /** Sets the weight version reported from now on, without changing weights (e.g. a server's initial version). */
    public void setWeightVersion(String version) {
        if (version == null || version.isBlank()) throw new IllegalArgumentException("weight version must not be blank");
        weightVersion = version;
    }

    /**
     * Changes the policy's weights between generations: waits until the generations in flight have finished
     * (on the old weights; requests arriving meanwhile wait), runs {@code copy} on the decode thread (which
     * owns the model), drops every cached sequence and makes {@code version} the weight version of every later
     * generation. Returns when done.
     *
     * @throws IllegalStateException when {@code copy} failed (the message is its message; the weights may be
     *                               partly copied, the version is unchanged) or the decode thread did not respond
     */
    public void updateWeights(Runnable copy, String version) {
        if (copy == null) throw new IllegalArgumentException("copy must not be null");
        if (version == null || version.isBlank()) throw new IllegalArgumentException("weight version must not be blank");
        Invalidate inv = new Invalidate(new CountDownLatch(1), copy, version, new Throwable[1]);
        inbox.add(inv);
        try {
            if (!inv.done().await(10, TimeUnit.MINUTES)) throw new IllegalStateException("decode thread did not respond within 10 minutes");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while waiting for the weight update", e);
        }
        if (inv.failure()[0] != null)
            throw new IllegalStateException(String.valueOf(inv.failure()[0].getMessage()), inv.failure()[0]);
    }

    private void validate(GenerationRequest r) {
        TokenContext c = r.context();
        if (c.length() == 0) throw new IllegalArgumentException("empty context: a generation needs at least one token");
        if (c.length() >= maxSeq)
            throw new IllegalArgumentException("context of " + c.length() + " tokens leaves no room under the policy's maxSeq " + maxSeq);
        int v = policy.config().vocab();
        for (int i = 0; i < c.length(); i++) {
            int t = c.tokenAt(i);
            if (t < 0 || t >= v) throw new IllegalArgumentException("context token " + i + " = " + t + " is outside [0, " + v + ")");
        }
    }

    /**
     * Drops every cached sequence (call after the policy's weights change). Waits until the decode thread
     * has done it; in-flight generations finish first with the weights they started with.
     */
    public void invalidate() {
        CountDownLatch done = new CountDownLatch(1);
        inbox.add(new Invalidate(done));
        try {
            if (!done.await(10, TimeUnit.MINUTES)) throw new IllegalStateException("decode thread did not respond");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    public Stats stats() {
        return stats;
    }

    @Override
    public void close() {
        if (closed) return;
        closed = true;
        thread.interrupt();
        try {
            thread.join(60_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    // ---------------------------------------------------------------------------------------------
    // decode thread
    // ---------------------------------------------------------------------------------------------

    private void loop() {
        try (DecodeBatch b = policy.newDecodeBatch(options.blockSize(), options.initialBlocks())) {
            batch = b;
            List<Invalidate> pendingInvalidations = new ArrayList<>();
            while (!closed) {
                Object first = active.isEmpty() ? inbox.poll(50, TimeUnit.MILLISECONDS) : inbox.poll();
                List<Active> admitted = new ArrayList<>();
                while (first != null) {
                    if (first instanceof Invalidate inv) pendingInvalidations.add(inv);
                    else if (first instanceof Group g) admitted.addAll(g.members());
                    else admitted.add((Active) first);
                    first = active.size() + admitted.size() < options.maxBatch() ? inbox.poll() : null;
                }
                // once nothing runs, the invalidations (and weight updates) go first; requests not yet started
                // (admitted just now, or waiting) then run after them. Waiting for the admitted list to be empty
                // too would never end while requests keep arriving.
                if (!pendingInvalidations.isEmpty() && active.isEmpty()) {
                    dropHeld();
                    for (Invalidate i : pendingInvalidations) {
                        try {
                            if (i.action() != null) {
                                try (PointerScope scope = new PointerScope()) {
                                    i.action().run();
                                }
                                dropHeld();
                            }
                            if (i.version() != null) weightVersion = i.version();
                        } catch (RuntimeException e) {
                            i.failure()[0] = e;
                        }
                        i.done().countDown();
                    }
                    pendingInvalidations.clear();
                }
                if (!pendingInvalidations.isEmpty() && !admitted.isEmpty()) {
                    // requests after an invalidation must not reuse caches of the old weights: finish the
                    // running ones first, then drop, then admit (a group goes back as one piece)
                    requeueFront(regroup(admitted));
                    admitted.clear();
                }
                if (active.isEmpty() && admitted.isEmpty()) continue;
                try (PointerScope scope = new PointerScope()) {
                    iterate(admitted);
                }
                stats = new Stats(requests, generated, prefilled, reused, forwards);
            }
        } catch (InterruptedException e) {
            // closing
        } catch (Throwable t) {
            failAll(t);
            throw t;
        } finally {
            closed = true;
            failAll(new GenerationException("generator closed"));
        }
    }

    /** {@code admitted} as inbox items: the members of a group back in one {@link Group}. */
    private static List<Object> regroup(List<Active> admitted) {
        List<Object> out = new ArrayList<>();
        for (int i = 0; i < admitted.size(); ) {
            Active a = admitted.get(i);
            int j = i + 1;
            while (j < admitted.size() && admitted.get(j).groupOf == a.groupOf && a.groupOf != null) j++;
            out.add(j - i == 1 && a.groupOf == null ? a : new Group(new ArrayList<>(admitted.subList(i, j))));
            i = j;
        }
        return out;
    }

    private void requeueFront(List<?> items) {
        List<Object> rest = new ArrayList<>();
        inbox.drainTo(rest);
        inbox.addAll(items);
        inbox.addAll(rest);
    }

    /** Admits new requests, samples one token for every active sequence, and steps the unfinished ones. */
    private void iterate(List<Active> admitted) {
        Tensor stepLogits = active.isEmpty() ? null : batch.logits();
        List<Active> rows = new ArrayList<>(active);
        Tensor admitLogits = null;
        if (!admitted.isEmpty()) {
            // keep the step logits alive: admitting runs another forward, which replaces batch.logits()
            if (stepLogits != null) stepLogits = stepLogits.clone();
            List<Active> ok = new ArrayList<>();
            admitLogits = admit(admitted, ok);
            rows.addAll(ok);
            active.addAll(ok);
        }
        if (rows.isEmpty()) return;
        Tensor logits = stepLogits == null ? admitLogits
                : admitLogits == null ? stepLogits : torch.cat(new TensorVector(stepLogits, admitLogits), 0);
        int n = rows.size();
        float[] temps = new float[n], topPs = new float[n], minPs = new float[n];
        int[] topKs = new int[n];
        long[] keys = new long[n], steps = new long[n];
        boolean anyMinP = false;
        for (int i = 0; i < n; i++) {
            Active a = rows.get(i);
            SamplingParams p = a.request.sampling();
            anyMinP |= p.minP() > 0;
            temps[i] = p.temperature();
            topPs[i] = p.topP();
            minPs[i] = p.minP();
            topKs[i] = p.topK();
            keys[i] = a.request.seed();
            steps[i] = a.n;
        }
        TorchSampler.Sample s = TorchSampler.sample(logits, SamplingParams.temperature(1f), 0L, 0L,
                Tensor.create(keys, n), Tensor.create(steps, n), Tensor.create(temps, n), Tensor.create(topKs, n),
                Tensor.create(topPs, n), anyMinP ? Tensor.create(minPs, n) : null, null, tokenizer.vocabSize());
        long[] tok = TorchTensors.hostLongs(s.tokens());   // host copies: the policy may be on CUDA
        float[] lp = TorchTensors.hostFloats(s.logprob()), h = TorchTensors.hostFloats(s.entropy());
        int kmax = 0;
        for (Active a : rows) kmax = Math.max(kmax, a.request.limits().topLogprobs());
        if (kmax > 0) topLogprobs(logits, rows, temps, Math.min(kmax, tokenizer.vocabSize()));
        List<Active> cont = new ArrayList<>(n);
        List<Integer> contTokens = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            Active a = rows.get(i);
            a.add((int) tok[i], lp[i], h[i]);
            generated++;
            if (a.listener != null) {
                boolean top = a.topIds != null && a.topIds.size() == a.n;
                try {
                    a.listener.token(a.n - 1, (int) tok[i], lp[i], top ? a.topIds.get(a.n - 1) : null, top ? a.topLps.get(a.n - 1) : null);
                } catch (RuntimeException ignored) {
                    // a listener's failure is the listener's (the stream's client went away); the generation goes on
                }
            }
            if (!finishIfDone(a)) {
                cont.add(a);
                contTokens.add((int) tok[i]);
            }
        }
        active.retainAll(cont);
        if (!cont.isEmpty()) {
            int[] ids = new int[cont.size()], toks = new int[cont.size()];
            for (int i = 0; i < ids.length; i++) {
                ids[i] = cont.get(i).seq;
                toks[i] = contTokens.get(i);
            }
            try {
                batch.step(ids, toks);
                forwards++;
            } catch (RuntimeException e) {
                for (Active a : cont) fail(a, e);
                active.clear();
            }
        }
    }

    /**
     * Starts the admitted requests' sequences and returns their next-token logits, rows in {@code ok}
     * order. Requests with the same context (a GRPO group) share one prefill and fork it; a request whose
     * context extends a held sequence forks that sequence at the longest common prefix and computes only
     * the rest.
     */
    private Tensor admit(List<Active> admitted, List<Active> ok) {
        requests += admitted.size();
        // group by context identity: one computation per distinct context, forks for the copies
        LinkedHashMap<Long, List<Active>> groups = new LinkedHashMap<>();
        for (Active a : admitted) {
            if (a.future.isDone()) continue;  // cancelled
            groups.computeIfAbsent(a.request.context().id(), k -> new ArrayList<>()).add(a);
        }
        List<List<Active>> fresh = new ArrayList<>(), forked = new ArrayList<>();
        List<int[]> freshTokens = new ArrayList<>(), forkedTokens = new ArrayList<>();
        for (List<Active> g : groups.values()) {
            Active a = g.get(0);
            Held h = bestHeld(a.request.context(), a.context);
            if (h != null) {
                int common = commonPrefix(h.tokens(), a.context);
                int at = Math.min(common, a.context.length - 1);  // recompute at least the last token for its logits
                a.seq = batch.fork(h.seq(), at, 1)[0];
                forked.add(g);
                forkedTokens.add(Arrays.copyOfRange(a.context, at, a.context.length));
                reused += at;
                prefilled += a.context.length - at;
            } else {
                fresh.add(g);
                freshTokens.add(a.context);
                prefilled += a.context.length;
            }
        }
        Tensor freshLogits = null, forkedLogits = null;
        if (!fresh.isEmpty()) {
            try {
                int[] ids = batch.prefill(freshTokens);
                forwards++;
                for (int i = 0; i < ids.length; i++) fresh.get(i).get(0).seq = ids[i];
                freshLogits = batch.logits().clone();
            } catch (RuntimeException e) {
                for (List<Active> g : fresh) g.forEach(a -> fail(a, e));
                fresh.clear();
            }
        }
        if (!forked.isEmpty()) {
            try {
                int[] ids = forked.stream().mapToInt(g -> g.get(0).seq).toArray();
                forkedLogits = batch.extend(ids, forkedTokens).clone();
                forwards++;
            } catch (RuntimeException e) {
                for (List<Active> g : forked) g.forEach(a -> fail(a, e));
                forked.clear();
            }
        }
        // fork the group copies after the computation (they share every cached token) and repeat rows
        List<Long> rowOfLogits = new ArrayList<>();
        long base = 0;
        for (List<List<Active>> part : List.of(fresh, forked)) {
            for (int gi = 0; gi < part.size(); gi++) {
                List<Active> g = part.get(gi);
                Active lead = g.get(0);
                if (g.size() > 1) {
                    int[] copies = batch.fork(lead.seq, g.size() - 1);
                    for (int c = 1; c < g.size(); c++) g.get(c).seq = copies[c - 1];
                }
                for (Active a : g) {
                    ok.add(a);
                    rowOfLogits.add(base + gi);
                }
            }
            base += part.size();
        }
        if (ok.isEmpty()) return null;
        Tensor all = freshLogits == null ? forkedLogits
                : forkedLogits == null ? freshLogits : torch.cat(new TensorVector(freshLogits, forkedLogits), 0);
        long[] idx = rowOfLogits.stream().mapToLong(Long::longValue).toArray();
        return all.index_select(0, Tensor.create(idx, idx.length).to(all.device(), torch.ScalarType.Long));
    }

    /** The held sequence sharing the longest prefix with the request, searching the context's ancestors. */
    private Held bestHeld(TokenContext ctx, int[] tokens) {
        Held best = null;
        int bestLen = 0;
        for (TokenContext c = ctx; c != null; c = c.parent()) {
            Held h = held.get(c.id());
            if (h == null) continue;
            int common = commonPrefix(h.tokens(), tokens);
            if (common > bestLen) {
                best = h;
                bestLen = common;
            }
        }
        return bestLen > 0 ? best : null;
    }

    private static int commonPrefix(int[] a, int[] b) {
        int n = Math.min(a.length, b.length), i = 0;
        while (i < n && a[i] == b[i]) i++;
        return i;
    }

    /** Records, for each row that asked, the top-k ids and logprobs of log_softmax(logits / T) (T = 1 when greedy). */
    private void topLogprobs(Tensor logits, List<Active> rows, float[] temps, int k) {
        int n = rows.size();
        float[] t = new float[n];
        for (int i = 0; i < n; i++) t[i] = temps[i] > 0 ? temps[i] : 1f;
        Tensor v = logits.narrow(1, 0, tokenizer.vocabSize());
        Tensor scaled = v.to(torch.ScalarType.Float).div(Tensor.create(t, n, 1).to(v.device(), torch.ScalarType.Float));
        var top = torch.log_softmax(scaled, 1).topk(k);
        Tensor vals = top.get0().contiguous(), idx = top.get1().contiguous();
        float[] fv = new float[n * k];
        long[] iv = new long[n * k];
        new org.bytedeco.javacpp.FloatPointer(vals.data_ptr()).capacity(fv.length).get(fv);
        new org.bytedeco.javacpp.LongPointer(idx.data_ptr()).capacity(iv.length).get(iv);
        for (int i = 0; i < n; i++) {
            Active a = rows.get(i);
            int want = Math.min(a.request.limits().topLogprobs(), k);
            if (want == 0) continue;
            if (a.topIds == null) {
                a.topIds = new ArrayList<>();
                a.topLps = new ArrayList<>();
            }
            int[] ids = new int[want];
            float[] lps = new float[want];
            for (int j = 0; j < want; j++) {
                ids[j] = (int) iv[i * k + j];
                lps[j] = fv[i * k + j];
            }
            a.topIds.add(ids);
            a.topLps.add(lps);
        }
    }

    /** −Σ p·log p over the top-k alternatives, plus the sampled token when it is not among them (vLLM's logprobs). */
    static float topKEntropy(int[] ids, float[] lps, int sampled, float sampledLp) {
        double h = 0;
        boolean seen = false;
        for (int j = 0; j < ids.length; j++) {
            h -= Math.exp(lps[j]) * lps[j];
            seen |= ids[j] == sampled;
        }
        if (!seen) h -= Math.exp(sampledLp) * sampledLp;
        return (float) h;
    }

    /** Completes {@code a} if its last token ends it; true when it did. */
    private boolean finishIfDone(Active a) {
        GenerationLimits p = a.request.limits();
        int last = a.out[a.n - 1];
        FinishReason reason = null;
        String stop = null;
        int stopId = -1;
        if (last == tokenizer.eosId() || p.stopTokenIds().contains(last)) {
            reason = FinishReason.STOP_TOKEN;
            stopId = last;
        } else if (!p.stopStrings().isEmpty()) {
            String text = tokenizer.decode(a.out, 0, a.n);
            stop = StopStrings.earliest(text, p.stopStrings(), a.stopScanFrom);
            if (stop != null) reason = FinishReason.STOP_STRING;
            else a.stopScanFrom = StopStrings.resumeFrom(text, p.stopStrings());
        }
        if (reason == null && (a.n >= p.maxNewTokens() || a.context.length + a.n >= maxSeq)) reason = FinishReason.LENGTH;
        if (reason == null) return false;
        float[] ents = Arrays.copyOf(a.ents, a.n);
        if (options.topKEntropy() && a.topIds != null && a.topIds.size() == a.n)
            for (int i = 0; i < a.n; i++) ents[i] = topKEntropy(a.topIds.get(i), a.topLps.get(i), a.out[i], a.lps[i]);
        Generation g = new Generation(Arrays.copyOf(a.out, a.n), Arrays.copyOf(a.lps, a.n), ents, reason, stop, stopId);
        Detailed d = a.topIds == null ? new Detailed(g, null, null, weightVersion)
                : new Detailed(g, a.topIds.toArray(new int[0][]), a.topLps.toArray(new float[0][]), weightVersion);
        // keep the sequence: the next turn or a tree expansion continues from it. Its cache holds the
        // context and all generated tokens but the last (which was sampled, not yet fed).
        int[] all = new int[a.context.length + a.n - 1];
        System.arraycopy(a.context, 0, all, 0, a.context.length);
        System.arraycopy(a.out, 0, all, a.context.length, a.n - 1);
        hold(a.request.context().id(), a.seq, all);
        a.seq = -1;
        a.future.complete(d);
        return true;
    }

    private void hold(long contextId, int seq, int[] tokens) {
        if (options.heldCapacity() == 0) {
            batch.release(seq);
            return;
        }
        Held prev = held.put(contextId, new Held(seq, tokens));
        if (prev != null) batch.release(prev.seq());
        Iterator<Map.Entry<Long, Held>> it = held.entrySet().iterator();
        while (held.size() > options.heldCapacity() && it.hasNext()) {
            batch.release(it.next().getValue().seq());
            it.remove();
        }
    }

    private void dropHeld() {
        for (Held h : held.values()) batch.release(h.seq());
        held.clear();
    }

    private void fail(Active a, Throwable t) {
        if (a.seq >= 0) {
            try {
                batch.release(a.seq);
            } catch (RuntimeException ignored) {
                // the batch may be in a bad state; the future still fails below
            }
            a.seq = -1;
        }
        a.future.completeExceptionally(t instanceof GenerationException ? t : new GenerationException("local generation failed: " + t, false, t));
    }

    private void failAll(Throwable t) {
        for (Active a : active) a.future.completeExceptionally(new GenerationException("local generator stopped: " + t, false, t));
        active.clear();
        List<Object> rest = new ArrayList<>();
        inbox.drainTo(rest);
        for (Object o : rest) {
            if (o instanceof Active a) a.future.completeExceptionally(new GenerationException("generator closed"));
            if (o instanceof Group g) g.members().forEach(a -> a.future.completeExceptionally(new GenerationException("generator closed")));
            if (o instanceof Invalidate i) i.done().countDown();
        }
    }

    /** Distinct context ids currently held (for tests). */
    Set<Long> heldContexts() {
        return new HashSet<>(held.keySet());
    }
}
