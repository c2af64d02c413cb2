package ai.arbor.task;

/**
 * Kinds of cold-start demonstration. The mix is chosen so that the SFT policy uses its tool only
 * sometimes and answers in its head otherwise — then RL has something to improve (accuracy and tool use
 * both rise when the tool is what gets answers right).
 */
public enum DemoStyle {
    /** Solves the problem with the tool, as planned (arith: one program; kb: two searches), then answers. */
    TOOL,
    /**
     * CoRT's hint-engineered demonstration (Li et al. 2025, "CoRT: Code-integrated Reasoning within
     * Thinking"): starts computing by hand, then switches to code with the hint "It looks tedious, and we
     * can use python code to simplify the reasoning.", and after the result adds "We don't need to doubt the
     * accuracy of python calculations." before answering.
     */
    HINT,
    /** Uses the tool only part of the way (kb: one search instead of two), then answers. */
    PARTIAL,
    /** Answers in its head, without any tool call (the gold answer: a tiny model can only imitate its shape). */
    HAND
}
