package ai.arbor.task;

import ai.arbor.kernels.SamplingParams;
import ai.arbor.reward.AnswerChecker;
import ai.arbor.reward.MathGrader;
import ai.arbor.rollout.AgentConfig;
import ai.arbor.rollout.ToolProvider;
import ai.arbor.rollout.ToolSession;
import ai.arbor.rollout.ToolSessionMode;
import ai.arbor.sandbox.PythonSandbox;
import ai.arbor.sandbox.SandboxSession;
import ai.arbor.tools.PythonTool;
import java.math.BigInteger;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * {@link ArithTask} for training: the stateful Python tool over the local jailed sandbox (workers are reset
 * in place when a session closes, {@code recycleWorkers}), answers graded by
 * {@link MathGrader}. A solved response reads
 * <pre>{@code Q: 417*38-290
 * <python>print(417*38-290)</python> <result>
 * 15556
 * </result>\boxed{15556}}</pre>
 */
final class ArithTraining implements TrainingTask {
    /** The cold start: 60 % use the tool plainly, 10 % after CoRT's hints, 30 % answer in their head. */
    static final Map<DemoStyle, Double> MIX = mix(0.60, 0.10, 0.30);
    static final String HINT_CODE = "It looks tedious, and we can use python code to simplify the reasoning.";
    static final String HINT_TRUST = "We don't need to doubt the accuracy of python calculations.";

    /** {@code arith-small}'s cold start: every demonstration uses the tool plainly. */
    static final Map<DemoStyle, Double> TOOL_ONLY = mix(1.0, 0.0, 0.0);

    private final ArithTask task;
    private final String name;
    private final Map<DemoStyle, Double> mix;
    private final MathGrader grader = MathGrader.standard();
    private PythonSandbox sandbox;

    ArithTraining(ArithTask task) {
        this(task, "arith", MIX);
    }

    /** {@code task} under the task name {@code name} with the cold-start mix {@code mix}. */
    ArithTraining(ArithTask task, String name, Map<DemoStyle, Double> mix) {
        this.task = task;
        this.name = name;
        this.mix = mix;
    }

    private static Map<DemoStyle, Double> mix(double tool, double hint, double hand) {
        Map<DemoStyle, Double> m = new LinkedHashMap<>();
        m.put(DemoStyle.TOOL, tool);
        m.put(DemoStyle.HINT, hint);
        m.put(DemoStyle.HAND, hand);
        return Map.copyOf(m);
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public List<Problem> train() {
        return task.train();
    }

    @Override
    public List<Problem> heldOut() {
        return task.heldOut();
    }

    /** The sandbox, started on first use (a worker per core, reset in place between sessions). */
    private synchronized PythonSandbox sandbox() {
        if (sandbox == null)
            sandbox = PythonSandbox.builder().recycleWorkers(true).workers(Math.max(4, Runtime.getRuntime().availableProcessors()))
                    .timeout(Duration.ofSeconds(3)).memoryLimitMb(512).build();
        return sandbox;
    }

    /**
     * The standard stateful Python tool, a session per path. The rollout engine leases it per call
     * ({@link ai.arbor.rollout.ToolSessionMode#LEASE_PER_CALL}, the default): a path holds a worker only
     * while its call runs (about 2 ms with recycling, plus 0.1–0.25 ms to replay each earlier cell, at most
     * one here), so AEPO's up to 48 paths per prompt never wait for one of the few workers. This replaced a
     * stateless fresh interpreter per call, which avoided the wait too (at one replayed cell less) but gave
     * arith other semantics than every other Python task: a second call could not use the first's variables.
     */
    @Override
    public ToolProvider tools() {
        return () -> {
            SandboxSession s = sandbox().openSession();
            return ToolSession.of(List.of(new PythonTool(s)), true, s);
        };
    }

    @Override
    public AnswerChecker checker() {
        return grader;
    }

    @Override
    public boolean questionAnswering() {
        return false;
    }

    /** 3 turns, 2 tool calls, 160 tokens per turn, 320 response tokens, observations up to 64 tokens. */
    @Override
    public AgentConfig agentConfig(SamplingParams sampling) {
        return AgentConfig.builder().sampling(sampling).maxNewTokens(160).maxTurns(3).maxToolCalls(2).maxResponseTokens(320)
                .maxObservationTokens(64).toolTimeout(Duration.ofSeconds(30)).toolSessions(ToolSessionMode.LEASE_PER_CALL).build();
    }

    @Override
    public Map<DemoStyle, Double> demoMix() {
        return mix;
    }

    @Override
    public DemoScript demonstration(Problem p, DemoStyle style) {
        String program = "<python>" + p.plan().get(0).argument() + "</python>";
        return switch (style) {
            case TOOL -> (turn, so) -> turn == 0 ? program : answerFromResult(so, p);
            case HINT -> (turn, so) -> {
                if (turn == 0) return firstProduct(p.question()) + " " + HINT_CODE + "\n" + program;
                String a = answerFromResult(so, p);
                return a == null ? null : HINT_TRUST + "\n" + a;
            };
            case HAND -> (turn, so) -> "\\boxed{" + p.answer() + "}";
            case PARTIAL -> throw new IllegalArgumentException("arith has no PARTIAL demonstrations (one program solves it)");
        };
    }

    /** {@code \boxed{output}} when the last observation holds exactly the gold answer, else null. */
    private static String answerFromResult(String so, Problem p) {
        String out = lastResult(so);
        return out != null && out.strip().equals(p.answer()) ? "\\boxed{" + out.strip() + "}" : null;
    }

    /** The body of the last {@code <result>…</result>} in {@code text}, or null. */
    static String lastResult(String text) {
        int open = text.lastIndexOf("<result>\n");
        int close = text.lastIndexOf("\n</result>");
        return open >= 0 && close > open ? text.substring(open + 9, close) : null;
    }

    /** The hand computation a hint demonstration starts with: the first product, worked out ({@code 417*38=15846.}). */
    static String firstProduct(String expr) {
        for (String term : expr.split("[+-]"))
            if (term.contains("*")) {
                BigInteger v = ArithTask.evaluate(term);
                return term + "=" + v + ".";
            }
        throw new IllegalArgumentException("no product in " + expr);
    }

    @Override
    public synchronized void close() {
        if (sandbox != null) sandbox.close();
        sandbox = null;
    }
}
