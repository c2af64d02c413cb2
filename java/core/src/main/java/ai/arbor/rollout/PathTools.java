package ai.arbor.rollout;

import ai.arbor.sandbox.ExecResult;
import ai.arbor.tools.Observation;
import ai.arbor.tools.Tool;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * The tool session of one path, owned by exactly one {@link AgentState} at a time (ownership moves to the
 * next state at each step). Package-private: the agent loop's bookkeeping.
 *
 * <p>One mechanism restores a stateful session: a freshly opened session replays the calls the path
 * executed so far (OK and TOOL_ERROR ones: an erroring cell can still have changed state), outputs
 * discarded, each compared with the result the model saw. It serves three cases:
 * <ul>
 *   <li>{@link ToolSessionMode#LEASE_PER_CALL} (default): every call opens a session, replays the path's
 *       earlier calls, runs, and closes it, so a path holds a sandbox worker only while a call runs — unless
 *       the session holds no worker ({@link ToolSession#holdsWorker()}: a {@code RemoteSandbox}'s, which
 *       replays its own cells with every request), which is kept as with {@link ToolSessionMode#HOLD_PER_PATH};</li>
 *   <li>{@link ToolSessionMode#HOLD_PER_PATH}: the session opened at the first call is kept until the path
 *       ends; only a forked branch's first session replays (the prefix's calls);</li>
 *   <li>either mode: a call that exceeds the tool timeout retires the session (closed when that call
 *       finally returns) and the next call replays into a fresh one.</li>
 * </ul>
 * A replayed call whose status or output differs from the original (randomness, the clock, files) means
 * the path's state cannot be rebuilt: the new call is not run and fails as an INFRASTRUCTURE_ERROR naming
 * the diverging call, so the trainer masks the trajectory instead of scoring it against a state the model
 * never saw. A call whose result says the sandbox lost its state ({@link ExecResult#stateLost()}) ends the
 * history: the state after it is a fresh interpreter, so it and the calls before it are not replayed.
 */
final class PathTools {

    /** A call the model saw executed and what it returned (replays compare against it). */
    record Executed(ToolCall call, ToolCallStatus status, String output, boolean lostState) {
        static Executed of(ToolCall call, ToolCallStatus status, String output, Object raw) {
            return new Executed(call, status, output == null ? "" : output, raw instanceof ExecResult r && r.stateLost());
        }
    }

    /** Longest excerpt of an output quoted in a divergence message. */
    private static final int QUOTE = 200;

    private final ToolProvider provider;
    private final CostMeter meter;
    private final ToolSessionMode mode;
    private ToolSession session;                   // guarded by this; HOLD_PER_PATH only
    private List<Executed> replay;                 // guarded by this: replayed into the next held session
    private final List<Executed> history;          // guarded by this: calls executed on this path since its state was last lost
    private int epoch;                             // guarded by this: bumped when a session is retired
    volatile AgentState owner;

    PathTools(ToolProvider provider, CostMeter meter, ToolSessionMode mode, List<Executed> executedBefore) {
        if (mode == null) throw new IllegalArgumentException("mode must not be null");
        this.provider = provider;
        this.meter = meter;
        this.mode = mode;
        this.history = new ArrayList<>();
        for (Executed e : executedBefore) record(e);
        this.replay = new ArrayList<>(history);
    }

    /** The outcome of one call, before rendering. */
    record Outcome(ToolCallStatus status, String output, Object raw, long nanos, boolean dispatched) {}

    /** A session ready for a call; {@code perCall} when the call must close it. */
    private record Lease(ToolSession session, boolean perCall) {}

    /** The session could not be restored: a replayed call gave a different result. */
    private static final class Diverged extends RuntimeException {
        Diverged(String message) {
            super(message, null, false, false);
        }
    }

    synchronized int epoch() {
        return epoch;
    }

    /** Runs {@code call}; blocking; runs on a tool thread. Never throws. */
    Outcome invoke(ToolCall call, int myEpoch) {
        long t0 = System.nanoTime();
        Lease lease;
        try {
            lease = sessionFor(myEpoch);
        } catch (Diverged d) {
            return new Outcome(ToolCallStatus.INFRASTRUCTURE_ERROR, d.getMessage(), null, System.nanoTime() - t0, false);
        } catch (RuntimeException e) {
            return new Outcome(ToolCallStatus.INFRASTRUCTURE_ERROR, "the tool session could not be opened: " + message(e), e,
                    System.nanoTime() - t0, false);
        }
        if (lease == null) return new Outcome(ToolCallStatus.INFRASTRUCTURE_ERROR, "the tool session was retired", null, 0, false);
        try {
            return run(lease.session(), call);
        } finally {
            if (lease.perCall()) closeQuietly(lease.session());
        }
    }

    private static Outcome run(ToolSession s, ToolCall call) {
        Tool tool = s.tool(call.tool());
        if (tool == null)
            return new Outcome(ToolCallStatus.UNKNOWN_TOOL, "unknown tool '" + call.tool() + "'; available: " + String.join(", ", s.names()),
                    null, 0, false);
        long t1 = System.nanoTime();
        try {
            Observation o = tool.call(call.arguments());
            long nanos = System.nanoTime() - t1;
            if (o == null) return new Outcome(ToolCallStatus.INFRASTRUCTURE_ERROR, "tool '" + call.tool() + "' returned nothing", null, nanos, true);
            return new Outcome(status(o), o.text(), o.raw(), nanos, true);
        } catch (RuntimeException | Error e) {
            // The Tool contract says tools never throw; one that does is broken infrastructure, not the model's fault.
            if (e instanceof VirtualMachineError vme) throw vme;
            return new Outcome(ToolCallStatus.INFRASTRUCTURE_ERROR, "tool '" + call.tool() + "' failed: " + message(e), e,
                    System.nanoTime() - t1, true);
        }
    }

    private static ToolCallStatus status(Observation o) {
        return o.success() ? ToolCallStatus.OK : o.infrastructureFailure() ? ToolCallStatus.INFRASTRUCTURE_ERROR : ToolCallStatus.TOOL_ERROR;
    }

    private Lease sessionFor(int myEpoch) {
        List<Executed> toReplay;
        synchronized (this) {
            if (myEpoch != epoch) return null;
            if (session != null) return new Lease(session, false);
            toReplay = List.copyOf(mode == ToolSessionMode.LEASE_PER_CALL ? history : replay);
        }
        ToolSession opened = provider.open();
        if (opened == null) throw new IllegalStateException("the tool provider returned no session");
        try {
            if (opened.stateful()) replayInto(opened, toReplay);
        } catch (RuntimeException | Error e) {
            closeQuietly(opened);
            throw e;
        }
        // Sessions that hold no worker (stateless tools, a RemoteSandbox's client-side cells) are worth nothing to
        // release between calls; keeping them saves an open and, for a stateful one, a replay per call.
        boolean perCall = mode == ToolSessionMode.LEASE_PER_CALL && opened.stateful() && opened.holdsWorker();
        synchronized (this) {
            if (myEpoch != epoch) {
                closeQuietly(opened);
                return null;
            }
            if (perCall) return new Lease(opened, true);
            if (session != null) {
                closeQuietly(opened);
                return new Lease(session, false);
            }
            session = opened;
            replay = List.of();
            return new Lease(session, false);
        }
    }

    /** Re-runs {@code cells} in {@code s}, outputs discarded; throws {@link Diverged} at the first that differs. */
    private void replayInto(ToolSession s, List<Executed> cells) {
        for (int i = 0; i < cells.size(); i++) {
            Executed e = cells.get(i);
            Tool t = s.tool(e.call().tool());
            String where = "restoring the path's tool state failed: replayed call " + (i + 1) + " of " + cells.size() + " (tool '"
                    + e.call().tool() + "') ";
            if (t == null) throw new Diverged(where + "is not offered by the new session; this call was not run");
            Observation o;
            try {
                o = t.call(e.call().arguments());
            } catch (RuntimeException ex) {
                throw new Diverged(where + "threw " + message(ex) + "; this call was not run");
            }
            meter.replayed();
            if (o == null) throw new Diverged(where + "returned nothing; this call was not run");
            ToolCallStatus st = status(o);
            String out = o.text() == null ? "" : o.text();
            if (st != e.status() || !out.equals(e.output()))
                throw new Diverged(where + "gave a different result (the cell is not deterministic?): first " + e.status() + " "
                        + quote(e.output()) + ", now " + st + " " + quote(out) + "; this call was not run");
        }
    }

    private static String quote(String s) {
        String q = s.length() <= QUOTE ? s : s.substring(0, QUOTE) + "…";
        return "\"" + q.replace("\n", "\\n") + "\"";
    }

    /** Records a call the model saw executed (for replays into later sessions). */
    synchronized void executed(Executed e) {
        record(e);
    }

    private void record(Executed e) {
        // After a lost state the session is a fresh interpreter: what ran before (and the losing cell) left nothing.
        if (e.lostState()) history.clear();
        else history.add(e);
    }

    /** Retires the current session after a timeout; {@code inFlight} completes when the stuck call returns. */
    void retire(CompletableFuture<?> inFlight) {
        ToolSession old;
        synchronized (this) {
            epoch++;
            old = session;
            session = null;
            replay = new ArrayList<>(history);
        }
        // A per-call session is closed by the stuck call itself when it returns (invoke's finally).
        if (old != null) inFlight.whenComplete((v, e) -> closeQuietly(old));
    }

    /** Closes the session (end of the path). */
    void close() {
        ToolSession old;
        synchronized (this) {
            epoch++;
            old = session;
            session = null;
        }
        if (old != null) closeQuietly(old);
    }

    private static void closeQuietly(ToolSession s) {
        try {
            s.close();
        } catch (RuntimeException ignored) {
            // Closing returns a worker to its pool; a failure there must not fail the rollout.
        }
    }

    static String message(Throwable e) {
        String m = e.getMessage();
        return e.getClass().getSimpleName() + (m == null ? "" : ": " + m);
    }
}
