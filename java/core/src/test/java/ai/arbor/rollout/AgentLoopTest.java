package ai.arbor.rollout;

import static org.junit.jupiter.api.Assertions.*;

import ai.arbor.tools.Observation;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class AgentLoopTest {
    static final CharTokenizer TOK = CharTokenizer.ascii();
    static final ExecutorService POOL = Executors.newFixedThreadPool(4);

    @AfterAll
    static void shutdown() {
        POOL.shutdownNow();
    }

    static Prompt prompt(String text) {
        return new Prompt("p", TOK.encode(text), text, Map.of());
    }

    /** Turn k (= results seen so far) calls {@code calls[k]}, then answers. */
    static ScriptedGenerator.Script calls(String... code) {
        return (ctx, rnd) -> {
            int k = count(ctx, "<result>");
            if (k < code.length) return new ScriptedGenerator.Turn("t" + k + " <python>" + code[k] + "</python>", false, 0.5);
            return new ScriptedGenerator.Turn("so \\boxed{42}", true, 0.25);
        };
    }

    static int count(String s, String sub) {
        int c = 0;
        for (int i = s.indexOf(sub); i >= 0; i = s.indexOf(sub, i + 1)) c++;
        return c;
    }

    static AgentLoop loop(Generator g, ToolProvider tools, AgentConfig cfg) {
        return AgentLoop.builder().generator(g).tokenizer(TOK).format(TagToolCallFormat.arpo()).tools(tools).config(cfg).toolExecutor(POOL).build();
    }

    static AgentConfig.Builder cfg() {
        return AgentConfig.builder().maxNewTokens(200);
    }

    @Test
    void masksCoverExactlyTheObservationsAndPostToolMarksTheRightTurns() {
        ScriptedGenerator gen = new ScriptedGenerator(TOK, calls("print(0)", "print(1)"));
        AgentLoop loop = loop(gen, ToolProvider.shared(TestTools.echo("python")), cfg().build());
        Trajectory t = loop.run(prompt("Q: 6*7?\n"), 7).join();

        String t0 = "t0 <python>print(0)</python>", t1 = "t1 <python>print(1)</python>", t2 = "so \\boxed{42}";
        String o0 = " <result>\nout:print(0)\n</result>", o1 = " <result>\nout:print(1)\n</result>";
        // Independent expectation built from the strings (char tokenizer: one token per char; EOS ends t2).
        List<Boolean> mask = new ArrayList<>();
        List<Integer> turn = new ArrayList<>();
        List<Boolean> post = new ArrayList<>();
        String[] parts = {t0, o0, t1, o1, t2};
        int[] turns = {0, 0, 1, 1, 2};
        boolean[] generated = {true, false, true, false, true};
        boolean[] postTool = {false, false, true, false, true};
        for (int p = 0; p < parts.length; p++) {
            int len = parts[p].length() + (p == 4 ? 1 : 0);
            for (int i = 0; i < len; i++) {
                mask.add(generated[p]);
                turn.add(turns[p]);
                post.add(postTool[p]);
            }
        }
        assertEquals(mask.size(), t.length());
        for (int i = 0; i < t.length(); i++) {
            assertEquals(mask.get(i), t.lossMask()[i], "mask at " + i);
            assertEquals(turn.get(i), t.turnIndex()[i], "turn at " + i);
            assertEquals(post.get(i), t.postTool()[i], "M_post at " + i);
            assertEquals(!mask.get(i), Float.isNaN(t.logprobs()[i]), "logprob NaN exactly on observations at " + i);
            if (mask.get(i)) assertTrue(t.logprobs()[i] < 0);
        }
        assertEquals(t0 + o0 + t1 + o1 + t2, t.responseText(TOK));
        assertEquals(TOK.eosId(), t.tokens()[t.length() - 1]);
        assertEquals(0.5f, t.entropies()[0]);
        assertEquals(0.25f, t.entropies()[t.length() - 1]);
        assertTrue(Float.isNaN(t.entropies()[t0.length()]));
        assertEquals(Termination.ANSWER, t.termination());
        assertEquals(List.of("print(0)", "print(1)"), t.toolCalls().stream().map(ToolCallRecord::arguments).toList());
        assertTrue(t.toolCalls().stream().allMatch(r -> r.status() == ToolCallStatus.OK && r.tool().equals("python") && !r.limitReached()));
        assertEquals(List.of(TurnOutcome.TOOL_CALL, TurnOutcome.TOOL_CALL, TurnOutcome.ANSWER), t.steps().stream().map(AgentStep::outcome).toList());
        assertEquals(t0.length() + t1.length() + t2.length() + 1, t.generatedTokens());
        // The third request continued from the full context: prompt + everything before it.
        GenerationRequest third = gen.requests().get(2);
        assertEquals("Q: 6*7?\n" + t0 + o0 + t1 + o1, TOK.decode(third.context().toArray()));
        assertTrue(third.limits().stopStrings().containsAll(List.of("</python>", "</search>")));
        assertEquals(Seeds.derive(7, 2), third.seed());
        // Each request's context extends the previous one (explicit prefix identity for KV reuse).
        assertTrue(third.context().startsWith(gen.requests().get(1).context()));
    }

    @Test
    void lastAllowedCallGetsTheLimitNoticeAndAFurtherCallEndsThePath() {
        ScriptedGenerator gen = new ScriptedGenerator(TOK, calls("a", "b", "c", "d"));
        AgentLoop loop = loop(gen, ToolProvider.shared(TestTools.echo("python")), cfg().maxToolCalls(2).maxTurns(10).build());
        Trajectory t = loop.run(prompt("Q\n"), 1).join();
        assertEquals(Termination.MAX_TOOL_CALLS, t.termination());
        assertEquals(2, t.toolCalls().size());
        ai.arbor.reward.TrajectorySummary sum = t.summary(TOK);
        assertEquals(new ai.arbor.reward.TrajectorySummary(t.responseText(TOK), 2, 0, t.length(), true), sum);
        assertFalse(t.toolCalls().get(0).limitReached());
        assertTrue(t.toolCalls().get(1).limitReached());
        AgentStep second = t.steps().get(1);
        assertEquals(" <result>\nout:b\n</result>\nReach max function call limit.", TOK.decode(second.observation()));
        assertEquals(TurnOutcome.CALL_NOT_EXECUTED, t.steps().get(2).outcome());
        assertEquals(0, t.steps().get(2).observation().length);
        assertEquals(3, t.steps().size());
    }

    @Test
    void aCallOnTheLastTurnIsNotExecuted() {
        ScriptedGenerator gen = new ScriptedGenerator(TOK, calls("a", "b", "c", "d"));
        TestTools.CounterProvider tools = new TestTools.CounterProvider();
        AgentLoop loop = loop(gen, tools, cfg().maxTurns(3).maxToolCalls(10).build());
        Trajectory t = loop.run(prompt("Q\n"), 1).join();
        assertEquals(Termination.MAX_TURNS, t.termination());
        assertEquals(3, t.steps().size());
        assertEquals(2, t.toolCalls().size());
        // leased per call (the default): "b" runs in its own session after replaying "a"
        assertEquals(3, tools.calls.get());
        assertEquals("2", t.toolCalls().get(1).output());
        assertEquals(TurnOutcome.CALL_NOT_EXECUTED, t.steps().get(2).outcome());
        assertEquals(2, tools.opened.get());
        assertEquals(2, tools.closed.get(), "each call's session is closed after it");

        TestTools.CounterProvider held = new TestTools.CounterProvider();
        Trajectory h = loop(new ScriptedGenerator(TOK, calls("a", "b", "c", "d")), held,
                cfg().maxTurns(3).maxToolCalls(10).toolSessions(ToolSessionMode.HOLD_PER_PATH).build()).run(prompt("Q\n"), 1).join();
        assertEquals("2", h.toolCalls().get(1).output());
        assertEquals(2, held.calls.get());
        assertEquals(1, held.opened.get());
        assertEquals(1, held.closed.get(), "a held session is closed when the path ends");
    }

    @Test
    void responseBudgetCutsTheObservationAndEndsThePath() {
        String t0 = "t0 <python>a</python>";
        ScriptedGenerator gen = new ScriptedGenerator(TOK, calls("a", "b"));
        AgentLoop loop = loop(gen, ToolProvider.shared(TestTools.echo("python")), cfg().maxResponseTokens(t0.length() + 5).build());
        Trajectory t = loop.run(prompt("Q\n"), 1).join();
        assertEquals(Termination.MAX_TOKENS, t.termination());
        assertEquals(t0.length() + 5, t.length());
        assertTrue(t.steps().get(0).observationTruncated());
        assertEquals(" <res", TOK.decode(t.steps().get(0).observation()));

        // A budget smaller than the turn: the generation is cut at the cap.
        ScriptedGenerator gen2 = new ScriptedGenerator(TOK, calls("a"));
        Trajectory u = loop(gen2, ToolProvider.shared(TestTools.echo("python")), cfg().maxResponseTokens(10).build()).run(prompt("Q\n"), 1).join();
        assertEquals(Termination.MAX_TOKENS, u.termination());
        assertEquals(10, u.length());
        assertEquals(TurnOutcome.TRUNCATED, u.steps().get(0).outcome());
        assertEquals(FinishReason.LENGTH, u.steps().get(0).finishReason());

        // The per-turn cap alone: TURN_LENGTH.
        Trajectory v = loop(new ScriptedGenerator(TOK, calls("a")), ToolProvider.shared(TestTools.echo("python")),
                cfg().maxNewTokens(5).build()).run(prompt("Q\n"), 1).join();
        assertEquals(Termination.TURN_LENGTH, v.termination());
        assertEquals(5, v.length());
    }

    @Test
    void longToolOutputIsCutInsideTheFormatsFrame() {
        ScriptedGenerator gen = new ScriptedGenerator(TOK, calls("a"));
        AgentLoop loop = loop(gen, ToolProvider.shared(TestTools.tool("python", a -> Observation.ok("y".repeat(500), null))),
                cfg().maxObservationTokens(40).build());
        Trajectory t = loop.run(prompt("Q\n"), 1).join();
        AgentStep s = t.steps().get(0);
        assertTrue(s.observationTruncated());
        // frame " <result>\n" (10) + 5 kept + marker (15) + "\n</result>" (10) = 40
        assertEquals(" <result>\nyyyyy\n...[truncated]\n</result>", TOK.decode(s.observation()));
        assertEquals(Termination.ANSWER, t.termination());
    }

    @Test
    void toolFailuresAndInfrastructureFailuresAreDistinct() {
        ScriptedGenerator gen = new ScriptedGenerator(TOK, (ctx, rnd) -> {
            int k = count(ctx, "<result>");
            return switch (k) {
                case 0 -> ScriptedGenerator.Turn.of("<python>1/0</python>");
                case 1 -> ScriptedGenerator.Turn.of("<search>q</search>");
                case 2 -> ScriptedGenerator.Turn.of("</python>");
                default -> ScriptedGenerator.Turn.of("\\boxed{1}");
            };
        });
        ToolProvider tools = ToolProvider.shared(TestTools.tool("python", a -> Observation.failure("ZeroDivisionError", null)),
                TestTools.tool("search", a -> Observation.infrastructureFailure("search backend down", null)));
        Trajectory t = loop(gen, tools, cfg().build()).run(prompt("Q\n"), 1).join();
        assertEquals(List.of(ToolCallStatus.TOOL_ERROR, ToolCallStatus.INFRASTRUCTURE_ERROR, ToolCallStatus.MALFORMED),
                t.toolCalls().stream().map(ToolCallRecord::status).toList());
        assertTrue(t.infrastructureFailure());
        assertTrue(t.allToolCallsFailed());
        assertEquals(3, t.summary(TOK).toolFailures());
        assertFalse(t.summary(TOK).truncated());
        assertEquals(" <result>\nZeroDivisionError\n</result>", TOK.decode(t.steps().get(0).observation()));
        assertEquals(" <result>\nError: found </python> without an opening <python>\n</result>", TOK.decode(t.steps().get(2).observation()));
        assertNull(t.toolCalls().get(2).tool());
        assertEquals(Termination.ANSWER, t.termination());

        // a tool that throws is infrastructure; an unknown tool (JSON format) is its own status
        ScriptedGenerator g2 = new ScriptedGenerator(TOK, (ctx, rnd) -> count(ctx, "<tool_response>") == 0
                ? ScriptedGenerator.Turn.of("<tool_call>{\"name\":\"nope\",\"arguments\":{}}</tool_call>")
                : count(ctx, "<tool_response>") == 1 ? ScriptedGenerator.Turn.of("<tool_call>{\"name\":\"python\",\"arguments\":{}}</tool_call>")
                : ScriptedGenerator.Turn.of("done"));
        AgentLoop json = AgentLoop.builder().generator(g2).tokenizer(TOK).format(JsonToolCallFormat.hermes()).toolExecutor(POOL)
                .tools(ToolProvider.shared(TestTools.tool("python", a -> {
                    throw new IllegalStateException("bug in tool");
                }))).config(cfg().build()).build();
        Trajectory u = json.run(prompt("Q\n"), 1).join();
        assertEquals(List.of(ToolCallStatus.UNKNOWN_TOOL, ToolCallStatus.INFRASTRUCTURE_ERROR), u.toolCalls().stream().map(ToolCallRecord::status).toList());
        assertTrue(u.toolCalls().get(0).output().contains("unknown tool 'nope'; available: python"), u.toolCalls().get(0).output());
        assertTrue(u.toolCalls().get(1).output().contains("bug in tool"));
        assertEquals(Termination.ANSWER, u.termination());
    }

    @ParameterizedTest
    @EnumSource(ToolSessionMode.class)
    void aToolThatHangsIsCutOffAndTheSessionIsRebuiltByReplay(ToolSessionMode mode) {
        ScriptedGenerator gen = new ScriptedGenerator(TOK, calls("a", "sleep", "b"));
        TestTools.CounterProvider tools = new TestTools.CounterProvider();
        AgentLoop loop = loop(gen, tools, cfg().toolTimeout(Duration.ofMillis(200)).toolSessions(mode).build());
        CostMeter meter = new CostMeter();
        AgentState end = loop.runToEnd(loop.start(prompt("Q\n"), null, 1, meter)).join();
        Trajectory t = Trajectory.of(end, 0, 0, null);
        assertEquals(List.of(ToolCallStatus.OK, ToolCallStatus.INFRASTRUCTURE_ERROR, ToolCallStatus.OK),
                t.toolCalls().stream().map(ToolCallRecord::status).toList());
        assertEquals("1", t.toolCalls().get(0).output());
        assertTrue(t.toolCalls().get(1).output().contains("200 ms tool timeout"));
        // the fresh session replayed "a" (count 1), then ran "b": 2 — the timed-out call is not replayed
        assertEquals("2", t.toolCalls().get(2).output());
        // held: only the rebuilt session replays "a"; leased: the sessions of "sleep" and "b" each replay it
        boolean held = mode == ToolSessionMode.HOLD_PER_PATH;
        assertEquals(held ? 1 : 2, meter.cost().replayedToolCalls());
        assertEquals(held ? 2 : 3, tools.opened.get());
        assertEquals(Termination.ANSWER, t.termination());
    }

    @ParameterizedTest
    @EnumSource(ToolSessionMode.class)
    void forkReplaysStatefulCallsIntoTheBranchSession(ToolSessionMode mode) {
        ScriptedGenerator gen = new ScriptedGenerator(TOK, calls("a", "b", "c"));
        TestTools.CounterProvider tools = new TestTools.CounterProvider();
        AgentLoop loop = loop(gen, tools, cfg().toolSessions(mode).build());
        CostMeter meter = new CostMeter();
        AgentState s0 = loop.start(prompt("Q\n"), null, 1, meter);
        AgentState s1 = loop.step(s0).join();
        assertEquals("1", s1.lastStep().toolCall().output());
        AgentState s2 = loop.step(s1).join();
        assertEquals("2", s2.lastStep().toolCall().output());
        assertThrows(IllegalStateException.class, () -> loop.step(s1), "a continued state must be forked");
        AgentState branch = loop.fork(s1, 99);
        AgentState b2 = loop.step(branch).join();
        // the branch's session replayed "a" (1) and ran its own call: 2, independent of the original path
        assertEquals("2", b2.lastStep().toolCall().output());
        AgentState s3 = loop.step(s2).join();
        assertEquals("3", s3.lastStep().toolCall().output());
        // held: the branch's session replays "a"; leased: so do b's, the branch's and c's ("a", "b") sessions
        assertEquals(mode == ToolSessionMode.HOLD_PER_PATH ? 1 : 4, meter.cost().replayedToolCalls());
        assertEquals(s1.context(), b2.context().parent(), "the branch extends the node's context: the prefix is shared, not copied");
        assertNotEquals(Seeds.derive(1, 1), gen.requests().get(2).seed(), "a branch samples with its own seed");
        loop.release(b2);
        loop.runToEnd(s3).join();
    }

    @Test
    void generationFailuresEndThePathAsInfrastructureFailures() {
        Generator broken = r -> CompletableFuture.failedFuture(new GenerationException("server unreachable", true, null));
        TestTools.CounterProvider tools = new TestTools.CounterProvider();
        CostMeter meter = new CostMeter();
        AgentLoop loop = loop(broken, tools, cfg().build());
        AgentState end = loop.runToEnd(loop.start(prompt("Q\n"), null, 1, meter)).join();
        Trajectory t = Trajectory.of(end, 0, 0, null);
        assertEquals(Termination.GENERATION_FAILED, t.termination());
        assertTrue(t.infrastructureFailure());
        assertEquals(0, t.length());
        assertTrue(t.steps().get(0).error().contains("server unreachable"));
        assertEquals(1, meter.generationFailures());

        // invalid generations (out-of-vocabulary ids, more tokens than asked) are failures too
        Generator bad = r -> CompletableFuture.completedFuture(new Generation(new int[] {999}, new float[] {-1f}, null, FinishReason.LENGTH, null, -1));
        Trajectory u = loop(bad, tools, cfg().build()).run(prompt("Q\n"), 1).join();
        assertEquals(Termination.GENERATION_FAILED, u.termination());
        assertTrue(u.steps().get(0).error().contains("999"), u.steps().get(0).error());
        Generator tooMany = r -> CompletableFuture.completedFuture(new Generation(new int[300], new float[300], null, FinishReason.LENGTH, null, -1));
        Trajectory v = loop(tooMany, tools, cfg().build()).run(prompt("Q\n"), 1).join();
        assertTrue(v.steps().get(0).error().contains("300 tokens"), v.steps().get(0).error());
        Generator throwing = r -> {
            throw new IllegalStateException("thrown, not returned");
        };
        assertEquals(Termination.GENERATION_FAILED, loop(throwing, tools, cfg().build()).run(prompt("Q\n"), 1).join().termination());
    }

    @Test
    void voidTurnsAndCortMarkdownEndToEnd() {
        ScriptedGenerator gen = new ScriptedGenerator(TOK, (ctx, rnd) -> ScriptedGenerator.Turn.of("I give up."));
        Trajectory t = loop(gen, ToolProvider.none(), cfg().build()).run(prompt("Q\n"), 1).join();
        assertEquals(Termination.NO_ANSWER, t.termination());
        assertTrue(t.hasVoidTurn());

        ScriptedGenerator cort = new ScriptedGenerator(TOK, (ctx, rnd) -> count(ctx, "```output") == 0
                ? new ScriptedGenerator.Turn("Compute.\n```python\nprint(2**10)\n```\n```output\nshould not be generated", false, 1)
                : ScriptedGenerator.Turn.of("\\boxed{1024}"));
        AgentLoop loop = AgentLoop.builder().generator(cort).tokenizer(TOK).format(MarkdownToolCallFormat.cort()).toolExecutor(POOL)
                .tools(ToolProvider.shared(TestTools.tool("python", a -> Observation.ok(a.equals("print(2**10)") ? "1024" : "?", null))))
                .config(cfg().build()).build();
        Trajectory c = loop.run(prompt("Q\n"), 1).join();
        assertEquals("Compute.\n```python\nprint(2**10)\n```\n```output\n1024\n```\n\\boxed{1024}", c.responseText(TOK));
        assertEquals(FinishReason.STOP_STRING, c.steps().get(0).finishReason());
        assertEquals("```output", c.steps().get(0).stopString());
        assertEquals(Termination.ANSWER, c.termination());
        assertArrayEquals(new int[] {1, 2}, Arrays.copyOf(AgentLoop.pathOf(2), 2));
    }

    /** Turn 0 writes neither a call nor an answer; after the invalid-action reply it calls, then answers. */
    static ScriptedGenerator.Script invalidFirst() {
        return (ctx, rnd) -> {
            if (!ctx.contains("My previous action is invalid")) return ScriptedGenerator.Turn.of("hmm");
            if (count(ctx, "<result>") == 0) return new ScriptedGenerator.Turn("<python>x</python>", false, 0.5);
            return ScriptedGenerator.Turn.of("so \\boxed{42}");
        };
    }

    @Test
    void anInvalidActionIsAnsweredAndThePathGoesOnWhenAsked() {
        String invalid = TagToolCallFormat.SEARCH_R1_INVALID;
        // default: the void turn ends the path
        Trajectory ended = loop(new ScriptedGenerator(TOK, invalidFirst()), ToolProvider.shared(TestTools.echo("python")), cfg().build())
                .run(prompt("Q?\n"), 3).join();
        assertEquals(Termination.NO_ANSWER, ended.termination());
        assertEquals("hmm".length() + 1, ended.length(), "the turn and its EOS, nothing appended");
        // Tree-GRPO's form: the release's exact reply, masked, and the path continues to a call and an answer
        AgentConfig tree = cfg().maxTurns(4).build().treeGrpo();
        assertEquals(invalid, tree.invalidActionObservation());
        Trajectory t = loop(new ScriptedGenerator(TOK, invalidFirst()), ToolProvider.shared(TestTools.echo("python")), tree).run(prompt("Q?\n"), 3).join();
        assertEquals(Termination.ANSWER, t.termination());
        String t0 = "hmm", o0 = invalid, t1 = "<python>x</python>", o1 = " <result>\nout:x\n</result>", t2 = "so \\boxed{42}";
        // one token per character; EOS after t0 and t2
        String[] parts = {t0, o0, t1, o1, t2};
        int[] extra = {1, 0, 0, 0, 1};
        boolean[] generated = {true, false, true, false, true};
        List<Boolean> mask = new ArrayList<>();
        for (int p = 0; p < parts.length; p++) for (int i = 0; i < parts[p].length() + extra[p]; i++) mask.add(generated[p]);
        assertEquals(mask.size(), t.length());
        for (int i = 0; i < t.length(); i++) assertEquals(mask.get(i), t.lossMask()[i], "token " + i);
        assertEquals(invalid, TOK.decode(Arrays.copyOfRange(t.tokens(), t0.length() + 1, t0.length() + 1 + invalid.length())));
        assertEquals(1, t.toolCalls().size(), "the invalid action is not a tool call");
        assertTrue(t.hasVoidTurn(), "it is still a void turn");
        // on the last turn an invalid action ends the path as before (no reply is appended)
        Trajectory last = loop(new ScriptedGenerator(TOK, invalidFirst()), ToolProvider.shared(TestTools.echo("python")),
                cfg().maxTurns(1).invalidActionObservation(invalid).build()).run(prompt("Q?\n"), 3).join();
        assertEquals(Termination.MAX_TURNS, last.termination());
        assertEquals("hmm".length() + 1, last.length());
        assertThrows(IllegalArgumentException.class, () -> cfg().invalidActionObservation("").build());
    }

    @Test
    void theFinalTurnRunsWithoutTools() {
        // a policy that always calls: with maxTurns = 2 the second call is not executed; with the final turn, two calls
        // run and a third generation follows whose call is not executed, a leaf
        ScriptedGenerator.Script always = (ctx, rnd) -> new ScriptedGenerator.Turn("<python>x" + count(ctx, "<result>") + "</python>", false, 0.5);
        Trajectory plain = loop(new ScriptedGenerator(TOK, always), ToolProvider.shared(TestTools.echo("python")), cfg().maxTurns(2).build())
                .run(prompt("Q?\n"), 3).join();
        assertEquals(Termination.MAX_TURNS, plain.termination());
        assertEquals(List.of("x0"), plain.toolCalls().stream().map(ToolCallRecord::arguments).toList());
        AgentConfig fin = cfg().maxTurns(2).finalTurnWithoutTools(true).build();
        assertEquals(3, fin.maxGenerations());
        Trajectory t = loop(new ScriptedGenerator(TOK, always), ToolProvider.shared(TestTools.echo("python")), fin).run(prompt("Q?\n"), 3).join();
        assertEquals(Termination.MAX_TURNS, t.termination());
        assertEquals(List.of("x0", "x1"), t.toolCalls().stream().map(ToolCallRecord::arguments).toList());
        String expected = "<python>x0</python> <result>\nout:x0\n</result><python>x1</python> <result>\nout:x1\n</result><python>x2</python>";
        assertEquals(expected, TOK.decode(t.tokens()), "the final turn's call is in the response, unexecuted, nothing after it");
    }

    @Test
    void cortsLoopPutsTheNoticeInTheSecondToLastRoundsOutputAndLastRoundHasNoToolStop() {
        // a policy that writes a call, then an answer after it: a tool stop cuts the turn at </python>, without one it runs on
        ScriptedGenerator.Script s = (ctx, rnd) -> ScriptedGenerator.Turn.of("<python>x" + count(ctx, "<result>") + "</python> so \\boxed{7}");
        String n = AgentConfig.CORT_LIMIT_NOTICE;
        assertEquals("\n\n[SYSTEM]\nYou have exceeded the allowed number of code executions. You can no longer write or run code. "
                + "Please continue solving the problem using your reasoning and analytical skills.", n, "CoRT's vllm_rollout.py text");
        // the task's loop: 3 turns, 2 calls; the default notice after the frame; the third turn's call is cut and not run
        ScriptedGenerator plainGen = new ScriptedGenerator(TOK, s);
        Trajectory plain = loop(plainGen, ToolProvider.shared(TestTools.echo("python")), cfg().maxTurns(3).maxToolCalls(2).build())
                .run(prompt("Q?\n"), 3).join();
        assertEquals(Termination.MAX_TURNS, plain.termination());
        assertEquals("<python>x0</python> <result>\nout:x0\n</result><python>x1</python> <result>\nout:x1\n</result>\nReach max function call limit."
                + "<python>x2</python>", TOK.decode(plain.tokens()));
        // CoRT's: rounds R = maxTurns = 3, calls in rounds 0 and 1, the notice inside round R - 2 = 1's output, round 2 unstopped
        AgentConfig cort = cfg().maxTurns(3).maxToolCalls(5).build().cort();
        assertEquals(2, cort.maxToolCalls(), "every round but the last may call");
        assertEquals(3, cort.maxGenerations(), "the last round is one of the R");
        ScriptedGenerator gen = new ScriptedGenerator(TOK, s);
        Trajectory t = loop(gen, ToolProvider.shared(TestTools.echo("python")), cort).run(prompt("Q?\n"), 3).join();
        assertEquals(Termination.ANSWER, t.termination(), "the unstopped last round ran past its call to the answer");
        String t0 = "<python>x0</python>", o0 = " <result>\nout:x0\n</result>", t1 = "<python>x1</python>", o1 = " <result>\nout:x1" + n + "\n</result>",
                t2 = "<python>x2</python> so \\boxed{7}";
        String[] parts = {t0, o0, t1, o1, t2};
        assertEquals(String.join("", parts), TOK.decode(t.tokens()));
        int[] extra = {0, 0, 0, 0, 1};   // EOS after the last round
        boolean[] generated = {true, false, true, false, true};
        List<Boolean> mask = new ArrayList<>();
        for (int p = 0; p < parts.length; p++) for (int i = 0; i < parts[p].length() + extra[p]; i++) mask.add(generated[p]);
        assertEquals(mask.size(), t.length());
        for (int i = 0; i < t.length(); i++) assertEquals(mask.get(i), t.lossMask()[i], "token " + i + ": the notice is masked with its observation");
        assertEquals(List.of(false, true), t.toolCalls().stream().map(ToolCallRecord::limitReached).toList());
        List<GenerationRequest> req = gen.requests();
        assertEquals(3, req.size());
        assertTrue(req.get(0).limits().stopStrings().contains("</python>") && req.get(1).limits().stopStrings().contains("</python>"));
        assertFalse(req.get(2).limits().stopStrings().contains("</python>"), "the last round has no tool stop: " + req.get(2).limits().stopStrings());
        assertFalse(req.get(2).limits().stopStrings().contains("</search>"));
        // cut to the observation cap (10 tokens short), the notice stays whole inside the frame after the marker
        String out = "0123456789".repeat(4), frameHead = " <result>\n", frameTail = "\n</result>";
        int cap = frameHead.length() + out.length() + n.length() + frameTail.length() - 10;
        AgentConfig small = cfg().maxTurns(3).maxObservationTokens(cap).build().cort();
        Trajectory c = loop(new ScriptedGenerator(TOK, s), ToolProvider.shared(TestTools.tool("python", a -> Observation.ok(out, null))), small)
                .run(prompt("Q?\n"), 3).join();
        String tail = AgentLoop.TRUNCATION_MARKER + n + frameTail;
        int keep = cap - frameHead.length() - tail.length();
        assertTrue(keep > 0 && keep < out.length());
        String uncut = frameHead + out + frameTail, cut = frameHead + out.substring(0, keep) + tail;
        assertEquals(cap, cut.length());
        assertEquals(t0 + uncut + t1 + cut + t2, TOK.decode(c.tokens()));
        assertTrue(c.steps().get(1).observationTruncated() && !c.steps().get(0).observationTruncated());
    }
}
