package ai.arbor.rollout;

import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The multi-turn agent loop (docs/algorithms.md §4 "Agent loop"), one step at a time: generate until a stop;
 * parse the turn with the {@link ToolCallFormat}; call the tool; append the observation tokens (loss
 * mask 0); repeat until an answer, {@code maxTurns}, {@code maxToolCalls} or {@code maxResponseTokens}.
 * On the last allowed tool call the limit notice is appended to the observation (CoRT / TIR).
 *
 * <p>Exposed as {@link #step} on immutable {@link AgentState}s so tree strategies can continue any node:
 * {@link #fork} a state to branch from it. {@link #run} runs one trajectory to the end.
 *
 * <p>Never throws for anything the model writes or a tool does: malformed calls get an error
 * observation, tool failures are recorded ({@link ToolCallStatus}), and a generation that fails after
 * the backend's retries ends the path with {@link Termination#GENERATION_FAILED}. Generation runs on
 * the generator's own threads (async); tool calls on {@code toolExecutor}; so one thread never waits
 * for another path's work and generation and tool calls of different paths overlap.
 */
public final class AgentLoop {
    static final String TRUNCATION_MARKER = "\n...[truncated]";

    private final Generator generator;
    private final Tokenizer tokenizer;
    private final ToolCallFormat format;
    private final ToolProvider tools;
    private final AgentConfig config;
    private final Executor toolExecutor;
    private final AsyncLimiter generationLimiter;
    private final GenerationLimits baseLimits;
    /** The last generation's limits when {@link AgentConfig#lastTurnWithoutToolStops()}: the config's, without the format's stops. */
    private final GenerationLimits lastTurnLimits;
    private final String limitNotice;

    private AgentLoop(Builder b) {
        if (b.generator == null) throw new IllegalArgumentException("generator must be set");
        if (b.tokenizer == null) throw new IllegalArgumentException("tokenizer must be set");
        if (b.format == null) throw new IllegalArgumentException("format must be set");
        if (b.toolExecutor == null) throw new IllegalArgumentException("toolExecutor must be set");
        this.generator = b.generator;
        this.tokenizer = b.tokenizer;
        this.format = b.format;
        this.tools = b.tools == null ? ToolProvider.none() : b.tools;
        this.config = b.config == null ? AgentConfig.builder().build() : b.config;
        this.toolExecutor = b.toolExecutor;
        this.generationLimiter = b.maxConcurrentGenerations > 0 ? new AsyncLimiter(b.maxConcurrentGenerations) : null;
        this.baseLimits = config.limits().plusStopStrings(format.stopStrings());
        this.lastTurnLimits = config.lastTurnWithoutToolStops() ? config.limits() : baseLimits;
        this.limitNotice = config.limitNotice() != null ? config.limitNotice() : format.limitNotice();
    }

    public static Builder builder() {
        return new Builder();
    }

    public AgentConfig config() {
        return config;
    }

    public Tokenizer tokenizer() {
        return tokenizer;
    }

    public ToolCallFormat format() {
        return format;
    }

    public Generator generator() {
        return generator;
    }

    /** The limits of every request (the config's, plus the format's stop strings); the distribution is the config's. */
    public GenerationLimits limits() {
        return baseLimits;
    }

    /** A new path from {@code prompt}; paths of one prompt should share {@code promptContext} (prefix-cache affinity). */
    public AgentState start(Prompt prompt, TokenContext promptContext, long pathSeed, CostMeter meter) {
        if (prompt == null) throw new IllegalArgumentException("prompt must not be null");
        if (promptContext == null) promptContext = TokenContext.of(prompt.tokens());
        if (promptContext.length() != prompt.tokens().length)
            throw new IllegalArgumentException("promptContext has " + promptContext.length() + " tokens but prompt " + prompt.id() + " has "
                    + prompt.tokens().length);
        return AgentState.initial(prompt, promptContext, pathSeed, meter == null ? new CostMeter() : meter, tools,
                config.toolSessions());
    }

    /**
     * A branch from {@code state}: the same context, steps and counters, a new path seed (so it samples
     * differently), and its own tool session, which replays the path's executed calls when the tools are
     * stateful. The prefix is shared, not copied.
     */
    public AgentState fork(AgentState state, long newPathSeed) {
        if (state.terminated()) throw new IllegalArgumentException("cannot branch from a terminated state: " + state);
        return state.fork(newPathSeed, tools, config.toolSessions());
    }

    /** Closes the tool session of a state that will not be continued (a terminated state's is already closed). */
    public void release(AgentState state) {
        if (state.owns()) state.tools.close();
    }

    /** Steps {@code state} until it terminates. */
    public CompletableFuture<AgentState> runToEnd(AgentState state) {
        if (state.terminated()) return CompletableFuture.completedFuture(state);
        return step(state).thenCompose(this::runToEnd);
    }

    /** One trajectory from {@code prompt} to the end (sample 0 of tree 0; node path = its steps). */
    public CompletableFuture<Trajectory> run(Prompt prompt, long seed) {
        return run(prompt, null, seed, null);
    }

    /** One trajectory to the end, its cost going to {@code meter} (e.g. a strategy's {@link RolloutContext#meter()}). */
    public CompletableFuture<Trajectory> run(Prompt prompt, TokenContext promptContext, long seed, CostMeter meter) {
        AgentState s = start(prompt, promptContext, seed, meter);
        return runToEnd(s).thenApply(end -> Trajectory.of(end, 0, 0, pathOf(end.stepCount())));
    }

    /**
     * A generation from {@code context} that belongs to no path — AEPO's entropy pre-monitoring probe.
     * Its tokens count in {@code meter}'s cost. Completes exceptionally when generation fails.
     */
    public CompletableFuture<Generation> probe(TokenContext context, int maxNewTokens, long seed, CostMeter meter) {
        if (context == null || meter == null) throw new IllegalArgumentException("context and meter are required");
        GenerationLimits limits = baseLimits.withMaxNewTokens(Math.max(1, Math.min(maxNewTokens, baseLimits.maxNewTokens())));
        GenerationRequest request = new GenerationRequest(context, config.sampling(), limits, seed);
        long t0 = System.nanoTime();
        CompletableFuture<Generation> gen = generationLimiter == null ? callGenerator(request) : generationLimiter.run(() -> callGenerator(request));
        return gen.thenApply(g -> {
            String invalid = validate(g, limits.maxNewTokens());
            if (invalid != null) throw new GenerationException(invalid);
            meter.generation(g.length(), System.nanoTime() - t0);
            return g;
        }).whenComplete((g, e) -> {
            if (e != null) meter.generationFailed();
        });
    }

    static int[] pathOf(int steps) {
        int[] p = new int[steps];
        for (int i = 0; i < steps; i++) p[i] = i + 1;
        return p;
    }

    /**
     * One step: a generation and, if the turn calls a tool, the call and its observation.
     *
     * @throws IllegalArgumentException when {@code state} has terminated
     * @throws IllegalStateException    when {@code state} was already continued (fork it to branch)
     */
    public CompletableFuture<AgentState> step(AgentState state) {
        if (state.terminated()) throw new IllegalArgumentException("state has terminated: " + state);
        if (!state.owns()) throw new IllegalStateException("this state was already continued; fork() it to branch from it");
        int remaining = config.maxResponseTokens() - state.responseTokens;
        // CoRT: the last round is sampled without the tool stops
        GenerationLimits turnLimits = state.turns + 1 >= config.maxGenerations() ? lastTurnLimits : baseLimits;
        int maxNew = Math.min(turnLimits.maxNewTokens(), remaining);
        GenerationLimits limits = maxNew == turnLimits.maxNewTokens() ? turnLimits : turnLimits.withMaxNewTokens(maxNew);
        GenerationRequest request = new GenerationRequest(state.context, config.sampling(), limits, Seeds.derive(state.pathSeed, state.turns));
        long t0 = System.nanoTime();
        CompletableFuture<Generation> gen = generationLimiter == null ? callGenerator(request) : generationLimiter.run(() -> callGenerator(request));
        return gen.handle((g, err) -> {
            long nanos = System.nanoTime() - t0;
            if (err != null) return CompletableFuture.completedFuture(generationFailed(state, unwrap(err), nanos));
            String invalid = validate(g, maxNew);
            if (invalid != null) return CompletableFuture.completedFuture(generationFailed(state, new GenerationException(invalid), nanos));
            state.meter.generation(g.length(), nanos);
            return afterGeneration(state, g, nanos);
        }).thenCompose(f -> f);
    }

    private CompletableFuture<Generation> callGenerator(GenerationRequest request) {
        try {
            CompletableFuture<Generation> f = generator.generate(request);
            return f != null ? f : CompletableFuture.failedFuture(new GenerationException("the generator returned no future"));
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    private String validate(Generation g, int maxNew) {
        if (g == null) return "the generator returned no generation";
        if (g.length() > maxNew) return "the generator returned " + g.length() + " tokens, more than maxNewTokens = " + maxNew;
        int v = tokenizer.vocabSize();
        for (int i = 0; i < g.length(); i++)
            if (g.tokens()[i] < 0 || g.tokens()[i] >= v) return "generated token " + i + " = " + g.tokens()[i] + " is outside [0, " + v + ")";
        return null;
    }

    private AgentState generationFailed(AgentState s, Throwable err, long nanos) {
        s.meter.generationFailed();
        String msg = PathTools.message(err);
        AgentStep step = new AgentStep(s.turns, new int[0], new float[0], null, s.nextPostTool, null, null, "", TurnOutcome.GENERATION_FAILED,
                null, new int[0], false, nanos, msg);
        return finish(s.next(step, s.context, s.toolCalls, Termination.GENERATION_FAILED));
    }

    private AgentState finish(AgentState s) {
        if (s.terminated()) s.tools.close();
        return s;
    }

    private CompletableFuture<AgentState> afterGeneration(AgentState s, Generation g, long genNanos) {
        String text = tokenizer.decode(g.tokens());
        ParsedTurn parsed;
        try {
            parsed = format.parse(text, g.stopString());
            if (parsed == null) parsed = ParsedTurn.none();
        } catch (RuntimeException e) {
            // A parser bug must not lose the path; the model sees it as its own malformed call.
            parsed = ParsedTurn.malformed("the tool call could not be read (" + PathTools.message(e) + ")");
        }
        boolean budgetLeft = s.responseTokens + g.length() < config.maxResponseTokens();
        boolean lastTurn = s.turns + 1 >= config.maxGenerations();
        boolean truncatedTurn = g.finishReason() == FinishReason.LENGTH;
        Termination lengthEnd = budgetLeft ? Termination.TURN_LENGTH : Termination.MAX_TOKENS;
        switch (parsed.kind()) {
            case TOOL_CALL, MALFORMED_CALL -> {
                Termination limit = lastTurn ? Termination.MAX_TURNS
                        : s.toolCalls >= config.maxToolCalls() ? Termination.MAX_TOOL_CALLS
                        : !budgetLeft ? Termination.MAX_TOKENS : null;
                if (limit != null) return CompletableFuture.completedFuture(end(s, g, text, genNanos, TurnOutcome.CALL_NOT_EXECUTED, limit));
                return execute(s, g, text, parsed, genNanos);
            }
            case ANSWER -> {
                return CompletableFuture.completedFuture(end(s, g, text, genNanos, TurnOutcome.ANSWER, truncatedTurn ? lengthEnd : Termination.ANSWER));
            }
            default -> {
                // Tree-GRPO / Search-R1: an invalid action is answered and the path goes on (not on its last turn)
                if (config.invalidActionObservation() != null && !lastTurn && budgetLeft)
                    return CompletableFuture.completedFuture(invalidAction(s, g, text, genNanos, truncatedTurn ? TurnOutcome.TRUNCATED : TurnOutcome.VOID));
                if (truncatedTurn) return CompletableFuture.completedFuture(end(s, g, text, genNanos, TurnOutcome.TRUNCATED, lengthEnd));
                return CompletableFuture.completedFuture(end(s, g, text, genNanos, TurnOutcome.VOID,
                        lastTurn ? Termination.MAX_TURNS : Termination.NO_ANSWER));
            }
        }
    }

    /** A turn with neither a call nor an answer, answered with the invalid-action text (masked); the path goes on. */
    private AgentState invalidAction(AgentState s, Generation g, String text, long genNanos, TurnOutcome outcome) {
        int room = config.maxResponseTokens() - s.responseTokens - g.length();
        int[] obs = tokenizer.encode(config.invalidActionObservation());
        boolean cut = false;
        if (obs.length > config.maxObservationTokens()) {
            obs = Arrays.copyOf(obs, config.maxObservationTokens());
            cut = true;
        }
        if (obs.length > room) {
            obs = Arrays.copyOf(obs, room);
            cut = true;
        }
        s.meter.observation(obs.length);
        AgentStep step = new AgentStep(s.turns, g.tokens(), g.logprobs(), g.entropies(), s.nextPostTool, g.finishReason(), g.stopString(), text,
                outcome, null, obs, cut, genNanos, null, g.weightVersion());
        int[] appended = new int[g.length() + obs.length];
        System.arraycopy(g.tokens(), 0, appended, 0, g.length());
        System.arraycopy(obs, 0, appended, g.length(), obs.length);
        return finish(s.next(step, s.context.extend(appended), s.toolCalls, obs.length >= room ? Termination.MAX_TOKENS : null));
    }

    /** The path ends after this generation (nothing appended). */
    private AgentState end(AgentState s, Generation g, String text, long genNanos, TurnOutcome outcome, Termination term) {
        AgentStep step = new AgentStep(s.turns, g.tokens(), g.logprobs(), g.entropies(), s.nextPostTool, g.finishReason(), g.stopString(), text,
                outcome, null, new int[0], false, genNanos, null, g.weightVersion());
        return finish(s.next(step, s.context.extend(g.tokens()), s.toolCalls, term));
    }

    private CompletableFuture<AgentState> execute(AgentState s, Generation g, String text, ParsedTurn parsed, long genNanos) {
        CompletableFuture<PathTools.Outcome> outcome;
        ToolCall call = parsed.call();
        if (parsed.kind() == ParsedTurn.Kind.MALFORMED_CALL) {
            outcome = CompletableFuture.completedFuture(new PathTools.Outcome(ToolCallStatus.MALFORMED, parsed.error(), null, 0, false));
        } else {
            int epoch = s.tools.epoch();
            CompletableFuture<PathTools.Outcome> task;
            try {
                task = CompletableFuture.supplyAsync(() -> s.tools.invoke(call, epoch), toolExecutor);
            } catch (RuntimeException e) {   // executor shut down / saturated
                task = CompletableFuture.completedFuture(new PathTools.Outcome(ToolCallStatus.INFRASTRUCTURE_ERROR,
                        "the tool executor refused the call: " + PathTools.message(e), e, 0, false));
            }
            CompletableFuture<PathTools.Outcome> running = task;
            Duration timeout = config.toolTimeout();
            outcome = task.copy().orTimeout(timeout.toMillis(), TimeUnit.MILLISECONDS).exceptionally(e -> {
                Throwable c = unwrap(e);
                if (c instanceof TimeoutException) {
                    s.tools.retire(running);
                    return new PathTools.Outcome(ToolCallStatus.INFRASTRUCTURE_ERROR, "the tool call exceeded the " + timeout.toMillis()
                            + " ms tool timeout", null, timeout.toNanos(), true);
                }
                return new PathTools.Outcome(ToolCallStatus.INFRASTRUCTURE_ERROR, "the tool call failed: " + PathTools.message(c), c, 0, true);
            });
        }
        return outcome.thenApply(o -> {
            if (call != null && o.dispatched() && (o.status() == ToolCallStatus.OK || o.status() == ToolCallStatus.TOOL_ERROR))
                s.tools.executed(PathTools.Executed.of(call, o.status(), o.output(), o.raw()));
            s.meter.toolCall(o.status(), o.nanos(), o.dispatched());
            int calls = s.toolCalls + 1;
            boolean limitReached = calls >= config.maxToolCalls();
            boolean isError = o.status() == ToolCallStatus.MALFORMED || o.status() == ToolCallStatus.UNKNOWN_TOOL;
            String notice = limitReached ? limitNotice : "";
            // CoRT: the notice is part of the execution result, inside the observation's frame
            String output = config.limitNoticeInOutput() ? Delimited.body(o.output()) + notice : o.output();
            if (config.limitNoticeInOutput()) notice = "";
            int room = config.maxResponseTokens() - s.responseTokens - g.length();
            int[] obs = observationTokens(text, output, isError, notice);
            boolean cut = false;
            if (obs.length > config.maxObservationTokens()) {
                obs = truncatedObservation(text, o.output(), isError, limitReached ? limitNotice : "");
                cut = true;
            }
            if (obs.length > room) {
                obs = Arrays.copyOf(obs, room);
                cut = true;
            }
            s.meter.observation(obs.length);
            ToolCallRecord record = new ToolCallRecord(s.turns, call == null ? null : call.tool(), call == null ? null : call.arguments(),
                    o.status(), o.nanos(), o.output(), o.raw(), limitReached);
            AgentStep step = new AgentStep(s.turns, g.tokens(), g.logprobs(), g.entropies(), s.nextPostTool, g.finishReason(), g.stopString(),
                    text, TurnOutcome.TOOL_CALL, record, obs, cut, genNanos, null, g.weightVersion());
            int[] appended = new int[g.length() + obs.length];
            System.arraycopy(g.tokens(), 0, appended, 0, g.length());
            System.arraycopy(obs, 0, appended, g.length(), obs.length);
            Termination term = obs.length >= room ? Termination.MAX_TOKENS : null;
            return finish(s.next(step, s.context.extend(appended), calls, term));
        });
    }

    private String render(String turnText, String output, boolean isError) {
        return isError ? format.renderError(turnText, output) : format.renderObservation(turnText, output);
    }

    private int[] observationTokens(String turnText, String output, boolean isError, String notice) {
        return tokenizer.encode(render(turnText, output, isError) + notice);
    }

    /**
     * The observation cut to {@code maxObservationTokens}, keeping the format's frame (e.g.
     * {@code <result>…</result>}) intact around the head of the tool output and a marker.
     */
    private int[] truncatedObservation(String turnText, String output, boolean isError, String notice) {
        int max = config.maxObservationTokens();
        // the notice inside the frame (CoRT) follows the cut output and the marker; else it follows the frame
        String inner = config.limitNoticeInOutput() ? notice : "";
        if (config.limitNoticeInOutput()) notice = "";
        String frame = render(turnText, "\u0000" + inner, isError);
        int at = frame.indexOf('\u0000');
        if (at >= 0 && frame.indexOf('\u0000', at + 1) < 0) {
            int[] pre = tokenizer.encode(frame.substring(0, at));
            int[] post = tokenizer.encode(frame.substring(at + 1) + notice);
            int[] marker = tokenizer.encode(TRUNCATION_MARKER);
            int room = max - pre.length - post.length - marker.length;
            if (room > 0) {
                int[] body = tokenizer.encode(Delimited.body(output));
                int keep = Math.min(room, body.length);
                int[] out = new int[pre.length + keep + marker.length + post.length];
                System.arraycopy(pre, 0, out, 0, pre.length);
                System.arraycopy(body, 0, out, pre.length, keep);
                System.arraycopy(marker, 0, out, pre.length + keep, marker.length);
                System.arraycopy(post, 0, out, pre.length + keep + marker.length, post.length);
                return out;
            }
        }
        return Arrays.copyOf(observationTokens(turnText, Delimited.body(output) + inner, isError, notice), max);
    }

    static Throwable unwrap(Throwable e) {
        while ((e instanceof CompletionException || e instanceof ExecutionException) && e.getCause() != null) e = e.getCause();
        return e;
    }

    /** Builder; generator, tokenizer, format and tool executor are required. */
    public static final class Builder {
        private Generator generator;
        private Tokenizer tokenizer;
        private ToolCallFormat format;
        private ToolProvider tools;
        private AgentConfig config;
        private Executor toolExecutor;
        private int maxConcurrentGenerations;

        public Builder generator(Generator g) {
            this.generator = g;
            return this;
        }

        public Builder tokenizer(Tokenizer t) {
            this.tokenizer = t;
            return this;
        }

        public Builder format(ToolCallFormat f) {
            this.format = f;
            return this;
        }

        public Builder tools(ToolProvider p) {
            this.tools = p;
            return this;
        }

        public Builder config(AgentConfig c) {
            this.config = c;
            return this;
        }

        /** Where tool calls run (they block: sandbox executions, searches). */
        public Builder toolExecutor(Executor e) {
            this.toolExecutor = e;
            return this;
        }

        /** Most generation requests in flight from this loop (0 = no limit here; the backend may limit too). */
        public Builder maxConcurrentGenerations(int n) {
            if (n < 0) throw new IllegalArgumentException("maxConcurrentGenerations must be >= 0, got " + n);
            this.maxConcurrentGenerations = n;
            return this;
        }

        public AgentLoop build() {
            return new AgentLoop(this);
        }
    }
}
