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

    /**
     * Whether an open session holds a scarce resource between its calls: a worker of the local pool (true, the
     * default). A {@link RemoteSandbox} session holds none — its state is the list of its cells, replayed by the
     * client on every call — so a rollout path keeps it open instead of leasing one per call
     * ({@code ToolSessionMode}).
     */
    default boolean holdsWorker() {
        return true;
    }

    /** Forgets all state (a fresh interpreter). */
    void reset();

    @Override
    void close();
}
