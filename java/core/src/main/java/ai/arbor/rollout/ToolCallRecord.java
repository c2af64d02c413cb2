package ai.arbor.rollout;

/**
 * One tool call of a trajectory.
 *
 * @param turn           the turn whose generation made the call
 * @param tool           tool name ({@code null} for a malformed call)
 * @param arguments      the arguments as the tool received them ({@code null} for a malformed call)
 * @param status         outcome; tool failures and infrastructure failures are distinct
 * @param latencyNanos   wall time of the call (0 when nothing ran)
 * @param output         the text the tool returned (or the error shown), before rendering
 * @param raw            the tool's raw result (e.g. an {@code ExecResult}), or null
 * @param limitReached   true when this was the last allowed call and the limit notice was appended
 */
public record ToolCallRecord(int turn, String tool, String arguments, ToolCallStatus status, long latencyNanos, String output, Object raw,
                             boolean limitReached) {
    public ToolCallRecord {
        if (status == null) throw new IllegalArgumentException("status must not be null");
        if (output == null) output = "";
    }
}
