package ai.arbor.kernels;

/**
 * How per-token losses become one number (verl {@code agg_loss}; docs/algorithms.md §2). Each mode is a
 * per-token weight w_t (0 where the mask m_t is 0) and the loss is Σ_t w_t·ℓ_t. The normalizer (N, B
 * or F) is computed from the batch unless {@link PolicyLossConfig#aggNormalizer()} gives it (e.g. the
 * global count in data-parallel training).
 */
public enum LossAgg {
    /** w = m / N, N = Σ m: every valid token counts the same (DAPO, GRPO-TCR; verl's default). */
    TOKEN_MEAN(0),
    /** w = m / B, B = sequences with at least one valid token: per-sequence sums, averaged. */
    SEQ_MEAN_TOKEN_SUM(1),
    /** w = m / (B·len_i), len_i = Σ m over the token's sequence: per-sequence means, averaged (GRPO). */
    SEQ_MEAN_TOKEN_MEAN(2),
    /**
     * w = m / F (Dr.GRPO, Liu et al. 2025): F = the most rows of any sequence, padding rows included —
     * the padded response length of verl's [B, L] layout; usually given as the generation budget.
     */
    SEQ_MEAN_TOKEN_SUM_NORM(3);

    private final int code;

    LossAgg(int code) {
        this.code = code;
    }

    /** The ABI's {@code ARBOR_AGG_*} value. */
    public int code() {
        return code;
    }

    /** True for the modes that need a row → sequence map. */
    public boolean needsSequences() {
        return this != TOKEN_MEAN;
    }
}
