package ai.arbor.rollout;

import ai.arbor.sandbox.SandboxSession;
import ai.arbor.tools.PythonTool;
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

    /**
     * Whether keeping this session open between calls holds a scarce resource (a local sandbox worker). When it
     * does not — a stateful session over a {@code RemoteSandbox}, which restores its own state by replaying its
     * cells with every request — a path keeps it open even under {@link ToolSessionMode#LEASE_PER_CALL}: a lease per
     * call would only replay the path's cells again on top of the client's own replay. Defaults to {@link #stateful()}.
     */
    default boolean holdsWorker() {
        return stateful();
    }

    @Override
    void close();

    /**
     * A session over {@code tools}. It {@linkplain #holdsWorker() holds a worker} when stateful, unless every sandbox
     * session it reaches — {@code onClose} and the sessions of its {@link PythonTool}s, at least one — holds none
     * ({@link SandboxSession#holdsWorker()}: a {@code RemoteSandbox}'s).
     *
     * @param stateful see {@link #stateful()}
     * @param onClose  closed with the session (e.g. the {@code SandboxSession}); may be null
     */
    static ToolSession of(List<? extends Tool> tools, boolean stateful, AutoCloseable onClose) {
        Map<String, Tool> byName = new LinkedHashMap<>();
        List<SandboxSession> sandboxes = new ArrayList<>();
        if (onClose instanceof SandboxSession s) sandboxes.add(s);
        for (Tool t : tools) {
            if (t == null) throw new IllegalArgumentException("tools must not contain null");
            if (byName.put(t.name(), t) != null) throw new IllegalArgumentException("two tools are named '" + t.name() + "'");
            if (t instanceof PythonTool p) sandboxes.add(p.session());
        }
        boolean holdsWorker = stateful && (sandboxes.isEmpty() || sandboxes.stream().anyMatch(SandboxSession::holdsWorker));
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
            public boolean holdsWorker() {
                return holdsWorker;
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
