package ai.arbor.advantage;

import java.util.Locale;

/** Why a filter excluded (or down-weighted) a trajectory; one metric counter each. */
public enum FilterReason {
    /** TAO-RL tool-aware filter: called tools at least once and every call failed. */
    ALL_TOOL_CALLS_FAILED,
    /** Degenerate group (DAPO dynamic sampling, TAO-RL): the group's rewards have std < threshold. */
    DEGENERATE_GROUP,
    /** SimpleTIR: a turn with neither a tool call nor a final answer. */
    VOID_TURN,
    /** DAPO overlong filtering: the response was truncated at the length limit. */
    TRUNCATED,
    /** TAO-RL's release ({@code min_n}): the group has too few responses within the length limit and is dropped whole. */
    FEW_WITHIN_LENGTH,
    /** DAPO dynamic sampling: an informative group beyond the batch size (the batch was already full). */
    OVERSAMPLED;

    /** Metric name, e.g. {@code all_tool_calls_failed}. */
    public String metricName() {
        return name().toLowerCase(Locale.ROOT);
    }
}
