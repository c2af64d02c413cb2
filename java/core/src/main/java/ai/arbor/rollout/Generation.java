package ai.arbor.rollout;

/**
 * What a backend generated for one request. Arrays are owned by the record (not copied: do not mutate).
 *
 * @param tokens       generated ids, including the stop token / the tokens completing a stop string
 * @param logprobs     behaviour log-probability of each generated token under the sampling distribution
 *                     (finite, ≤ 0); same length as {@code tokens}
 * @param entropies    per-token entropy of the sampling distribution, or null when the backend provides
 *                     none. Exact for a local backend; from an HTTP backend, the top-k estimate
 *                     −Σ_{j∈top-k} p_j log p_j (a lower bound, ARPO's estimate)
 * @param finishReason why it ended
 * @param stopString   the stop string matched when {@code finishReason == STOP_STRING}, else null
 * @param stopTokenId  the stop token when {@code finishReason == STOP_TOKEN} (may be -1 when the backend
 *                     did not say which), else -1
 * @param weightVersion the policy (weight) version that generated it, as the server reported it (SGLang's
 *                     {@code weight_version}), or null when the backend reports none
 */
public record Generation(int[] tokens, float[] logprobs, float[] entropies, FinishReason finishReason, String stopString,
                         int stopTokenId, String weightVersion) {
    public Generation {
        if (tokens == null) throw new IllegalArgumentException("tokens must not be null");
        if (logprobs == null || logprobs.length != tokens.length)
            throw new IllegalArgumentException("logprobs must have one entry per token (" + tokens.length + "), got "
                    + (logprobs == null ? "null" : logprobs.length));
        if (entropies != null && entropies.length != tokens.length)
            throw new IllegalArgumentException("entropies must have one entry per token (" + tokens.length + "), got " + entropies.length);
        if (finishReason == null) throw new IllegalArgumentException("finishReason must not be null");
        if (finishReason == FinishReason.STOP_STRING && (stopString == null || stopString.isEmpty()))
            throw new IllegalArgumentException("a STOP_STRING finish must name the stop string");
        for (int i = 0; i < logprobs.length; i++)
            if (!(logprobs[i] <= 1e-4f) || Float.isInfinite(logprobs[i]))
                throw new IllegalArgumentException("logprobs[" + i + "] = " + logprobs[i] + " is not a finite log-probability");
        if (entropies != null)
            for (int i = 0; i < entropies.length; i++)
                if (!(entropies[i] >= -1e-4f) || Float.isInfinite(entropies[i]))
                    throw new IllegalArgumentException("entropies[" + i + "] = " + entropies[i] + " is not a finite entropy");
    }

    /** Without a weight version (a backend that reports none). */
    public Generation(int[] tokens, float[] logprobs, float[] entropies, FinishReason finishReason, String stopString, int stopTokenId) {
        this(tokens, logprobs, entropies, finishReason, stopString, stopTokenId, null);
    }

    /** This generation with the version of the weights that produced it. */
    public Generation withWeightVersion(String version) {
        return new Generation(tokens, logprobs, entropies, finishReason, stopString, stopTokenId, version);
    }

    /** Number of generated tokens. */
    public int length() {
        return tokens.length;
    }
}
