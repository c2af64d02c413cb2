package ai.arbor.rollout;

import ai.arbor.tools.Tool;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The tools one trajectory (one path of a tree) talks to. A stateful session — a Python interpreter
 * whose variables persist across calls — serves one path; a fresh one first replays the path's earlier
 * calls: before each call when sessions are leased per call ({@link ToolSessionMode}), when a tree
 * branches from the middle of a path (see {@link #stateful()}). Closing returns the resources (e.g. the
 * sandbox worker).
 */
public interface ToolSession extends AutoCloseable {

    /** The tool registered under {@code name}, or null. */
    Tool tool(String name);

    /** Names of the tools, in registration order. */
    List<String> names();

    /**
     * True when calls change state that later calls see (a Python session). A branch that continues
     * from the middle of a path then needs the earlier calls replayed into a fresh session; for
     * stateless tools (calculator, search) nothing is replayed.
     */
    boolean stateful();

    @Override
    void close();

    /**
     * A session over {@code tools}.
     *
     * @param stateful see {@link #stateful()}
     * @param onClose  closed with the session (e.g. the {@code SandboxSession}); may be null
     */
    static ToolSession of(List<? extends Tool> tools, boolean stateful, AutoCloseable onClose) {
        Map<String, Tool> byName = new LinkedHashMap<>();
        for (Tool t : tools) {
            if (t == null) throw new IllegalArgumentException("tools must not contain null");
            if (byName.put(t.name(), t) != null) throw new IllegalArgumentException("two tools are named '" + t.name() + "'");
        }
        List<String> names = List.copyOf(new ArrayList<>(byName.keySet()));
        return new ToolSession() {
            private boolean closed;

            @Override
            public Tool tool(String name) {
                return byName.get(name);
            }

            @Override
            public List<String> names() {
                return names;
            }

            @Override
            public boolean stateful() {
                return stateful;
            }

            @Override
            public synchronized void close() {
                if (closed) return;
                closed = true;
                if (onClose != null) {
                    try {
                        onClose.close();
                    } catch (Exception e) {
                        throw new IllegalStateException("closing the tool session failed: " + e.getMessage(), e);
                    }
                }
            }
        };
    }
}
