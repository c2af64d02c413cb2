package ai.arbor.rollout;

/**
 * A generation failed for a reason that is not the model's output: the backend is unreachable after the
 * retries, timed out, or answered with something invalid. The agent loop turns it into a trajectory that
 * ends with {@link Termination#GENERATION_FAILED} (an infrastructure failure the trainer masks), never
 * into a lost batch.
 */
public class GenerationException extends RuntimeException {
    private final boolean retryable;

    public GenerationException(String message, boolean retryable, Throwable cause) {
        super(message, cause);
        this.retryable = retryable;
    }

    public GenerationException(String message) {
        this(message, false, null);
    }

    /** True when the failure is transient (connection lost, timeout, 5xx) and a retry may succeed. */
    public boolean retryable() {
        return retryable;
    }
}
