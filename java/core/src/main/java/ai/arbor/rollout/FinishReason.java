package ai.arbor.rollout;

/** Why a generation ended. */
public enum FinishReason {
    /** The output contains one of the request's stop strings (the matched one is reported). */
    STOP_STRING,
    /** The last token is EOS or one of the request's stop token ids. */
    STOP_TOKEN,
    /** {@code maxNewTokens} were generated. */
    LENGTH
}
