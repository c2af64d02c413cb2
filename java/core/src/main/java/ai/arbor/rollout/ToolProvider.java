package ai.arbor.rollout;

import ai.arbor.tools.Tool;
import java.util.List;

/**
 * Opens a {@link ToolSession} per path. The agent loop opens it lazily, on the path's first tool call
 * and on a tool thread, so paths that never call a tool hold no sandbox worker.
 *
 * <pre>{@code
 * // stateless tools shared by every path
 * ToolProvider tools = ToolProvider.shared(new CalculatorTool(), searchTool);
 * // a stateful Python session per path (local jailed sandbox)
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
