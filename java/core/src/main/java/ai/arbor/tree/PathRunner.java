package ai.arbor.tree;

import ai.arbor.rollout.AgentLoop;
import ai.arbor.rollout.AgentState;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/** Steps a path to its end, keeping every intermediate state (one per tree node). Package-private. */
final class PathRunner {
    private PathRunner() {}

    static CompletableFuture<List<AgentState>> run(AgentLoop loop, AgentState start) {
        return run(loop, start, new ArrayList<>());
    }

    private static CompletableFuture<List<AgentState>> run(AgentLoop loop, AgentState s, List<AgentState> acc) {
        if (s.terminated()) return CompletableFuture.completedFuture(acc);
        return loop.step(s).thenCompose(n -> {
            acc.add(n);
            return run(loop, n, acc);
        });
    }

    /** Completes when all complete, with their results in order. */
    static <T> CompletableFuture<List<T>> all(List<CompletableFuture<T>> fs) {
        return CompletableFuture.allOf(fs.toArray(new CompletableFuture<?>[0])).thenApply(v -> {
            List<T> out = new ArrayList<>(fs.size());
            for (CompletableFuture<T> f : fs) out.add(f.join());
            return out;
        });
    }
}
