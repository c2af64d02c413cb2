package ai.arbor.train;

import ai.arbor.dist.GradientSync;
import java.util.Map;

/**
 * A data-parallel RL step's rollout metrics over every rank's share ({@code Scored.rolloutMetrics} of the union), so
 * that rank 0 logs the step's, not its share's: the counts summed; the means over live trajectories (reward, accuracy,
 * tool calls and use, response tokens) re-weighted by each share's live trajectories; the tool failure rate by each
 * share's tool calls. The rollout entropy is a mean over tokens the metrics do not count: weighted by each share's
 * live trajectories × response tokens, close to but not exactly the union's.
 */
final class DataParallelMetrics {
    private DataParallelMetrics() {}

    private static final String[] MEANS = {"reward", "accuracy", "tool_calls", "tool_use", "response_tokens"};
    private static final String[] SUMS = {"trajectories", "infra_masked", "gen_tokens", "tool_calls_total"};

    /** Replaces {@code m}'s rollout metrics with the global ones (every rank calls it at the same step). */
    static void globalRollout(Map<String, Object> m, GradientSync sync) {
        putGlobal(m, sync.sum(weightedSums(m)));
    }

    /** This share's sums: the {@link #SUMS}, live trajectories, live × each mean, tool calls, tool failures, entropy weight and its product. */
    static double[] weightedSums(Map<String, Object> m) {
        double live = num(m, "trajectories") - num(m, "infra_masked");
        double calls = live * num(m, "tool_calls");
        double entropyWeight = Double.isFinite(num(m, "entropy")) ? live * num(m, "response_tokens") : 0;
        double[] v = new double[SUMS.length + 1 + MEANS.length + 4];
        int k = 0;
        for (String s : SUMS) v[k++] = num(m, s);
        v[k++] = live;
        for (String s : MEANS) v[k++] = live * num(m, s);
        v[k++] = calls;
        v[k++] = calls * num(m, "tool_failure_rate");
        v[k++] = entropyWeight;
        v[k] = entropyWeight == 0 ? 0 : entropyWeight * num(m, "entropy");
        return v;
    }

    /** The metrics of {@link #weightedSums} summed over the ranks, into {@code m}. */
    static void putGlobal(Map<String, Object> m, double[] g) {
        int k = 0;
        for (String s : SUMS) m.put(s, Math.round(g[k++]));
        double live = g[k++];
        for (String s : MEANS) {
            double sum = g[k++];
            m.put(s, live > 0 ? sum / live : 0.0);
        }
        double calls = g[k++], failed = g[k++], ew = g[k++], e = g[k];
        m.put("tool_failure_rate", calls > 0 ? failed / calls : 0.0);
        m.put("entropy", ew > 0 ? e / ew : Double.NaN);
    }

    private static double num(Map<String, Object> m, String key) {
        Object o = m.get(key);
        if (!(o instanceof Number n)) throw new IllegalStateException("rollout metric " + key + " missing: " + m.keySet());
        return n.doubleValue();
    }
}
