package ai.arbor.tree;

/** What AEPO's consecutive-branching count {@code l} counts. */
public enum ConsecutiveScope {
    /**
     * Released code: per prompt, the number of consecutive rounds in which the prompt gained new paths
     * (branches or fresh samples); reset by a round without any.
     */
    PROMPT,
    /** Per path lineage: the consecutive tool-call events at which this path branched (a branch inherits the count). */
    PATH
}
