package ai.arbor.rollout;

import static org.junit.jupiter.api.Assertions.*;

import ai.arbor.sandbox.PythonSandbox;
import ai.arbor.sandbox.SandboxSession;
import ai.arbor.tools.PythonTool;
import java.math.BigInteger;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Stateful Python paths that outnumber the sandbox's workers: with sessions leased per call (the default)
 * a path holds a worker only while its call runs, and replay restores its variables for the next call.
 */
class LeasedToolSessionsTest {
    static final CharTokenizer TOK = CharTokenizer.ascii();
    static final int WORKERS = 4, PATHS = 64, CALLS = 5;
    static final Pattern PATH = Pattern.compile("Q: path (\\d+)\\.");
    static PythonSandbox sandbox;
    static ExecutorService toolThreads;

    @BeforeAll
    static void start() {
        // recycling: a leased session costs a reset in place (~2 ms) instead of a worker respawn per call
        sandbox = PythonSandbox.builder().workers(WORKERS).recycleWorkers(true).timeout(Duration.ofSeconds(5)).memoryLimitMb(512).build();
        toolThreads = Executors.newFixedThreadPool(16);
    }

    @AfterAll
    static void stop() {
        toolThreads.shutdownNow();
        sandbox.close();
    }

    static ToolProvider python() {
        return () -> {
            SandboxSession s = sandbox.openSession();
            return ToolSession.of(List.of(new PythonTool(s)), true, s);
        };
    }

    /** x_0 = path, x_k = x_{k-1}*3 + k. */
    static BigInteger expected(int path, int k) {
        BigInteger x = BigInteger.valueOf(path);
        for (int i = 1; i <= k; i++) x = x.multiply(BigInteger.valueOf(3)).add(BigInteger.valueOf(i));
        return x;
    }

    /** Call 1 starts from the path's number; call k > 1 uses only the variable the previous call left. */
    static String cell(int path, int k) {
        return k == 1 ? "x = " + path + " * 3 + 1\nprint(x)" : "x = x * 3 + " + k + "\nprint(x)";
    }

    /** Simulated policy time per generation: what a path spends between its calls, holding no worker when leased. */
    static final long GENERATION_MILLIS = 150;

    static AgentLoop loop(ToolSessionMode mode, int calls, java.util.function.IntFunction<String> cellOfPath) {
        return loop(mode, calls, cellOfPath, 0, Duration.ofSeconds(30));
    }

    static AgentLoop loop(ToolSessionMode mode, int calls, java.util.function.IntFunction<String> cellOfPath, long generationMillis,
                          Duration toolTimeout) {
        ScriptedGenerator gen = new ScriptedGenerator(TOK, (ctx, rnd) -> {
            Matcher m = PATH.matcher(ctx);
            assertTrue(m.find(), ctx);
            int path = Integer.parseInt(m.group(1));
            int k = AgentLoopTest.count(ctx, "```output") + 1;
            if (k > calls) return ScriptedGenerator.Turn.of("So \\boxed{done}");
            return ScriptedGenerator.Turn.of("Step " + k + ".\n```python\n" + cellOfPath.apply(path * 100 + k) + "\n```\n```output");
        }).recordRequests(false);
        Executor later = CompletableFuture.delayedExecutor(generationMillis, TimeUnit.MILLISECONDS);
        Generator slow = generationMillis == 0 ? gen : r -> gen.generate(r).thenApplyAsync(g -> g, later);
        return AgentLoop.builder().generator(slow).tokenizer(TOK).format(MarkdownToolCallFormat.cort()).tools(python())
                .config(AgentConfig.builder().maxNewTokens(200).maxToolCalls(calls + 1).maxTurns(calls + 2).maxResponseTokens(4000)
                        .toolTimeout(toolTimeout).toolSessions(mode).build())
                .toolExecutor(toolThreads).build();
    }

    static Prompt prompt(int path) {
        return new Prompt("p" + path, TOK.encode("Q: path " + path + ".\n"), null, Map.of());
    }

    @Test
    void sixtyFourStatefulPathsOverFourWorkersAllGetTheirOwnValues() {
        AgentConfig defaults = AgentConfig.builder().build();
        assertEquals(ToolSessionMode.LEASE_PER_CALL, defaults.toolSessions());
        IllegalArgumentException bad = assertThrows(IllegalArgumentException.class, () -> AgentConfig.builder().toolSessions(null).build());
        assertTrue(bad.getMessage().contains("toolSessions"), bad.getMessage());
        // Every path spends ~6 x 150 ms generating; holding a worker through that, 64 paths would queue
        // 16 deep behind 4 workers (~15 s) and exceed the 5 s tool timeout. Leased, a path waits only for cells.
        AgentLoop loop = loop(ToolSessionMode.LEASE_PER_CALL, CALLS, pk -> cell(pk / 100, pk % 100), GENERATION_MILLIS,
                Duration.ofSeconds(5));
        long t0 = System.nanoTime();
        List<CompletableFuture<Trajectory>> runs = new ArrayList<>();
        for (int p = 0; p < PATHS; p++) runs.add(loop.run(prompt(p), 1000 + p));
        List<Trajectory> done = runs.stream().map(CompletableFuture::join).toList();
        double seconds = (System.nanoTime() - t0) / 1e9;
        long maxLatency = 0;
        for (int p = 0; p < PATHS; p++) {
            Trajectory t = done.get(p);
            assertEquals(Termination.ANSWER, t.termination(), "path " + p);
            assertFalse(t.infrastructureFailure(), "path " + p);
            List<ToolCallRecord> calls = t.toolCalls();
            assertEquals(CALLS, calls.size(), "path " + p);
            for (int k = 1; k <= CALLS; k++) {
                ToolCallRecord r = calls.get(k - 1);
                assertEquals(ToolCallStatus.OK, r.status(), "path " + p + " call " + k + ": " + r.output());
                assertEquals(expected(p, k) + "\n", r.output(), "path " + p + " call " + k);
                maxLatency = Math.max(maxLatency, r.latencyNanos());
            }
        }
        System.out.printf("%d paths x %d dependent calls over %d workers (lease per call): %.2f s, slowest cell %.1f ms%n",
                PATHS, CALLS, WORKERS, seconds, maxLatency / 1e6);
    }

    @Test
    void holdingASessionPerPathStillWorksWhenThereIsAWorkerForEachPath() {
        AgentLoop loop = loop(ToolSessionMode.HOLD_PER_PATH, CALLS, pk -> cell(pk / 100, pk % 100));
        List<CompletableFuture<Trajectory>> runs = new ArrayList<>();
        for (int p = 0; p < WORKERS; p++) runs.add(loop.run(prompt(p), 2000 + p));
        for (int p = 0; p < WORKERS; p++) {
            List<ToolCallRecord> calls = runs.get(p).join().toolCalls();
            assertEquals(CALLS, calls.size());
            for (int k = 1; k <= CALLS; k++) assertEquals(expected(p, k) + "\n", calls.get(k - 1).output(), "path " + p + " call " + k);
        }
    }

    @Test
    void aReplayedCellThatPrintsDifferentlyFailsTheCallAsInfrastructure() {
        // call 1 prints a fresh random number; replaying it before call 2 cannot reproduce what the model saw
        AgentLoop leased = loop(ToolSessionMode.LEASE_PER_CALL, 2,
                pk -> pk % 100 == 1 ? "import random\nr = random.random()\nprint(r)" : "print('second')");
        Trajectory t = leased.run(prompt(7), 3000).join();
        List<ToolCallRecord> calls = t.toolCalls();
        assertEquals(ToolCallStatus.OK, calls.get(0).status());
        assertEquals(ToolCallStatus.INFRASTRUCTURE_ERROR, calls.get(1).status(), calls.get(1).output());
        assertTrue(calls.get(1).output().contains("replayed call 1 of 1 (tool 'python') gave a different result"), calls.get(1).output());
        assertTrue(calls.get(1).output().contains(calls.get(0).output().strip()), calls.get(1).output());
        assertTrue(t.infrastructureFailure());

        // holding the session keeps the interpreter, so the same path runs cleanly
        AgentLoop held = loop(ToolSessionMode.HOLD_PER_PATH, 2,
                pk -> pk % 100 == 1 ? "import random\nr = random.random()\nprint(r)" : "print('second')");
        List<ToolCallRecord> heldCalls = held.run(prompt(7), 3000).join().toolCalls();
        assertEquals(List.of(ToolCallStatus.OK, ToolCallStatus.OK), heldCalls.stream().map(ToolCallRecord::status).toList());
        assertEquals("second\n", heldCalls.get(1).output());
    }

    @Test
    void aCellThatLosesTheInterpreterIsNotReplayedNorAnythingBeforeIt() {
        // call 2 kills the interpreter (CRASHED, state lost): call 3 starts from a fresh interpreter, as with a held session
        AgentLoop loop = loop(ToolSessionMode.LEASE_PER_CALL, 3, pk -> switch (pk % 100) {
            case 1 -> "y = 5\nprint(y)";
            case 2 -> "import os\nos._exit(3)";
            default -> "print('y' in globals())";
        });
        CostMeter meter = new CostMeter();
        List<ToolCallRecord> calls = loop.run(prompt(1), null, 4000, meter).join().toolCalls();
        assertEquals(ToolCallStatus.OK, calls.get(0).status());
        assertEquals(ToolCallStatus.TOOL_ERROR, calls.get(1).status(), calls.get(1).output());
        assertEquals(ToolCallStatus.OK, calls.get(2).status(), calls.get(2).output());
        assertEquals("False\n", calls.get(2).output());
        assertEquals(1, meter.cost().replayedToolCalls(), "only call 1, replayed before call 2");
    }

    /**
     * The price of leasing: call k replays k−1 cells, so its extra time grows linearly with the path's
     * history. Measured on one path of 20 dependent calls, leased vs held (printed, values asserted).
     */
    @Test
    void replayCostGrowsWithTheNumberOfEarlierCells() {
        int n = 20, rounds = 3;
        double[] leased = new double[n], held = new double[n];
        for (int round = 0; round < rounds; round++) {
            for (ToolSessionMode mode : ToolSessionMode.values()) {
                CostMeter meter = new CostMeter();
                PathTools tools = new PathTools(python(), meter, mode, List.of());
                try {
                    for (int k = 1; k <= n; k++) {
                        ToolCall call = new ToolCall("python", cell(9, k));
                        long t0 = System.nanoTime();
                        PathTools.Outcome o = tools.invoke(call, tools.epoch());
                        double ms = (System.nanoTime() - t0) / 1e6;
                        assertEquals(ToolCallStatus.OK, o.status(), mode + " call " + k + ": " + o.output());
                        assertEquals(expected(9, k) + "\n", o.output(), mode + " call " + k);
                        tools.executed(PathTools.Executed.of(call, o.status(), o.output(), o.raw()));
                        if (round > 0) (mode == ToolSessionMode.LEASE_PER_CALL ? leased : held)[k - 1] += ms / (rounds - 1);
                    }
                } finally {
                    tools.close();
                }
                long expectedReplays = mode == ToolSessionMode.LEASE_PER_CALL ? (long) n * (n - 1) / 2 : 0;
                assertEquals(expectedReplays, meter.cost().replayedToolCalls(), mode.toString());
            }
        }
        double extraSum = 0, slope = 0, kMean = (n - 1) / 2.0, var = 0;
        for (int k = 0; k < n; k++) {
            double extra = leased[k] - held[k];
            extraSum += extra;
            slope += (k - kMean) * extra;
            var += (k - kMean) * (k - kMean);
        }
        System.out.printf("replay cost over %d dependent calls: held %.2f ms/call, leased %.2f ms/call (call 1 %.2f ms, call %d %.2f ms); "
                        + "mean extra %.2f ms/call, %.2f ms per earlier cell%n", n, mean(held), mean(leased), leased[0], n, leased[n - 1],
                extraSum / n, slope / var);
    }

    /** Twelve strings: a set of them prints in an order that depends on the interpreter's str hash secret. */
    static final String WORDS = "{'alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel', 'india', 'juliet', 'kilo', 'lima'}";

    /**
     * Every worker runs with one hash secret (PYTHONHASHSEED=0), so a printed set of strings comes out the same on
     * each, and a replay of it on another worker matches what the model saw. With a secret per worker (the
     * interpreter's default) twelve strings print in one order on four workers with probability about (1/12!)^3.
     */
    @Test
    void everyWorkerHasOneHashSeedSoAReplayedSetPrintsTheSame() {
        // the pool's four workers at once (four open sessions cannot share one)
        List<SandboxSession> sessions = new ArrayList<>();
        try {
            for (int i = 0; i < WORKERS; i++) sessions.add(sandbox.openSession());
            List<String> printed = new ArrayList<>();
            for (SandboxSession s : sessions) {
                ai.arbor.sandbox.ExecResult r = s.execute("import sys\nprint(sys.flags.hash_randomization, " + WORDS + ")");
                assertEquals(ai.arbor.sandbox.ExecStatus.OK, r.status(), r::toString);
                printed.add(r.stdout());
            }
            assertTrue(printed.get(0).startsWith("0 {"), printed.get(0));
            for (String p : printed) assertEquals(printed.get(0), p, "every worker prints the set in one order");
        } finally {
            sessions.forEach(SandboxSession::close);
        }
        // 16 paths over 4 workers, leased per call: each call replays the earlier ones, which printed the set, elsewhere
        int paths = 16, calls = 3;
        AgentLoop loop = loop(ToolSessionMode.LEASE_PER_CALL, calls, pk -> pk % 100 == 1 ? "s = set(" + WORDS + ")\nprint(s)"
                : "s.add('w" + (pk % 100) + "')\nprint(sorted(s)[-1], s)");
        List<CompletableFuture<Trajectory>> runs = new ArrayList<>();
        for (int p = 0; p < paths; p++) runs.add(loop.run(prompt(p), 5000 + p));
        for (int p = 0; p < paths; p++) {
            Trajectory t = runs.get(p).join();
            assertFalse(t.infrastructureFailure(), "path " + p + ": " + t.toolCalls());
            List<ToolCallRecord> done = t.toolCalls();
            assertEquals(calls, done.size());
            for (int k = 1; k <= calls; k++) assertEquals(ToolCallStatus.OK, done.get(k - 1).status(), "path " + p + " call " + k);
            assertTrue(done.get(calls - 1).output().startsWith("w" + calls + " {"), done.get(calls - 1).output());
        }
    }

    /**
     * A RemoteSandbox session holds no worker and replays its own cells with every request: a path keeps it open under
     * LEASE_PER_CALL (one open, no replay by the path), where a local session is leased per call and replayed.
     */
    @Test
    void aRemoteSandboxSessionIsHeldEvenWhenSessionsAreLeasedPerCall() {
        int n = 4;
        try (ai.arbor.sandbox.SandboxServer server = ai.arbor.sandbox.SandboxServer.start(sandbox, "127.0.0.1", 0, Duration.ofSeconds(20))) {
            ai.arbor.sandbox.RemoteSandbox client = ai.arbor.sandbox.RemoteSandbox.builder(server.uri()).timeout(Duration.ofSeconds(5)).build();
            for (boolean remote : new boolean[] {true, false}) {
                java.util.concurrent.atomic.AtomicInteger opens = new java.util.concurrent.atomic.AtomicInteger();
                ToolProvider provider = () -> {
                    opens.incrementAndGet();
                    SandboxSession s = remote ? client.openSession() : sandbox.openSession();
                    return ToolSession.of(List.of(new PythonTool(s)), true, s);
                };
                CostMeter meter = new CostMeter();
                PathTools tools = new PathTools(provider, meter, ToolSessionMode.LEASE_PER_CALL, List.of());
                try {
                    for (int k = 1; k <= n; k++) {
                        ToolCall call = new ToolCall("python", cell(11, k));
                        PathTools.Outcome o = tools.invoke(call, tools.epoch());
                        assertEquals(expected(11, k) + "\n", o.output(), (remote ? "remote" : "local") + " call " + k);
                        tools.executed(PathTools.Executed.of(call, o.status(), o.output(), o.raw()));
                    }
                } finally {
                    tools.close();
                }
                assertEquals(remote ? 1 : n, opens.get(), remote ? "one remote session for the path" : "a local session per call");
                assertEquals(remote ? 0 : n * (n - 1) / 2, meter.cost().replayedToolCalls(), remote ? "remote" : "local");
            }
            try (SandboxSession r = client.openSession(); SandboxSession l = sandbox.openSession()) {
                assertFalse(ToolSession.of(List.of(new PythonTool(r)), true, r).holdsWorker());
                assertTrue(ToolSession.of(List.of(new PythonTool(l)), true, l).holdsWorker());
                assertFalse(ToolSession.of(List.of(new PythonTool(l)), false, null).holdsWorker(), "stateless");
            }
        }
    }

    static double mean(double[] a) {
        double s = 0;
        for (double v : a) s += v;
        return s / a.length;
    }
}
