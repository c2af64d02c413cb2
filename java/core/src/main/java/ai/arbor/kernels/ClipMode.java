package ai.arbor.kernels;

/**
 * The clipped surrogate of a policy loss (docs/algorithms.md §2). Per token, with r = e^δ,
 * δ = clamp(logprob − oldLogprob, −20, 20), lo = 1 − ε_low, hi = 1 + ε_high and advantage A.
 */
public enum ClipMode {
    /**
     * PPO clip with separate bounds (Schulman et al. 2017; GRPO, Shao et al. 2024; clip-higher of DAPO,
     * Yu et al. 2025, and GRPO-TCR with ε_high &gt; ε_low): ℓ = max(−A·r, −A·clip(r, lo, hi)).
     * Gradient w.r.t. logprob: −A·r where r is not clipped, 0 where r lies strictly outside [lo, hi]
     * on the side the sign of A makes active.
     */
    PPO(0),
    /**
     * Dual-clip PPO (Ye et al. 2020; Tree-GRPO's default via verl's {@code compute_policy_loss_vanilla}):
     * for A &lt; 0, ℓ = min(ℓ_PPO, −A·c) with c &gt; 1 (default 3); ℓ_PPO for A ≥ 0. Where the cap is
     * active (ℓ_PPO &gt; −A·c) the gradient is 0.
     */
    DUAL_CLIP(1),
    /**
     * AEPO's entropy-balanced stop-gradient clip (Dong et al. 2025, "Agentic Entropy-Balanced Policy
     * Optimization"; code {@code AEPO/verl_aepo_entropy}): the upper clip value becomes
     * (1 + ε_high)·r / sg(r). Its value equals the PPO clip's; the gradient of a token clipped at the
     * top with A &gt; 0 is −A·(1 + ε_high)·∂logprob instead of 0. The lower side is unchanged. The
     * released code applies it to every token (default, {@code aepoTopEntropyFraction = 1}); the paper
     * to the high-entropy tokens (a fraction q &lt; 1, see {@link PolicyLossConfig}).
     */
    AEPO_STOP_GRADIENT(2);

    private final int code;

    ClipMode(int code) {
        this.code = code;
    }

    /** The ABI's {@code ARBOR_CLIP_*} value. */
    public int code() {
        return code;
    }
}
