package ai.arbor.rollout;

/**
 * One agent step — one generation plus, when it called a tool, the observation. A tree node's payload:
 * a trajectory is the concatenation of the steps on its root-to-leaf path (the shared prefix is stored
 * once, in the shared nodes). Arrays are owned by the record; do not mutate.
 *
 * @param turn             turn index (0 = first generation)
 * @param generated        generated ids (loss mask 1)
 * @param logprobs         behaviour logprob per generated id
 * @param entropies        per-token entropy per generated id, or null when the backend gave none
 * @param postTool         true when this turn follows a tool observation (TAO-RL's M_post)
 * @param finishReason     why the generation ended (null when it failed)
 * @param stopString       the matched stop string, or null
 * @param text             decoded text of {@code generated}
 * @param outcome          what the turn did
 * @param toolCall         the call's record, or null
 * @param observation      observation ids appended after the generation (loss mask 0); empty if none
 * @param observationTruncated true when the observation was cut to the token limits
 * @param generationNanos  wall time of the generation request
 * @param error            why the generation failed ({@code outcome == GENERATION_FAILED}), else null
 * @param weightVersion    the policy version the generation came from ({@link Generation#weightVersion}), or null
 */
public record AgentStep(int turn, int[] generated, float[] logprobs, float[] entropies, boolean postTool, FinishReason finishReason,
                        String stopString, String text, TurnOutcome outcome, ToolCallRecord toolCall, int[] observation,
                        boolean observationTruncated, long generationNanos, String error, String weightVersion) {
    public AgentStep {
        if (generated == null || logprobs == null || logprobs.length != generated.length)
            throw new IllegalArgumentException("generated and logprobs must have the same length");
        if (entropies != null && entropies.length != generated.length) throw new IllegalArgumentException("entropies must match generated");
        if (observation == null) observation = new int[0];
        if (text == null) text = "";
        if (outcome == null) throw new IllegalArgumentException("outcome must not be null");
    }

    /** Without a weight version. */
    public AgentStep(int turn, int[] generated, float[] logprobs, float[] entropies, boolean postTool, FinishReason finishReason,
                     String stopString, String text, TurnOutcome outcome, ToolCallRecord toolCall, int[] observation,
                     boolean observationTruncated, long generationNanos, String error) {
        this(turn, generated, logprobs, entropies, postTool, finishReason, stopString, text, outcome, toolCall, observation,
                observationTruncated, generationNanos, error, null);
    }

    /** This step with the weight version of its generation. */
    public AgentStep withWeightVersion(String version) {
        return new AgentStep(turn, generated, logprobs, entropies, postTool, finishReason, stopString, text, outcome, toolCall, observation,
                observationTruncated, generationNanos, error, version);
    }

    /** Generated plus observation tokens. */
    public int length() {
        return generated.length + observation.length;
    }
}
