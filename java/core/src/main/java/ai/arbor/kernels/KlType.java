package ai.arbor.kernels;

/**
 * Estimator of the KL divergence to a reference policy, added to the loss as β·agg(KL)
 * (docs/algorithms.md §2; Schulman, "Approximating KL divergence", 2020; verl {@code kl_penalty}). With
 * κ = refLogprob − logprob:
 */
public enum KlType {
    /** No KL term (refLogprob is not read). */
    NONE(0),
    /** k1 = −κ = logprob − ref; ∂/∂logprob = 1. */
    K1(1),
    /** k2 = κ²/2; ∂/∂logprob = −κ. */
    K2(2),
    /**
     * k3 ("low_var_kl") = clamp(e^{κc} − κc − 1, −10, 10) with κc = clamp(κ, −20, 20);
     * ∂/∂logprob = 1 − e^{κ} inside both clamps, 0 outside.
     */
    K3(3);

    private final int code;

    KlType(int code) {
        this.code = code;
    }

    /** The ABI's {@code ARBOR_KL_*} value. */
    public int code() {
        return code;
    }
}
