package ai.arbor.sandbox;

/**
 * Result of executing code in a {@link SandboxSession}.
 *
 * @param status         outcome
 * @param stdout         standard output (capped; head + tail with a marker when truncated)
 * @param stderr         standard error (capped likewise; the traceback on ERROR)
 * @param durationMillis wall time of the execution
 * @param stateLost      true when the session's variables were lost (the worker was killed/respawned)
 * @param truncated      true when stdout or stderr was cut
 */
public record ExecResult(ExecStatus status, String stdout, String stderr, long durationMillis, boolean stateLost,
                         boolean truncated) {
    public ExecResult {
        if (status == null) throw new IllegalArgumentException("status must not be null");
        if (stdout == null) stdout = "";
        if (stderr == null) stderr = "";
    }

    /** True when the status is {@link ExecStatus#OK}. */
    public boolean ok() {
        return status == ExecStatus.OK;
    }
}
