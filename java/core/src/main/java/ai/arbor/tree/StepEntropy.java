package ai.arbor.tree;

/**
 * The entropy of one agent step as ARPO / AEPO measure it: over the first {@code tokens} generated
 * tokens of the step (docs/algorithms.md §4, "Step entropy": the first k ≤ 20 generated tokens).
 *
 * <p>Released code ({@code vllm_rollout_with_tools.py}): the entropy terms −p·log p of the top-k
 * logprobs of the first min(20, len) positions are <em>summed</em> and divided by log|V|. That is
 * {@link #code()}: {@link Aggregation#SUM}, normalized. The per-token terms come from the
 * {@link ai.arbor.rollout.Generation#entropies()} the backend gives: exact from a local generator, the
 * same top-k estimate as the code from an HTTP backend with {@code topLogprobs > 0}.
 *
 * @param tokens              number of leading tokens measured (k ≥ 1)
 * @param aggregation         sum (code) or mean over those tokens
 * @param normalizeByLogVocab divide by log|V| (code) — makes ΔH scale-free across tokenizers
 */
public record StepEntropy(int tokens, Aggregation aggregation, boolean normalizeByLogVocab) {
    public enum Aggregation {
        /** Σ over the first k tokens (released code). */
        SUM,
        /** Mean over the first k tokens. */
        MEAN
    }

    public StepEntropy {
        if (tokens < 1) throw new IllegalArgumentException("tokens must be >= 1, got " + tokens);
        if (aggregation == null) throw new IllegalArgumentException("aggregation must not be null");
    }

    /** The released code's measure: Σ of the first 20 tokens' entropies / log|V|. */
    public static StepEntropy code() {
        return new StepEntropy(20, Aggregation.SUM, true);
    }

    /**
     * The step entropy of per-token entropies {@code h}, or NaN when there are none (no tokens, or a
     * backend without entropies).
     */
    public double of(float[] h, int vocabSize) {
        if (h == null || h.length == 0) return Double.NaN;
        if (vocabSize < 2) throw new IllegalArgumentException("vocabSize must be >= 2, got " + vocabSize);
        int k = Math.min(tokens, h.length);
        double sum = 0;
        for (int i = 0; i < k; i++) sum += h[i];
        double v = aggregation == Aggregation.SUM ? sum : sum / k;
        return normalizeByLogVocab ? v / Math.log(vocabSize) : v;
    }
}
