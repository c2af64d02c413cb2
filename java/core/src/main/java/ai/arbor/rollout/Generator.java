package ai.arbor.rollout;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * A policy that continues token prefixes. Three backends implement it: {@link OpenAiCompatibleGenerator}
 * (vLLM / SGLang servers), seeded programmatic generators in tests and benchmarks, and the local libtorch
 * generator (arbor-torch) that decodes many requests as one batch.
 *
 * <p>Contract:
 * <ul>
 *   <li>{@link #generate} returns at once; the future completes with the {@link Generation} or
 *       exceptionally with a {@link GenerationException}. Many requests are in flight at a time (the
 *       rollout engine issues one per active path), so a batching backend collects concurrent requests
 *       into decoding batches — a tree's branches included.</li>
 *   <li>Stops: generation ends at EOS, at a stop token id, at a stop string (the tokens completing it are
 *       kept; {@link StopStrings} finds it in decoded text), or at {@code maxNewTokens}.</li>
 *   <li>Prefix forking is explicit: {@link GenerationRequest#context()} names the prefix by identity, and
 *       a tree expansion's context extends the node's context. A backend that keeps KV caches reuses the
 *       deepest ancestor it holds; one that does not ignores it.</li>
 *   <li>Per-token outputs: ids, behaviour logprobs, and entropies where available.</li>
 * </ul>
 */
public interface Generator extends AutoCloseable {

    /** Starts one generation. */
    CompletableFuture<Generation> generate(GenerationRequest request);

    /**
     * Starts several generations at once; a batching backend may schedule them as one batch. The default
     * issues them one by one.
     */
    default List<CompletableFuture<Generation>> generateAll(List<GenerationRequest> requests) {
        List<CompletableFuture<Generation>> out = new ArrayList<>(requests.size());
        for (GenerationRequest r : requests) out.add(generate(r));
        return out;
    }

    /** Releases connections / threads / native memory. */
    @Override
    default void close() {}
}
