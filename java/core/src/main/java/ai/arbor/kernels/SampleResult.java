package ai.arbor.kernels;

/**
 * Per-row outputs of {@link Sampler} over Java arrays.
 *
 * @param tokens         the drawn token of each row; -1 for a masked row
 * @param logprobSampled log q(token): the sampling (truncated, renormalized) distribution; 0 for greedy
 *                       rows, equal to {@code logprob} when nothing is truncated
 * @param logprob        log p(token) under the untruncated tempered distribution — the behaviour
 *                       ("old") logprob a PPO/GRPO trainer stores (see {@link Sampler})
 * @param entropy        entropy of the untruncated tempered distribution (what ARPO/AEPO branch on)
 */
public record SampleResult(int[] tokens, float[] logprobSampled, float[] logprob, float[] entropy) {

    /** Number of rows. */
    public int rows() {
        return tokens.length;
    }
}
