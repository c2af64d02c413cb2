package ai.arbor.rollout;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * One finished path: the prompt, the response tokens with their per-token records, the tool calls and
 * the steps, and where it sits in its group / tree. Per-token arrays are parallel, one entry per
 * response token (generated and observation tokens in order). This is what the rewards, filters,
 * advantage estimators and the trainer consume.
 *
 * @param prompt      the prompt (its id is the group id)
 * @param sampleIndex index of this trajectory within its prompt's group
 * @param treeIndex   index of its tree within the prompt (Tree-GRPO intra-tree groups); chains and
 *                    ARPO/AEPO paths of one prompt form one tree per global sample (see the strategy)
 * @param nodePath    node ids from the root's child to the leaf (ids unique within the tree); two
 *                    trajectories share a prefix exactly up to their common path prefix
 * @param tokens      response ids (prompt excluded)
 * @param lossMask    true for generated tokens, false for observation tokens
 * @param logprobs    behaviour logprob of generated tokens; NaN on observation tokens
 * @param entropies   per-token entropy where the backend gave it; NaN elsewhere
 * @param turnIndex   turn of each token (an observation belongs to the turn whose call produced it)
 * @param postTool    TAO-RL's M_post: generated tokens of a turn that follows a tool observation
 * @param toolCalls   the tool calls in order
 * @param steps       the agent steps (turn records) in order
 * @param termination why it ended
 */
public record Trajectory(Prompt prompt, int sampleIndex, int treeIndex, int[] nodePath, int[] tokens, boolean[] lossMask, float[] logprobs,
                         float[] entropies, int[] turnIndex, boolean[] postTool, List<ToolCallRecord> toolCalls, List<AgentStep> steps,
                         Termination termination) {
    public Trajectory {
        if (prompt == null) throw new IllegalArgumentException("prompt must not be null");
        int n = tokens.length;
        if (lossMask.length != n || logprobs.length != n || entropies.length != n || turnIndex.length != n || postTool.length != n)
            throw new IllegalArgumentException("per-token arrays must all have " + n + " entries");
        toolCalls = List.copyOf(toolCalls);
        steps = List.copyOf(steps);
        if (termination == null) throw new IllegalArgumentException("termination must not be null (the path is still active)");
    }

    /** Builds the per-token arrays of a terminated path. */
    public static Trajectory of(AgentState state, int sampleIndex, int treeIndex, int[] nodePath) {
        if (!state.terminated()) throw new IllegalArgumentException("state is not terminated: " + state);
        List<AgentStep> steps = state.steps();
        int n = state.responseTokens();
        int[] tokens = new int[n];
        boolean[] mask = new boolean[n];
        float[] lp = new float[n];
        float[] ent = new float[n];
        int[] turn = new int[n];
        boolean[] post = new boolean[n];
        List<ToolCallRecord> calls = new ArrayList<>();
        int at = 0;
        for (AgentStep s : steps) {
            int g = s.generated().length;
            System.arraycopy(s.generated(), 0, tokens, at, g);
            System.arraycopy(s.logprobs(), 0, lp, at, g);
            if (s.entropies() != null) System.arraycopy(s.entropies(), 0, ent, at, g);
            else Arrays.fill(ent, at, at + g, Float.NaN);
            Arrays.fill(mask, at, at + g, true);
            Arrays.fill(turn, at, at + g, s.turn());
            Arrays.fill(post, at, at + g, s.postTool());
            at += g;
            int o = s.observation().length;
            System.arraycopy(s.observation(), 0, tokens, at, o);
            Arrays.fill(lp, at, at + o, Float.NaN);
            Arrays.fill(ent, at, at + o, Float.NaN);
            Arrays.fill(turn, at, at + o, s.turn());
            at += o;
            if (s.toolCall() != null) calls.add(s.toolCall());
        }
        if (at != n) throw new IllegalStateException("steps hold " + at + " tokens but the state counted " + n);
        return new Trajectory(state.prompt(), sampleIndex, treeIndex, nodePath == null ? new int[0] : nodePath.clone(), tokens, mask, lp, ent,
                turn, post, calls, steps, state.termination());
    }

    /**
     * The policy versions its generations came from, in turn order without repeats (empty when the backend
     * reports none): one entry when the weights did not change during the rollout.
     */
    public List<String> policyVersions() {
        java.util.LinkedHashSet<String> v = new java.util.LinkedHashSet<>();
        for (AgentStep s : steps) if (s.weightVersion() != null) v.add(s.weightVersion());
        return List.copyOf(v);
    }

    /** Number of response tokens. */
    public int length() {
        return tokens.length;
    }

    /** Number of generated (loss-mask 1) tokens. */
    public int generatedTokens() {
        int c = 0;
        for (boolean m : lossMask) if (m) c++;
        return c;
    }

    /** True when the infrastructure failed on this path (generation failed, or a tool call's infrastructure did): mask, do not punish. */
    public boolean infrastructureFailure() {
        if (termination == Termination.GENERATION_FAILED) return true;
        for (ToolCallRecord r : toolCalls) if (r.status() == ToolCallStatus.INFRASTRUCTURE_ERROR) return true;
        return false;
    }

    /** TAO-RL's filter condition: at least one tool call, and every call failed. */
    public boolean allToolCallsFailed() {
        if (toolCalls.isEmpty()) return false;
        for (ToolCallRecord r : toolCalls) if (!r.status().failed()) return false;
        return true;
    }

    /** SimpleTIR's void-turn condition: some turn has neither a tool call nor a final answer. */
    public boolean hasVoidTurn() {
        for (AgentStep s : steps) if (s.outcome() == TurnOutcome.VOID) return true;
        return false;
    }

    /**
     * What the reward functions read ({@code ai.arbor.reward}): the decoded response with observations,
     * tool calls and failed calls, the response length (generated + observation tokens) and whether a
     * limit cut it.
     */
    public ai.arbor.reward.TrajectorySummary summary(Tokenizer tokenizer) {
        int failed = 0;
        int malformed = 0;  // never reached a tool: GRPO-TCR's per-call term does not pay for them
        for (ToolCallRecord r : toolCalls) {
            if (r.status().failed()) failed++;
            if (r.status() == ToolCallStatus.MALFORMED || r.status() == ToolCallStatus.UNKNOWN_TOOL) malformed++;
        }
        return new ai.arbor.reward.TrajectorySummary(responseText(tokenizer), toolCalls.size(), failed, length(), termination.truncated(),
                malformed);
    }

    /** The decoded response (special tokens skipped). */
    public String responseText(Tokenizer tokenizer) {
        return tokenizer.decode(tokens);
    }

    /** The decoded generated text of all turns, without observations (what the model wrote). */
    public String generatedText() {
        StringBuilder sb = new StringBuilder();
        for (AgentStep s : steps) sb.append(s.text());
        return sb.toString();
    }

    @Override
    public String toString() {
        return "Trajectory[prompt=" + prompt.id() + ", sample=" + sampleIndex + ", tree=" + treeIndex + ", path=" + Arrays.toString(nodePath)
                + ", tokens=" + tokens.length + ", toolCalls=" + toolCalls.size() + ", termination=" + termination + "]";
    }
}
