package ai.arbor.tools;

/**
 * What a tool call gives back.
 *
 * @param text                  the text shown to the model (already capped by the tool)
 * @param success               false when the call failed (error, timeout, crash, bad arguments) — the
 *                              TAO-RL tool-aware filter counts these
 * @param infrastructureFailure true when the failure is the tool's infrastructure (e.g.
 *                              {@code SANDBOX_ERROR}), not the model's fault: a trainer masks instead of
 *                              punishing
 * @param raw                   the tool's raw result for metrics (e.g. an {@code ExecResult}), or null
 */
public record Observation(String text, boolean success, boolean infrastructureFailure, Object raw) {
    public Observation {
        if (text == null) text = "";
        if (infrastructureFailure && success) throw new IllegalArgumentException("an infrastructure failure is not a success");
    }

    public static Observation ok(String text, Object raw) {
        return new Observation(text, true, false, raw);
    }

    public static Observation failure(String text, Object raw) {
        return new Observation(text, false, false, raw);
    }

    public static Observation infrastructureFailure(String text, Object raw) {
        return new Observation(text, false, true, raw);
    }
}
