package ai.arbor.kernels;

/**
 * The clipped surrogate of a policy loss (docs/algorithms.md §2, §8). Per token, with r = e^δ,
 * δ = clamp(logprob − oldLogprob, −20, 20), lo = 1 − ε_low, hi = 1 + ε_high and advantage A.
 * Dual-clip (Ye et al. 2020; verl's {@code compute_policy_loss_vanilla}, on in every released recipe of
 * docs/algorithms.md §6) is not a mode but {@link PolicyLossConfig#dualClipC()} &gt; 0, combined with
 * {@link #PPO} or {@link #AEPO_STOP_GRADIENT}: for A &lt; 0, ℓ = min(ℓ, −A·c), gradient 0 where the cap
 * is active.
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
     * AEPO's entropy-balanced stop-gradient clip (Dong et al. 2025, "Agentic Entropy-Balanced Policy
     * Optimization"; code {@code AEPO/verl_aepo_entropy}): the upper clip value becomes
     * (1 + ε_high)·r / sg(r). Its value equals the PPO clip's; the gradient of a token clipped at the
     * top with A &gt; 0 is −A·(1 + ε_high)·∂logprob instead of 0. The lower side is unchanged. The
     * released code applies it to every token (default, {@code aepoTopEntropyFraction = 1}); the paper
     * to the high-entropy tokens (a fraction q &lt; 1, see {@link PolicyLossConfig}).
     */
    AEPO_STOP_GRADIENT(2),
    /**
     * CISPO (MiniMax-M1, arXiv 2506.13585; verl {@code compute_policy_loss_cispo}):
     * ℓ = −sg(clip(r, lo, hi))·A·logprob. Every token keeps a gradient, −clip(r)·A, scaled by the
     * detached clipped ratio; "clipped" counts r &gt; hi and r &lt; lo whatever A's sign. verl's example
     * uses ε_low = 10 (no lower bound; here ε_low = 1, bound 0, the same) and ε_high = 0.2
     * ({@link PolicyLossConfig#cispo()}).
     */
    CISPO(3),
    /**
     * GSPO, token form (Zheng et al. 2025, arXiv 2507.18071; verl {@code compute_policy_loss_gspo}): the
     * sequence ratio s_i = exp(mean_t δ_{i,t}) over the valid tokens of sequence i (δ unclamped), the
     * token ratio s_{i,t} = sg(s_i)·π_θ(y_t)/sg(π_θ(y_t)) with log s clamped ≤ 10, and the PPO clip on
     * it, ℓ = max(−A·s, −A·clip(s, lo, hi)). Needs sequence ids: a per-sequence pre-pass
     * ({@link PolicyLoss#gspoAnchor}) turns the old log-probs into anchors sg(lp_t) − mean_i δ, then the
     * per-token kernel runs as for PPO. verl forces seq-mean-token-mean; so does {@link PolicyLossConfig#gspo()}.
     */
    GSPO_TOKEN(4),
    /**
     * GSPO, sequence form (the paper's J_GSPO): ℓ_i = max(−Â_i·s_i, −Â_i·clip(s_i, lo, hi)) per sequence, with
     * the full gradient of s_i. It equals {@link #GSPO_TOKEN} with every token's advantage replaced by its
     * sequence's mask-weighted mean Â_i (the per-token weights of every aggregation are m_t times a
     * per-sequence constant, so the gradients agree exactly); the two differ only when the advantages vary
     * within a sequence (token shaping). Same kernel, the pre-pass also averages A.
     */
    GSPO_SEQUENCE(4);

    private final int code;

    ClipMode(int code) {
        this.code = code;
    }

    /** The ABI's {@code ARBOR_CLIP_*} value. */
    public int code() {
        return code;
    }

    /** True for the GSPO forms (they need sequence ids and the per-sequence pre-pass). */
    public boolean isGspo() {
        return this == GSPO_TOKEN || this == GSPO_SEQUENCE;
    }

    /** True for the surrogates that can carry verl's dual clip (PPO and AEPO; not CISPO or GSPO, as in verl). */
    public boolean allowsDualClip() {
        return this == PPO || this == AEPO_STOP_GRADIENT;
    }
}
