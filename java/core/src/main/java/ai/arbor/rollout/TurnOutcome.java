package ai.arbor.rollout;

/** What one model turn did. */
public enum TurnOutcome {
    /** Made a tool call that was dispatched (whatever its status, malformed included). */
    TOOL_CALL,
    /** Gave a final answer. */
    ANSWER,
    /** Neither a tool call nor an answer (SimpleTIR's void turn). */
    VOID,
    /** Cut by a token limit before it finished. */
    TRUNCATED,
    /** Made a tool call that was not executed because a limit (turns, tool calls, tokens) was reached. */
    CALL_NOT_EXECUTED,
    /** The generation failed (backend unreachable or invalid); the turn has no tokens. */
    GENERATION_FAILED
}
