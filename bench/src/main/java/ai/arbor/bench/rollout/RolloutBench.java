package ai.arbor.bench.rollout;

import ai.arbor.rollout.AgentConfig;
import ai.arbor.rollout.CharTokenizer;
import ai.arbor.rollout.FinishReason;
import ai.arbor.rollout.Generation;
import ai.arbor.rollout.GenerationRequest;
import ai.arbor.rollout.Generator;
import ai.arbor.rollout.GroupRollout;
import ai.arbor.rollout.Prompt;
import ai.arbor.rollout.RolloutBatch;
import ai.arbor.rollout.RolloutEngine;
import ai.arbor.rollout.RolloutStrategy;
import ai.arbor.rollout.TagToolCallFormat;
import ai.arbor.rollout.TokenContext;
import ai.arbor.rollout.ToolProvider;
import ai.arbor.rollout.ToolSession;
import ai.arbor.sandbox.PythonSandbox;
import ai.arbor.sandbox.SandboxSession;
import ai.arbor.tools.Observation;
import ai.arbor.tools.PythonTool;
import ai.arbor.tools.Tool;
import java.time.Duration;
import ai.arbor.tree.ChainRollout;
import ai.arbor.tree.TreeGrpoRollout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.AuxCounters;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * Throughput of the rollout orchestration layer alone: a zero-cost generator (precomputed token
 * arrays returned as completed futures) and an in-process tool, so what is measured is the agent loop,
 * the formats, tokenization of observations, tree bookkeeping, the futures and the tool thread pool.
 * One operation = one rollout of a batch of {@code trajectories} concurrent trajectories, each making
 * {@code calls} tool calls then answering ({@code calls + 1} agent steps); the primary score is batches/s.
 * The auxiliary counters report trajectories/s, tool calls/s, agent steps/s (= generations/s) and
 * replayed calls/s; µs per step = 1e6 / steps/s (wall time, all cores).
 *
 * <p>{@code tool = sleep1ms}: every call blocks a tool thread for 1 ms (a fast sandbox execution), to
 * show generation and tool calls of many paths overlapping on the 16 tool threads.
 *
 * <p>{@code tool = sandbox}: the real {@code PythonTool} over the local jailed {@code PythonSandbox}, one
 * stateful session per path (opened at the path's first call, closed — the worker killed and respawned —
 * at its end), each call running {@code print(1)}. The pool has {@value #SANDBOX_WORKERS} workers, so at
 * most 2 prompts (16 paths) are rolled out at once; Tree-GRPO's expansions replay their prefix's calls
 * into a fresh session (counted in the replay metric, not in tool calls).
 *
 * <p>Run: {@code bench/run.sh RolloutBench -f 1 -wi 2 -i 3}
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
public class RolloutBench {
    @Param({"64", "256"})
    public int trajectories;

    @Param({"noop", "sleep1ms", "sandbox"})
    public String tool;

    @Param({"chains", "tree-grpo"})
    public String strategy;

    /** Tool calls per trajectory before the answer. */
    @Param({"3"})
    public int calls;

    static final CharTokenizer TOK = CharTokenizer.ascii();
    static final int SANDBOX_WORKERS = 16;
    RolloutEngine engine;
    PythonSandbox sandbox;
    List<Prompt> prompts;
    RolloutStrategy<? extends GroupRollout> rollout;

    /** Turn k of a path = depth of its context chain below the prompt: no decoding, no allocation but the result. */
    static final class ZeroCostGenerator implements Generator {
        final int[] call = TOK.encode("Let me check. <python>print(1)</python>");
        final int[] answer;
        final float[] callLp, answerLp;
        final int calls;

        ZeroCostGenerator(int calls) {
            this.calls = calls;
            int[] a = TOK.encode("So \\boxed{1}");
            answer = Arrays.copyOf(a, a.length + 1);
            answer[a.length] = TOK.eosId();
            callLp = new float[call.length];
            answerLp = new float[answer.length];
            Arrays.fill(callLp, -0.1f);
            Arrays.fill(answerLp, -0.1f);
        }

        @Override
        public CompletableFuture<Generation> generate(GenerationRequest r) {
            int turn = 0;
            for (TokenContext c = r.context(); c.parent() != null; c = c.parent()) turn++;
            Generation g = turn < calls ? new Generation(call, callLp, null, FinishReason.STOP_STRING, "</python>", -1)
                    : new Generation(answer, answerLp, null, FinishReason.STOP_TOKEN, null, TOK.eosId());
            return CompletableFuture.completedFuture(g);
        }
    }

    @Setup(Level.Trial)
    public void setup() {
        boolean sleep = tool.equals("sleep1ms");
        Tool t = new Tool() {
            public String name() {
                return "python";
            }

            public String description() {
                return "benchmark tool";
            }

            public String parametersSchema() {
                return "{}";
            }

            public Observation call(String arguments) {
                if (sleep) {
                    try {
                        Thread.sleep(1);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
                return Observation.ok("1", null);
            }
        };
        ToolProvider tools = ToolProvider.shared(t);
        int promptsInFlight = 0;
        if (tool.equals("sandbox")) {
            sandbox = PythonSandbox.builder().workers(SANDBOX_WORKERS).timeout(Duration.ofSeconds(10)).leaseTimeout(Duration.ofMinutes(5)).build();
            tools = () -> {
                SandboxSession s = sandbox.openSession();
                return ToolSession.of(List.of(new PythonTool(s)), true, s);
            };
            promptsInFlight = 2;
        }
        engine = RolloutEngine.builder().generator(new ZeroCostGenerator(calls)).tokenizer(TOK).format(TagToolCallFormat.arpo())
                .tools(tools).config(AgentConfig.builder().maxNewTokens(128)
                        .maxTurns(calls + 2).maxToolCalls(calls + 1).build()).toolThreads(16).maxConcurrentPrompts(promptsInFlight).build();
        // groups of 8 (chains) or 2 trees x 3 kept leaves + expansions (Tree-GRPO defaults: 6 per prompt)
        int perPrompt = strategy.equals("chains") ? 8 : 6;
        prompts = new ArrayList<>();
        for (int i = 0; i < trajectories / perPrompt; i++) prompts.add(new Prompt("q" + i, TOK.encode("Question " + i + "?\n"), null, Map.of()));
        rollout = strategy.equals("chains") ? new ChainRollout(8) : new TreeGrpoRollout();
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        engine.close();
        if (sandbox != null) sandbox.close();
    }

    /** Per-second rates JMH derives from these totals. */
    @AuxCounters(AuxCounters.Type.OPERATIONS)
    @State(Scope.Thread)
    public static class Counts {
        public long trajectoriesDone, toolCalls, agentSteps, replayedCalls;
    }

    @Benchmark
    public RolloutBatch<?> rollout(Counts c) {
        RolloutBatch<?> b = engine.run(prompts, rollout, 42);
        c.trajectoriesDone += b.metrics().trajectories();
        c.toolCalls += b.cost().toolCalls();
        c.agentSteps += b.cost().generations();
        c.replayedCalls += b.cost().replayedToolCalls();
        return b;
    }
}
