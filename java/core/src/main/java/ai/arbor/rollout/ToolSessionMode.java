package ai.arbor.rollout;

/**
 * How a path holds its stateful tool session (a Python interpreter) between calls
 * ({@link AgentConfig#toolSessions()}).
 */
public enum ToolSessionMode {
    /**
     * The default. A path opens a session only while one of its calls runs and closes it after (the
     * sandbox worker goes back to the pool while the policy generates); before each call the fresh session
     * replays the path's earlier executed calls, outputs discarded, to restore its state. A replayed call
     * whose result differs from the one the model saw (randomness, time, files) makes the new call an
     * infrastructure failure: the path's state can no longer be restored. A session that holds no worker
     * ({@link ToolSession#holdsWorker()}: a {@code RemoteSandbox}'s) is kept open as with {@link #HOLD_PER_PATH}.
     * Cost: call k re-runs k−1 cells, and each call opens and closes a session (cheap with {@code recycleWorkers(true)} or a fork server, a
     * worker respawn otherwise).
     */
    LEASE_PER_CALL,
    /**
     * A path opens its session at its first call and holds it (and its sandbox worker) until the path
     * ends; no replay except when a branch forks. Use it when cells are non-deterministic or when the pool
     * has a worker for every concurrent path (a {@code RemoteSandbox} session, which holds no worker and
     * replays its own cells, is held this way in either mode).
     */
    HOLD_PER_PATH
}
