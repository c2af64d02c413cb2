package ai.arbor.rollout;

import java.util.ArrayDeque;
import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;

/**
 * A semaphore that never blocks a thread: {@link #run} starts the task when a permit is free, otherwise
 * queues it (FIFO). Used to bound in-flight generation requests without a thread per waiting request.
 */
public final class AsyncLimiter {
    private final int permits;
    private int inUse;
    private final ArrayDeque<Runnable> waiting = new ArrayDeque<>();

    public AsyncLimiter(int permits) {
        if (permits < 1) throw new IllegalArgumentException("permits must be >= 1, got " + permits);
        this.permits = permits;
    }

    /** Runs {@code task} under a permit; the permit is released when its future completes. */
    public <T> CompletableFuture<T> run(Supplier<CompletableFuture<T>> task) {
        CompletableFuture<T> result = new CompletableFuture<>();
        Runnable start = () -> {
            CompletableFuture<T> f;
            try {
                f = task.get();
            } catch (Throwable t) {
                f = CompletableFuture.failedFuture(t);
            }
            f.whenComplete((v, e) -> {
                release();
                if (e != null) result.completeExceptionally(e);
                else result.complete(v);
            });
        };
        boolean now;
        synchronized (this) {
            now = inUse < permits;
            if (now) inUse++;
            else waiting.add(start);
        }
        if (now) start.run();
        return result;
    }

    private void release() {
        Runnable next;
        synchronized (this) {
            next = waiting.poll();
            if (next == null) inUse--;
        }
        if (next != null) next.run();
    }

    /** Permits in use now. */
    public synchronized int inUse() {
        return inUse;
    }

    /** Tasks waiting for a permit now. */
    public synchronized int waiting() {
        return waiting.size();
    }
}
