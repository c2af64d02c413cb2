package ai.arbor.rollout;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAccumulator;

/**
 * Thread-safe counters of one prompt's rollout (its {@link RolloutCost}) plus the metrics the engine
 * reports; every update is forwarded to an optional parent (the engine-wide meter).
 */
public final class CostMeter {
    private final CostMeter parent;
    private final AtomicLong generatedTokens = new AtomicLong(), generations = new AtomicLong(), toolCalls = new AtomicLong(),
            replayedToolCalls = new AtomicLong(), observationTokens = new AtomicLong(), generationFailures = new AtomicLong(),
            toolFailures = new AtomicLong(), infrastructureFailures = new AtomicLong(), malformedCalls = new AtomicLong(),
            generationNanos = new AtomicLong(), toolNanos = new AtomicLong();
    private final LongAccumulator maxGenerationNanos = new LongAccumulator(Math::max, 0), maxToolNanos = new LongAccumulator(Math::max, 0);

    public CostMeter() {
        this(null);
    }

    public CostMeter(CostMeter parent) {
        this.parent = parent;
    }

    void generation(int tokens, long nanos) {
        generatedTokens.addAndGet(tokens);
        generations.incrementAndGet();
        generationNanos.addAndGet(nanos);
        maxGenerationNanos.accumulate(nanos);
        if (parent != null) parent.generation(tokens, nanos);
    }

    void generationFailed() {
        generationFailures.incrementAndGet();
        if (parent != null) parent.generationFailed();
    }

    void toolCall(ToolCallStatus status, long nanos, boolean dispatched) {
        if (dispatched) {
            toolCalls.incrementAndGet();
            toolNanos.addAndGet(nanos);
            maxToolNanos.accumulate(nanos);
        }
        switch (status) {
            case TOOL_ERROR -> toolFailures.incrementAndGet();
            case INFRASTRUCTURE_ERROR -> infrastructureFailures.incrementAndGet();
            case MALFORMED, UNKNOWN_TOOL -> malformedCalls.incrementAndGet();
            default -> { }
        }
        if (parent != null) parent.toolCall(status, nanos, dispatched);
    }

    void replayed() {
        replayedToolCalls.incrementAndGet();
        if (parent != null) parent.replayed();
    }

    void observation(int tokens) {
        observationTokens.addAndGet(tokens);
        if (parent != null) parent.observation(tokens);
    }

    /** The cost so far. */
    public RolloutCost cost() {
        return new RolloutCost(generatedTokens.get(), generations.get(), toolCalls.get(), replayedToolCalls.get(), observationTokens.get());
    }

    public long generationFailures() {
        return generationFailures.get();
    }

    public long toolFailures() {
        return toolFailures.get();
    }

    public long infrastructureFailures() {
        return infrastructureFailures.get();
    }

    public long malformedCalls() {
        return malformedCalls.get();
    }

    /** Mean generation latency in ms (0 when none). */
    public double meanGenerationMillis() {
        long n = generations.get();
        return n == 0 ? 0 : generationNanos.get() / 1e6 / n;
    }

    public double maxGenerationMillis() {
        return maxGenerationNanos.get() / 1e6;
    }

    /** Mean tool-call latency in ms (0 when none). */
    public double meanToolMillis() {
        long n = toolCalls.get();
        return n == 0 ? 0 : toolNanos.get() / 1e6 / n;
    }

    public double maxToolMillis() {
        return maxToolNanos.get() / 1e6;
    }
}
