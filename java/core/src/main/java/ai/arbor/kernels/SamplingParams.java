package ai.arbor.kernels;

/**
 * How a row's next token is drawn by {@link Sampler}: the tempered distribution
 * p = softmax(logits / temperature), optionally truncated (vLLM's order: min-p and top-k, then top-p on
 * what they kept) and renormalized into the sampling distribution q.
 *
 * <ul>
 *   <li>{@code temperature} — finite, ≥ 0; 0 = greedy (argmax; the lowest index among equal maxima).
 *   <li>{@code topK} — keep the tokens whose tempered logit is ≥ the k-th largest (ties at the k-th value
 *       are all kept); 0 = off.
 *   <li>{@code topP} — in (0, 1]: keep the smallest set of most probable tokens whose renormalized mass
 *       reaches topP (nucleus sampling, Holtzman et al. 2020; ties at the boundary kept); 1 = off.
 *   <li>{@code minP} — in [0, 1]: keep tokens with p_j ≥ minP · max_j p_j (Nguyen et al. 2024); 0 = off.
 * </ul>
 *
 * RL rollouts normally sample with truncation off ({@link #temperature(float)}): the trainer's ratios
 * are then exact (see {@link Sampler} on which logprob to store).
 */
public record SamplingParams(float temperature, int topK, float topP, float minP) {

    public SamplingParams {
        if (!(temperature >= 0) || Float.isInfinite(temperature))
            throw new IllegalArgumentException("temperature must be finite and >= 0 (0 = greedy), got " + temperature);
        if (topK < 0) throw new IllegalArgumentException("topK must be >= 0 (0 = off), got " + topK);
        if (!(topP > 0 && topP <= 1)) throw new IllegalArgumentException("topP must be in (0, 1] (1 = off), got " + topP);
        if (!(minP >= 0 && minP <= 1)) throw new IllegalArgumentException("minP must be in [0, 1] (0 = off), got " + minP);
    }

    /** Argmax decoding (ties: the lowest token id). */
    public static SamplingParams greedy() {
        return new SamplingParams(0f, 0, 1f, 0f);
    }

    /** Pure temperature sampling, no truncation. */
    public static SamplingParams temperature(float temperature) {
        return new SamplingParams(temperature, 0, 1f, 0f);
    }

    public SamplingParams withTopK(int k) {
        return new SamplingParams(temperature, k, topP, minP);
    }

    public SamplingParams withTopP(float p) {
        return new SamplingParams(temperature, topK, p, minP);
    }

    public SamplingParams withMinP(float p) {
        return new SamplingParams(temperature, topK, topP, p);
    }

    public boolean isGreedy() {
        return temperature == 0f;
    }

    /** True when top-k, top-p or min-p may remove tokens (then q differs from p). */
    public boolean truncates() {
        return topK > 0 || topP < 1f || minP > 0f;
    }
}
