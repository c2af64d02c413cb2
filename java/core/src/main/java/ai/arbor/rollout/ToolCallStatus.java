package ai.arbor.rollout;

/** Outcome of one tool call, as the filters (TAO-RL) and the trainer see it. */
public enum ToolCallStatus {
    /** The tool ran and succeeded. */
    OK,
    /** The tool ran and failed because of what the model wrote (an exception in its code, a timeout, bad arguments). */
    TOOL_ERROR,
    /** The infrastructure failed (sandbox down, {@code SANDBOX_ERROR}, tool crashed or timed out on the Java side): not the model's fault. */
    INFRASTRUCTURE_ERROR,
    /** The call could not be parsed (unclosed/mismatched delimiters, invalid JSON, empty or giant arguments). */
    MALFORMED,
    /** The call names a tool the session does not have. */
    UNKNOWN_TOOL;

    /** True for everything but {@link #OK}. */
    public boolean failed() {
        return this != OK;
    }
}
