package ai.arbor.rl;

import ai.arbor.kernels.ClipMode;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * Off-policy correction of a policy-gradient batch (docs/algorithms.md §7; verl's "rollout correction"): the
 * rollout policy π_rollout sampled the tokens (its log-probs are the batch's {@link TokenBatch#behaviour}), the
 * trainer recomputed π_old ({@link TokenBatch#old}), and δ_t = log π_old − log π_rollout measures the mismatch
 * (numerics of another engine, bf16 against fp32, a stale policy version).
 *
 * <ul>
 *   <li><b>Importance sampling</b> ({@link IsLevel}): a weight w that multiplies each token's policy-gradient
 *       term (not the KL or entropy terms) and is never differentiated. Token TIS: w_t = min(e^{clamp(δ_t, ±20)}, C);
 *       sequence TIS: w = min(e^{clamp(Σ_t δ_t, ±20)}, C) for every token of the sequence (verl
 *       {@code compute_rollout_correction_weights}, C = {@code rollout_is_threshold}, default 2).</li>
 *   <li><b>Rejection</b> ({@link RejectLevel}): tokens — or whole sequences, by the product of their ratios
 *       e^{Σδ} or by its geometric mean e^{mean δ} — whose ratio (δ clamped to ±20) lies outside
 *       [lo, hi] get loss weight 0: they leave the loss and its normalizer (verl
 *       {@code compute_rollout_rejection_mask}; lo defaults to 1/hi).</li>
 *   <li><b>Veto</b>: a sequence with any token whose ratio is below {@code veto} is rejected whole (verl
 *       {@code rollout_token_veto_threshold}).</li>
 * </ul>
 *
 * <p>How w reaches the kernel: through the advantage column, A'_t = w_t·A_t. Every surrogate of the policy-loss
 * kernel is positively homogeneous in A for a fixed ratio — PPO's max(−A r, −A clip(r)), the dual clip's −A c, CISPO's
 * −sg(clip(r))·A·logprob, AEPO's top-side gradient −A·(1+ε_high), GSPO's token form — and every clip decision
 * depends on the sign of A only, which w &gt; 0 keeps; so the kernel's loss, gradient and clip counts with A' are
 * those of w·ℓ(r, A) with the KL and entropy terms untouched, on the CPU, CUDA and fused-linear paths alike
 * (tested against a double-precision reference that multiplies the policy-gradient term by w,
 * {@code RolloutCorrectionTest}). GSPO's sequence form averages A over a sequence, which would average token
 * weights: it takes sequence-level IS only ({@link #check}).
 *
 * <p>Bypass mode (verl's {@code bypass_mode}: π_old := π_rollout, no recomputation, the clip ratio is π_θ/π_rollout)
 * is the trainer's {@code --old-logprobs behaviour}; δ is then 0, so this correction needs the recomputed π_old
 * (the trainer recomputes whenever a correction is on).
 *
 * @param is          importance-sampling level, or {@link IsLevel#NONE}
 * @param isThreshold C: the truncation of the IS weight (&gt; 0)
 * @param reject      rejection level, or {@link RejectLevel#NONE}
 * @param rejectLow   the lowest accepted ratio (&gt; 0; NaN = 1 / rejectHigh)
 * @param rejectHigh  the highest accepted ratio (&gt; rejectLow)
 * @param veto        a token ratio below this rejects its sequence (&gt; 0), or 0 = no veto
 */
public record RolloutCorrection(IsLevel is, double isThreshold, RejectLevel reject, double rejectLow, double rejectHigh,
                                double veto) {

    /** verl's SAFETY_BOUND: log-ratios are clamped to ±20 before exponentiation. */
    public static final double SAFETY_BOUND = 20;

    /** Importance-sampling weight levels. */
    public enum IsLevel { NONE, TOKEN, SEQUENCE }

    /** Rejection levels: by the token's ratio, the sequence's product of ratios, or its geometric mean. */
    public enum RejectLevel { NONE, TOKEN, SEQUENCE, GEOMETRIC }

    /** No correction. */
    public static final RolloutCorrection NONE = new RolloutCorrection(IsLevel.NONE, 2, RejectLevel.NONE, Double.NaN, 2, 0);

    public RolloutCorrection {
        if (is == null) throw new IllegalArgumentException("is (the IS level) is required");
        if (reject == null) throw new IllegalArgumentException("reject (the rejection level) is required");
        if (!(isThreshold > 0) || Double.isInfinite(isThreshold))
            throw new IllegalArgumentException("isThreshold must be finite and > 0, got " + isThreshold);
        if (!(rejectHigh > 0) || Double.isInfinite(rejectHigh))
            throw new IllegalArgumentException("rejectHigh must be finite and > 0, got " + rejectHigh);
        if (Double.isNaN(rejectLow)) rejectLow = 1 / rejectHigh;
        if (!(rejectLow > 0) || !(rejectLow < rejectHigh))
            throw new IllegalArgumentException("rejectLow must be in (0, rejectHigh = " + rejectHigh + "), got " + rejectLow);
        if (!(veto >= 0) || Double.isInfinite(veto)) throw new IllegalArgumentException("veto must be finite and >= 0, got " + veto);
    }

    /** Token TIS with truncation {@code c} (verl {@code rollout_is: token}). */
    public static RolloutCorrection tokenIs(double c) {
        return new RolloutCorrection(IsLevel.TOKEN, c, RejectLevel.NONE, Double.NaN, 2, 0);
    }

    /** Sequence TIS with truncation {@code c} (verl {@code rollout_is: sequence}). */
    public static RolloutCorrection sequenceIs(double c) {
        return new RolloutCorrection(IsLevel.SEQUENCE, c, RejectLevel.NONE, Double.NaN, 2, 0);
    }

    /** This correction with rejection at {@code level} outside [lo, hi] (lo NaN = 1/hi). */
    public RolloutCorrection withRejection(RejectLevel level, double lo, double hi) {
        return new RolloutCorrection(is, isThreshold, level, lo, hi, veto);
    }

    /** This correction with a per-token veto below {@code threshold}. */
    public RolloutCorrection withVeto(double threshold) {
        return new RolloutCorrection(is, isThreshold, reject, rejectLow, rejectHigh, threshold);
    }

    /** Whether this correction changes anything (else only its metrics are computed). */
    public boolean active() {
        return is != IsLevel.NONE || reject != RejectLevel.NONE || veto > 0;
    }

    /** Refuses combinations the kernel cannot express exactly (token-level IS with GSPO's sequence form). */
    public void check(ClipMode mode) {
        if (is == IsLevel.TOKEN && mode == ClipMode.GSPO_SEQUENCE)
            throw new IllegalArgumentException("token-level IS weights with " + mode + ": the sequence form averages the advantage "
                    + "over a sequence, so the weights would be averaged too; use sequence-level IS");
    }

    /**
     * Parses the CLI form: {@code none}, or comma-separated {@code is=token|sequence}, {@code is-threshold=C},
     * {@code reject=token|sequence|geometric}, {@code reject-high=H}, {@code reject-low=L}, {@code veto=V}, e.g.
     * {@code is=token,is-threshold=2,reject=geometric,reject-high=1.001,reject-low=0.999}.
     */
    public static RolloutCorrection parse(String spec) {
        if (spec == null || spec.isBlank() || spec.trim().equalsIgnoreCase("none")) return NONE;
        IsLevel is = IsLevel.NONE;
        RejectLevel rj = RejectLevel.NONE;
        double c = 2, lo = Double.NaN, hi = 2, veto = 0;
        for (String part : spec.split(",")) {
            String[] kv = part.trim().split("=", 2);
            if (kv.length != 2) throw new IllegalArgumentException("rollout correction: '" + part.trim() + "' is not key=value (in '" + spec + "')");
            String k = kv[0].trim().toLowerCase(Locale.ROOT), v = kv[1].trim();
            try {
                switch (k) {
                    case "is" -> is = IsLevel.valueOf(v.toUpperCase(Locale.ROOT));
                    case "is-threshold" -> c = Double.parseDouble(v);
                    case "reject" -> rj = RejectLevel.valueOf(v.toUpperCase(Locale.ROOT));
                    case "reject-high" -> hi = Double.parseDouble(v);
                    case "reject-low" -> lo = Double.parseDouble(v);
                    case "veto" -> veto = Double.parseDouble(v);
                    default -> throw new IllegalArgumentException("rollout correction: unknown key '" + k
                            + "' (is, is-threshold, reject, reject-high, reject-low, veto)");
                }
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("rollout correction: " + k + " = '" + v + "' is not a number");
            } catch (IllegalArgumentException e) {
                if (e.getMessage() != null && e.getMessage().startsWith("rollout correction")) throw e;
                throw new IllegalArgumentException("rollout correction: " + k + " = '" + v + "' is not one of "
                        + (k.equals("is") ? "none, token, sequence" : "none, token, sequence, geometric"));
            }
        }
        return new RolloutCorrection(is, c, rj, lo, hi, veto);
    }

    /** The corrected batch and the step's metrics. */
    public record Applied(TokenBatch batch, Map<String, Double> metrics, float[] isWeight) {}

    /**
     * Applies this correction to {@code batch}, which needs behaviour (π_rollout) and old (π_old) log-probs and,
     * when IS weights are on, advantages. Rows with weight 0 are ignored. The metrics (also without a
     * correction): {@code rc_mean_abs_delta} (mean |δ|), {@code rc_kl} (mean log π_rollout − log π_old, the direct
     * estimate of KL(π_rollout‖π_old)), {@code rc_k3_kl} (mean e^δ − δ − 1), {@code rc_chi2_token} (mean
     * e^{2δ} − 1), {@code rc_is_mean} / {@code rc_is_max} / {@code rc_is_min} (of the truncated weights, when IS
     * is on), {@code rc_rejected_frac} (tokens that had weight and lost it to rejection or veto),
     * {@code rc_rejected_seq_frac}, {@code rc_veto_seq_frac}. The mean over tokens weights each row by its loss
     * weight (soft masks as verl's masked means).
     */
    public Applied apply(TokenBatch batch) {
        if (batch.behaviour() == null || batch.old() == null)
            throw new IllegalArgumentException("rollout correction needs behaviour (rollout) and old log-probs");
        if (is != IsLevel.NONE && batch.advantage() == null)
            throw new IllegalArgumentException("rollout correction: IS weights need the batch's advantages");
        int n = batch.rows(), seqs = batch.sequenceCount();
        float[] m = batch.weight(), beh = batch.behaviour(), old = batch.old();
        int[] sid = batch.seqId();
        double[] delta = new double[n], seqSum = new double[seqs], seqMass = new double[seqs];
        boolean[] seqVeto = new boolean[seqs];
        double logVeto = veto > 0 ? Math.log(veto) : Double.NEGATIVE_INFINITY;
        double mass = 0, absD = 0, kl = 0, k3 = 0, chi2 = 0;
        for (int r = 0; r < n; r++) {
            if (!(m[r] > 0)) continue;
            double d = (double) old[r] - beh[r];
            delta[r] = d;
            double ds = clampSafe(d);
            mass += m[r];
            absD += m[r] * Math.abs(d);
            kl += m[r] * -d;
            k3 += m[r] * (Math.exp(d) - d - 1);
            chi2 += m[r] * (Math.exp(2 * ds) - 1);
            seqSum[sid[r]] += m[r] * d;
            seqMass[sid[r]] += m[r];
            if (d < logVeto) seqVeto[sid[r]] = true;
        }
        // IS weights (truncated) and the accepted rows
        float[] w = is == IsLevel.NONE ? null : new float[n];
        float[] weight = m.clone();
        double wSum = 0, wMax = Double.NEGATIVE_INFINITY, wMin = Double.POSITIVE_INFINITY, rejectedMass = 0;
        boolean[] seqRejected = new boolean[seqs];
        for (int r = 0; r < n; r++) {
            if (!(m[r] > 0)) {
                if (w != null) w[r] = 1;
                continue;
            }
            int s = sid[r];
            if (w != null) {
                double logW = is == IsLevel.TOKEN ? delta[r] : seqSum[s];
                double wr = Math.min(Math.exp(clampSafe(logW)), isThreshold);
                w[r] = (float) wr;
                wSum += m[r] * w[r];
                wMax = Math.max(wMax, w[r]);
                wMin = Math.min(wMin, w[r]);
            }
            boolean keep = !seqVeto[s];
            if (reject != RejectLevel.NONE) {
                double logR = switch (reject) {
                    case TOKEN -> delta[r];
                    case SEQUENCE -> seqSum[s];
                    case GEOMETRIC -> seqSum[s] / seqMass[s];
                    case NONE -> 0;
                };
                double ratio = Math.exp(clampSafe(logR));
                keep &= ratio >= rejectLow && ratio <= rejectHigh;
            }
            if (!keep) {
                rejectedMass += m[r];
                weight[r] = 0;
                seqRejected[s] = true;
            }
        }
        int liveSeqs = 0, rejSeqs = 0, vetoSeqs = 0;
        for (int s = 0; s < seqs; s++) {
            if (!(seqMass[s] > 0)) continue;
            liveSeqs++;
            if (seqRejected[s]) rejSeqs++;
            if (seqVeto[s]) vetoSeqs++;
        }
        Map<String, Double> out = new LinkedHashMap<>();
        double inv = mass > 0 ? 1 / mass : 0;
        out.put("rc_mean_abs_delta", absD * inv);
        out.put("rc_kl", kl * inv);
        out.put("rc_k3_kl", k3 * inv);
        out.put("rc_chi2_token", chi2 * inv);
        if (w != null) {
            out.put("rc_is_mean", wSum * inv);
            out.put("rc_is_max", mass > 0 ? wMax : 0);
            out.put("rc_is_min", mass > 0 ? wMin : 0);
        }
        out.put("rc_rejected_frac", rejectedMass * inv);
        out.put("rc_rejected_seq_frac", liveSeqs > 0 ? (double) rejSeqs / liveSeqs : 0);
        out.put("rc_veto_seq_frac", liveSeqs > 0 ? (double) vetoSeqs / liveSeqs : 0);
        TokenBatch b = batch;
        if (w != null) {
            float[] a = batch.advantage().clone();
            for (int r = 0; r < n; r++) a[r] *= w[r];
            b = b.withAdvantages(a);
        }
        if (reject != RejectLevel.NONE || veto > 0) b = b.withWeights(weight);
        return new Applied(b, out, w);
    }

    private static double clampSafe(double d) {
        return Math.max(-SAFETY_BOUND, Math.min(SAFETY_BOUND, d));
    }
}
