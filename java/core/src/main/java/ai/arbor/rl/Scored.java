package ai.arbor.rl;

import ai.arbor.reward.RewardFunction;
import ai.arbor.rollout.RolloutBatch;
import ai.arbor.rollout.Tokenizer;
import ai.arbor.rollout.ToolCallRecord;
import ai.arbor.rollout.Trajectory;
import ai.arbor.task.Problem;
import ai.arbor.task.TrainingTask;
import ai.arbor.tree.TreeGroup;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A scored trajectory: what the advantages, the filters and the metrics need.
 *
 * @param group                 its prompt's index in the step (its group for the advantages)
 * @param reward                the recipe's reward (0, and never used, for an infrastructure failure)
 * @param infrastructureFailure a generation that failed, a sandbox error, a tool past its timeout: masked out of
 *                              the group statistics and the loss, never punished (docs/algorithms.md §3)
 */
public record Scored(Problem problem, int group, Trajectory trajectory, double reward, boolean correct, boolean infrastructureFailure) {

    /** Rewards and correctness of every trajectory of {@code batch} (groups in the order of {@code problems}). */
    public static List<Scored> score(RolloutBatch<TreeGroup> batch, List<Problem> problems, TrainingTask task, RewardFunction reward,
                                     Tokenizer tokenizer) {
        List<Scored> out = new ArrayList<>();
        for (int g = 0; g < batch.groups().size(); g++) {
            Problem p = problems.get(g);
            for (Trajectory t : batch.groups().get(g).trajectories()) {
                var summary = t.summary(tokenizer);
                boolean infra = t.infrastructureFailure();
                boolean correct = !infra && task.checker().isCorrect(summary.text(), p.answers());
                double r = infra ? 0 : reward.reward(summary, p.answers());
                out.add(new Scored(p, g, t, r, correct, infra));
            }
        }
        return out;
    }

    /**
     * Reward, accuracy, tool use and rollout cost of one step's trajectories (means over those without an
     * infrastructure failure), as the rows of {@code metrics.jsonl} name them.
     */
    public static Map<String, Object> rolloutMetrics(List<Scored> scored, RolloutBatch<TreeGroup> batch) {
        int n = scored.size(), infra = 0, correct = 0, withTool = 0;
        long calls = 0, failed = 0;
        double reward = 0, entropy = 0, length = 0;
        long entropyTokens = 0;
        for (Scored s : scored) {
            Trajectory t = s.trajectory();
            if (s.infrastructureFailure()) {
                infra++;
                continue;
            }
            reward += s.reward();
            if (s.correct()) correct++;
            if (!t.toolCalls().isEmpty()) withTool++;
            calls += t.toolCalls().size();
            for (ToolCallRecord c : t.toolCalls()) if (c.status().failed()) failed++;
            length += t.length();
            for (int q = 0; q < t.length(); q++)
                if (t.lossMask()[q] && Float.isFinite(t.entropies()[q])) {
                    entropy += t.entropies()[q];
                    entropyTokens++;
                }
        }
        int live = Math.max(1, n - infra);
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("trajectories", n);
        m.put("reward", reward / live);
        m.put("accuracy", (double) correct / live);
        m.put("entropy", entropyTokens == 0 ? Double.NaN : entropy / entropyTokens);
        m.put("tool_calls", (double) calls / live);
        m.put("tool_use", (double) withTool / live);
        m.put("tool_failure_rate", calls == 0 ? 0.0 : (double) failed / calls);
        m.put("infra_masked", infra);
        m.put("response_tokens", length / live);
        m.put("gen_tokens", batch.cost().generatedTokens());
        m.put("tool_calls_total", batch.cost().toolCalls());
        return m;
    }
}
