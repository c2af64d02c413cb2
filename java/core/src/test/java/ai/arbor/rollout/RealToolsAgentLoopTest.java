package ai.arbor.rollout;

import static org.junit.jupiter.api.Assertions.*;

import ai.arbor.sandbox.ExecResult;
import ai.arbor.sandbox.ExecStatus;
import ai.arbor.sandbox.PythonSandbox;
import ai.arbor.sandbox.SandboxSession;
import ai.arbor.tools.CalculatorTool;
import ai.arbor.tools.PythonTool;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** The agent loop with the real tools: PythonTool over the local jailed sandbox, and CalculatorTool. */
class RealToolsAgentLoopTest {
    static final CharTokenizer TOK = CharTokenizer.ascii();
    static PythonSandbox sandbox;
    static ExecutorService pool;

    @BeforeAll
    static void start() {
        sandbox = PythonSandbox.builder().workers(2).timeout(Duration.ofSeconds(5)).memoryLimitMb(1024).build();
        System.out.println("sandbox: " + sandbox.isolationReport());
        pool = Executors.newFixedThreadPool(4);
    }

    @AfterAll
    static void stop() {
        pool.shutdownNow();
        sandbox.close();
    }

    static ToolProvider python() {
        return () -> {
            SandboxSession s = sandbox.openSession();
            return ToolSession.of(List.of(new PythonTool(s)), true, s);
        };
    }

    static Prompt prompt() {
        return new Prompt("p", TOK.encode("Q: compute.\n"), null, Map.of());
    }

    /** Spans of equal mask value, decoded: [text, generated?] in order. */
    static List<String> spans(Trajectory t, boolean generated) {
        List<String> out = new ArrayList<>();
        int i = 0;
        while (i < t.length()) {
            int j = i;
            while (j < t.length() && t.lossMask()[j] == t.lossMask()[i]) j++;
            if (t.lossMask()[i] == generated) out.add(TOK.decode(java.util.Arrays.copyOfRange(t.tokens(), i, j)));
            i = j;
        }
        return out;
    }

    @Test
    void cortWithThePythonSandboxKeepsStateMasksObservationsAndMarksPostToolTurns() {
        String[] turns = {"Let me compute.\n```python\nx = 6*7\nprint(x)\n```\n```output",
                "Check with state.\n```python\nprint(x + 1)\n```\n```output",
                "Now divide.\n```python\n1/0\n```\n```output",
                "So \\boxed{43}"};
        ScriptedGenerator gen = new ScriptedGenerator(TOK, (ctx, rnd) -> {
            int k = AgentLoopTest.count(ctx, "```output");
            return new ScriptedGenerator.Turn(turns[Math.min(k, 3)], k >= 3, 0.5);
        });
        AgentLoop loop = AgentLoop.builder().generator(gen).tokenizer(TOK).format(MarkdownToolCallFormat.cort()).tools(python())
                .config(AgentConfig.builder().maxNewTokens(200).maxToolCalls(3).maxTurns(6)
                        .maxResponseTokens(2000).build()).toolExecutor(pool).build();
        Trajectory t = loop.run(prompt(), 1).join();

        assertEquals(Termination.ANSWER, t.termination());
        assertEquals(List.of(ToolCallStatus.OK, ToolCallStatus.OK, ToolCallStatus.TOOL_ERROR), t.toolCalls().stream().map(ToolCallRecord::status).toList());
        assertEquals(ExecStatus.ERROR, ((ExecResult) t.toolCalls().get(2).raw()).status());
        List<String> obs = spans(t, false);
        assertEquals(3, obs.size());
        assertEquals("\n42\n```\n", obs.get(0));
        assertEquals("\n43\n```\n", obs.get(1), "variables persist across calls of one trajectory");
        assertTrue(obs.get(2).contains("ZeroDivisionError"), obs.get(2));
        assertTrue(obs.get(2).endsWith("\n```\n\nReach max function call limit."), obs.get(2));
        // the generated spans are exactly the model's turns (the last one followed by EOS, skipped by decode)
        assertEquals(List.of(turns), spans(t, true));
        // M_post: every token of turns 1..3, none of turn 0 nor of any observation
        for (int i = 0; i < t.length(); i++) assertEquals(t.lossMask()[i] && t.turnIndex()[i] > 0, t.postTool()[i], "M_post at " + i);
        assertEquals(0, sandbox.stats().openSessions(), "the path's session was closed at its end");
    }

    @ParameterizedTest
    @EnumSource(ToolSessionMode.class)
    void aBranchReplaysThePythonStateIntoItsOwnSession(ToolSessionMode mode) {
        ScriptedGenerator gen = new ScriptedGenerator(TOK, (ctx, rnd) -> {
            int k = AgentLoopTest.count(ctx, "<result>");
            String code = k == 0 ? "x = 5\nprint(x)" : "x = x + 100\nprint(x)";
            return new ScriptedGenerator.Turn("step <python>" + code + "</python>", false, 1);
        });
        AgentLoop loop = AgentLoop.builder().generator(gen).tokenizer(TOK).format(TagToolCallFormat.arpo()).tools(python())
                .config(AgentConfig.builder().maxNewTokens(200).toolSessions(mode).build()).toolExecutor(pool).build();
        CostMeter meter = new CostMeter();
        AgentState s1 = loop.step(loop.start(prompt(), null, 1, meter)).join();
        assertEquals("5\n", s1.lastStep().toolCall().output());
        AgentState branch = loop.fork(s1, 2);
        AgentState original = loop.step(s1).join();
        AgentState branched = loop.step(branch).join();
        assertEquals("105\n", original.lastStep().toolCall().output());
        assertEquals("105\n", branched.lastStep().toolCall().output(), "the branch sees x = 5 (replayed), not the original's 105");
        // held: the branch's session replays x = 5 and both paths keep a worker between calls; leased: each
        // path's second call replays it into a session that is closed again after the call
        boolean held = mode == ToolSessionMode.HOLD_PER_PATH;
        assertEquals(held ? 1 : 2, meter.cost().replayedToolCalls());
        assertEquals(held ? 2 : 0, sandbox.stats().openSessions());
        loop.release(original);
        loop.release(branched);
        assertEquals(0, sandbox.stats().openSessions());
    }

    @Test
    void calculatorThroughJsonToolCallsAndAClosedSandboxAsInfrastructureFailure() {
        String[] turns = {"<tool_call>{\"name\": \"calculator\", \"arguments\": {\"expression\": \"2^100\"}}</tool_call>",
                "<tool_call>{\"name\": \"calculator\", \"arguments\": {\"expression\": \"1/(\"}}</tool_call>",
                "<tool_call>{\"name\": \"python\", \"arguments\": {\"code\": \"print(1)\"}}</tool_call>",
                "It is 1267650600228229401496703205376."};
        ScriptedGenerator gen = new ScriptedGenerator(TOK, (ctx, rnd) -> {
            int k = AgentLoopTest.count(ctx, "<tool_response>");
            return new ScriptedGenerator.Turn(turns[Math.min(k, 3)], k >= 3, 1);
        });
        PythonSandbox closed = PythonSandbox.builder().workers(1).build();
        closed.close();
        ToolProvider tools = () -> {
            CalculatorTool calc = new CalculatorTool();
            SandboxSession s = closed.openSession();   // throws: the sandbox is closed
            return ToolSession.of(List.of(calc, new PythonTool(s)), true, s);
        };
        ToolProvider calcOnly = ToolProvider.shared(new CalculatorTool());
        AgentLoop loop = AgentLoop.builder().generator(gen).tokenizer(TOK).format(JsonToolCallFormat.hermes()).tools(calcOnly)
                .config(AgentConfig.builder().maxNewTokens(200).build()).toolExecutor(pool).build();
        Trajectory t = loop.run(prompt(), 1).join();
        assertEquals(List.of(ToolCallStatus.OK, ToolCallStatus.TOOL_ERROR, ToolCallStatus.UNKNOWN_TOOL),
                t.toolCalls().stream().map(ToolCallRecord::status).toList());
        List<String> obs = spans(t, false);
        assertEquals("\n<tool_response>\n1267650600228229401496703205376\n</tool_response>\n", obs.get(0));
        assertTrue(obs.get(1).startsWith("\n<tool_response>\n") && obs.get(1).length() > 30, obs.get(1));
        assertEquals(List.of(turns), spans(t, true));
        for (int i = 0; i < t.length(); i++) assertEquals(t.lossMask()[i] && t.turnIndex()[i] > 0, t.postTool()[i]);
        assertEquals(Termination.ANSWER, t.termination());

        AgentLoop broken = AgentLoop.builder().generator(gen).tokenizer(TOK).format(JsonToolCallFormat.hermes()).tools(tools)
                .config(AgentConfig.builder().maxNewTokens(200).build()).toolExecutor(pool).build();
        Trajectory u = broken.run(prompt(), 1).join();
        assertEquals(ToolCallStatus.INFRASTRUCTURE_ERROR, u.toolCalls().get(0).status());
        assertTrue(u.toolCalls().get(0).output().contains("could not be opened"), u.toolCalls().get(0).output());
        assertTrue(u.infrastructureFailure());
        assertEquals(Termination.ANSWER, u.termination(), "an infrastructure failure does not stop the loop");
    }
}
