package ai.arbor.tree;

/**
 * Which step's entropy decides branching at a tool call (ARPO / AEPO).
 */
public enum EntropyTiming {
    /**
     * Paper (and docs/algorithms.md §4): after the tool call, the first k tokens generated after the
     * observation are measured; the decision to branch from the point after the observation is taken
     * once they exist. Here the continuing path's own next step is the probe, so no tokens are spent
     * twice; the branches are siblings of that step, and a branch's own first step does not decide
     * again at the point it was branched from (one decision per tool-call point).
     */
    AFTER_OBSERVATION,
    /**
     * Released code: the decision at a tool call uses the entropy of the step that <em>ended with</em>
     * the call (so ΔH at a path's first call is always 0), and the branches start after the observation.
     */
    STEP_BEFORE_CALL
}
