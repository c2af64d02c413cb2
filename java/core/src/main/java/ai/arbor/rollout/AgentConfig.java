package ai.arbor.rollout;

import ai.arbor.kernels.SamplingParams;
import java.time.Duration;

/**
 * Limits and sampling of the agent loop (docs/algorithms.md §4 "Agent loop").
 *
 * @param sampling             the distribution every turn is drawn from
 * @param limits               per-turn limits: {@code maxNewTokens} is the per-turn cap (the format's stop
 *                             strings are added to its stops)
 * @param maxTurns             most generations per trajectory; a tool call made on the last turn is not executed
 * @param maxToolCalls         most tool calls per trajectory (malformed ones count); the last allowed one gets
 *                             the limit notice, a further one ends the trajectory
 * @param maxResponseTokens    budget of generated + observation tokens per trajectory (verl's response length)
 * @param maxObservationTokens longest observation; longer tool output is cut (head kept, marker appended)
 * @param limitNotice          text appended after the last allowed call's observation (CoRT); null = the
 *                             format's default ({@code "\nReach max function call limit."}), "" = none
 * @param toolTimeout          safety net around a tool call (tools enforce their own limits first); a call
 *                             that exceeds it is an infrastructure failure and the path's session is replaced;
 *                             it covers waiting for a sandbox worker and replaying the path's earlier calls
 * @param toolSessions         whether a path leases its stateful session per call (default) or holds it
 *                             for its whole life ({@link ToolSessionMode})
 * @param invalidActionObservation null (default): a turn with neither a tool call nor an answer ends the path
 *                             ({@link Termination#NO_ANSWER}, or the length ending when it was cut); else that text is
 *                             appended as an observation (masked) and the path goes on — Tree-GRPO / Search-R1's
 *                             "My previous action is invalid…" ({@link TagToolCallFormat#SEARCH_R1_INVALID}). Such a
 *                             turn is still a void turn; it is not a tool call
 * @param finalTurnWithoutTools after {@code maxTurns} turns, one more generation whose tool call is not executed, a leaf
 *                             (Tree-GRPO's {@code generation_ts.py}: {@code max_turns} acting turns, then a final rollout
 *                             with {@code do_search=False}); false (default): the {@code maxTurns}-th turn is the last
 * @param lastTurnWithoutToolStops the last generation ({@link #maxGenerations()}-th) is sampled without the format's stop
 *                             strings, so it cannot stop at a tool call and runs to EOS or its length (CoRT's
 *                             {@code vllm_rollout.py}: the last round clears {@code stop_token_ids}); false (default): every
 *                             turn stops at a call
 * @param limitNoticeInOutput  the limit notice goes inside the observation's frame, after the tool output (CoRT:
 *                             {@code exec_result += notice}, then {@code ```output\n…\n```}); false (default): after the
 *                             rendered observation
 */
public record AgentConfig(SamplingParams sampling, GenerationLimits limits, int maxTurns, int maxToolCalls, int maxResponseTokens, int maxObservationTokens,
                          String limitNotice, Duration toolTimeout, ToolSessionMode toolSessions, String invalidActionObservation,
                          boolean finalTurnWithoutTools, boolean lastTurnWithoutToolStops, boolean limitNoticeInOutput) {
    public AgentConfig {
        if (sampling == null) throw new IllegalArgumentException("sampling must not be null");
        if (limits == null) throw new IllegalArgumentException("limits must not be null");
        if (maxTurns < 1) throw new IllegalArgumentException("maxTurns must be >= 1, got " + maxTurns);
        if (maxToolCalls < 0) throw new IllegalArgumentException("maxToolCalls must be >= 0, got " + maxToolCalls);
        if (maxResponseTokens < 1) throw new IllegalArgumentException("maxResponseTokens must be >= 1, got " + maxResponseTokens);
        if (maxObservationTokens < 1) throw new IllegalArgumentException("maxObservationTokens must be >= 1, got " + maxObservationTokens);
        if (toolTimeout == null || toolTimeout.isNegative() || toolTimeout.isZero())
            throw new IllegalArgumentException("toolTimeout must be positive, got " + toolTimeout);
        if (toolSessions == null) throw new IllegalArgumentException("toolSessions must not be null");
        if (invalidActionObservation != null && invalidActionObservation.isEmpty())
            throw new IllegalArgumentException("invalidActionObservation must be null (end the path) or a non-empty text");
    }

    /** Generations a trajectory may take: {@code maxTurns}, plus the final one without tools when that is on. */
    public int maxGenerations() {
        return maxTurns + (finalTurnWithoutTools ? 1 : 0);
    }

    /** Tree-GRPO's released loop ({@code generation_ts.py}): invalid actions get Search-R1's reply, then a final turn without tools. */
    public AgentConfig treeGrpo() {
        return new AgentConfig(sampling, limits, maxTurns, maxToolCalls, maxResponseTokens, maxObservationTokens, limitNotice, toolTimeout,
                toolSessions, TagToolCallFormat.SEARCH_R1_INVALID, true, lastTurnWithoutToolStops, limitNoticeInOutput);
    }

    /**
     * CoRT's notice when code execution ends ({@code vllm_rollout_with_executor/vllm_rollout.py}, appended to the
     * execution result of round {@code max_num_func_calls − 2}).
     */
    public static final String CORT_LIMIT_NOTICE = "\n\n[SYSTEM]\nYou have exceeded the allowed number of code executions. You can no longer "
            + "write or run code. Please continue solving the problem using your reasoning and analytical skills.";

    /**
     * CoRT's released loop ({@code vllm_rollout_with_executor/vllm_rollout.py}) with {@code maxTurns} as its
     * {@code max_num_func_calls} rounds R: every round but the last may call the tool (so {@code maxToolCalls} =
     * R − 1); the call of round R − 2 gets {@link #CORT_LIMIT_NOTICE} inside its output; the last round is sampled
     * without the format's stops. In this loop a round that neither calls nor answers ends the path, so round r's
     * call is call r + 1 and "the last allowed call" is the call of round R − 2, as in the release. The final turn
     * without tools (Tree-GRPO's) is turned off: CoRT's last round is one of its R.
     */
    public AgentConfig cort() {
        return new AgentConfig(sampling, limits, maxTurns, maxTurns - 1, maxResponseTokens, maxObservationTokens, CORT_LIMIT_NOTICE, toolTimeout,
                toolSessions, invalidActionObservation, false, true, true);
    }

    public static Builder builder() {
        return new Builder();
    }

    /** Builder with defaults: τ=1, 1024 tokens per turn, 8 turns, 8 tool calls, 4096 response tokens, 1024 observation tokens, 120 s tool timeout, sessions leased per call. */
    public static final class Builder {
        private SamplingParams sampling = SamplingParams.temperature(1f);
        private GenerationLimits limits = GenerationLimits.defaults();
        private int maxTurns = 8, maxToolCalls = 8, maxResponseTokens = 4096, maxObservationTokens = 1024;
        private String limitNotice;
        private Duration toolTimeout = Duration.ofSeconds(120);
        private ToolSessionMode toolSessions = ToolSessionMode.LEASE_PER_CALL;
        private String invalidActionObservation;
        private boolean finalTurnWithoutTools, lastTurnWithoutToolStops, limitNoticeInOutput;

        public Builder sampling(SamplingParams s) {
            this.sampling = s;
            return this;
        }

        public Builder limits(GenerationLimits l) {
            this.limits = l;
            return this;
        }

        /** These limits with at most {@code n} new tokens per turn. */
        public Builder maxNewTokens(int n) {
            this.limits = limits.withMaxNewTokens(n);
            return this;
        }

        public Builder maxTurns(int n) {
            this.maxTurns = n;
            return this;
        }

        public Builder maxToolCalls(int n) {
            this.maxToolCalls = n;
            return this;
        }

        public Builder maxResponseTokens(int n) {
            this.maxResponseTokens = n;
            return this;
        }

        public Builder maxObservationTokens(int n) {
            this.maxObservationTokens = n;
            return this;
        }

        public Builder limitNotice(String s) {
            this.limitNotice = s;
            return this;
        }

        public Builder toolTimeout(Duration d) {
            this.toolTimeout = d;
            return this;
        }

        /** See {@link ToolSessionMode}. */
        public Builder toolSessions(ToolSessionMode m) {
            this.toolSessions = m;
            return this;
        }

        /** See {@link AgentConfig#invalidActionObservation()} (null: a void turn ends the path). */
        public Builder invalidActionObservation(String text) {
            this.invalidActionObservation = text;
            return this;
        }

        /** See {@link AgentConfig#finalTurnWithoutTools()}. */
        public Builder finalTurnWithoutTools(boolean on) {
            this.finalTurnWithoutTools = on;
            return this;
        }

        /** See {@link AgentConfig#lastTurnWithoutToolStops()}. */
        public Builder lastTurnWithoutToolStops(boolean on) {
            this.lastTurnWithoutToolStops = on;
            return this;
        }

        /** See {@link AgentConfig#limitNoticeInOutput()}. */
        public Builder limitNoticeInOutput(boolean on) {
            this.limitNoticeInOutput = on;
            return this;
        }

        public AgentConfig build() {
            return new AgentConfig(sampling, limits, maxTurns, maxToolCalls, maxResponseTokens, maxObservationTokens, limitNotice, toolTimeout,
                    toolSessions, invalidActionObservation, finalTurnWithoutTools, lastTurnWithoutToolStops, limitNoticeInOutput);
        }
    }
}
