package ai.arbor.rollout;

/** Why a trajectory ended. */
public enum Termination {
    /** The model gave a final answer. */
    ANSWER,
    /** The model stopped (EOS) without a tool call or an answer. */
    NO_ANSWER,
    /** {@code maxTurns} generations were used (a tool call on the last turn is not executed). */
    MAX_TURNS,
    /** The model called a tool after the last allowed call. */
    MAX_TOOL_CALLS,
    /** The response budget ({@code maxResponseTokens}, generated + observation tokens) is used up. */
    MAX_TOKENS,
    /** One turn reached the per-turn token cap ({@code GenerationLimits.maxNewTokens}). */
    TURN_LENGTH,
    /** Generation failed (infrastructure): the trainer should mask this trajectory. */
    GENERATION_FAILED;

    /** True for the endings caused by a limit (truncation), which overlong shaping / filters look at. */
    public boolean truncated() {
        return this == MAX_TURNS || this == MAX_TOOL_CALLS || this == MAX_TOKENS || this == TURN_LENGTH;
    }
}
