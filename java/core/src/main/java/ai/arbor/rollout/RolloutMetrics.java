package ai.arbor.rollout;

import java.util.EnumMap;
import java.util.List;
import java.util.Map;

/**
 * Per-step metrics of a rollout (one RL step's batch).
 *
 * @param prompts               prompts rolled out
 * @param trajectories          trajectories in the batch
 * @param cost                  total cost (all prompts, discarded work included)
 * @param toolFailures          tool calls that failed because of the model's call
 * @param infrastructureFailures tool calls whose infrastructure failed
 * @param malformedCalls        malformed calls and calls to unknown tools
 * @param generationFailures    generations that failed (paths ended with GENERATION_FAILED)
 * @param meanTurns             mean turns per trajectory
 * @param maxTurns              most turns of a trajectory
 * @param meanResponseTokens    mean response length (generated + observation)
 * @param terminations          how trajectories ended
 * @param meanGenerationMillis  mean latency of a generation request
 * @param maxGenerationMillis   slowest generation request
 * @param meanToolMillis        mean latency of a tool call
 * @param maxToolMillis         slowest tool call
 * @param wallSeconds           wall time of the rollout
 */
public record RolloutMetrics(int prompts, int trajectories, RolloutCost cost, long toolFailures, long infrastructureFailures, long malformedCalls,
                             long generationFailures, double meanTurns, int maxTurns, double meanResponseTokens,
                             Map<Termination, Integer> terminations, double meanGenerationMillis, double maxGenerationMillis,
                             double meanToolMillis, double maxToolMillis, double wallSeconds) {
    public RolloutMetrics {
        terminations = Map.copyOf(terminations);
    }

    static RolloutMetrics of(int prompts, List<Trajectory> all, CostMeter meter, double wallSeconds) {
        Map<Termination, Integer> term = new EnumMap<>(Termination.class);
        long turns = 0, tokens = 0;
        int maxTurns = 0;
        for (Trajectory t : all) {
            term.merge(t.termination(), 1, Integer::sum);
            turns += t.steps().size();
            maxTurns = Math.max(maxTurns, t.steps().size());
            tokens += t.length();
        }
        int n = all.size();
        return new RolloutMetrics(prompts, n, meter.cost(), meter.toolFailures(), meter.infrastructureFailures(), meter.malformedCalls(),
                meter.generationFailures(), n == 0 ? 0 : (double) turns / n, maxTurns, n == 0 ? 0 : (double) tokens / n, term,
                meter.meanGenerationMillis(), meter.maxGenerationMillis(), meter.meanToolMillis(), meter.maxToolMillis(), wallSeconds);
    }

    /** Trajectories per second of wall time. */
    public double trajectoriesPerSecond() {
        return wallSeconds > 0 ? trajectories / wallSeconds : 0;
    }

    /** Tool calls per second of wall time. */
    public double toolCallsPerSecond() {
        return wallSeconds > 0 ? cost.toolCalls() / wallSeconds : 0;
    }

    /** Generated tokens per second of wall time. */
    public double tokensPerSecond() {
        return wallSeconds > 0 ? cost.generatedTokens() / wallSeconds : 0;
    }
}
