package ai.arbor.rollout;

import static org.junit.jupiter.api.Assertions.*;

import ai.arbor.tools.Observation;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class RolloutEngineTest {
    static final CharTokenizer TOK = CharTokenizer.ascii();

    /** GRPO-style groups of n independent loops per prompt (the tree package has the full strategies). */
    static RolloutStrategy<GroupRollout> group(int n) {
        return (p, ctx) -> {
            List<CompletableFuture<Trajectory>> fs = new ArrayList<>();
            for (int i = 0; i < n; i++) fs.add(ctx.loop().run(p, ctx.promptContext(), ctx.pathSeed(i), ctx.meter()));
            return CompletableFuture.allOf(fs.toArray(new CompletableFuture<?>[0])).thenApply(v -> {
                List<Trajectory> ts = fs.stream().map(CompletableFuture::join).toList();
                return new GroupRollout() {
                    public Prompt prompt() {
                        return p;
                    }

                    public List<Trajectory> trajectories() {
                        return ts;
                    }

                    public RolloutCost cost() {
                        return ctx.meter().cost();
                    }
                };
            });
        };
    }

    static ScriptedGenerator.Script randomCalls() {
        return (ctx, rnd) -> {
            int k = AgentLoopTest.count(ctx, "<result>");
            if (k == 0 || rnd.nextDouble() < 0.6) return new ScriptedGenerator.Turn("x" + rnd.nextInt(1000) + " <python>" + rnd.nextInt(9) + "</python>", false, 1);
            return ScriptedGenerator.Turn.of("\\boxed{" + rnd.nextInt(9) + "}");
        };
    }

    static List<Prompt> prompts(int n) {
        List<Prompt> out = new ArrayList<>();
        for (int i = 0; i < n; i++) out.add(new Prompt("q" + i, TOK.encode("Q" + i + "\n"), null, Map.of()));
        return out;
    }

    @Test
    void deterministicUnderConcurrencyAndMetricsAddUp() {
        List<String> first = null;
        for (int run = 0; run < 2; run++) {
            AtomicInteger concurrent = new AtomicInteger(), maxConcurrent = new AtomicInteger();
            ScriptedGenerator gen = new ScriptedGenerator(TOK, randomCalls()).recordRequests(false);
            // a tool with latency, so calls of many paths overlap on the tool threads
            ToolProvider tools = ToolProvider.shared(TestTools.tool("python", a -> {
                maxConcurrent.accumulateAndGet(concurrent.incrementAndGet(), Math::max);
                try {
                    Thread.sleep(2);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                concurrent.decrementAndGet();
                return Observation.ok("r" + a, null);
            }));
            try (RolloutEngine engine = RolloutEngine.builder().generator(gen).tokenizer(TOK).format(TagToolCallFormat.arpo()).tools(tools)
                    .config(AgentConfig.builder().maxNewTokens(64).maxTurns(6).build()).toolThreads(8)
                    .maxConcurrentGenerations(16).build()) {
                RolloutBatch<GroupRollout> batch = engine.run(prompts(12), group(8), 2024);
                List<String> sig = batch.trajectories().stream().map(t -> t.prompt().id() + Arrays.toString(t.tokens())).toList();
                if (first == null) first = sig;
                else assertEquals(first, sig, "same seed, same trajectories, whatever the thread interleaving");
                RolloutMetrics m = batch.metrics();
                assertEquals(12, m.prompts());
                assertEquals(96, m.trajectories());
                assertEquals(gen.tokensGenerated(), m.cost().generatedTokens());
                long calls = batch.trajectories().stream().mapToLong(t -> t.toolCalls().size()).sum();
                assertEquals(calls, m.cost().toolCalls());
                long obs = batch.trajectories().stream().mapToLong(t -> t.length() - t.generatedTokens()).sum();
                assertEquals(obs, m.cost().observationTokens());
                assertEquals(96, m.terminations().values().stream().mapToInt(Integer::intValue).sum());
                assertEquals(batch.trajectories().stream().mapToInt(t -> t.steps().size()).average().orElse(0), m.meanTurns(), 1e-9);
                assertTrue(m.meanToolMillis() >= 2, "tool latency measured: " + m.meanToolMillis());
                assertTrue(m.wallSeconds() > 0 && m.trajectoriesPerSecond() > 0);
                assertTrue(maxConcurrent.get() > 1, "tool calls of different paths overlapped: " + maxConcurrent.get());
                long sum = batch.groups().stream().mapToLong(g -> g.cost().generatedTokens()).sum();
                assertEquals(m.cost().generatedTokens(), sum);
            }
        }
    }

    @Test
    void aFailingStrategyFailsTheRunAndBadArgumentsAreRefused() {
        ScriptedGenerator gen = new ScriptedGenerator(TOK, randomCalls());
        try (RolloutEngine engine = RolloutEngine.builder().generator(gen).tokenizer(TOK).format(TagToolCallFormat.arpo()).toolThreads(1).build()) {
            RolloutStrategy<GroupRollout> broken = (p, ctx) -> {
                throw new IllegalStateException("strategy bug");
            };
            Exception e = assertThrows(Exception.class, () -> engine.run(prompts(2), broken, 1));
            assertTrue(String.valueOf(e.getCause()).contains("strategy bug"), String.valueOf(e));
            assertThrows(IllegalArgumentException.class, () -> engine.run(List.of(), group(1), 1));
        }
        assertThrows(IllegalArgumentException.class, () -> RolloutEngine.builder().toolThreads(0).build());
    }

    @Test
    void tokenContextSharesPrefixesAndAsyncLimiterBounds() {
        TokenContext root = TokenContext.of(new int[] {1, 2});
        TokenContext a = root.extend(new int[] {3}), b = root.extend(new int[] {4, 5});
        assertArrayEquals(new int[] {1, 2, 3}, a.toArray());
        assertArrayEquals(new int[] {1, 2, 4, 5}, b.toArray());
        assertEquals(root.rootId(), b.rootId());
        assertEquals(2, b.parentLength());
        assertEquals(5, b.tokenAt(3));
        assertTrue(b.startsWith(root) && !b.startsWith(a));
        assertSame(root, root.extend(new int[0]));
        assertThrows(IllegalArgumentException.class, () -> b.tokenAt(4));

        AsyncLimiter lim = new AsyncLimiter(2);
        List<CompletableFuture<Integer>> gates = new ArrayList<>();
        List<CompletableFuture<Integer>> results = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            CompletableFuture<Integer> gate = new CompletableFuture<>();
            gates.add(gate);
            results.add(lim.run(() -> gate));
        }
        assertEquals(2, lim.inUse());
        assertEquals(3, lim.waiting());
        for (int i = 0; i < 5; i++) gates.get(i).complete(i);
        for (int i = 0; i < 5; i++) assertEquals(i, results.get(i).join());
        assertEquals(0, lim.inUse());
    }
}
