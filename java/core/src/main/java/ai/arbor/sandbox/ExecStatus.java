package ai.arbor.sandbox;

/**
 * Outcome of one code execution. {@link #SANDBOX_ERROR} is the infrastructure failing (not the model's
 * code), so a trainer can mask such a trajectory instead of punishing it.
 */
public enum ExecStatus {
    /** Ran to completion. */
    OK,
    /** The code raised an exception or exited non-zero. */
    ERROR,
    /** Exceeded the soft (in-worker) or hard (Java-enforced) time limit. */
    TIMEOUT,
    /** Exceeded the memory limit. */
    MEMORY,
    /** Produced more output than allowed. */
    OUTPUT_LIMIT,
    /** The worker died (signal, segfault, os._exit, protocol garbage). */
    CRASHED,
    /** The sandbox itself failed (could not start a worker, remote server unreachable, …). */
    SANDBOX_ERROR
}
