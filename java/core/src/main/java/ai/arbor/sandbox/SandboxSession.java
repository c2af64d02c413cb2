package ai.arbor.sandbox;

/**
 * A stateful code-execution session, like a notebook kernel: variables persist across
 * {@link #execute(String)} calls, and the value of a final bare expression is printed. Implemented by
 * the local jailed Python pool and by the SandboxFusion-compatible remote client. Closing returns the
 * session's resources (e.g. its worker) to the pool.
 */
public interface SandboxSession extends AutoCloseable {

    /** Executes {@code code}; never throws for anything the code does (see {@link ExecStatus}). */
    ExecResult execute(String code);

    /** Forgets all state (a fresh interpreter). */
    void reset();

    @Override
    void close();
}
