package ai.arbor.rollout;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Runs many agent loops concurrently: every prompt of a batch is rolled out by a
 * {@link RolloutStrategy} at the same time, each path stepping independently, so generation requests of
 * some paths overlap with tool calls of others. Concurrency is bounded three ways: in-flight generation
 * requests ({@code maxConcurrentGenerations}), tool threads ({@code toolThreads}, a bounded pool owned by
 * the engine), and prompts in progress ({@code maxConcurrentPrompts}). Results are deterministic for a
 * seed with a deterministic generator: every seed and random decision depends on positions only.
 *
 * <pre>{@code
 * try (RolloutEngine engine = RolloutEngine.builder().generator(gen).tokenizer(tok)
 *         .format(MarkdownToolCallFormat.cort()).tools(tools).config(cfg).toolThreads(8).build()) {
 *     RolloutBatch<TreeGroup> batch = engine.run(prompts, new ChainRollout(8), seed);
 *     TokenBatch rows = TokenBatch.of(batch.trajectories());   // ai.arbor.rl: one row per generated token
 * }
 * }</pre>
 */
public final class RolloutEngine implements AutoCloseable {
    private final AgentLoop loop;
    private final ExecutorService toolPool;
    private final int maxConcurrentPrompts;

    private RolloutEngine(Builder b) {
        if (b.toolThreads < 1) throw new IllegalArgumentException("toolThreads must be >= 1, got " + b.toolThreads);
        if (b.maxConcurrentPrompts < 0) throw new IllegalArgumentException("maxConcurrentPrompts must be >= 0, got " + b.maxConcurrentPrompts);
        AtomicInteger n = new AtomicInteger();
        ThreadFactory tf = r -> {
            Thread t = new Thread(r, "arbor-tool-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        };
        this.toolPool = Executors.newFixedThreadPool(b.toolThreads, tf);
        this.loop = b.loop.toolExecutor(toolPool).build();
        this.maxConcurrentPrompts = b.maxConcurrentPrompts;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** The agent loop the strategies drive. */
    public AgentLoop loop() {
        return loop;
    }

    /** Rolls out {@code prompts} with {@code strategy}; blocks until every group is done. */
    public <G extends GroupRollout> RolloutBatch<G> run(List<Prompt> prompts, RolloutStrategy<G> strategy, long seed) {
        return runAsync(prompts, strategy, seed).join();
    }

    /** Asynchronous {@link #run}. */
    public <G extends GroupRollout> CompletableFuture<RolloutBatch<G>> runAsync(List<Prompt> prompts, RolloutStrategy<G> strategy, long seed) {
        if (prompts == null || prompts.isEmpty()) throw new IllegalArgumentException("prompts must not be empty");
        if (strategy == null) throw new IllegalArgumentException("strategy must not be null");
        long t0 = System.nanoTime();
        CostMeter total = new CostMeter();
        AsyncLimiter limiter = maxConcurrentPrompts > 0 ? new AsyncLimiter(maxConcurrentPrompts) : null;
        List<CompletableFuture<G>> futures = new ArrayList<>(prompts.size());
        for (int i = 0; i < prompts.size(); i++) {
            Prompt p = prompts.get(i);
            RolloutContext ctx = new RolloutContext(loop, Seeds.derive(seed, i), i, new CostMeter(total), TokenContext.of(p.tokens()));
            futures.add(limiter == null ? start(strategy, p, ctx) : limiter.run(() -> start(strategy, p, ctx)));
        }
        return CompletableFuture.allOf(futures.toArray(new CompletableFuture<?>[0])).thenApply(v -> {
            List<G> groups = new ArrayList<>(futures.size());
            List<Trajectory> all = new ArrayList<>();
            for (CompletableFuture<G> f : futures) {
                G g = f.join();
                groups.add(g);
                all.addAll(g.trajectories());
            }
            return new RolloutBatch<>(groups, RolloutMetrics.of(prompts.size(), all, total, (System.nanoTime() - t0) / 1e9));
        });
    }

    private static <G extends GroupRollout> CompletableFuture<G> start(RolloutStrategy<G> s, Prompt p, RolloutContext ctx) {
        try {
            return s.rollout(p, ctx);
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    /** Stops the tool threads (waiting up to 10 s for running calls). Does not close the generator. */
    @Override
    public void close() {
        toolPool.shutdown();
        try {
            if (!toolPool.awaitTermination(10, TimeUnit.SECONDS)) toolPool.shutdownNow();
        } catch (InterruptedException e) {
            toolPool.shutdownNow();
            Thread.currentThread().interrupt();
        }
    }

    /** Builder: the agent-loop settings plus the engine's concurrency bounds. */
    public static final class Builder {
        private final AgentLoop.Builder loop = AgentLoop.builder();
        private int toolThreads = Math.max(4, 2 * Runtime.getRuntime().availableProcessors());
        private int maxConcurrentPrompts;

        public Builder generator(Generator g) {
            loop.generator(g);
            return this;
        }

        public Builder tokenizer(Tokenizer t) {
            loop.tokenizer(t);
            return this;
        }

        public Builder format(ToolCallFormat f) {
            loop.format(f);
            return this;
        }

        public Builder tools(ToolProvider p) {
            loop.tools(p);
            return this;
        }

        public Builder config(AgentConfig c) {
            loop.config(c);
            return this;
        }

        /** Threads that run tool calls (default max(4, 2 × cores)); size it to the sandbox pool. */
        public Builder toolThreads(int n) {
            this.toolThreads = n;
            return this;
        }

        /** Most generation requests in flight (0 = unbounded here; the backend may bound it). */
        public Builder maxConcurrentGenerations(int n) {
            loop.maxConcurrentGenerations(n);
            return this;
        }

        /** Most prompts rolled out at once (0 = all of the batch). */
        public Builder maxConcurrentPrompts(int n) {
            this.maxConcurrentPrompts = n;
            return this;
        }

        public RolloutEngine build() {
            return new RolloutEngine(this);
        }
    }
}
