package ai.arbor.rollout;

/**
 * One generation: continue {@code context} with {@code params}.
 *
 * @param context the prefix (prompt + everything so far on this path); its identity tells the backend
 *                which earlier context it extends (see {@link TokenContext})
 * @param params  sampling parameters
 * @param seed    sampling seed: a deterministic backend gives the same output for the same
 *                (context tokens, params, seed); every path of a tree gets its own seed
 */
public record GenerationRequest(TokenContext context, SamplingParams params, long seed) {
    public GenerationRequest {
        if (context == null) throw new IllegalArgumentException("context must not be null");
        if (params == null) throw new IllegalArgumentException("params must not be null");
    }
}
