package ai.arbor.rollout;

import ai.arbor.tools.Observation;
import ai.arbor.tools.Tool;
import java.util.ArrayList;
import java.util.List;

/**
 * The tool session of one path, opened lazily and owned by exactly one {@link AgentState} at a time
 * (ownership moves to the next state at each step). Package-private: the agent loop's bookkeeping.
 *
 * <p>Forking: a branch gets a new {@code PathTools} whose first opened session, when stateful, replays
 * the calls the path executed so far (OK and TOOL_ERROR ones: an erroring cell can still have changed
 * state). A call that exceeds the tool timeout retires the session (closed when that call finally
 * returns) and the next call opens a fresh one with the same replay.
 */
final class PathTools {
    private final ToolProvider provider;
    private final CostMeter meter;
    private ToolSession session;                   // guarded by this
    private List<ToolCall> replay;                 // guarded by this: replayed into the next opened session
    private final List<ToolCall> history;          // guarded by this: calls executed on this path
    private int epoch;                             // guarded by this: bumped when a session is retired
    volatile AgentState owner;

    PathTools(ToolProvider provider, CostMeter meter, List<ToolCall> executedBefore) {
        this.provider = provider;
        this.meter = meter;
        this.history = new ArrayList<>(executedBefore);
        this.replay = new ArrayList<>(executedBefore);
    }

    /** The outcome of one call, before rendering. */
    record Outcome(ToolCallStatus status, String output, Object raw, long nanos, boolean dispatched) {}

    synchronized int epoch() {
        return epoch;
    }

    /** Runs {@code call}; blocking; runs on a tool thread. Never throws. */
    Outcome invoke(ToolCall call, int myEpoch) {
        long t0 = System.nanoTime();
        ToolSession s;
        try {
            s = sessionFor(myEpoch);
        } catch (RuntimeException e) {
            return new Outcome(ToolCallStatus.INFRASTRUCTURE_ERROR, "the tool session could not be opened: " + message(e), e,
                    System.nanoTime() - t0, false);
        }
        if (s == null) return new Outcome(ToolCallStatus.INFRASTRUCTURE_ERROR, "the tool session was retired", null, 0, false);
        Tool tool = s.tool(call.tool());
        if (tool == null)
            return new Outcome(ToolCallStatus.UNKNOWN_TOOL, "unknown tool '" + call.tool() + "'; available: " + String.join(", ", s.names()),
                    null, 0, false);
        long t1 = System.nanoTime();
        try {
            Observation o = tool.call(call.arguments());
            long nanos = System.nanoTime() - t1;
            if (o == null) return new Outcome(ToolCallStatus.INFRASTRUCTURE_ERROR, "tool '" + call.tool() + "' returned nothing", null, nanos, true);
            ToolCallStatus st = o.success() ? ToolCallStatus.OK
                    : o.infrastructureFailure() ? ToolCallStatus.INFRASTRUCTURE_ERROR : ToolCallStatus.TOOL_ERROR;
            return new Outcome(st, o.text(), o.raw(), nanos, true);
        } catch (RuntimeException | Error e) {
            // The Tool contract says tools never throw; one that does is broken infrastructure, not the model's fault.
            if (e instanceof VirtualMachineError vme) throw vme;
            return new Outcome(ToolCallStatus.INFRASTRUCTURE_ERROR, "tool '" + call.tool() + "' failed: " + message(e), e,
                    System.nanoTime() - t1, true);
        }
    }

    private ToolSession sessionFor(int myEpoch) {
        List<ToolCall> toReplay;
        synchronized (this) {
            if (myEpoch != epoch) return null;
            if (session != null) return session;
            toReplay = replay;
        }
        ToolSession opened = provider.open();
        if (opened == null) throw new IllegalStateException("the tool provider returned no session");
        if (opened.stateful()) {
            for (ToolCall c : toReplay) {
                Tool t = opened.tool(c.tool());
                if (t == null) continue;
                try {
                    t.call(c.arguments());
                } catch (RuntimeException e) {
                    // Best effort: the original call's observation is what the model saw; a replay
                    // failure only means later state may differ, which the replayed call already risked.
                }
                meter.replayed();
            }
        }
        synchronized (this) {
            if (myEpoch != epoch || session != null) {
                opened.close();
                return myEpoch != epoch ? null : session;
            }
            session = opened;
            replay = List.of();
            return session;
        }
    }

    /** Records a call the model saw executed (for replays into later sessions). */
    synchronized void executed(ToolCall call) {
        history.add(call);
    }

    /** Retires the current session after a timeout; {@code inFlight} completes when the stuck call returns. */
    void retire(java.util.concurrent.CompletableFuture<?> inFlight) {
        ToolSession old;
        synchronized (this) {
            epoch++;
            old = session;
            session = null;
            replay = new ArrayList<>(history);
        }
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
