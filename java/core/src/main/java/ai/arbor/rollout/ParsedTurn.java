package ai.arbor.rollout;

/**
 * What a {@link ToolCallFormat} read in one model turn.
 *
 * @param kind  see {@link Kind}
 * @param call  the call when {@code kind == TOOL_CALL}, else null
 * @param error why the call is malformed when {@code kind == MALFORMED_CALL}, else null
 */
public record ParsedTurn(Kind kind, ToolCall call, String error) {
    public enum Kind {
        /** A complete, well-formed tool call ends the turn. */
        TOOL_CALL,
        /** The turn ended on a tool-call delimiter but the call cannot be read; the model gets an error observation. */
        MALFORMED_CALL,
        /** No tool call; the turn contains a final answer. */
        ANSWER,
        /** Neither a tool call nor an answer (a "void turn" in SimpleTIR's terms). */
        NONE
    }

    public ParsedTurn {
        if (kind == null) throw new IllegalArgumentException("kind must not be null");
        if ((kind == Kind.TOOL_CALL) != (call != null)) throw new IllegalArgumentException("a call is given exactly for TOOL_CALL");
        if (kind == Kind.MALFORMED_CALL && (error == null || error.isEmpty())) throw new IllegalArgumentException("MALFORMED_CALL needs an error");
    }

    public static ParsedTurn call(String tool, String arguments) {
        return new ParsedTurn(Kind.TOOL_CALL, new ToolCall(tool, arguments), null);
    }

    public static ParsedTurn malformed(String error) {
        return new ParsedTurn(Kind.MALFORMED_CALL, null, error);
    }

    public static ParsedTurn answer() {
        return new ParsedTurn(Kind.ANSWER, null, null);
    }

    public static ParsedTurn none() {
        return new ParsedTurn(Kind.NONE, null, null);
    }
}
