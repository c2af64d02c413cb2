package ai.arbor.rollout;

import java.util.concurrent.CompletableFuture;

/**
 * How one prompt is rolled out: plain chains (GRPO), Tree-GRPO trees, ARPO / AEPO entropy-driven
 * branching (package {@code ai.arbor.tree}). A strategy drives the {@link AgentLoop} of the context,
 * derives every seed from {@link RolloutContext#seed()}, and makes its random decisions in a fixed
 * order, so a deterministic generator gives the same result on every run.
 */
@FunctionalInterface
public interface RolloutStrategy<G extends GroupRollout> {

    /** Name for logs and metrics. */
    default String name() {
        return getClass().getSimpleName();
    }

    /** Rolls out one prompt. */
    CompletableFuture<G> rollout(Prompt prompt, RolloutContext context);
}
