package ai.arbor.tools;

/**
 * A tool the policy can call. Implementations never throw for anything the model writes: malformed
 * arguments give a failed {@link Observation} with an explanation.
 */
public interface Tool {

    /** Name used in tool calls (e.g. {@code python}, {@code search}, {@code calculator}). */
    String name();

    /** One-paragraph description shown to the model in JSON tool-call prompts. */
    String description();

    /** JSON schema (as JSON text) of the arguments object, for JSON tool-call prompts. */
    String parametersSchema();

    /**
     * Runs the call. {@code arguments} is the text the model wrote: for tag and markdown formats the text
     * inside the call (code, a query, an expression); for JSON tool calls the serialized
     * {@code arguments} object. Each tool documents which forms it accepts.
     */
    Observation call(String arguments);
}
