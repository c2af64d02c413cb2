package ai.arbor.rollout;

import ai.arbor.kernels.SamplingParams;

/**
 * One generation: continue {@code context}, drawing from {@code sampling}, within {@code limits}.
 *
 * @param context  the prefix (prompt + everything so far on this path); its identity tells the backend
 *                 which earlier context it extends (see {@link TokenContext})
 * @param sampling the distribution (temperature, top-k, top-p, min-p): the same value the sampling kernel
 *                 and the trainer's loss read
 * @param limits   length, stops and the top log-probs to report
 * @param seed     sampling seed: a deterministic backend gives the same output for the same
 *                 (context tokens, sampling, limits, seed); every path of a tree gets its own seed
 */
public record GenerationRequest(TokenContext context, SamplingParams sampling, GenerationLimits limits, long seed) {
    public GenerationRequest {
        if (context == null) throw new IllegalArgumentException("context must not be null");
        if (sampling == null) throw new IllegalArgumentException("sampling must not be null");
        if (limits == null) throw new IllegalArgumentException("limits must not be null");
    }
}
