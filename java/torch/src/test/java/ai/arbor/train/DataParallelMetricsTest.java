package ai.arbor.train;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Two ranks' rollout metrics combined into the step's, against hand-computed values of the union. */
class DataParallelMetricsTest {
    static Map<String, Object> share(int trajectories, int infra, double reward, double accuracy, double toolCalls, double toolUse, double failRate,
                                     double responseTokens, double entropy, long genTokens, long callsTotal) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("trajectories", trajectories);
        m.put("reward", reward);
        m.put("accuracy", accuracy);
        m.put("entropy", entropy);
        m.put("tool_calls", toolCalls);
        m.put("tool_use", toolUse);
        m.put("tool_failure_rate", failRate);
        m.put("infra_masked", infra);
        m.put("response_tokens", responseTokens);
        m.put("gen_tokens", genTokens);
        m.put("tool_calls_total", callsTotal);
        return m;
    }

    @Test
    void theUnionsMeansAreTheSharesReweighted() {
        // rank 0: 4 trajectories, 1 infrastructure failure, so 3 live: rewards 1, 1, 0; 2 calls each on 2 of them, 1 of the 4 failed
        Map<String, Object> a = share(4, 1, 2 / 3.0, 2 / 3.0, 4 / 3.0, 2 / 3.0, 0.25, 50, 2.0, 150, 4);
        // rank 1: 4 live: rewards 1, 0, 0, 0; 1 call on one of them (failed); entropy undefined on this share
        Map<String, Object> b = share(4, 0, 0.25, 0.25, 0.25, 0.25, 1.0, 20, Double.NaN, 80, 1);
        double[] ga = DataParallelMetrics.weightedSums(a), gb = DataParallelMetrics.weightedSums(b);
        double[] g = new double[ga.length];
        for (int i = 0; i < g.length; i++) g[i] = ga[i] + gb[i];
        Map<String, Object> m = new LinkedHashMap<>(a);
        DataParallelMetrics.putGlobal(m, g);
        assertEquals(8L, m.get("trajectories"));
        assertEquals(1L, m.get("infra_masked"));
        assertEquals(230L, m.get("gen_tokens"));
        assertEquals(5L, m.get("tool_calls_total"));
        assertEquals(3 / 7.0, (double) m.get("reward"), 1e-12);       // 3 correct of 7 live
        assertEquals(3 / 7.0, (double) m.get("accuracy"), 1e-12);
        assertEquals(5 / 7.0, (double) m.get("tool_calls"), 1e-12);   // 4 + 1 calls
        assertEquals(3 / 7.0, (double) m.get("tool_use"), 1e-12);
        assertEquals(2 / 5.0, (double) m.get("tool_failure_rate"), 1e-12);   // 1 + 1 failed of 5
        assertEquals((3 * 50 + 4 * 20) / 7.0, (double) m.get("response_tokens"), 1e-12);
        assertEquals(2.0, (double) m.get("entropy"), 1e-12, "only rank 0's share had entropies");
    }
}
