package ai.arbor.kernels;

/**
 * Independent double-precision reference of the policy losses for the tests: docs/algorithms.md §1–§2
 * written as straightforward loops (two-pass softmax, explicit sums, the verl definitions), with no
 * code shared with the kernels. The benchmarks' plain-Java baseline too (through the test jar).
 */
public final class PolicyLossReference {
    private PolicyLossReference() {}

    /** Everything the reference computes for one batch. */
    public static final class Out {
        public double loss, pg, kl, ent, entropyMean, clipHigh, clipLow, dual, approxKl, tokens, normalizer;
        public double[] logprob, entropy, weights, ratio, kappa, gLogprob, gEntropy, gradLogits;
        public boolean[] clippedTop, clamped;
    }

    /**
     * @param logits    [rows, vocab] (values as the kernel reads them)
     * @param sel       AEPO selection values (null = the row entropies)
     * @param threshold AEPO entropy threshold (−∞ = all tokens)
     */
    public static Out compute(PolicyLossConfig c, double[] logits, int rows, int vocab, int vocabLimit, int[] labels,
                       double[] old, double[] adv, double[] mask, double[] ref, int[] seqIds, double[] sel,
                       double threshold) {
        return compute(c, logits, rows, vocab, vocabLimit, labels, old, adv, mask, ref, seqIds, sel, threshold, null);
    }

    /**
     * As above with off-policy importance weights (docs/algorithms.md §7): {@code isWeight[r]} multiplies row r's
     * policy-gradient term — its loss and its gradient — and nothing else (null = 1 everywhere).
     */
    public static Out compute(PolicyLossConfig c, double[] logits, int rows, int vocab, int vocabLimit, int[] labels,
                       double[] old, double[] adv, double[] mask, double[] ref, int[] seqIds, double[] sel,
                       double threshold, double[] isWeight) {
        Out o = new Out();
        double t = (float) c.temperature();  // the kernels (and the native reference) use the fp32 value
        o.logprob = new double[rows];
        o.entropy = new double[rows];
        double[][] p = new double[rows][];
        double[] meanZ = new double[rows];
        for (int r = 0; r < rows; r++) {
            if (!(mask[r] > 0)) continue;
            double max = Double.NEGATIVE_INFINITY;
            for (int j = 0; j < vocabLimit; j++) max = Math.max(max, logits[r * vocab + j] / t);
            double s = 0;
            for (int j = 0; j < vocabLimit; j++) s += Math.exp(logits[r * vocab + j] / t - max);
            double lse = max + Math.log(s);
            p[r] = new double[vocabLimit];
            double pz = 0;
            for (int j = 0; j < vocabLimit; j++) {
                double z = logits[r * vocab + j] / t;
                p[r][j] = Math.exp(z - lse);
                if (p[r][j] > 0) pz += p[r][j] * z;
            }
            meanZ[r] = pz;
            o.logprob[r] = logits[r * vocab + labels[r]] / t - lse;
            o.entropy[r] = lse - pz;
        }

        // weights (verl agg_loss)
        int numSeqs = 0;
        if (seqIds != null) for (int id : seqIds) numSeqs = Math.max(numSeqs, id + 1);
        double[] len = new double[numSeqs], count = new double[numSeqs];
        double n = 0;
        for (int r = 0; r < rows; r++) {
            n += mask[r];
            if (seqIds != null && seqIds[r] >= 0) {
                len[seqIds[r]] += mask[r];
                count[seqIds[r]] += 1;
            }
        }
        double b = 0, f = 0;
        for (int s = 0; s < numSeqs; s++) {
            if (len[s] > 0) b++;
            f = Math.max(f, count[s]);
        }
        double norm = switch (c.agg()) {
            case TOKEN_MEAN -> n;
            case SEQ_MEAN_TOKEN_SUM, SEQ_MEAN_TOKEN_MEAN -> b;
            case SEQ_MEAN_TOKEN_SUM_NORM -> f;
        };
        if (c.aggNormalizer() > 0) norm = c.aggNormalizer();
        o.normalizer = norm;
        o.weights = new double[rows];
        for (int r = 0; r < rows; r++) {
            if (!(mask[r] > 0)) continue;
            o.weights[r] = c.agg() == LossAgg.SEQ_MEAN_TOKEN_MEAN ? mask[r] / (norm * len[seqIds[r]]) : mask[r] / norm;
        }

        // per token
        double lo = 1.0 - (double) (float) c.epsLow(), hi = 1.0 + (double) (float) c.epsHigh(), cc = (float) c.dualClipC();
        double beta = c.klType() == KlType.NONE ? 0 : (float) c.klCoef(), ch = (float) c.entropyCoef();
        o.ratio = new double[rows];
        o.kappa = new double[rows];
        o.gLogprob = new double[rows];
        o.gEntropy = new double[rows];
        o.clippedTop = new boolean[rows];
        o.clamped = new boolean[rows];
        double sm = 0, shi = 0, slo = 0, sdual = 0, snd = 0, shm = 0;
        // GSPO (verl compute_policy_loss_gspo): per sequence, mean δ = Σ m (lp − old) / max(Σ m, 1), unclamped
        boolean gspo = c.clipMode() == ClipMode.GSPO_TOKEN || c.clipMode() == ClipMode.GSPO_SEQUENCE;
        double[] seqD = new double[Math.max(numSeqs, 1)], seqM = new double[Math.max(numSeqs, 1)], seqA = new double[Math.max(numSeqs, 1)];
        double[] seqW = new double[Math.max(numSeqs, 1)];
        if (gspo)
            for (int r = 0; r < rows; r++) {
                if (!(mask[r] > 0)) continue;
                seqD[seqIds[r]] += mask[r] * (o.logprob[r] - old[r]);
                seqM[seqIds[r]] += mask[r];
                seqA[seqIds[r]] += mask[r] * adv[r];
                seqW[seqIds[r]] += o.weights[r];
            }
        for (int r = 0; r < rows; r++) {
            if (!(mask[r] > 0)) continue;
            double m = mask[r], w = o.weights[r], a = adv[r];
            double dRaw, d;
            boolean passes;
            if (gspo) {  // the sequence ratio s_i, log clamped <= 10 (gradient blocked above)
                int i = seqIds[r];
                dRaw = seqD[i] / Math.max(seqM[i], 1);
                d = Math.min(dRaw, 10);
                passes = dRaw <= 10;
                if (c.clipMode() == ClipMode.GSPO_SEQUENCE) a = seqA[i] / seqM[i];  // the sequence's advantage
            } else {
                dRaw = o.logprob[r] - old[r];
                d = Math.max(-20, Math.min(20, dRaw));
                passes = dRaw >= -20 && dRaw <= 20;
            }
            o.clamped[r] = !passes;
            double ratio = Math.exp(d);
            o.ratio[r] = ratio;
            double loss, dLoss;
            boolean top, bottom;
            if (c.clipMode() == ClipMode.CISPO) {  // −sg(clip(r))·A·logprob: every token keeps −clip(r)·A
                double cr = Math.max(lo, Math.min(hi, ratio));
                loss = -cr * a * o.logprob[r];
                dLoss = -cr * a;
                top = ratio > hi;
                bottom = ratio < lo;
            } else {
                double unclipped = -a * ratio, clipped = -a * Math.max(lo, Math.min(hi, ratio));
                loss = Math.max(unclipped, clipped);
                top = a > 0 && ratio > hi;
                bottom = a < 0 && ratio < lo;
                dLoss = top || bottom || !passes ? 0 : -a * ratio;
                if (c.clipMode() == ClipMode.GSPO_SEQUENCE && dLoss != 0) {
                    // the sequence objective W_i·ℓ_i(s_i) differentiated through s_i: ∂s_i/∂lp_t = s_i·m_t/max(len, 1);
                    // divided by w (multiplied back below) so that the token gets W_i·ℓ'·s_i·m_t/max(len, 1)
                    int i = seqIds[r];
                    dLoss = -a * ratio * seqW[i] * m / Math.max(seqM[i], 1) / w;
                }
            }
            o.clippedTop[r] = top;
            if (c.clipMode() == ClipMode.AEPO_STOP_GRADIENT && top) {
                double s = sel != null ? sel[r] : o.entropy[r];
                if (s >= threshold) dLoss = passes ? -a * hi : 0;
            }
            boolean dual = false;
            if (c.dualClipC() > 0 && a < 0 && loss > -a * cc) {
                loss = -a * cc;
                dLoss = 0;
                dual = true;
            }
            if (isWeight != null) {
                loss *= isWeight[r];
                dLoss *= isWeight[r];
            }
            double kl = 0, dKl = 0;
            if (c.klType() != KlType.NONE) {
                double kappa = ref[r] - o.logprob[r];
                o.kappa[r] = kappa;
                switch (c.klType()) {
                    case K1 -> { kl = -kappa; dKl = 1; }
                    case K2 -> { kl = 0.5 * kappa * kappa; dKl = -kappa; }
                    default -> {
                        double kc = Math.max(-20, Math.min(20, kappa));
                        double raw = Math.exp(kc) - kc - 1;
                        kl = Math.max(-10, Math.min(10, raw));
                        dKl = kappa >= -20 && kappa <= 20 && raw >= -10 && raw <= 10 ? 1 - Math.exp(kappa) : 0;
                    }
                }
            }
            o.gLogprob[r] = w * (dLoss + beta * dKl);
            o.gEntropy[r] = -ch * w;
            o.pg += w * loss;
            o.kl += w * kl;
            o.ent += w * o.entropy[r];
            sm += m;
            shi += top ? m : 0;
            slo += bottom ? m : 0;
            sdual += dual ? m : 0;
            snd += -m * d;
            shm += m * o.entropy[r];
        }
        o.tokens = sm;
        o.kl = c.klType() == KlType.NONE ? 0 : o.kl;
        o.loss = o.pg + beta * o.kl - ch * o.ent;
        o.entropyMean = sm > 0 ? shm / sm : 0;
        o.clipHigh = sm > 0 ? shi / sm : 0;
        o.clipLow = sm > 0 ? slo / sm : 0;
        o.dual = sm > 0 ? sdual / sm : 0;
        o.approxKl = sm > 0 ? snd / sm : 0;

        // dL/dlogits by the chain rule: ∂logprob/∂z_j = 1[j = y] − p_j, ∂H/∂z_j = −p_j (z_j − Σ p z)
        o.gradLogits = new double[rows * vocab];
        for (int r = 0; r < rows; r++) {
            if (!(mask[r] > 0)) continue;
            for (int j = 0; j < vocabLimit; j++) {
                double z = logits[r * vocab + j] / t, pj = p[r][j];
                double dz = o.gLogprob[r] * ((j == labels[r] ? 1 : 0) - pj)
                        - o.gEntropy[r] * (pj > 0 ? pj * (z - meanZ[r]) : 0);
                o.gradLogits[r * vocab + j] = dz / t;
            }
        }
        return o;
    }

    /** The loss value alone (for finite differences). */
    static double lossValue(PolicyLossConfig c, double[] logits, int rows, int vocab, int[] labels, double[] old,
                            double[] adv, double[] mask, double[] ref, int[] seqIds) {
        return compute(c, logits, rows, vocab, vocab, labels, old, adv, mask, ref, seqIds, null,
                Double.NEGATIVE_INFINITY).loss;
    }
}
