package ai.arbor.kernels;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.bindings.ArborCpu;
import ai.arbor.testing.Gpu;
import ai.arbor.testing.Seeds;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * {@link FusedLinear} against the unfused path — logits = h·Wᵀ materialised (double-precision products
 * rounded to fp32), then {@link PolicyLoss#forwardBackward} (or {@link TokenStats#forward}), then
 * dh = G·W and dW = Gᵀ·h in double — within 1e-5 relative: odd sizes, padded vocabularies, masked rows,
 * tiles smaller and larger than the problem, every aggregation, tied embeddings; and its validation.
 */
class FusedLinearTest {

    /** One random problem. */
    private record Problem(int rows, int dim, int vocab, int vocabLimit, float[] h, float[] w, int[] labels,
                           float[] old, float[] adv, float[] mask, float[] ref, int[] seqIds) {
        static Problem random(Random rnd, int rows, int dim, int vocab, int vocabLimit, double maskedFraction) {
            float[] h = new float[rows * dim], w = new float[vocab * dim];
            double scale = 3.0 / Math.sqrt(dim);
            for (int i = 0; i < h.length; i++) h[i] = (float) rnd.nextGaussian();
            for (int i = 0; i < w.length; i++) w[i] = (float) (rnd.nextGaussian() * scale);
            int[] labels = new int[rows], seq = new int[rows];
            float[] old = new float[rows], adv = new float[rows], mask = new float[rows], ref = new float[rows];
            int seqs = Math.max(1, rows / 5);
            for (int r = 0; r < rows; r++) {
                boolean masked = rnd.nextDouble() < maskedFraction;
                mask[r] = masked ? 0f : 1f;
                labels[r] = masked ? -100 : rnd.nextInt(vocabLimit);
                old[r] = (float) (-Math.log(vocabLimit) + rnd.nextGaussian());
                adv[r] = (float) rnd.nextGaussian();
                ref[r] = (float) (-Math.log(vocabLimit) + rnd.nextGaussian());
                seq[r] = Math.min(seqs - 1, r * seqs / rows);
            }
            return new Problem(rows, dim, vocab, vocabLimit, h, w, labels, old, adv, mask, ref, seq);
        }

        /** logits = h·Wᵀ over all vocab columns (double products, rounded once). */
        float[] logits() {
            float[] z = new float[rows * vocab];
            for (int r = 0; r < rows; r++)
                for (int v = 0; v < vocab; v++) {
                    double s = 0;
                    for (int k = 0; k < dim; k++) s += (double) h[r * dim + k] * w[v * dim + k];
                    z[r * vocab + v] = (float) s;
                }
            return z;
        }
    }

    /**
     * dh = G·W and dW = Gᵀ·h in double ([0], [1]), and the scale of each element's terms, Σ|G||W| and Σ|Gᵀ||h| ([2],
     * [3]): the gradient rows sum to ~0 over the vocabulary (softmax), so an element can be a small difference of
     * large terms, and the fused path's logits (fp32 sgemm, d products) differ from the unfused ones (double products
     * rounded once) by a rounding that moves each term by ~1e-7 of its own size, not of the sum's.
     */
    private static double[][] linearGrads(Problem p, float[] g) {
        double[] dh = new double[p.rows * p.dim], dw = new double[p.vocab * p.dim];
        double[] sh = new double[p.rows * p.dim], sw = new double[p.vocab * p.dim];
        for (int r = 0; r < p.rows; r++)
            for (int v = 0; v < p.vocab; v++) {
                double gv = g[r * p.vocab + v];
                if (gv == 0) continue;
                for (int k = 0; k < p.dim; k++) {
                    double w = p.w[v * p.dim + k], h = p.h[r * p.dim + k];
                    dh[r * p.dim + k] += gv * w;
                    dw[v * p.dim + k] += gv * h;
                    sh[r * p.dim + k] += Math.abs(gv * w);
                    sw[v * p.dim + k] += Math.abs(gv * h);
                }
            }
        return new double[][] {dh, dw, sh, sw};
    }

    /**
     * |ref − got| ≤ rel · max(max |ref|, terms) element by element, {@code terms} the scale of that element's summands
     * ({@link #linearGrads}).
     */
    private static void assertClose(String what, double[] ref, double[] terms, float[] got, double rel) {
        double max = 0;
        for (double v : ref) max = Math.max(max, Math.abs(v));
        for (int i = 0; i < ref.length; i++) {
            double tol = rel * Math.max(max, terms == null ? 0 : terms[i]) + 1e-12;
            if (!(Math.abs(ref[i] - got[i]) <= tol))
                throw new AssertionError(what + "[" + i + "]: " + got[i] + " vs unfused " + ref[i] + " (tol " + tol
                        + ", terms " + terms[i] + ")");
        }
    }

    /** |ref − got| ≤ rel · max |ref|, element by element. */
    private static void assertClose(String what, double[] ref, float[] got, double rel) {
        assertClose(what, ref, null, got, rel);
    }

    private static void assertClose(String what, double ref, double got, double rel) {
        assertClose(what, ref, got, rel, 1e-3);
    }

    /** |ref − got| ≤ rel · max(floor, |ref|): {@code floor} is the scale of the error when {@code ref} is a small difference. */
    private static void assertClose(String what, double ref, double got, double rel, double floor) {
        assertTrue(Math.abs(ref - got) <= rel * Math.max(floor, Math.abs(ref)), what + ": " + got + " vs unfused " + ref);
    }

    private static double[] toDouble(float[] a) {
        double[] d = new double[a.length];
        for (int i = 0; i < a.length; i++) d[i] = a[i];
        return d;
    }

    /**
     * Raises the term scales ug[2], ug[3] to 4x the change in the unfused dh, dW when the unfused path runs on
     * {@code logits}, {@code old}, {@code ref} instead (each element's allowance is 1e-5 of its scale).
     */
    private static void allowChange(PolicyLossConfig cfg, Problem p, double[][] ug, float[] logits, float[] old, float[] ref,
                                    int[] seq) {
        double[][] ug2 = unfusedGrads(cfg, p, logits, old, ref, seq);
        for (int i = 0; i < ug[2].length; i++) ug[2][i] = Math.max(ug[2][i], 4e5 * Math.abs(ug[0][i] - ug2[0][i]));
        for (int i = 0; i < ug[3].length; i++) ug[3][i] = Math.max(ug[3][i], 4e5 * Math.abs(ug[1][i] - ug2[1][i]));
    }

    /** {@link #linearGrads} of the unfused path's logits gradient on these logits, old and ref log-probs. */
    private static double[][] unfusedGrads(PolicyLossConfig cfg, Problem p, float[] logits, float[] old, float[] ref, int[] seq) {
        float[] g = new float[logits.length];
        PolicyLoss.forwardBackward(cfg, logits, p.rows, p.vocab, p.vocabLimit, p.labels, old, p.adv, p.mask, ref, seq, null, g);
        return linearGrads(p, g);
    }

    /**
     * How far dW accumulated onto {@code start} may lie from start + the fresh dW: the two sum the same row blocks'
     * products into fp32 in a different order (start first, or added last), each addition rounded at the scale of the
     * partial sums, |start| + the terms (seed 9755708160531: start -0.28 + dW -18.87 one ulp of 19.15 apart); 2^-20 of
     * that is eight ulps.
     */
    private static double accumulated(float start, double terms) {
        return Math.scalb(Math.abs(start) + terms, -20) + 1e-9;
    }

    /** The fused linear result vs the unfused path for one problem and configuration. */
    private static void compare(String name, PolicyLossConfig cfg, Problem p, FusedLinear.Chunks chunks) {
        int[] seq = cfg.agg().needsSequences() ? p.seqIds : null;
        float[] ref = cfg.klType() == KlType.NONE ? null : p.ref;
        float[] logits = p.logits();
        float[] g = new float[logits.length];
        PolicyLossResult u = PolicyLoss.forwardBackward(cfg, logits, p.rows, p.vocab, p.vocabLimit, p.labels, p.old, p.adv,
                p.mask, ref, seq, null, g);
        double[][] ug = linearGrads(p, g);
        float[] lpU = new float[p.rows], hU = new float[p.rows];
        boolean[] valid = new boolean[p.rows];
        for (int r = 0; r < p.rows; r++) valid[r] = p.mask[r] > 0;
        TokenStats.forward(logits, p.rows, p.vocab, p.vocabLimit, p.labels, (float) cfg.temperature(), valid, lpU, hU, null);
        // Each row's scale L = max(1, |z_max|, |lse|) (z = logits / T, in double): the kernels' log-probs, entropies and
        // their backward's d_j = z_j - lse carry an absolute error up to ~2^-24 L from fp32 roundings at that scale (the
        // products z = x (1/T); lse = m + log S rounded to fp32, which the backward subtracts), and the two paths
        // round differently (their logits differ in the last bits).
        float inv = (float) (1.0 / cfg.temperature());
        double[] scaleL = new double[p.rows], lse = new double[p.rows];
        double[][] prob = new double[p.rows][];
        for (int r = 0; r < p.rows; r++) {
            double m = Double.NEGATIVE_INFINITY, sum = 0;
            for (int v = 0; v < p.vocabLimit; v++) m = Math.max(m, (double) (logits[r * p.vocab + v] * inv));
            double[] pr = prob[r] = new double[p.vocab];
            for (int v = 0; v < p.vocabLimit; v++) sum += pr[v] = Math.exp(logits[r * p.vocab + v] * inv - m);
            for (int v = 0; v < p.vocabLimit; v++) pr[v] /= sum;
            lse[r] = m + Math.log(sum);
            scaleL[r] = Math.max(1, Math.max(Math.abs(m), Math.abs(lse[r])));
        }
        // (1) The unfused path's sensitivity to its logits' fp32 rounding: the fused path's logits come from fp32 sgemm
        // products (d of them, each rounded), which differ from these (double products rounded once) by up to
        // ~d 2^-24 of Σ_k |h_k W_vk|; where the gradient cancels (the entropy term's z - z̄, a dominant token) that
        // moves it by more than 1e-5 of its terms. So the same path again on logits moved by 2^-22 of that scale, signs
        // alternating along the row (from a random start), so that every row's distribution moves (with random signs, a
        // row of two columns moves both ways alike half the time, its distribution not at all), and 4x the change it makes is
        // allowed on top (seed 57468696651675: dh[0] 5.8e-5 of its terms apart, T 1, d 3, V 5).
        float[] moved = logits.clone();
        Random signs = new Random(0x5eed);
        for (int r = 0; r < p.rows; r++) {
            int phase = signs.nextInt(2);
            for (int v = 0; v < p.vocab; v++) {
                double mag = 0;
                for (int k = 0; k < p.dim; k++) mag += Math.abs((double) p.h[r * p.dim + k] * p.w[v * p.dim + k]);
                moved[r * p.vocab + v] += (float) (((v + phase) % 2 == 0 ? 1 : -1) * Math.scalb(mag, -22));
            }
        }
        allowChange(cfg, p, ug, moved, p.old, ref, seq);
        // (2) Its sensitivity to the log-probs' own error (2^-24 L per path): old and ref raised by 2^-23 L (at least an
        // ulp of each), as the log-prob lowered by that; where the upstream coefficient is a small difference of its
        // inputs (k3's β (1 - e^{ref - lp}) with ref - lp ~ -0.0075, the row's ratio clipped) it moves by far more than
        // 1e-5 of itself (seed 9742779017082: dW[0] 2.3e-5 relative apart, T 0.7, d 1, V 2).
        float[] oldUp = p.old.clone(), refUp = ref == null ? null : ref.clone();
        for (int r = 0; r < p.rows; r++) {
            double e = Math.scalb(scaleL[r], -23);
            oldUp[r] = (float) (p.old[r] + Math.max(e, Math.ulp(p.old[r])));
            if (refUp != null) refUp[r] = (float) (ref[r] + Math.max(e, Math.ulp(ref[r])));
        }
        allowChange(cfg, p, ug, logits, oldUp, refUp, seq);
        // (3) The kernels' own rounding in the backward, g_j = p_j (a + b d_j) - [j = y] g_lp / T with a = -(g_lp + g_H H) / T,
        // b = -g_H / T: p_j carries a relative error of ~2^-22 (a row's exps summed in fp32 lanes) and 2^-24 L (d_j's), H and
        // d_j absolute 2^-24 L, so each g_j may move by (max(p_j, [j = y]) |g_lp| + p_j |g_H| (1 + H + |d_j|)) / T times
        // 2^-22 + 2^-24 L per path, which is not 1e-5 of what is left where g_j is a small difference: a nearly certain
        // row's c (p_y - 1) (seed 4931388908756: T 0.7, V 5, p_y 1 - 3.4e-6, dh[0] 1.2 % of its terms apart; seed
        // 9668850481263: T 0.7, V 5, lse 9.4, p_y 0.987, dh[0] 1.7e-5 of its terms apart) or a nearly uniform row's
        // entropy term p_j (log p_j + H) (seed 10769170973560: V 2, p 0.5002 / 0.4998, the ratio clipped, dh[0] 1.6e-4 of
        // its terms apart). g_lp and g_H: the unfused loss's own, from the unfused statistics. Summed over a product's
        // terms, as the error of a sum.
        float[] glp = new float[p.rows], gH = new float[p.rows];
        PolicyLoss.loss(cfg, lpU, hU, p.old, p.adv, p.mask, ref, seq, null, glp, gH);
        double[] allowDw = new double[p.vocab * p.dim];
        for (int r = 0; r < p.rows; r++) {
            if (!valid[r]) continue;
            double per = (Math.scalb(1.0, -21) + Math.scalb(scaleL[r], -22)) * inv;  // two paths
            double[] allowDh = new double[p.dim];
            for (int v = 0; v < p.vocabLimit; v++) {
                double d = (double) (logits[r * p.vocab + v] * inv) - lse[r];
                double pv = prob[r][v], av = per * ((v == p.labels[r] ? Math.max(pv, 1) : pv) * Math.abs(glp[r])
                        + pv * Math.abs(gH[r]) * (1 + Math.abs(hU[r]) + (pv > 0 ? Math.abs(d) : 0)));
                for (int k = 0; k < p.dim; k++) {
                    allowDh[k] += av * Math.abs(p.w[v * p.dim + k]);
                    allowDw[v * p.dim + k] += av * Math.abs(p.h[r * p.dim + k]);
                }
            }
            for (int k = 0; k < p.dim; k++) ug[2][r * p.dim + k] = Math.max(ug[2][r * p.dim + k], allowDh[k] / 1e-5);
        }
        for (int i = 0; i < allowDw.length; i++) ug[3][i] = Math.max(ug[3][i], allowDw[i] / 1e-5);  // 1e-5 of a term is allowed

        float[] dh = new float[p.rows * p.dim], dw = new float[p.vocab * p.dim];
        java.util.Arrays.fill(dw, Float.NaN);  // every element must be written (padding rows: 0)
        float[] lp = new float[p.rows], ent = new float[p.rows];
        PolicyLossResult f = FusedLinear.forwardBackward(cfg, p.h, p.rows, p.dim, p.w, p.vocab, p.vocabLimit, p.labels,
                p.old, p.adv, p.mask, ref, seq, null, dh, dw, false, chunks, lp, ent);
        String at = name + " (T " + p.rows + ", d " + p.dim + ", V " + p.vocab + "/" + p.vocabLimit + ")";
        // the losses are weighted means of O(1) terms that may cancel: compared at that scale, not at their sum's
        assertClose(at + " loss", u.loss(), f.loss(), 1e-5, 0.1);
        assertClose(at + " pgLoss", u.pgLoss(), f.pgLoss(), 1e-5, 0.1);
        // the kernels' entropy carries an absolute error of a few 1e-8 per row (fp32 sums, and H's two terms do not cancel
        // in fp32; before 2b430e7, at T != 1, also the max column's e^δ, δ the rounding of x·(1/T)), and the fused and
        // unfused logits differ in their last bits, so their errors differ: compared at that scale where the entropy is
        // small (seed 4931388908756: H 4.86e-5 off by 6.7e-9 and 1.9e-8 of the double value)
        assertClose(at + " entropyMean", u.entropyMean(), f.entropyMean(), 1e-5, 2e-2);
        // approx KL is a mean of δ = logprob − old: its error is the log-probs' (fp32, ~1e-7 absolute), however small δ
        // is (seed 7022455477395: δ 0.0085, error 1.0e-7)
        assertClose(at + " approxKl", u.approxKl(), f.approxKl(), 1e-5, 0.1);
        assertEquals(u.tokens(), f.tokens(), at + " tokens");
        assertEquals(u.normalizer(), f.normalizer(), at + " normalizer");
        assertEquals(u.clipFracHigh() + u.clipFracLow(), f.clipFracHigh() + f.clipFracLow(), 1.01 / Math.max(1, u.tokens()),
                at + " clip fraction");
        for (int r = 0; r < p.rows; r++) {
            if (!valid[r]) {
                assertEquals(0f, lp[r], at + " masked logprob");
                continue;
            }
            assertEquals(lpU[r], lp[r], 1e-5 * (1 + Math.abs(lpU[r])), at + " logprob[" + r + "]");
            assertEquals(hU[r], ent[r], 1e-5 * (1 + Math.abs(hU[r])), at + " entropy[" + r + "]");
        }
        assertClose(at + " dh", ug[0], ug[2], dh, 1e-5);
        assertClose(at + " dW", ug[1], ug[3], dw, 1e-5);
        for (int r = 0; r < p.rows; r++)
            if (!valid[r]) for (int k = 0; k < p.dim; k++) assertEquals(0f, dh[r * p.dim + k], at + " masked dh row");
        for (int v = p.vocabLimit; v < p.vocab; v++)
            for (int k = 0; k < p.dim; k++) assertEquals(0f, dw[v * p.dim + k], at + " padding dW row");
    }

    @Test
    void equalsUnfusedPathOverRandomShapesAndConfigs() {
        long seed = Seeds.seed("FusedLinearTest.equalsUnfusedPathOverRandomShapesAndConfigs");
        Random rnd = new Random(seed);
        PolicyLossConfig[] cfgs = {
            PolicyLossConfig.defaults(),
            PolicyLossConfig.treeGrpo().toBuilder().temperature(0.7).build(),
            PolicyLossConfig.grpoTcr().toBuilder().entropyCoef(0.01).agg(LossAgg.SEQ_MEAN_TOKEN_MEAN).build(),
            PolicyLossConfig.aepo().toBuilder().agg(LossAgg.SEQ_MEAN_TOKEN_SUM_NORM).klType(KlType.K2).klCoef(0.05).build(),
            PolicyLossConfig.builder().agg(LossAgg.SEQ_MEAN_TOKEN_SUM).aggNormalizer(7).temperature(1.3).build(),
        };
        int[][] shapes = {{1, 1, 2, 2}, {7, 5, 101, 97}, {37, 19, 1001, 1001}, {64, 33, 3000, 2999}, {129, 8, 513, 500}};
        FusedLinear.Chunks[] chunks = {new FusedLinear.Chunks(1, 1), new FusedLinear.Chunks(8, 128),
            new FusedLinear.Chunks(16, 2048), null};
        for (int[] s : shapes)
            for (int c = 0; c < cfgs.length; c++) {
                Problem p = Problem.random(rnd, s[0], s[1], s[2], s[3], 0.25);
                FusedLinear.Chunks ch = chunks[rnd.nextInt(chunks.length)];
                if (ch != null && ch.rows() * ch.vocab() == 1 && (long) s[0] * s[2] > 20000) ch = chunks[1];  // 1x1 tiles: small problems only
                compare("cfg " + c + " chunks " + ch, cfgs[c], p, ch);
            }
    }

    /**
     * Tiles of the whole vocabulary (chunk vocab ≥ the vocabulary): pass 2 reuses pass 1's tile (three products) and
     * runs row block by row block; equal to the unfused path, over several row blocks with masked rows, at every
     * thread count to the bit, and with tied embeddings.
     */
    @Test
    void wholeVocabularyTilesReusePassOnesLogits() {
        long seed = Seeds.seed("FusedLinearTest.wholeVocabularyTilesReusePassOnesLogits");
        Random rnd = new Random(seed);
        PolicyLossConfig[] cfgs = {PolicyLossConfig.defaults(),
            PolicyLossConfig.grpoTcr().toBuilder().entropyCoef(0.01).agg(LossAgg.SEQ_MEAN_TOKEN_MEAN).temperature(0.7).build()};
        for (int[] s : new int[][] {{1, 3, 5, 5}, {45, 11, 777, 770}, {100, 16, 2500, 2499}})
            for (PolicyLossConfig cfg : cfgs)
                for (long chunkRows : new long[] {1, 7, 64}) {
                    Problem p = Problem.random(rnd, s[0], s[1], s[2], s[3], 0.25);
                    compare("whole vocabulary, " + chunkRows + " rows", cfg, p, FusedLinear.Chunks.wholeVocabulary(chunkRows, s[2] + rnd.nextInt(3)));
                }
        Problem p = Problem.random(rnd, 70, 9, 1500, 1490, 0.2);
        FusedLinear.Chunks ch = FusedLinear.Chunks.wholeVocabulary(16, 1500);
        float[] dw = sameBitsAtOneAndTwoThreads(PolicyLossConfig.treeGrpo(), p, ch).dw();
        float[] dwAcc = new float[p.vocab * p.dim], start = new float[p.vocab * p.dim];
        for (int i = 0; i < start.length; i++) start[i] = dwAcc[i] = (float) rnd.nextGaussian();
        FusedLinear.forwardBackward(PolicyLossConfig.treeGrpo(), p.h, p.rows, p.dim, p.w, p.vocab, p.vocabLimit, p.labels,
                p.old, p.adv, p.mask, p.ref, null, null, null, dwAcc, true, ch, null, null);
        double[] terms = unfusedGrads(PolicyLossConfig.treeGrpo(), p, p.logits(), p.old, p.ref, null)[3];  // Σ_r |G_rv h_rk|
        for (int i = 0; i < start.length; i++) {
            if (i / p.dim >= p.vocabLimit) assertEquals(start[i], dwAcc[i], "padding row left as it was");
            else assertEquals((double) start[i] + dw[i], dwAcc[i], accumulated(start[i], terms[i]), "dW[" + i + "] accumulated");
        }
    }

    @Test
    void equalsUnfusedPathWithAepoTopEntropySelection() {
        long seed = Seeds.seed("FusedLinearTest.equalsUnfusedPathWithAepoTopEntropySelection");
        Random rnd = new Random(seed);
        Problem p = Problem.random(rnd, 50, 12, 700, 700, 0.2);
        compare("aepo q = 0.3", PolicyLossConfig.aepo().toBuilder().aepoTopEntropyFraction(0.3).build(), p, new FusedLinear.Chunks(16, 256));
    }

    @Test
    void tiedEmbeddingsAccumulateIntoTheGivenGradient() {
        long seed = Seeds.seed("FusedLinearTest.tiedEmbeddingsAccumulateIntoTheGivenGradient");
        Random rnd = new Random(seed);
        Problem p = Problem.random(rnd, 21, 7, 300, 290, 0.3);
        PolicyLossConfig cfg = PolicyLossConfig.defaults();
        float[] dwFresh = new float[p.vocab * p.dim], dwAcc = new float[p.vocab * p.dim], before = new float[p.vocab * p.dim];
        for (int i = 0; i < before.length; i++) before[i] = dwAcc[i] = (float) rnd.nextGaussian();  // the lookup's gradient
        FusedLinear.Chunks ch = new FusedLinear.Chunks(8, 64);
        FusedLinear.forwardBackward(cfg, p.h, p.rows, p.dim, p.w, p.vocab, p.vocabLimit, p.labels, p.old, p.adv, p.mask,
                null, null, null, null, dwFresh, false, ch, null, null);
        FusedLinear.forwardBackward(cfg, p.h, p.rows, p.dim, p.w, p.vocab, p.vocabLimit, p.labels, p.old, p.adv, p.mask,
                null, null, null, null, dwAcc, true, ch, null, null);
        double[] terms = unfusedGrads(cfg, p, p.logits(), p.old, null, null)[3];  // Σ_r |G_rv h_rk|
        for (int i = 0; i < before.length; i++) {
            if (i / p.dim >= p.vocabLimit) assertEquals(before[i], dwAcc[i], "padding row left as it was");
            else assertEquals((double) before[i] + dwFresh[i], dwAcc[i], accumulated(before[i], terms[i]), "dW[" + i + "]");
        }
    }

    @Test
    void statsEqualTokenStatsOfTheMaterialisedLogits() {
        long seed = Seeds.seed("FusedLinearTest.statsEqualTokenStatsOfTheMaterialisedLogits");
        Random rnd = new Random(seed);
        for (int[] s : new int[][] {{3, 4, 10, 9}, {40, 17, 5000, 4999}}) {
            Problem p = Problem.random(rnd, s[0], s[1], s[2], s[3], 0.3);
            boolean[] valid = new boolean[p.rows];
            for (int r = 0; r < p.rows; r++) valid[r] = p.mask[r] > 0;
            float[] lp = new float[p.rows], h = new float[p.rows], lse = new float[p.rows];
            float[] lpU = new float[p.rows], hU = new float[p.rows], lseU = new float[p.rows];
            TokenStats.forward(p.logits(), p.rows, p.vocab, p.vocabLimit, p.labels, 0.8f, valid, lpU, hU, lseU);
            FusedLinear.stats(p.h, p.rows, p.dim, p.w, p.vocab, p.vocabLimit, p.labels, 0.8f, valid, lp, h, lse,
                    new FusedLinear.Chunks(7, 300));
            for (int r = 0; r < p.rows; r++) {
                assertEquals(lpU[r], lp[r], 1e-5 * (1 + Math.abs(lpU[r])), "logprob[" + r + "]");
                assertEquals(hU[r], h[r], 1e-5 * (1 + Math.abs(hU[r])), "entropy[" + r + "]");
                assertEquals(lseU[r], lse[r], 1e-5 * (1 + Math.abs(lseU[r])), "lse[" + r + "]");
            }
        }
    }

    @Test
    void threadCountsGiveTheSameBitsAndMemoryEqualsArrays() {
        long seed = Seeds.seed("FusedLinearTest.threadCountsGiveTheSameBitsAndMemoryEqualsArrays");
        Random rnd = new Random(seed);
        Problem p = Problem.random(rnd, 70, 9, 4100, 4100, 0.2);
        PolicyLossConfig cfg = PolicyLossConfig.treeGrpo();
        FusedLinear.Chunks ch = new FusedLinear.Chunks(32, 1024);
        Run arrays = sameBitsAtOneAndTwoThreads(cfg, p, ch);
        // the memory form over direct buffers: the same kernel, the same bits
        ByteBuffer h = floats(p.h), w = floats(p.w), old = floats(p.old), adv = floats(p.adv), mask = floats(p.mask),
                ref = floats(p.ref), gh = floats(new float[p.rows * p.dim]), gw = floats(new float[p.vocab * p.dim]);
        ByteBuffer lab = ByteBuffer.allocateDirect(4 * p.rows).order(ByteOrder.nativeOrder());
        for (int i = 0; i < p.rows; i++) lab.putInt(4 * i, p.labels[i]);
        PolicyLossResult m = FusedLinear.forwardBackward(cfg,
                FusedLinear.Linear.of(MemRef.of(h), MemRef.of(w), DType.F32, p.rows, p.dim, p.vocab),
                PolicyLoss.Inputs.of(MemRef.of(lab), DType.I32, MemRef.of(old), MemRef.of(adv), MemRef.of(mask), MemRef.of(ref)),
                MemRef.of(gh), p.dim, MemRef.of(gw), p.dim, false, null, ch, 0L);
        assertEquals(arrays.res(), m);
        float[] ghA = new float[p.rows * p.dim], gwA = new float[p.vocab * p.dim];
        gh.asFloatBuffer().get(ghA);
        gw.asFloatBuffer().get(gwA);
        assertArrayEquals(arrays.dh(), ghA);
        assertArrayEquals(arrays.dw(), gwA);
    }

    /**
     * bf16 or fp16 {@code h} and {@code W} in host memory: the kernel widens them to fp32 a block at a time, so every
     * output is the fp32 call's on the widened values, to the bit (the same products on the same numbers) — with general
     * and whole-vocabulary tiles and the default ones, a strided {@code h}, a padded vocabulary, masked rows; the
     * statistics likewise.
     */
    @org.junit.jupiter.params.ParameterizedTest(name = "{0}")
    @org.junit.jupiter.params.provider.CsvSource({"BF16", "F16"})
    void halfOnTheHostIsTheFp32CallOnTheWidenedValues(DType half) {
        long seed = Seeds.seed("FusedLinearTest.halfOnTheHostIsTheFp32CallOnTheWidenedValues " + half);
        Random rnd = new Random(seed);
        FusedLinear.Chunks[] chunks = {new FusedLinear.Chunks(16, 512), FusedLinear.Chunks.wholeVocabulary(32, 1500), null};
        for (FusedLinear.Chunks ch : chunks) {
            Problem p = Problem.random(rnd, 70, 24, 1500, 1490, 0.2);
            int hs = p.dim + 3;  // h strided
            ByteBuffer h16 = direct(2L * p.rows * hs), w16 = direct(2L * p.vocab * p.dim);
            ByteBuffer h32 = direct(4L * p.rows * hs), w32 = direct(4L * p.vocab * p.dim);
            for (int r = 0; r < p.rows; r++)
                for (int k = 0; k < p.dim; k++) {
                    short b = toHalf(half, p.h[r * p.dim + k]);
                    h16.putShort(2 * (r * hs + k), b);
                    h32.putFloat(4 * (r * hs + k), fromHalf(half, b));
                }
            for (int i = 0; i < p.vocab * p.dim; i++) {
                short b = toHalf(half, p.w[i]);
                w16.putShort(2 * i, b);
                w32.putFloat(4 * i, fromHalf(half, b));
            }
            ByteBuffer lab = direct(4L * p.rows);
            for (int i = 0; i < p.rows; i++) lab.putInt(4 * i, p.labels[i]);
            PolicyLossConfig cfg = PolicyLossConfig.grpoTcr().toBuilder().entropyCoef(0.01).temperature(0.7).build();
            PolicyLoss.Inputs in = PolicyLoss.Inputs.of(MemRef.of(lab), DType.I32, MemRef.of(floats(p.old)),
                    MemRef.of(floats(p.adv)), MemRef.of(floats(p.mask)), MemRef.of(floats(p.ref)));
            float[][] out = new float[2][];
            PolicyLossResult[] res = new PolicyLossResult[2];
            float[][] stats = new float[2][];
            for (int t = 0; t < 2; t++) {
                DType dt = t == 0 ? half : DType.F32;
                FusedLinear.Linear lin = new FusedLinear.Linear(MemRef.of(t == 0 ? h16 : h32), MemRef.of(t == 0 ? w16 : w32),
                        dt, p.rows, p.dim, hs, p.vocab, p.dim, p.vocabLimit);
                ByteBuffer gh = direct(4L * p.rows * p.dim), gw = direct(4L * p.vocab * p.dim);
                ByteBuffer lp = direct(4L * p.rows), ent = direct(4L * p.rows);
                res[t] = FusedLinear.forwardBackward(cfg, lin, in, MemRef.of(gh), p.dim, MemRef.of(gw), p.dim, false,
                        new PolicyLoss.RowOutputs(MemRef.of(lp), MemRef.of(ent), null, null), ch, 0L);
                out[t] = concat(gh, gw, lp, ent);
                ByteBuffer slp = direct(4L * p.rows), sent = direct(4L * p.rows), slse = direct(4L * p.rows);
                ByteBuffer rowMask = direct(p.rows);
                for (int i = 0; i < p.rows; i++) rowMask.put(i, (byte) (p.mask[i] > 0 ? 1 : 0));
                FusedLinear.stats(lin, MemRef.of(lab), DType.I32, 0.7f, MemRef.of(rowMask), MemRef.of(slp), MemRef.of(sent),
                        MemRef.of(slse), ch, 0L);
                stats[t] = concat(slp, sent, slse);
            }
            assertEquals(res[1], res[0], half + " vs fp32 on the widened values, chunks " + ch + ": result");
            assertArrayEquals(out[1], out[0], half + " vs fp32 on the widened values, chunks " + ch + ": dh, dW, logprob, entropy");
            assertArrayEquals(stats[1], stats[0], half + " vs fp32 on the widened values, chunks " + ch + ": statistics");
        }
    }

    /** x rounded to the half type, as its bits (any rounding: these are inputs; bf16 to nearest even, fp16 the library's). */
    private static short toHalf(DType half, float x) {
        return half == DType.BF16 ? (short) CpuPathsTest.bf16Nearest(x) : ArborCpu.arbor_f32_to_f16(x);
    }

    /** The value of half bits, decoded here (not by the library whose widening is under test). */
    private static float fromHalf(DType half, short b) {
        int u = b & 0xffff;
        if (half == DType.BF16) return Float.intBitsToFloat(u << 16);
        int sign = (u & 0x8000) != 0 ? -1 : 1, exp = (u >>> 10) & 0x1f, man = u & 0x3ff;
        if (exp == 0x1f) return man == 0 ? sign * Float.POSITIVE_INFINITY : Float.NaN;
        return (float) (sign * (exp == 0 ? Math.scalb((double) man, -24) : Math.scalb(1024.0 + man, exp - 25)));
    }

    private static ByteBuffer direct(long bytes) {
        return ByteBuffer.allocateDirect((int) Math.max(1, bytes)).order(ByteOrder.nativeOrder());
    }

    private static float[] concat(ByteBuffer... bufs) {
        int n = 0;
        for (ByteBuffer b : bufs) n += b.capacity() / 4;
        float[] all = new float[n];
        int at = 0;
        for (ByteBuffer b : bufs) {
            int m = b.capacity() / 4;
            b.asFloatBuffer().get(all, at, m);
            at += m;
        }
        return all;
    }

    private record Run(PolicyLossResult res, float[] dh, float[] dw) {}

    /** The fused call (arrays) at 1 and at 2 threads: the same result and gradients to the bit; returns the 2-thread run. */
    private static Run sameBitsAtOneAndTwoThreads(PolicyLossConfig cfg, Problem p, FusedLinear.Chunks ch) {
        int before = Kernels.threads();
        float[][] dh = new float[2][p.rows * p.dim], dw = new float[2][p.vocab * p.dim];
        PolicyLossResult[] res = new PolicyLossResult[2];
        try {
            for (int t = 1; t <= 2; t++) {
                Kernels.setThreads(t);
                res[t - 1] = FusedLinear.forwardBackward(cfg, p.h, p.rows, p.dim, p.w, p.vocab, p.vocabLimit, p.labels,
                        p.old, p.adv, p.mask, p.ref, null, null, dh[t - 1], dw[t - 1], false, ch, null, null);
            }
        } finally {
            Kernels.setThreads(before);
        }
        assertEquals(res[0], res[1], "result at 1 and 2 threads");
        assertArrayEquals(dh[0], dh[1], "dh at 1 and 2 threads");
        assertArrayEquals(dw[0], dw[1], "dW at 1 and 2 threads");
        return new Run(res[1], dh[1], dw[1]);
    }

    private static ByteBuffer floats(float[] a) {
        ByteBuffer b = ByteBuffer.allocateDirect(4 * Math.max(1, a.length)).order(ByteOrder.nativeOrder());
        b.asFloatBuffer().put(a);
        return b;
    }

    @Test
    void emptyBatchWritesZeroGradients() {
        float[] w = {1, 2, 3, 4, 5, 6}, dw = {9, 9, 9, 9, 9, 9}, dh = new float[0];
        PolicyLossResult r = FusedLinear.forwardBackward(PolicyLossConfig.defaults(), new float[0], 0, 2, w, 3, new int[0],
                new float[0], new float[0], new float[0], null, null, dh, dw);
        assertEquals(0.0, r.loss());
        assertArrayEquals(new float[6], dw);
    }

    @Test
    void badInputThrowsNamingTheValue() {
        Problem p = Problem.random(new Random(1), 4, 3, 10, 10, 0);
        PolicyLossConfig cfg = PolicyLossConfig.defaults();
        float[] dh = new float[12], dw = new float[30];
        assertMessage("hidden", () -> FusedLinear.forwardBackward(cfg, null, 4, 3, p.w, 10, p.labels, p.old, p.adv, p.mask,
                null, null, dh, dw));
        assertMessage("weight", () -> FusedLinear.forwardBackward(cfg, p.h, 4, 3, new float[29], 10, p.labels, p.old, p.adv,
                p.mask, null, null, dh, dw));
        assertMessage("dim", () -> FusedLinear.forwardBackward(cfg, p.h, 4, 0, p.w, 10, p.labels, p.old, p.adv, p.mask,
                null, null, dh, dw));
        assertMessage("gradHidden", () -> FusedLinear.forwardBackward(cfg, p.h, 4, 3, p.w, 10, p.labels, p.old, p.adv,
                p.mask, null, null, new float[11], dw));
        assertMessage("gradWeight", () -> FusedLinear.forwardBackward(cfg, p.h, 4, 3, p.w, 10, p.labels, p.old, p.adv,
                p.mask, null, null, dh, p.w));
        int[] bad = p.labels.clone();
        bad[2] = 10;
        assertMessage("labels[2] = 10", () -> FusedLinear.forwardBackward(cfg, p.h, 4, 3, p.w, 10, bad, p.old, p.adv,
                p.mask, null, null, dh, dw));
        float[] badMask = p.mask.clone();
        badMask[1] = 2;
        assertMessage("mask[1]", () -> FusedLinear.forwardBackward(cfg, p.h, 4, 3, p.w, 10, p.labels, p.old, p.adv,
                badMask, null, null, dh, dw));
        assertMessage("vocabLimit", () -> FusedLinear.forwardBackward(cfg, p.h, 4, 3, p.w, 10, 11, p.labels, p.old, p.adv,
                p.mask, null, null, null, dh, dw, false, null, null, null));
        assertMessage("refLogprob", () -> FusedLinear.forwardBackward(PolicyLossConfig.treeGrpo(), p.h, 4, 3, p.w, 10,
                p.labels, p.old, p.adv, p.mask, null, null, dh, dw));
        assertMessage("chunk rows", () -> new FusedLinear.Chunks(0, 5));
        ByteBuffer hb = floats(p.h), wb = floats(p.w);
        assertMessage("F32, BF16 or (host) F16, got I32", () -> FusedLinear.Linear.of(MemRef.of(hb), MemRef.of(wb), DType.I32, 4, 3, 10));
        assertMessage("weight needs", () -> FusedLinear.Linear.of(MemRef.of(hb), MemRef.of(hb), DType.F32, 4, 3, 10));
        assertMessage("hiddenStride", () -> new FusedLinear.Linear(MemRef.of(hb), MemRef.of(wb), DType.F32, 4, 3, 2, 10, 3, 10));
        // memory: a gradient overlapping an input
        FusedLinear.Linear lin = FusedLinear.Linear.of(MemRef.of(hb), MemRef.of(wb), DType.F32, 4, 3, 10);
        ByteBuffer lab = ByteBuffer.allocateDirect(16).order(ByteOrder.nativeOrder());
        for (int i = 0; i < p.rows; i++) lab.putInt(4 * i, p.labels[i]);
        PolicyLoss.Inputs in = PolicyLoss.Inputs.of(MemRef.of(lab), DType.I32, MemRef.of(floats(p.old)),
                MemRef.of(floats(p.adv)), MemRef.of(floats(p.mask)), null);
        assertMessage("overlaps", () -> FusedLinear.forwardBackward(cfg, lin, in, MemRef.of(hb), 3, null, 3, false, null,
                null, 0L));
    }

    private static void assertMessage(String fragment, org.junit.jupiter.api.function.Executable call) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, call);
        assertTrue(e.getMessage().contains(fragment), "message '" + e.getMessage() + "' should name " + fragment);
    }

    @Test
    void cudaEqualsCpu() {
        Gpu.assume(Backend.CUDA.isAvailable(), Backend.CUDA::unavailableReason);
        Random rnd = new Random(Seeds.seed("FusedLinearTest.cudaEqualsCpu"));
        Problem p = Problem.random(rnd, 300, 64, 5000, 4990, 0.2);
        PolicyLossConfig cfg = PolicyLossConfig.treeGrpo();
        float[] dh = new float[p.rows * p.dim], dw = new float[p.vocab * p.dim];
        PolicyLossResult c = FusedLinear.forwardBackward(cfg, p.h, p.rows, p.dim, p.w, p.vocab, p.vocabLimit, p.labels,
                p.old, p.adv, p.mask, p.ref, null, null, dh, dw, false, null, null, null);
        try (CudaBuffer h = CudaBuffer.of(p.h, 0); CudaBuffer w = CudaBuffer.of(p.w, 0); CudaBuffer lab = CudaBuffer.of(p.labels, 0);
             CudaBuffer old = CudaBuffer.of(p.old, 0); CudaBuffer adv = CudaBuffer.of(p.adv, 0);
             CudaBuffer mask = CudaBuffer.of(p.mask, 0); CudaBuffer ref = CudaBuffer.of(p.ref, 0);
             CudaBuffer gh = CudaBuffer.allocate(4L * dh.length, 0); CudaBuffer gw = CudaBuffer.allocate(4L * dw.length, 0)) {
            PolicyLossResult g = FusedLinear.forwardBackward(cfg,
                    new FusedLinear.Linear(h.ref(), w.ref(), DType.F32, p.rows, p.dim, p.dim, p.vocab, p.dim, p.vocabLimit),
                    PolicyLoss.Inputs.of(lab.ref(), DType.I32, old.ref(), adv.ref(), mask.ref(), ref.ref()), gh.ref(), p.dim,
                    gw.ref(), p.dim, false, null, null, 0L);
            assertClose("cuda loss", c.loss(), g.loss(), 1e-4);
            float[] ghd = new float[dh.length], gwd = new float[dw.length];
            gh.copyTo(ghd);
            gw.copyTo(gwd);
            assertClose("cuda dh", toDouble(dh), ghd, 1e-4);
            assertClose("cuda dW", toDouble(dw), gwd, 1e-4);
        }
    }
}
