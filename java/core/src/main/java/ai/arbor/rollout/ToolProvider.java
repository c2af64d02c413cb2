package ai.arbor.rollout;

import ai.arbor.tools.Tool;
import java.util.List;

/**
 * Opens {@link ToolSession}s for a path, on a tool thread and only when a call needs one, so paths that
 * never call a tool hold no sandbox worker. A stateful session is opened for each call by default
 * ({@link ToolSessionMode#LEASE_PER_CALL}: the path's earlier calls are replayed into it) or once per path
 * ({@link ToolSessionMode#HOLD_PER_PATH}).
 *
 * <pre>{@code
 * // stateless tools shared by every path
 * ToolProvider tools = ToolProvider.shared(new CalculatorTool(), searchTool);
 * // a stateful Python session (local jailed sandbox; recycleWorkers(true) makes a lease per call cheap)
 * ToolProvider python = () -> {
 *     SandboxSession s = sandbox.openSession();
 *     return ToolSession.of(List.of(new PythonTool(s)), true, s);
 * };
 * }</pre>
 */
@FunctionalInterface
public interface ToolProvider {

    /** Opens a session for one path. May block (e.g. waiting for a sandbox worker); may throw, which
     * the loop records as an infrastructure failure of the call. */
    ToolSession open();

    /** The same stateless tools for every path; closing a session closes nothing. */
    static ToolProvider shared(Tool... tools) {
        List<Tool> list = List.of(tools);
        ToolSession.of(list, false, null);   // validates names once, eagerly
        return () -> ToolSession.of(list, false, null);
    }

    /** No tools: every call is answered "unknown tool". */
    static ToolProvider none() {
        return () -> ToolSession.of(List.of(), false, null);
    }
}
