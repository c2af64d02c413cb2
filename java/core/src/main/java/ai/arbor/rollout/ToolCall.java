package ai.arbor.rollout;

/**
 * A tool call parsed from a model turn.
 *
 * @param tool      tool name (as registered in the {@link ToolSession})
 * @param arguments what the tool receives: the text inside the call for tag/markdown formats, the
 *                  serialized {@code arguments} object for JSON tool calls
 */
public record ToolCall(String tool, String arguments) {
    public ToolCall {
        if (tool == null || tool.isEmpty()) throw new IllegalArgumentException("tool must not be empty");
        if (arguments == null) arguments = "";
    }
}
