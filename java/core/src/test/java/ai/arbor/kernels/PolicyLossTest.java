package ai.arbor.kernels;

import ai.arbor.testing.Gpu;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.bindings.ArborCpu;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Policy losses (fused and composable, arrays and memory) against the independent double reference
 * {@link PolicyLossReference}, hand-computed cases, finite differences, and each other.
 *
 * <p>Random cases put every token's log-ratio δ and reference gap κ at a chosen value away from the
 * kinks (the clip bounds, the dual-clip cap, the ±20 clamp, k3's clamp at 10): the kernels' fp32
 * logprob differs from the reference's by ~1e-6, so a token near a kink could legitimately take the
 * other branch. Tolerances: sums |err| ≤ 2e-5·Σ_t w_t·(1 + |A| max(r, 1) + |κ| + e^{min(κ, 3)} + H)
 * (fp32 logprob, ratio and products); gradients per element |err| ≤ 3e-5·(|g_lp| + |g_H| (1 + ln V)
 * + w (|A| max(r, 1) + β (1 + e^{min(|κ|, 3)})))/T, the token-stats backward's error plus the error of
 * the upstream gradient.
 */
class PolicyLossTest {

    @AfterEach
    void restore() {
        Kernels.forceCpuIsa(null);
        Kernels.setThreads(Runtime.getRuntime().availableProcessors());
    }

    // ---------------------------------------------------------------------------------------------
    // Random cases
    // ---------------------------------------------------------------------------------------------

    /** One batch: the kernels' float inputs and their double copies. */
    static final class Case {
        int rows, vocab, vocabLimit;
        float[] logits, old, adv, mask, ref;
        int[] labels, seqIds;
        double[] x, oldD, advD, maskD, refD;
    }

    /**
     * A random batch for {@code cfg}: N(0, 2²) logits, soft and hard masks (masked rows have label −100,
     * sometimes sequence id −1), sequences as runs of 1–8 rows, and per valid token a log-ratio δ
     * drawn from N(0, 0.35) (mostly), ±[1.2, 2.5] (dual-clip region), ±[20.5, 25] (the clamp) or 0,
     * kept 0.01 away from every kink.
     */
    static Case randomCase(Random rnd, PolicyLossConfig cfg, int rows, int vocab, int vocabLimit) {
        return randomCase(rnd, cfg, rows, vocab, vocabLimit, true);
    }

    /** As above; without {@code clampDraws} no δ lands beyond the ±20 clamp (whose e^20-sized losses
     * would drown finite differences in round-off). */
    static Case randomCase(Random rnd, PolicyLossConfig cfg, int rows, int vocab, int vocabLimit, boolean clampDraws) {
        float[] logits = new float[rows * vocab];
        for (int i = 0; i < logits.length; i++) logits[i] = (float) (rnd.nextGaussian() * 2);
        return randomCase(rnd, cfg, rows, vocab, vocabLimit, clampDraws, logits, null);
    }

    /** As above on the given logits; {@code labelOk} (null: any) says which columns of a row may be its label. */
    static Case randomCase(Random rnd, PolicyLossConfig cfg, int rows, int vocab, int vocabLimit, boolean clampDraws,
                           float[] logits, java.util.function.BiPredicate<Integer, Integer> labelOk) {
        Case k = new Case();
        k.rows = rows;
        k.vocab = vocab;
        k.vocabLimit = vocabLimit;
        k.logits = logits;
        k.mask = new float[rows];
        k.labels = new int[rows];
        k.seqIds = new int[rows];
        int seq = 0, left = 1 + rnd.nextInt(8);
        for (int r = 0; r < rows; r++) {
            double u = rnd.nextDouble();
            k.mask[r] = u < 0.75 ? 1f : (u < 0.88 ? 0f : (float) (0.1 + 0.9 * rnd.nextDouble()));
            // GSPO's sequence form equals the token form with sequence advantages when every sequence's mask sum
            // is >= 1 (verl's clamp(min=1) of the length); soft masks are covered by the token form
            if (cfg.clipMode() == ClipMode.GSPO_SEQUENCE && k.mask[r] > 0) k.mask[r] = 1f;
            if (left-- == 0) {
                seq++;
                left = rnd.nextInt(8);
            }
            k.seqIds[r] = k.mask[r] == 0 && rnd.nextInt(3) == 0 ? -1 : seq;
            if (k.mask[r] > 0) {
                int y;
                do y = rnd.nextInt(vocabLimit); while (labelOk != null && !labelOk.test(r, y));
                k.labels[r] = y;
            } else {
                k.labels[r] = -100;
            }
        }
        k.x = TokenStatsTest.toDouble(k.logits);
        double[] lp = logprobs(k.x, rows, vocab, vocabLimit, k.labels, k.mask, cfg.temperature());
        double lo = Math.log(1 - (float) cfg.epsLow()), hi = Math.log(1 + (float) cfg.epsHigh());
        double lc = Math.log((float) cfg.dualClipC());
        k.old = new float[rows];
        k.adv = new float[rows];
        k.ref = new float[rows];
        for (int r = 0; r < rows; r++) {
            if (!(k.mask[r] > 0)) {
                k.old[r] = Float.NaN;  // never read
                k.adv[r] = Float.NaN;
                k.ref[r] = Float.NaN;
                continue;
            }
            double d;
            do {
                double u = rnd.nextDouble();
                d = u < 0.72 ? rnd.nextGaussian() * 0.35
                        : u < 0.87 ? (rnd.nextBoolean() ? 1 : -1) * (1.2 + 1.3 * rnd.nextDouble())
                        : u < 0.95 && clampDraws ? (rnd.nextBoolean() ? 1 : -1) * (20.5 + 4.5 * rnd.nextDouble()) : 0.0;
            } while (near(d, lo) || near(d, hi) || near(d, lc) || near(Math.abs(d), 20));
            k.old[r] = (float) (lp[r] - d);
            k.adv[r] = rnd.nextInt(10) == 0 ? 0f : (float) rnd.nextGaussian();
            double kappa;
            do {
                double u = rnd.nextDouble();
                kappa = u < 0.8 ? rnd.nextGaussian() * 0.5 : u < 0.9 ? 3 + 3 * rnd.nextDouble() : -12 - 3 * rnd.nextDouble();
            } while (Math.abs(kappa - 2.528) < 0.05 || Math.abs(kappa + 11.0) < 0.05);
            k.ref[r] = (float) (lp[r] + kappa);
        }
        k.oldD = TokenStatsTest.toDouble(k.old);
        k.advD = TokenStatsTest.toDouble(k.adv);
        k.maskD = TokenStatsTest.toDouble(k.mask);
        k.refD = TokenStatsTest.toDouble(k.ref);
        return k;
    }

    private static boolean near(double a, double b) {
        return Math.abs(a - b) < 0.01;
    }

    /** Double log-probs of the labels (for placing δ and κ). */
    static double[] logprobs(double[] x, int rows, int vocab, int limit, int[] labels, float[] mask, double t) {
        double[] lp = new double[rows];
        for (int r = 0; r < rows; r++) {
            if (!(mask[r] > 0)) continue;
            double max = Double.NEGATIVE_INFINITY, s = 0;
            for (int j = 0; j < limit; j++) max = Math.max(max, x[r * vocab + j] / t);
            for (int j = 0; j < limit; j++) s += Math.exp(x[r * vocab + j] / t - max);
            lp[r] = x[r * vocab + labels[r]] / t - max - Math.log(s);
        }
        return lp;
    }

    static PolicyLossReference.Out reference(PolicyLossConfig cfg, Case k, double[] sel, double thr) {
        return PolicyLossReference.compute(cfg, k.x, k.rows, k.vocab, k.vocabLimit, k.labels, k.oldD, k.advD, k.maskD,
                k.refD, cfg.agg().needsSequences() ? k.seqIds : null, sel, thr);
    }

    static int[] seqIdsFor(PolicyLossConfig cfg, Case k) {
        return cfg.agg().needsSequences() ? k.seqIds : null;
    }

    static float[] refFor(PolicyLossConfig cfg, Case k) {
        return cfg.klType() == KlType.NONE ? null : k.ref;
    }

    /**
     * The fused gradient against the composable path's: the fused kernel forms p_j = e^{z_j − lse} as the exp its
     * statistics pass kept, e^{z_j − m_c}, times e^{m_c − lse} (its chunk's, from double), the composable backward by
     * a second exp of d_j = fl(z_j − lse) (docs/policy-loss.md). Both are within a few ulp of p_j but for the rounding
     * of d_j (and of z_j − m_c), an absolute error of up to 2^-24 |d| in the exponent: |d| < 104 where p_j ≥ 2^-150,
     * so a relative 2^-24 · 128 twice plus a few ulp, < 2e-5; then each rounded to the gradient's dtype (one ulp of
     * it apart at most, and f16's denormal step absolute). Tolerance: 2e-5 relative, that ulp, and 1e-37 absolute (p
     * near FLT_MIN, 0 on one side of the cut and not on the other). The label columns are left out: the fused kernel
     * forms d_y against lse plus what its fp32 value lost, which the composable backward, given only the fp32 lse,
     * cannot (a confident token's g_y then differs by up to half an ulp of lse relative to its 1 - p_y); each is
     * checked against the double reference instead (assertMatches; TokenStatsTest for the backward).
     */
    static void assertCloseToComposable(float[] fused, float[] composable, DType dt, int[] labels, int vocab, String where) {
        assertEquals(composable.length, fused.length, where + ": length");
        double rounding = dt == DType.F32 ? 0 : dt == DType.BF16 ? 0x1p-7 : 0x1p-10;  // one ulp of the dtype, relative
        double absolute = dt == DType.F16 ? 0x1p-24 : 1e-37;
        for (int i = 0; i < fused.length; i++) {
            if (labels[i / vocab] == i % vocab) continue;
            float a = fused[i], b = composable[i];
            if (Float.floatToIntBits(a) == Float.floatToIntBits(b)) continue;
            double m = Math.max(Math.abs(a), Math.abs(b));
            double tol = (2e-5 + rounding) * m + absolute;
            if (!(Math.abs((double) a - b) <= tol))
                assertEquals(b, a, tol, where + " at " + i + " (" + (Math.abs((double) a - b) / Math.max(m, Double.MIN_VALUE)) + " relative)");
        }
    }

    /** Checks a kernel result and gradient against the reference; returns the worst error / tolerance. */
    static double assertMatches(PolicyLossConfig cfg, Case k, PolicyLossReference.Out ref, PolicyLossResult res,
                                float[] grad, String where) {
        double scale = 0;
        for (int r = 0; r < k.rows; r++) {
            if (!(k.mask[r] > 0)) continue;
            double kap = ref.kappa[r];
            scale += ref.weights[r] * (1 + Math.abs(k.advD[r]) * Math.max(ref.ratio[r], 1) + Math.abs(kap)
                    + Math.exp(Math.min(kap, 3)) + Math.abs(ref.entropy[r]));
        }
        double tol = 2e-5 * scale + 1e-9;
        double worst = 0;
        worst = Math.max(worst, close(ref.loss, res.loss(), tol, where + " loss"));
        worst = Math.max(worst, close(ref.pg, res.pgLoss(), tol, where + " pgLoss"));
        worst = Math.max(worst, close(ref.kl, res.klLoss(), tol, where + " klLoss"));
        worst = Math.max(worst, close(ref.ent, res.entropyLoss(), tol, where + " entropyLoss"));
        worst = Math.max(worst, close(ref.entropyMean, res.entropyMean(), 1e-5 * (1 + ref.entropyMean), where + " entropyMean"));
        worst = Math.max(worst, close(ref.clipHigh, res.clipFracHigh(), 1e-6, where + " clipFracHigh"));
        worst = Math.max(worst, close(ref.clipLow, res.clipFracLow(), 1e-6, where + " clipFracLow"));
        worst = Math.max(worst, close(ref.dual, res.dualClipFrac(), 1e-6, where + " dualClipFrac"));
        worst = Math.max(worst, close(ref.approxKl, res.approxKl(), 1e-5 * (1 + Math.abs(ref.approxKl)), where + " approxKl"));
        worst = Math.max(worst, close(ref.tokens, res.tokens(), 1e-6 * (1 + ref.tokens), where + " tokens"));
        worst = Math.max(worst, close(ref.normalizer, res.normalizer(), 1e-9 * (1 + ref.normalizer), where + " normalizer"));
        double logV = Math.log(k.vocabLimit), t = cfg.temperature();
        double beta = cfg.klType() == KlType.NONE ? 0 : cfg.klCoef();
        for (int r = 0; r < k.rows; r++) {
            double w = ref.weights[r];
            if (!(k.mask[r] > 0)) {  // masked: exactly zero
                for (int j = 0; j < k.vocab; j++) assertEquals(0f, grad[r * k.vocab + j], 0f, where + " masked row " + r);
                continue;
            }
            double g = Math.abs(ref.gLogprob[r]) + Math.abs(ref.gEntropy[r]) * (1 + logV)
                    + w * (Math.abs(k.advD[r]) * Math.max(ref.ratio[r], 1) + beta * (1 + Math.exp(Math.min(Math.abs(ref.kappa[r]), 3))));
            double gt = 3e-5 * g / t + 1e-12;
            for (int j = 0; j < k.vocab; j++) {
                int i = r * k.vocab + j;
                worst = Math.max(worst, close(ref.gradLogits[i], grad[i], gt, where + " grad[" + r + "," + j + "]"));
            }
        }
        return worst;
    }

    static double close(double expected, double actual, double tol, String what) {
        if (Double.isNaN(expected) || Double.isInfinite(expected)) {
            assertEquals(expected, actual, what);
            return 0;
        }
        double err = Math.abs(expected - actual);
        assertTrue(err <= tol, () -> what + ": expected " + expected + " got " + actual + " (|err| " + err + " > tol " + tol + ")");
        return err / tol;
    }

    static Stream<Arguments> modes() {
        List<Arguments> out = new ArrayList<>();
        for (ClipMode c : ClipMode.values())
            for (KlType k : KlType.values())
                for (LossAgg a : LossAgg.values())
                    if (!c.isGspo() || a == LossAgg.SEQ_MEAN_TOKEN_MEAN) out.add(Arguments.of(c, k, a));  // GSPO: verl's agg only
        return out.stream();
    }

    /** A random config of {@code clip}; PPO and AEPO get dual clip c = 3 or 10 half of the time (verl's vanilla loss). */
    static PolicyLossConfig config(Random rnd, ClipMode clip, KlType kl, LossAgg agg) {
        if (clip.isGspo()) agg = LossAgg.SEQ_MEAN_TOKEN_MEAN;
        return PolicyLossConfig.builder().clipMode(clip).klType(kl).agg(agg).epsLow(0.2)
                .dualClipC(clip.allowsDualClip() && rnd.nextBoolean() ? (rnd.nextBoolean() ? 3 : 10) : 0)
                .epsHigh(rnd.nextBoolean() ? 0.2 : 0.28).klCoef(rnd.nextBoolean() ? 0.05 : 0.5)
                .entropyCoef(rnd.nextBoolean() ? 0.0 : 0.01).temperature(rnd.nextBoolean() ? 1.0 : 0.7).build();
    }

    // ---------------------------------------------------------------------------------------------
    // Against the reference, every mode
    // ---------------------------------------------------------------------------------------------

    @ParameterizedTest(name = "{0} {1} {2}")
    @MethodSource("modes")
    void fusedAndComposableMatchTheDoubleReference(ClipMode clip, KlType kl, LossAgg agg) {
        long seed = Logits.seed();
        System.out.println("PolicyLossTest " + clip + " " + kl + " " + agg + " seed=" + seed);
        Random rnd = new Random(seed);
        double worst = 0;
        for (int c = 0; c < 3; c++) {
            PolicyLossConfig cfg = config(rnd, clip, kl, agg);
            int vocab = c == 2 ? 1000 + rnd.nextInt(40) : 1 + rnd.nextInt(300);
            int rows = c == 2 ? 1 + rnd.nextInt(12) : 1 + rnd.nextInt(60);
            Case k = randomCase(rnd, cfg, rows, vocab, vocab);
            String where = cfg + " rows=" + rows + " vocab=" + vocab;
            float[] g = new float[rows * vocab];
            PolicyLossResult res = PolicyLoss.forwardBackward(cfg, k.logits, rows, vocab, k.labels, k.old, k.adv, k.mask,
                    refFor(cfg, k), seqIdsFor(cfg, k), g);
            PolicyLossReference.Out ref = reference(cfg, k, null, Double.NEGATIVE_INFINITY);
            worst = Math.max(worst, assertMatches(cfg, k, ref, res, g, where));
            // The composable path: the same results (the same statistics pass), the gradient within rounding.
            float[] g2 = new float[rows * vocab];
            PolicyLossResult res2 = PolicyLoss.forwardBackwardComposable(cfg, k.logits, rows, vocab, k.labels, k.old,
                    k.adv, k.mask, refFor(cfg, k), seqIdsFor(cfg, k), g2);
            assertEquals(res, res2, where + ": composable vs fused result");
            assertCloseToComposable(g, g2, DType.F32, k.labels, vocab, where + ": composable vs fused gradient");
        }
        System.out.printf("  worst error / tolerance = %.3f%n", worst);
    }

    /**
     * A confident token's label gradient, g_y = g_lp (1 - p_y) / T with 1 - p_y from 1e-6 to 1e-3, against double at
     * logits ~ 20 and ~ 1000: its error does not grow with the logits' size. Formed against the fp32 lse, d_y was off by
     * up to half an ulp of lse (9.5e-7 at 20, 3.1e-5 at 1000: fifty times 1 - p_y); at T != 1 the vector paths' fused
     * x (1/T) - m also left the max column's e^{d} = e^δ, δ up to half an ulp of z, in S. Against lse + what its fp32
     * value lost, with 1 - p_y as -expm1(d_y) and z - m from the rounded product, what is left is the statistics' fp32
     * sum S = 1 + the rest, whose lane holding the max adds the rest's terms to 1 and drops those below half an ulp (on
     * this test's rows up to 6 % of 1 - p_y on the AVX-512 path, 13 % AVX2, 27 % scalar, whose four lanes put a quarter of
     * the terms in the max's; allowed: half). Every CPU path, T 1 and 0.7, one chunk and several (the kept-exps
     * gradient's s_c too). The reference takes the kernels' z, the rounded products x (1/T).
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("ai.arbor.kernels.Kernels#cpuIsas")
    void aConfidentTokensLabelGradientKeepsItsRelativePrecision(String isa) {
        Kernels.forceCpuIsa(isa);
        Random rnd = new Random(20261208);
        double worst = 0;
        for (int vocab : new int[] {1000, 5000})
            for (double level : new double[] {20, 1000})
                for (float t : new float[] {1f, 0.7f})
                    for (double spread : new double[] {20.7, 16, 13}) {  // 1 - p_y ~ 0.6 e^{-(spread - ln V)}: 1e-6 .. 1e-3
                        float inv = 1f / t;
                        int y = 1 + rnd.nextInt(vocab - 2);
                        float[] x = new float[vocab];
                        x[y] = (float) (level + rnd.nextDouble());
                        for (int j = 0; j < vocab; j++)
                            if (j != y) x[j] = (float) (x[y] - t * (spread + Math.log(vocab / 1000.0) + rnd.nextDouble()));
                        double q = 0;  // Σ_{j != y} p_j / p_y in double, over the rounded products z = x (1/T)
                        for (int j = 0; j < vocab; j++)
                            if (j != y) q += Math.exp((double) (x[j] * inv) - (double) (x[y] * inv));
                        double oneMinusPy = q / (1 + q), lp = -Math.log1p(q);
                        PolicyLossConfig cfg = PolicyLossConfig.builder().temperature(t).build();
                        float[] g = new float[vocab];
                        PolicyLoss.forwardBackward(cfg, x, 1, vocab, new int[] {y}, new float[] {(float) lp},
                                new float[] {1f}, new float[] {1f}, null, null, g);
                        // g_lp = -A r / N = -1 (ratio 1 to ~1e-7): g_y = -(1 - p_y) / T, g_j = p_j / T
                        double ref = -oneMinusPy * inv, err = Math.abs(g[y] - ref) / Math.abs(ref);
                        String where = isa + " V " + vocab + " x_y " + x[y] + " T " + t + " 1 - p_y " + oneMinusPy;
                        assertTrue(err <= 0.5, where + ": g_y " + g[y] + " vs " + ref + " (relative error " + err + ")");
                        int j = y == 0 ? 1 : y - 1;
                        double pj = Math.exp((double) (x[j] * inv) - (double) (x[y] * inv)) / (1 + q);
                        // (p_j = e_j / S: S's dropped terms, up to half of 1 - p_y as above, are relative to S ~ 1)
                        assertEquals(pj * inv, g[j], (1e-5 + 0.5 * oneMinusPy) * pj * inv, where + ": g_" + j);
                        worst = Math.max(worst, err);
                    }
        System.out.printf("  %s: worst relative error of a confident label's 1 - p_y %.3f%n", isa, worst);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("ai.arbor.kernels.Kernels#cpuIsas")
    void everyCpuIsaMatchesTheReferenceToo(String isa) {
        Kernels.forceCpuIsa(isa);
        long seed = Logits.seed();
        System.out.println("everyCpuIsaMatchesTheReferenceToo " + isa + " seed=" + seed);
        Random rnd = new Random(seed);
        for (ClipMode clip : ClipMode.values()) {
            PolicyLossConfig cfg = config(rnd, clip, KlType.K3, LossAgg.SEQ_MEAN_TOKEN_MEAN);
            Case k = randomCase(rnd, cfg, 37, 517, 517);
            float[] g = new float[k.rows * k.vocab];
            PolicyLossResult res = PolicyLoss.forwardBackward(cfg, k.logits, k.rows, k.vocab, k.labels, k.old, k.adv,
                    k.mask, k.ref, k.seqIds, g);
            assertMatches(cfg, k, reference(cfg, k, null, Double.NEGATIVE_INFINITY), res, g, isa + " " + clip);
        }
    }

    @Test
    void nativeDoubleReferenceAgreesWithTheTestReference() {
        // arbor_ref_policy_loss is the CUDA checks' ground truth; it must agree with this independent one.
        long seed = Logits.seed();
        System.out.println("nativeDoubleReferenceAgreesWithTheTestReference seed=" + seed);
        Random rnd = new Random(seed);
        for (ClipMode clip : ClipMode.values())
            for (LossAgg agg : LossAgg.values()) {
                if (clip.isGspo() && agg != LossAgg.SEQ_MEAN_TOKEN_MEAN) continue;  // GSPO: verl's aggregation only
                KlType kl = KlType.values()[rnd.nextInt(4)];
                PolicyLossConfig cfg = config(rnd, clip, kl, agg);
                int vocab = 1 + rnd.nextInt(80);
                Case k = randomCase(rnd, cfg, 1 + rnd.nextInt(30), vocab, vocab);
                PolicyLossReference.Out ref = reference(cfg, k, null, Double.NEGATIVE_INFINITY);
                double[] grad = new double[k.rows * k.vocab], sums = new double[9], counts = new double[4];
                int[] ids = seqIdsFor(cfg, k);
                int ns = 0;
                if (ids != null) for (int id : ids) ns = Math.max(ns, id + 1);
                double[] oldIn = k.oldD, advIn = k.advD;
                if (clip.isGspo()) {  // the native reference takes GSPO's anchors, as the kernels do: in double here
                    oldIn = new double[k.rows];
                    advIn = k.advD.clone();
                    double[] sd = new double[ns], sm = new double[ns], sa = new double[ns];
                    for (int r = 0; r < k.rows; r++)
                        if (k.mask[r] > 0) {
                            sd[ids[r]] += k.maskD[r] * (ref.logprob[r] - k.oldD[r]);
                            sm[ids[r]] += k.maskD[r];
                            sa[ids[r]] += k.maskD[r] * k.advD[r];
                        }
                    for (int r = 0; r < k.rows; r++)
                        if (k.mask[r] > 0) {
                            oldIn[r] = ref.logprob[r] - sd[ids[r]] / Math.max(sm[ids[r]], 1);
                            if (clip == ClipMode.GSPO_SEQUENCE) advIn[r] = sa[ids[r]] / sm[ids[r]];
                        }
                }
                try (ArborCpu.PolicyLossParams p = cfg.params(Float.NEGATIVE_INFINITY)) {
                    ArborCpu.arbor_ref_policy_loss(p, agg.code(), 0, k.x, k.rows, k.vocab, k.vocab, k.vocab,
                            Logits.toLong(k.labels), oldIn, advIn, k.maskD, kl == KlType.NONE ? null : k.refD, ids, ns,
                            null, grad, sums, counts);
                }
                String w = "native ref " + cfg;
                PolicyLossResult res = PolicyLossResult.fromSums(cfg, sums, counts[3], Double.NEGATIVE_INFINITY);
                // 1e-9: k3's e^κ − κ − 1 cancels for small κ, so one ulp of exp (Java vs C) shows
                assertEquals(ref.loss, res.loss(), 1e-9 * (1 + Math.abs(ref.loss)), w);
                assertEquals(ref.clipHigh, res.clipFracHigh(), 1e-12, w);
                assertEquals(ref.dual, res.dualClipFrac(), 1e-12, w);
                assertEquals(ref.approxKl, res.approxKl(), 1e-12 * (1 + Math.abs(ref.approxKl)), w);
                assertEquals(ref.normalizer, counts[3], 1e-12, w);
                for (int i = 0; i < grad.length; i++)
                    assertEquals(ref.gradLogits[i], grad[i], 1e-9 * (1 + Math.abs(ref.gradLogits[i])), w + " grad " + i);
            }
    }

    // ---------------------------------------------------------------------------------------------
    // Hand-computed cases
    // ---------------------------------------------------------------------------------------------

    /** One token per row through the O(T) loss with logprob given directly; mask 1; token-mean. */
    private static PolicyLossResult tokens(PolicyLossConfig cfg, float[] lp, float[] old, float[] adv, float[] ref,
                                           float[] glp) {
        float[] mask = new float[lp.length];
        java.util.Arrays.fill(mask, 1f);
        return PolicyLoss.loss(cfg, lp, null, old, adv, mask, ref, null, null, glp, null);
    }

    @Test
    void dualClipCombinesWithAepoAndCisoGspoByHand() {
        float lp = -1.5f;
        float d4 = (float) Math.log(4), d2 = (float) Math.log(2);
        float[] g = new float[2];
        // AEPO + dual clip c = 3, ε 0.2: token 0 has A = +1, r = 2 (top-clipped: ℓ = −1.2, stop-gradient keeps
        // g = −A·1.2); token 1 has A = −2, r = 4 (PPO ℓ = 8 capped at −A·c = 6, g = 0). Token-mean over 2.
        PolicyLossConfig aepoDual = PolicyLossConfig.builder().clipMode(ClipMode.AEPO_STOP_GRADIENT).dualClipC(3).build();
        PolicyLossResult res = tokens(aepoDual, new float[] {lp, lp}, new float[] {lp - d2, lp - d4}, new float[] {1f, -2f}, null, g);
        assertEquals((-1.2 + 6.0) / 2, res.loss(), 1e-5);
        assertEquals(-1.2 / 2, g[0], 1e-6);
        assertEquals(0f, g[1], 0f);
        assertEquals(0.5, res.dualClipFrac());
        assertEquals(0.5, res.clipFracHigh());
        // without dual clip the same AEPO loss leaves token 1 unclipped: ℓ = 8, g = −A·r = 8
        res = tokens(PolicyLossConfig.aepo().toBuilder().dualClipC(0).build(), new float[] {lp, lp},
                new float[] {lp - d2, lp - d4}, new float[] {1f, -2f}, null, g);
        assertEquals((-1.2 + 8.0) / 2, res.loss(), 1e-5);
        assertEquals(8.0 / 2, g[1], 1e-5);
        assertEquals(0.0, res.dualClipFrac());

        // CISPO ε 0.2 / 0.2: ℓ = −sg(clip(r))·A·lp. r = 2 → clip 1.2, A = 1: ℓ = 1.2·1.5 = 1.8, g = −1.2;
        // r = 0.5 → clip 0.8, A = −1: ℓ = −0.8·1.5 = −1.2, g = +0.8 (no zero gradient where clipped).
        PolicyLossConfig cispo = PolicyLossConfig.builder().clipMode(ClipMode.CISPO).eps(0.2).build();
        float dh = (float) Math.log(0.5);
        res = tokens(cispo, new float[] {lp, lp}, new float[] {lp - d2, lp - dh}, new float[] {1f, -1f}, null, g);
        assertEquals((1.8 - 1.2) / 2, res.loss(), 1e-5);
        assertEquals(-1.2 / 2, g[0], 1e-6);
        assertEquals(0.8 / 2, g[1], 1e-6);
        assertEquals(0.5, res.clipFracHigh());
        assertEquals(0.5, res.clipFracLow());
        // verl's example bounds (ε_low 1: no lower clip): r = 0.5 keeps its ratio, g = +0.5
        res = tokens(PolicyLossConfig.cispo(), new float[] {lp}, new float[] {lp - dh}, new float[] {-1f}, null, g = new float[1]);
        assertEquals(0.5, g[0], 1e-6);

        // GSPO, one sequence of two tokens with δ = ln 4 and 0: s = exp(mean δ) = 2; ε 0.2 / 0.2.
        // A = −1 on both: unclipped (A < 0, s > lo): ℓ = 2 each; token form g_t = w_t·(−A·s) = ½·2 = 1 each
        // (seq-mean-token-mean, one sequence: w = ½). Per-token A (+1, −1): token 0 is clipped at the top (ℓ = −1.2,
        // g 0), token 1 keeps ℓ = 2, g = 1; the sequence form uses Ā = 0: ℓ = 0, g = 0.
        PolicyLossConfig gspo = PolicyLossConfig.gspo().toBuilder().eps(0.2).build();
        float[] lps = {lp, lp}, olds = {lp - d4, lp}, m = {1f, 1f};
        int[] ids = {0, 0};
        float[] gl = new float[2];
        res = PolicyLoss.loss(gspo, lps, null, olds, new float[] {-1f, -1f}, m, null, ids, null, gl, null);
        assertEquals(2.0, res.loss(), 1e-5);
        assertEquals(1.0, gl[0], 1e-5);
        assertEquals(1.0, gl[1], 1e-5);
        res = PolicyLoss.loss(gspo, lps, null, olds, new float[] {1f, -1f}, m, null, ids, null, gl, null);
        assertEquals((-1.2 + 2.0) / 2, res.loss(), 1e-5);
        assertEquals(0f, gl[0], 0f);
        assertEquals(1.0, gl[1], 1e-5);
        PolicyLossConfig gseq = gspo.toBuilder().clipMode(ClipMode.GSPO_SEQUENCE).build();
        res = PolicyLoss.loss(gseq, lps, null, olds, new float[] {1f, -1f}, m, null, ids, null, gl, null);
        assertEquals(0.0, res.loss(), 1e-6);
        assertEquals(0f, gl[0], 1e-7f);
        // the log-ratio is clamped at 10 (verl): mean δ = 12 gives ℓ = −A·e^10 for A < 0 and no gradient
        res = PolicyLoss.loss(gspo, new float[] {lp}, null, new float[] {lp - 12f}, new float[] {-1f}, new float[] {1f},
                null, new int[] {0}, null, gl = new float[1], null);
        assertEquals(Math.exp(10), res.loss(), Math.exp(10) * 1e-6);
        assertEquals(0f, gl[0], 0f);
    }

    @Test
    void clipBoundariesByHand() {
        PolicyLossConfig ppo = PolicyLossConfig.builder().eps(0.2).build();
        float lp = -1.5f;
        // r exactly 1 = 1 + ε_high with ε_high = 0, A > 0: on the bound, not clipped (clamp passes the
        // gradient at its bounds): ℓ = −A, ∂ℓ/∂lp = −A·r = −A.
        PolicyLossConfig zeroHigh = PolicyLossConfig.builder().epsLow(0.2).epsHigh(0).build();
        float[] g = new float[1];
        PolicyLossResult res = tokens(zeroHigh, new float[] {lp}, new float[] {lp}, new float[] {2f}, null, g);
        assertEquals(-2.0, res.loss(), 0.0);
        assertEquals(-2f, g[0], 0f);
        assertEquals(0.0, res.clipFracHigh());
        // r exactly 1 = 1 − ε_low with ε_low = 0, A < 0: same, on the lower bound.
        PolicyLossConfig zeroLow = PolicyLossConfig.builder().epsLow(0).epsHigh(0.2).build();
        res = tokens(zeroLow, new float[] {lp}, new float[] {lp}, new float[] {-3f}, null, g);
        assertEquals(3.0, res.loss(), 0.0);
        assertEquals(3f, g[0], 0f);
        assertEquals(0.0, res.clipFracLow());
        // A = 0: no loss, no gradient, never clipped, even far outside the bounds.
        res = tokens(ppo, new float[] {lp}, new float[] {lp - 1.5f}, new float[] {0f}, null, g);
        assertEquals(0.0, res.loss(), 0.0);
        assertEquals(0f, Math.abs(g[0]), 0f);
        assertEquals(0.0, res.clipFracHigh() + res.clipFracLow());
        // r = 1.25 > 1.2 with A = 1: clipped at the top, ℓ = −1.2, no gradient.
        float d = (float) Math.log(1.25);
        res = tokens(ppo, new float[] {lp}, new float[] {lp - d}, new float[] {1f}, null, g);
        assertEquals(-1.2, res.loss(), 1e-6);
        assertEquals(0f, g[0], 0f);
        assertEquals(1.0, res.clipFracHigh());
        // r = 0.5 < 0.8 with A = −1: clipped at the bottom, ℓ = 0.8; with A = +1 unclipped, ℓ = −0.5, g = −0.5.
        float dl = (float) Math.log(0.5);
        res = tokens(ppo, new float[] {lp, lp}, new float[] {lp - dl, lp - dl}, new float[] {-1f, 1f}, null,
                g = new float[2]);
        assertEquals((0.8 - 0.5) / 2, res.loss(), 1e-6);
        assertEquals(0f, g[0], 0f);
        assertEquals(-0.5 / 2, g[1], 1e-6);
        assertEquals(0.5, res.clipFracLow());
        // A < 0 with r = 4 > c = 3: PPO leaves it unclipped (ℓ = 2·4 = 8, g = −A·r = 8); dual-clip caps
        // it at −A·c = 6 with no gradient.
        float d4 = (float) Math.log(4);
        res = tokens(ppo, new float[] {lp}, new float[] {lp - d4}, new float[] {-2f}, null, g = new float[1]);
        assertEquals(8.0, res.loss(), 1e-5);
        assertEquals(8.0, g[0], 1e-5);
        PolicyLossConfig dual = PolicyLossConfig.builder().dualClipC(3).build();
        res = tokens(dual, new float[] {lp}, new float[] {lp - d4}, new float[] {-2f}, null, g);
        assertEquals(6.0, res.loss(), 1e-6);
        assertEquals(0f, g[0], 0f);
        assertEquals(1.0, res.dualClipFrac());
        // dual-clip with 1.2 < r = 2 < c and A < 0: the ordinary unclipped branch, ℓ = 2, g = 2.
        float d2 = (float) Math.log(2);
        res = tokens(dual, new float[] {lp}, new float[] {lp - d2}, new float[] {-1f}, null, g);
        assertEquals(2.0, res.loss(), 1e-6);
        assertEquals(2.0, g[0], 1e-6);
        assertEquals(0.0, res.dualClipFrac());
        // δ = 25 is clamped to 20: r = e^20 and the clamp blocks the gradient.
        res = tokens(ppo, new float[] {lp}, new float[] {lp - 25f}, new float[] {-1f}, null, g);
        assertEquals(Math.exp(20), res.loss(), Math.exp(20) * 1e-6);
        assertEquals(0f, g[0], 0f);
        assertEquals(-20.0, res.approxKl(), 0.0);
        // AEPO: same values; the top-clipped A > 0 token has gradient −A(1 + ε_high) instead of 0.
        PolicyLossConfig aepo = PolicyLossConfig.aepo();
        res = tokens(aepo, new float[] {lp, lp}, new float[] {lp - d, lp - d}, new float[] {1f, -1f}, null,
                g = new float[2]);
        assertEquals((-1.2 + 1.25) / 2, res.loss(), 1e-6);
        assertEquals(-1.2 / 2, g[0], 1e-6);
        assertEquals(1.25 / 2, g[1], 1e-6);  // A < 0 above the top: unclipped, unchanged
    }

    @Test
    void klEstimatorsByHand() {
        float lp = -1f;
        float[] g = new float[1];
        float[] adv = {0f};  // no policy-gradient term
        for (double kappa : new double[] {0.5, -0.7}) {
            float ref = (float) (lp + kappa);
            double k = (double) ref - lp;
            PolicyLossConfig c1 = PolicyLossConfig.builder().klType(KlType.K1).klCoef(1).build();
            PolicyLossResult res = tokens(c1, new float[] {lp}, new float[] {lp}, adv, new float[] {ref}, g);
            assertEquals(-k, res.klLoss(), 1e-6);
            assertEquals(1f, g[0], 1e-6f);
            PolicyLossConfig c2 = PolicyLossConfig.builder().klType(KlType.K2).klCoef(1).build();
            res = tokens(c2, new float[] {lp}, new float[] {lp}, adv, new float[] {ref}, g);
            assertEquals(0.5 * k * k, res.klLoss(), 1e-6);
            assertEquals(-k, g[0], 1e-6);
            PolicyLossConfig c3 = PolicyLossConfig.builder().klType(KlType.K3).klCoef(0.5).build();
            res = tokens(c3, new float[] {lp}, new float[] {lp}, adv, new float[] {ref}, g);
            assertEquals(Math.exp(k) - k - 1, res.klLoss(), 1e-6);
            assertEquals(0.5 * (Math.exp(k) - k - 1), res.loss(), 1e-6);
            assertEquals(0.5 * (1 - Math.exp(k)), g[0], 1e-6);
        }
        // k3 clamps: κ = 5 gives e^5 − 6 > 10 → 10 and no gradient; κ = 25 is clamped to 20 first.
        PolicyLossConfig c3 = PolicyLossConfig.builder().klType(KlType.K3).klCoef(1).build();
        PolicyLossResult res = tokens(c3, new float[] {lp, lp}, new float[] {lp, lp}, new float[] {0f, 0f},
                new float[] {lp + 5, lp + 25}, g = new float[2]);
        assertEquals(10.0, res.klLoss(), 1e-6);  // mean of 10 and 10
        assertEquals(0f, g[0], 0f);
        assertEquals(0f, g[1], 0f);
    }

    @Test
    void aggregationWeightsByHand() {
        // 5 tokens, sequences {0,0,0,1,1}, mask {1,1,0,1,0.5}; A = −1 and r = 1, so ℓ_t = 1 and
        // ∂loss/∂lp_t = w_t: N = 3.5, B = 2, len = (2, 1.5), F = 3 rows.
        float[] lp = {-1f, -2f, -3f, -1.5f, -0.5f};
        float[] adv = {-1f, -1f, -1f, -1f, -1f};
        float[] mask = {1f, 1f, 0f, 1f, 0.5f};
        int[] ids = {0, 0, 0, 1, 1};
        double[][] expected = {
            {1 / 3.5, 1 / 3.5, 0, 1 / 3.5, 0.5 / 3.5},   // token-mean
            {0.5, 0.5, 0, 0.5, 0.25},                     // seq-mean-token-sum
            {0.25, 0.25, 0, 1 / 3.0, 1 / 6.0},            // seq-mean-token-mean: 1/(B·len_i)
            {1 / 3.0, 1 / 3.0, 0, 1 / 3.0, 0.5 / 3.0},    // seq-mean-token-sum-norm: m/F
        };
        double[] norms = {3.5, 2, 2, 3};
        for (LossAgg agg : LossAgg.values()) {
            PolicyLossConfig cfg = PolicyLossConfig.builder().agg(agg).build();
            float[] g = new float[5];
            PolicyLossResult res = PolicyLoss.loss(cfg, lp, null, lp, adv, mask, null, ids, null, g, null);
            double sum = 0;
            for (int r = 0; r < 5; r++) {
                assertEquals(expected[agg.ordinal()][r], g[r], 1e-7, agg + " weight of token " + r);
                sum += expected[agg.ordinal()][r];
            }
            assertEquals(sum, res.loss(), 1e-6, agg + " loss");
            assertEquals(norms[agg.ordinal()], res.normalizer(), 0.0, agg + " normalizer");
            assertEquals(3.5, res.tokens(), 0.0);
            // a global normalizer replaces the batch's (data-parallel training)
            PolicyLossResult global = PolicyLoss.loss(cfg.withAggNormalizer(7), lp, null, lp, adv, mask, null, ids,
                    null, g, null);
            assertEquals(7.0, global.normalizer(), 0.0);
            double ratio = agg == LossAgg.SEQ_MEAN_TOKEN_MEAN ? 2 / 7.0 : norms[agg.ordinal()] / 7.0;
            assertEquals(res.loss() * ratio, global.loss(), 1e-6, agg + " with normalizer 7");
        }
    }

    @Test
    void readmeExampleRunsAsWritten() {
        // The README's "Policy loss" example, verbatim, checked by hand: row 0 has lse = ln(1 + e + e²),
        // logprob = 2 − lse, r = e^{logprob + 0.5}; row 1 has logprob = 1 − (1 + ln(1 + e^-1 + e^-2)),
        // r = e^{logprob + 0.3}; neither is clipped (0.8 < r < 1.28), so loss = (−r0 + r1)/2.
        int rows = 2, vocab = 3;
        float[] logits = {0f, 1f, 2f, 1f, 0f, -1f};   // [rows, vocab]
        int[] labels = {2, 0};                        // the sampled tokens
        float[] oldLogprob = {-0.5f, -0.3f};          // log-probs under the rollout policy
        float[] advantages = {1f, -1f};
        float[] mask = {1f, 1f};                      // 0 = prompt or tool output
        float[] grad = new float[rows * vocab];
        PolicyLossResult r = PolicyLoss.forwardBackward(PolicyLossConfig.grpoTcr(), logits, rows, vocab, labels,
                oldLogprob, advantages, mask, null, null, grad);
        String printed = String.format("loss %.4f, clipped %.2f, approx KL %.4f",
                r.loss(), r.clipFracHigh() + r.clipFracLow(), r.approxKl());
        System.out.println(printed);
        double lp0 = 2 - Math.log(1 + Math.E + Math.exp(2)), lp1 = -Math.log(1 + Math.exp(-1) + Math.exp(-2));
        double r0 = Math.exp(lp0 + 0.5), r1 = Math.exp(lp1 + 0.3);
        assertEquals((-r0 + r1) / 2, r.loss(), 1e-6);
        assertEquals(-((lp0 + 0.5) + (lp1 + 0.3)) / 2, r.approxKl(), 1e-6);
        assertEquals(String.format("loss %.4f, clipped %.2f, approx KL %.4f", (-r0 + r1) / 2, 0.0,
                -((lp0 + 0.5) + (lp1 + 0.3)) / 2), printed);
        // dL/dlogits of row 0: g = −A r w = −r0/2 times (1[j = 2] − p_j)
        double[] p0 = {1 / (1 + Math.E + Math.exp(2)), Math.E / (1 + Math.E + Math.exp(2)), Math.exp(2) / (1 + Math.E + Math.exp(2))};
        for (int j = 0; j < 3; j++) assertEquals(-r0 / 2 * ((j == 2 ? 1 : 0) - p0[j]), grad[j], 1e-6);
    }

    // ---------------------------------------------------------------------------------------------
    // Gradients
    // ---------------------------------------------------------------------------------------------

    @Test
    void gradientsMatchCentralFiniteDifferences() {
        // Through the whole chain logits → logprob/entropy → loss, in double: the reference's analytic
        // gradient and the fp32 kernel's against (L(x + h) − L(x − h)) / 2h. AEPO is excluded (its
        // gradient is by design not the derivative of its value; see aepoStopGradient...).
        long seed = Logits.seed();
        System.out.println("gradientsMatchCentralFiniteDifferences seed=" + seed);
        Random rnd = new Random(seed);
        // CISPO and GSPO's token form are excluded like AEPO (their gradients stop at sg(·) by design); the
        // sequence form's gradient is the derivative of its value
        for (ClipMode clip : new ClipMode[] {ClipMode.PPO, ClipMode.GSPO_SEQUENCE})
            for (KlType kl : KlType.values())
                for (LossAgg agg0 : LossAgg.values()) {
                    if (agg0 != LossAgg.TOKEN_MEAN && kl != KlType.values()[agg0.ordinal()]) continue;  // a spread, not all 32
                    LossAgg agg = clip.isGspo() ? LossAgg.SEQ_MEAN_TOKEN_MEAN : agg0;
                    boolean dualOn = clip == ClipMode.PPO && (kl.ordinal() + agg0.ordinal()) % 2 == 1;  // PPO with and without dual clip
                    PolicyLossConfig cfg = PolicyLossConfig.builder().clipMode(clip).dualClipC(dualOn ? 3 : 0).klType(kl).agg(agg).klCoef(0.3)
                            .entropyCoef(0.05).temperature(0.8).build();
                    int rows = 2 + rnd.nextInt(6), vocab = 2 + rnd.nextInt(9);
                    Case k = randomCase(rnd, cfg, rows, vocab, vocab, false);
                    float[] g = new float[rows * vocab];
                    PolicyLoss.forwardBackward(cfg, k.logits, rows, vocab, k.labels, k.old, k.adv, k.mask,
                            refFor(cfg, k), seqIdsFor(cfg, k), g);
                    PolicyLossReference.Out ref = reference(cfg, k, null, Double.NEGATIVE_INFINITY);
                    double[] x = k.x.clone();
                    for (int i = 0; i < x.length; i++) {
                        double h = 1e-5, saved = x[i];
                        x[i] = saved + h;
                        double plus = PolicyLossReference.lossValue(cfg, x, rows, vocab, k.labels, k.oldD, k.advD,
                                k.maskD, k.refD, seqIdsFor(cfg, k));
                        x[i] = saved - h;
                        double minus = PolicyLossReference.lossValue(cfg, x, rows, vocab, k.labels, k.oldD, k.advD,
                                k.maskD, k.refD, seqIdsFor(cfg, k));
                        x[i] = saved;
                        double fd = (plus - minus) / (2 * h);
                        String w = cfg + " element " + i;
                        assertEquals(fd, ref.gradLogits[i], 1e-6 * (1 + Math.abs(fd)), "reference vs FD: " + w);
                        assertEquals(fd, g[i], 5e-5 * (1 + Math.abs(fd)), "kernel vs FD: " + w);
                    }
                }
    }

    @Test
    void aepoStopGradientProperties() {
        // Value = the plain clip's; gradient of a top-clipped A > 0 token = −A(1 + ε_high)·w·∂logprob;
        // every other token's gradient = the plain clip's.
        long seed = Logits.seed();
        System.out.println("aepoStopGradientProperties seed=" + seed);
        Random rnd = new Random(seed);
        PolicyLossConfig ppo = PolicyLossConfig.builder().eps(0.2).epsHigh(0.28).build();
        PolicyLossConfig aepo = ppo.toBuilder().clipMode(ClipMode.AEPO_STOP_GRADIENT).build();
        int rows = 80, vocab = 333;
        // a random case has a few top-clipped A > 0 tokens, not always three: draw until it has (same seed,
        // same sequence of cases), so the property is always checked where it differs from the plain clip
        Case k;
        int draws = 0;
        do {
            k = randomCase(rnd, ppo, rows, vocab, vocab);
            assertTrue(++draws <= 50, "no case with three top-clipped tokens in 50 draws");
        } while (countTrue(reference(ppo, k, null, Double.NEGATIVE_INFINITY).clippedTop) < 3);
        float[] gp = new float[rows * vocab], ga = new float[rows * vocab];
        PolicyLossResult rp = PolicyLoss.forwardBackward(ppo, k.logits, rows, vocab, k.labels, k.old, k.adv, k.mask, null, null, gp);
        PolicyLossResult ra = PolicyLoss.forwardBackward(aepo, k.logits, rows, vocab, k.labels, k.old, k.adv, k.mask, null, null, ga);
        assertEquals(rp.loss(), ra.loss(), 0.0, "forward value equals the plain clip's");
        assertEquals(rp.clipFracHigh(), ra.clipFracHigh(), 0.0);
        // per-row upstream gradients through the O(T) form
        float[] lp = new float[rows], h = new float[rows];
        boolean[] valid = new boolean[rows];
        for (int r = 0; r < rows; r++) valid[r] = k.mask[r] > 0;
        TokenStats.forward(k.logits, rows, vocab, vocab, k.labels, 1f, valid, lp, h, null);
        float[] glpP = new float[rows], glpA = new float[rows];
        PolicyLoss.loss(ppo, lp, h, k.old, k.adv, k.mask, null, null, null, glpP, null);
        PolicyLoss.loss(aepo, lp, h, k.old, k.adv, k.mask, null, null, null, glpA, null);
        PolicyLossReference.Out ref = reference(ppo, k, null, Double.NEGATIVE_INFINITY);
        int topClipped = 0;
        for (int r = 0; r < rows; r++) {
            if (ref.clippedTop[r]) {
                topClipped++;
                assertEquals(0f, glpP[r], 0f, "plain clip: no gradient at a top-clipped token, row " + r);
                // −A·(1 + ε_high)·w, unless the ±20 clamp of δ blocks the gradient
                double expected = ref.clamped[r] ? 0 : -k.adv[r] * (1 + (float) 0.28) * ref.weights[r];
                assertEquals(expected, glpA[r], 1e-6 * Math.abs(expected), "AEPO gradient, row " + r);
                // dL/dlogits of that row: g_lp (1[j=y] − p_j) with g_H = 0
                for (int j = 0; j < vocab; j++) {
                    int i = r * vocab + j;
                    double pj = Math.exp(k.x[i] - k.x[r * vocab + k.labels[r]] + ref.logprob[r]);
                    double e = glpA[r] * ((j == k.labels[r] ? 1 : 0) - pj);
                    assertEquals(e, ga[i], 3e-5 * Math.abs(glpA[r]) + 1e-12, "AEPO dL/dlogits [" + r + "," + j + "]");
                }
            } else {
                assertEquals(glpP[r], glpA[r], 0f, "other tokens: the plain clip's gradient, row " + r);
                for (int j = 0; j < vocab; j++) assertEquals(gp[r * vocab + j], ga[r * vocab + j], 0f);
            }
        }
        assertTrue(topClipped >= 3, "the case has top-clipped tokens: " + topClipped);
    }

    private static boolean hasSelectedTopClippedRow(PolicyLossConfig ppo, Case k, int rows, int vocab, double q) {
        boolean[] valid = new boolean[rows];
        for (int r = 0; r < rows; r++) valid[r] = k.mask[r] > 0;
        float[] h = new float[rows];
        TokenStats.forward(k.logits, rows, vocab, vocab, k.labels, 1f, valid, null, h, null);
        float thr = PolicyLoss.aepoEntropyThreshold(q, h, k.mask);
        PolicyLossReference.Out ref = reference(ppo, k, null, Double.NEGATIVE_INFINITY);
        for (int r = 0; r < rows; r++) if (valid[r] && h[r] >= thr && ref.clippedTop[r] && !ref.clamped[r]) return true;
        return false;
    }

    private static int countTrue(boolean[] b) {
        int n = 0;
        for (boolean x : b) if (x) n++;
        return n;
    }

    @Test
    void aepoTopEntropyFractionSelectsByEntropy() {
        // Hand case of the threshold: the ⌈0.4·5⌉ = 2nd largest valid entropy; a masked row is ignored.
        float[] ent = {0.1f, 0.5f, 0.3f, 0.9f, 0.7f, 5f};
        float[] mask = {1, 1, 1, 1, 1, 0};
        assertEquals(0.7f, PolicyLoss.aepoEntropyThreshold(0.4, ent, mask));
        assertEquals(0.9f, PolicyLoss.aepoEntropyThreshold(0.2, ent, mask));
        assertEquals(Float.NEGATIVE_INFINITY, PolicyLoss.aepoEntropyThreshold(1.0, ent, mask));

        long seed = Logits.seed();
        System.out.println("aepoTopEntropyFractionSelectsByEntropy seed=" + seed);
        Random rnd = new Random(seed);
        PolicyLossConfig ppo = PolicyLossConfig.builder().epsHigh(0.28).build();
        PolicyLossConfig aepoQ = ppo.toBuilder().clipMode(ClipMode.AEPO_STOP_GRADIENT).aepoTopEntropyFraction(0.3).build();
        int rows = 120, vocab = 211;
        // draw (same seed, same sequence) until a selected token is top-clipped, so the stop-gradient branch
        // is exercised on a selected token; a single draw sometimes has none
        Case k;
        int draws = 0;
        do {
            k = randomCase(rnd, ppo, rows, vocab, vocab);
            assertTrue(++draws <= 50, "no case with a selected top-clipped token in 50 draws");
        } while (!hasSelectedTopClippedRow(ppo, k, rows, vocab, 0.3));
        float[] gq = new float[rows * vocab], gc = new float[rows * vocab], gp = new float[rows * vocab];
        // fused (threshold from an extra statistics pass) = composable (from its forward): the same selection and
        // results, the gradient within rounding
        PolicyLossResult rq = PolicyLoss.forwardBackward(aepoQ, k.logits, rows, vocab, k.labels, k.old, k.adv, k.mask, null, null, gq);
        PolicyLossResult rc = PolicyLoss.forwardBackwardComposable(aepoQ, k.logits, rows, vocab, k.labels, k.old, k.adv, k.mask, null, null, gc);
        assertEquals(rq, rc);
        assertCloseToComposable(gq, gc, DType.F32, k.labels, vocab, "AEPO q = 0.3: fused vs composable gradient");
        PolicyLoss.forwardBackward(ppo, k.logits, rows, vocab, k.labels, k.old, k.adv, k.mask, null, null, gp);
        float[] h = new float[rows];
        boolean[] valid = new boolean[rows];
        int n = 0;
        for (int r = 0; r < rows; r++) if (valid[r] = k.mask[r] > 0) n++;
        TokenStats.forward(k.logits, rows, vocab, vocab, k.labels, 1f, valid, null, h, null);
        float thr = (float) rq.aepoEntropyThreshold();
        int selected = 0;
        PolicyLossReference.Out ref = reference(ppo, k, null, Double.NEGATIVE_INFINITY);
        int changed = 0;
        for (int r = 0; r < rows; r++) {
            if (!valid[r]) continue;
            boolean sel = h[r] >= thr;
            if (sel) selected++;
            boolean differs = false;
            for (int j = 0; j < vocab; j++) differs |= gq[r * vocab + j] != gp[r * vocab + j];
            assertEquals(sel && ref.clippedTop[r] && !ref.clamped[r], differs, "row " + r + " (H " + h[r] + ", thr " + thr + ")");
            if (differs) changed++;
        }
        assertEquals((int) Math.ceil(0.3 * n), selected, "⌈q·N⌉ tokens selected");
        assertTrue(changed >= 1, "some selected token was top-clipped");
        // explicit selection values: select the low-entropy tokens instead, by passing −H
        float[] neg = new float[rows];
        for (int r = 0; r < rows; r++) neg[r] = -h[r];
        float[] gn = new float[rows * vocab];
        PolicyLossResult rn = PolicyLoss.forwardBackward(aepoQ, k.logits, rows, vocab, vocab, k.labels, k.old, k.adv,
                k.mask, null, null, neg, gn);
        for (int r = 0; r < rows; r++) {
            if (!valid[r]) continue;
            boolean differs = false;
            for (int j = 0; j < vocab; j++) differs |= gn[r * vocab + j] != gp[r * vocab + j];
            assertEquals(neg[r] >= rn.aepoEntropyThreshold() && ref.clippedTop[r] && !ref.clamped[r], differs,
                    "selected by -H, row " + r);
        }
    }

    // ---------------------------------------------------------------------------------------------
    // Determinism, memory forms, dtypes
    // ---------------------------------------------------------------------------------------------

    @Test
    void oneAndTwoThreadsAreBitwiseIdentical() {
        long seed = Logits.seed();
        System.out.println("PolicyLoss oneAndTwoThreadsAreBitwiseIdentical seed=" + seed);
        Random rnd = new Random(seed);
        PolicyLossConfig cfg = PolicyLossConfig.treeGrpo().toBuilder().agg(LossAgg.SEQ_MEAN_TOKEN_MEAN).entropyCoef(0.01).build();
        int rows = 301, vocab = 4099;  // large enough that the kernels split rows
        Case k = randomCase(rnd, cfg, rows, vocab, vocab);
        PolicyLossResult[] res = new PolicyLossResult[4];
        float[][] grads = new float[4][];
        for (int threads = 1; threads <= 2; threads++) {
            Kernels.setThreads(threads);
            float[] g = new float[rows * vocab];
            res[threads - 1] = PolicyLoss.forwardBackward(cfg, k.logits, rows, vocab, k.labels, k.old, k.adv, k.mask, k.ref, k.seqIds, g);
            grads[threads - 1] = g;
            float[] g2 = new float[rows * vocab];
            res[threads + 1] = PolicyLoss.forwardBackwardComposable(cfg, k.logits, rows, vocab, k.labels, k.old, k.adv, k.mask, k.ref, k.seqIds, g2);
            grads[threads + 1] = g2;
        }
        assertEquals(res[0], res[1], "fused, 1 vs 2 threads");
        assertArrayEquals(grads[0], grads[1], "fused gradient, 1 vs 2 threads");
        assertEquals(res[2], res[3], "composable, 1 vs 2 threads");
        assertArrayEquals(grads[2], grads[3], "composable gradient, 1 vs 2 threads");
        assertEquals(res[0], res[2], "fused vs composable");
    }

    /**
     * At a gradient of ≥ 16 MiB the fused kernel streams its stores and prefetches each thread's next row into
     * L2 while it writes the current one (docs/kernels.md): the composable path's results and (within rounding)
     * gradient, on every CPU path, fp32 and bf16 at the Qwen vocabulary, out of place and in place over the logits
     * (bit for bit), masked rows between.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("ai.arbor.kernels.Kernels#cpuIsas")
    void streamedFusedLossMatchesComposableOnEveryPath(String isa) {
        Kernels.forceCpuIsa(isa);
        long seed = Logits.seed();
        System.out.println("streamedFusedLossMatchesComposableOnEveryPath " + isa + " seed=" + seed);
        Random rnd = new Random(seed);
        for (DType dt : new DType[] {DType.F32, DType.BF16}) {
            // fp32 without an entropy term (g_H = 0: the gradient's entropy part drops out) on aligned rows (a vocabulary
            // of whole vectors: every row takes the streamed stores), bf16 with one on any vocabulary
            PolicyLossConfig cfg = PolicyLossConfig.vanilla().toBuilder().entropyCoef(dt == DType.F32 ? 0.0 : 0.01)
                    .temperature(0.9).build();
            int vocab = dt == DType.F32 ? 151936 : 151936 + rnd.nextInt(5), limit = vocab - rnd.nextInt(3);
            int rows = (int) (16L * 1024 * 1024 / ((long) vocab * dt.bytes())) + 3;
            Case k = randomCase(rnd, cfg, rows, vocab, limit);
            k.mask[1] = 0f;  // at least one masked row (its label and old log-prob are then never read)
            k.maskD[1] = 0;
            ByteBuffer xb = Logits.direct(k.logits, dt);
            LogitsView view = new LogitsView(MemRef.of(xb), dt, rows, vocab, vocab, limit);
            PolicyLoss.Inputs in = new PolicyLoss.Inputs(MemRef.of(Logits.direct(k.labels)), DType.I32,
                    MemRef.of(Logits.direct(k.old, DType.F32)), MemRef.of(Logits.direct(k.adv, DType.F32)),
                    MemRef.of(Logits.direct(k.mask, DType.F32)), null, null, rows, null);
            for (int threads = 1; threads <= 2; threads++) {
                Kernels.setThreads(threads);
                String where = isa + " " + dt + " threads=" + threads + " rows=" + rows + " vocab=" + vocab;
                ByteBuffer gb = Logits.direct(new float[rows * vocab], dt);
                PolicyLossResult res = PolicyLoss.forwardBackward(cfg, view, in, MemRef.of(gb), dt, vocab, null, null, 0);
                ByteBuffer mb = Logits.direct(toBytes(k.mask));
                ByteBuffer lp = Logits.directFloats(rows), h = Logits.directFloats(rows), lse = Logits.directFloats(rows);
                TokenStats.forward(view, in.labels(), DType.I32, (float) cfg.temperature(), MemRef.of(mb), MemRef.of(lp),
                        MemRef.of(h), MemRef.of(lse), 0);
                ByteBuffer glp = Logits.directFloats(rows), gh = Logits.directFloats(rows);
                PolicyLossResult res2 = PolicyLoss.loss(cfg, rows, MemRef.of(lp), MemRef.of(h), in, MemRef.of(glp),
                        MemRef.of(gh), null, 0);
                ByteBuffer gb2 = Logits.direct(new float[rows * vocab], dt);
                TokenStats.backward(view, in.labels(), DType.I32, (float) cfg.temperature(), MemRef.of(mb), MemRef.of(lse),
                        MemRef.of(h), MemRef.of(glp), MemRef.of(gh), MemRef.of(gb2), dt, vocab, 0);
                assertEquals(res2, res, where + ": composable vs fused result");
                assertCloseToComposable(Logits.read(gb, dt, rows * vocab), Logits.read(gb2, dt, rows * vocab), dt, k.labels,
                        vocab, where + ": composable vs fused gradient");
                int masked = 0;
                for (int r = 0; r < rows; r++) {
                    if (k.mask[r] > 0) continue;
                    masked++;
                    for (long b = (long) r * vocab * dt.bytes(); b < (long) (r + 1) * vocab * dt.bytes(); b++)
                        if (gb.get((int) b) != 0) assertEquals(0, gb.get((int) b), where + ": masked row " + r + " byte " + b);
                }
                assertTrue(masked > 0, where + ": the case has masked rows");
                ByteBuffer inPlace = CpuPathsTest.copy(xb);
                PolicyLossResult res3 = PolicyLoss.forwardBackward(cfg, new LogitsView(MemRef.of(inPlace), dt, rows, vocab, vocab, limit), in,
                        MemRef.of(inPlace), dt, vocab, null, null, 0);
                assertEquals(res, res3, where + ": in place, same result");
                assertEquals(gb, inPlace, where + ": in place, same gradient bytes");
            }
        }
    }

    /**
     * Rows of several statistics chunks (2048 columns, merged by the online-softmax rescaling, each chunk's next
     * one prefetched during its exp scan): a peak 100 above the rest (every other chunk's mass underflows), a peak
     * 84 above (p_j near and below FLT_MIN), a chunk of absent (-inf) columns, and plain rows; with and without an
     * entropy term, at τ 1 and 0.7, on every CPU path. Fused equals composable bit for bit, both match the double
     * reference, and the far chunks of a +100 peak get exactly zero gradient.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("ai.arbor.kernels.Kernels#cpuIsas")
    void multiChunkRowsWithFarAndAbsentChunksMatchTheReference(String isa) {
        Kernels.forceCpuIsa(isa);
        long seed = Logits.seed();
        System.out.println("multiChunkRowsWithFarAndAbsentChunksMatchTheReference " + isa + " seed=" + seed);
        Random rnd = new Random(seed);
        final int C = 2048;
        for (double ent : new double[] {0.0, 0.01})
            for (double temp : new double[] {1.0, 0.7}) {
                PolicyLossConfig cfg = PolicyLossConfig.vanilla().toBuilder().entropyCoef(ent).temperature(temp)
                        .dualClipC(3).build();
                int vocab = 3 * C + 1 + rnd.nextInt(1500), limit = vocab, rows = 8 + rnd.nextInt(5);   // the array form: no padding
                float[] x = new float[rows * vocab];
                int[] peak = new int[rows];
                for (int r = 0; r < rows; r++) {
                    float rowMax = Float.NEGATIVE_INFINITY;
                    for (int j = 0; j < vocab; j++) {
                        x[r * vocab + j] = (float) (rnd.nextGaussian() * 2);
                        rowMax = Math.max(rowMax, x[r * vocab + j]);
                    }
                    peak[r] = C + rnd.nextInt(limit - C);
                    // the peaks stand above the row's max (not above their own value: a low peak 100 above itself
                    // leaves columns within 87.3 of the log-sum-exp, whose p_j >= FLT_MIN is rightly not zero)
                    switch (r % 4) {
                        case 1 -> x[r * vocab + peak[r]] = rowMax + 100f;
                        case 2 -> x[r * vocab + peak[r]] = rowMax + 84f;
                        case 3 -> { for (int j = C; j < 2 * C; j++) x[r * vocab + j] = Float.NEGATIVE_INFINITY; }
                        default -> { }
                    }
                }
                // a label in the absent chunk would have log-prob -inf (no finite loss)
                Case k = randomCase(rnd, cfg, rows, vocab, limit, false, x, (r, y) -> r % 4 != 3 || y < C || y >= 2 * C);
                String where = isa + " " + cfg + " rows=" + rows + " vocab=" + vocab;
                float[] g = new float[rows * vocab], g2 = new float[rows * vocab];
                PolicyLossResult res = PolicyLoss.forwardBackward(cfg, k.logits, rows, vocab, k.labels, k.old, k.adv, k.mask,
                        null, null, g);
                PolicyLossResult res2 = PolicyLoss.forwardBackwardComposable(cfg, k.logits, rows, vocab, k.labels, k.old,
                        k.adv, k.mask, null, null, g2);
                assertEquals(res, res2, where + ": composable vs fused result");
                assertCloseToComposable(g, g2, DType.F32, k.labels, vocab, where + ": composable vs fused gradient");
                assertMatches(cfg, k, reference(cfg, k, null, Double.NEGATIVE_INFINITY), res, g, where);
                for (int r = 1; r < rows; r += 4) {  // the far chunks of a +100 peak: exactly zero
                    if (!(k.mask[r] > 0)) continue;
                    int c = peak[r] / C == 1 ? 2 : 1;
                    for (int j = c * C; j < (c + 1) * C && j < limit; j++)
                        if (j != k.labels[r]) assertEquals(0f, g[r * vocab + j], 0f, where + " row " + r + " far column " + j);
                }
            }
    }

    @Test
    void memoryFormsMatchArraysForEveryDtypeStrideAndInPlace() {
        long seed = Logits.seed();
        System.out.println("memoryFormsMatchArraysForEveryDtypeStrideAndInPlace seed=" + seed);
        Random rnd = new Random(seed);
        PolicyLossConfig cfg = PolicyLossConfig.treeGrpo().toBuilder().agg(LossAgg.SEQ_MEAN_TOKEN_SUM).entropyCoef(0.02)
                .temperature(1.3).build();
        int rows = 29, vocab = 517, limit = 509, stride = 520;
        Case k = randomCase(rnd, cfg, rows, vocab, limit);
        for (DType dt : new DType[] {DType.F32, DType.BF16, DType.F16}) {
            // strided, padded logits (junk in the padding) as the kernel will read them
            float[] strided = new float[rows * stride];
            for (int r = 0; r < rows; r++)
                for (int j = 0; j < stride; j++)
                    strided[r * stride + j] = j < limit ? k.logits[r * vocab + j] : (j % 2 == 0 ? Float.NaN : 1e30f);
            ByteBuffer xb = Logits.direct(strided, dt);
            LogitsView view = new LogitsView(MemRef.of(xb), dt, rows, vocab, stride, limit);
            PolicyLoss.Inputs in = new PolicyLoss.Inputs(MemRef.of(Logits.direct(Logits.toLong(k.labels))), DType.I64,
                    MemRef.of(Logits.direct(k.old, DType.F32)), MemRef.of(Logits.direct(k.adv, DType.F32)),
                    MemRef.of(Logits.direct(k.mask, DType.F32)), MemRef.of(Logits.direct(k.ref, DType.F32)),
                    MemRef.of(Logits.direct(k.seqIds)), rows, null);
            ByteBuffer gb = Logits.directFloats(rows * stride);
            gb.asFloatBuffer().put(TokenStatsTest.filled(rows * stride, 7.25f));
            ByteBuffer lpb = Logits.directFloats(rows), hb = Logits.directFloats(rows), glpb = Logits.directFloats(rows);
            PolicyLossResult res = PolicyLoss.forwardBackward(cfg, view, in, MemRef.of(gb), DType.F32, stride,
                    new PolicyLoss.RowOutputs(MemRef.of(lpb), MemRef.of(hb), MemRef.of(glpb), null), null, 0);
            // against the reference on the values the kernel saw
            Case seen = new Case();
            seen.rows = rows;
            seen.vocab = vocab;
            seen.vocabLimit = limit;
            double[] x = Logits.asSeen(k.logits, dt);
            seen.x = x;
            seen.labels = k.labels; seen.oldD = k.oldD; seen.advD = k.advD; seen.maskD = k.maskD; seen.refD = k.refD;
            seen.seqIds = k.seqIds; seen.mask = k.mask;
            PolicyLossReference.Out ref = reference(cfg, seen, null, Double.NEGATIVE_INFINITY);
            float[] g = Logits.floats(gb, rows * stride), packed = new float[rows * vocab];
            for (int r = 0; r < rows; r++) {
                for (int j = 0; j < vocab; j++) packed[r * vocab + j] = g[r * stride + j];
                for (int j = vocab; j < stride; j++) assertEquals(7.25f, g[r * stride + j], "stride gap written");
            }
            assertMatches(cfg, seen, ref, res, packed, "memory " + dt);
            float[] lp = Logits.floats(lpb, rows), glp = Logits.floats(glpb, rows);
            for (int r = 0; r < rows; r++) {
                assertEquals(ref.logprob[r], lp[r], 1e-4, "logprob row " + r);
                assertEquals(ref.gLogprob[r], glp[r], 1e-4 * (1 + Math.abs(ref.gLogprob[r])), "grad logprob row " + r);
            }
            // composable over memory: token stats forward → loss → token stats backward: the same results, the
            // gradient within rounding (the stride gaps untouched by both)
            ByteBuffer mb = Logits.direct(toBytes(k.mask));
            ByteBuffer lp2 = Logits.directFloats(rows), h2 = Logits.directFloats(rows), lse2 = Logits.directFloats(rows);
            TokenStats.forward(view, in.labels(), DType.I64, 1.3f, MemRef.of(mb), MemRef.of(lp2), MemRef.of(h2), MemRef.of(lse2), 0);
            ByteBuffer glp2 = Logits.directFloats(rows), gh2 = Logits.directFloats(rows);
            PolicyLossResult res2 = PolicyLoss.loss(cfg, rows, MemRef.of(lp2), MemRef.of(h2), in, MemRef.of(glp2),
                    MemRef.of(gh2), null, 0);
            ByteBuffer gb2 = Logits.directFloats(rows * stride);
            gb2.asFloatBuffer().put(TokenStatsTest.filled(rows * stride, 7.25f));
            TokenStats.backward(view, in.labels(), DType.I64, 1.3f, MemRef.of(mb), MemRef.of(lse2), MemRef.of(h2),
                    MemRef.of(glp2), MemRef.of(gh2), MemRef.of(gb2), DType.F32, stride, 0);
            assertEquals(res, res2, dt + ": composable vs fused (memory)");
            assertCloseToComposable(g, Logits.floats(gb2, rows * stride), DType.F32, k.labels, stride,
                    dt + ": composable vs fused gradient (memory)");
            // in place over the logits (the logits' dtype) = out of place in that dtype, bit for bit
            ByteBuffer out = Logits.direct(new float[rows * stride], dt);
            PolicyLoss.forwardBackward(cfg, view, in, MemRef.of(out), dt, stride, null, null, 0);
            PolicyLossResult inPlace = PolicyLoss.forwardBackward(cfg, view, in, MemRef.of(xb), dt, stride, null,
                    MemRef.of(Logits.directFloats((int) (PolicyLoss.workspaceBytes(rows, rows) / 4 + 2))), 0);
            assertEquals(res, inPlace, dt + ": in place, same result");
            float[] a = Logits.read(out, dt, rows * stride), b = Logits.read(xb, dt, rows * stride);
            for (int r = 0; r < rows; r++)
                for (int j = 0; j < vocab; j++)
                    assertEquals(a[r * stride + j], b[r * stride + j], 0f, dt + " in place [" + r + "," + j + "]");
        }
    }

    private static byte[] toBytes(float[] mask) {
        byte[] b = new byte[mask.length];
        for (int i = 0; i < b.length; i++) b[i] = (byte) (mask[i] > 0 ? 1 : 0);
        return b;
    }

    @Test
    void arrayFormEqualsMemoryFormBitwise() {
        long seed = Logits.seed();
        System.out.println("PolicyLoss arrayFormEqualsMemoryFormBitwise seed=" + seed);
        Random rnd = new Random(seed);
        PolicyLossConfig cfg = PolicyLossConfig.grpoTcr();
        int rows = 45, vocab = 301;
        Case k = randomCase(rnd, cfg, rows, vocab, vocab);
        float[] g = new float[rows * vocab];
        PolicyLossResult a = PolicyLoss.forwardBackward(cfg, k.logits, rows, vocab, k.labels, k.old, k.adv, k.mask, null, null, g);
        ByteBuffer gb = Logits.directFloats(rows * vocab);
        PolicyLossResult b = PolicyLoss.forwardBackward(cfg,
                LogitsView.of(MemRef.of(Logits.direct(k.logits, DType.F32)), DType.F32, rows, vocab),
                PolicyLoss.Inputs.of(MemRef.of(Logits.direct(k.labels)), DType.I32, MemRef.of(Logits.direct(k.old, DType.F32)),
                        MemRef.of(Logits.direct(k.adv, DType.F32)), MemRef.of(Logits.direct(k.mask, DType.F32)), null),
                MemRef.of(gb), DType.F32, vocab, null, null, 0);
        assertEquals(a, b);
        assertArrayEquals(g, Logits.floats(gb, rows * vocab));
        // in place over a float[]
        float[] x = k.logits.clone();
        PolicyLossResult c = PolicyLoss.forwardBackward(cfg, x, rows, vocab, k.labels, k.old, k.adv, k.mask, null, null, x);
        assertEquals(a, c);
        assertArrayEquals(g, x);
    }

    // ---------------------------------------------------------------------------------------------
    // Edge cases and validation
    // ---------------------------------------------------------------------------------------------

    @Test
    void edgeCasesHaveExactValues() {
        PolicyLossConfig cfg = PolicyLossConfig.builder().entropyCoef(0.1).build();
        // every row masked: zero loss, zero metrics, zero gradient; labels (−100) unread
        float[] g = TokenStatsTest.filled(6, 9f);
        PolicyLossResult r = PolicyLoss.forwardBackward(cfg, new float[] {1, 2, 3, 4, 5, 6}, 2, 3, new int[] {-100, -100},
                new float[2], new float[2], new float[2], null, null, g);
        assertEquals(new PolicyLossResult(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, Double.NaN), r);
        assertArrayEquals(new float[6], g);
        // no rows at all
        r = PolicyLoss.forwardBackward(cfg, new float[0], 0, 5, new int[0], new float[0], new float[0], new float[0], null, null, new float[0]);
        assertEquals(0.0, r.loss());
        // the label has probability 0 (logit −inf): logprob −inf, δ clamped to −20, r = e^-20, no
        // gradient through the ratio; the entropy term's gradient stays finite
        float ninf = Float.NEGATIVE_INFINITY;
        float[] x = {ninf, 1f, 2f};
        g = new float[3];
        r = PolicyLoss.forwardBackward(cfg, x, 1, 3, new int[] {0}, new float[] {-1f}, new float[] {1f}, new float[] {1f}, null, null, g);
        assertEquals(-Math.exp(-20), r.pgLoss(), 1e-15);  // A > 0 below the lower bound: unclipped, −A·r
        assertEquals(20.0, r.approxKl(), 0.0);
        for (float v : g) assertTrue(Float.isFinite(v), "finite gradient " + java.util.Arrays.toString(g));
        assertEquals(0f, g[0], 0f);
        // vocabulary of one: logprob 0, entropy 0
        r = PolicyLoss.forwardBackward(cfg, new float[] {3f}, 1, 1, new int[] {0}, new float[] {0f}, new float[] {1f},
                new float[] {1f}, null, null, g = new float[1]);
        assertEquals(-1.0, r.loss(), 0.0);
        assertEquals(0.0, r.entropyMean(), 0.0);
        assertEquals(0f, g[0], 0f);
    }

    @Test
    void badInputsAreRejectedWithTheValue() {
        PolicyLossConfig cfg = PolicyLossConfig.defaults();
        float[] x = new float[6], g = new float[6];
        int[] y = {0, 1};
        float[] z = new float[2], one = {1f, 1f};
        expect("mask[1] = 1.5", () -> PolicyLoss.forwardBackward(cfg, x, 2, 3, y, z, z, new float[] {1f, 1.5f}, null, null, g));
        expect("mask[0] = NaN", () -> PolicyLoss.forwardBackward(cfg, x, 2, 3, y, z, z, new float[] {Float.NaN, 1f}, null, null, g));
        expect("mask[0] = -0.5", () -> PolicyLoss.forwardBackward(cfg, x, 2, 3, y, z, z, new float[] {-0.5f, 1f}, null, null, g));
        expect("labels[1] = 3", () -> PolicyLoss.forwardBackward(cfg, x, 2, 3, new int[] {0, 3}, z, z, one, null, null, g));
        expect("oldLogprob[0] = NaN", () -> PolicyLoss.forwardBackward(cfg, x, 2, 3, y, new float[] {Float.NaN, 0}, z, one, null, null, g));
        expect("advantages[1] = Infinity", () -> PolicyLoss.forwardBackward(cfg, x, 2, 3, y, z, new float[] {0, Float.POSITIVE_INFINITY}, one, null, null, g));
        expect("advantages.length must be 2", () -> PolicyLoss.forwardBackward(cfg, x, 2, 3, y, z, new float[3], one, null, null, g));
        expect("gradLogitsOut.length must be 6", () -> PolicyLoss.forwardBackward(cfg, x, 2, 3, y, z, z, one, null, null, new float[5]));
        PolicyLossConfig k3 = PolicyLossConfig.builder().klType(KlType.K3).build();
        expect("refLogprob is required for KL type K3", () -> PolicyLoss.forwardBackward(k3, x, 2, 3, y, z, z, one, null, null, g));
        expect("refLogprob[1] = NaN", () -> PolicyLoss.forwardBackward(k3, x, 2, 3, y, z, z, one, new float[] {0, Float.NaN}, null, g));
        PolicyLossConfig seq = PolicyLossConfig.builder().agg(LossAgg.SEQ_MEAN_TOKEN_MEAN).build();
        expect("seqIds are required", () -> PolicyLoss.forwardBackward(seq, x, 2, 3, y, z, z, one, null, null, g));
        expect("seqIds[1] = -1 on a valid row", () -> PolicyLoss.forwardBackward(seq, x, 2, 3, y, z, z, one, null, new int[] {0, -1}, g));
        expect("seqIds[0] = 2 is outside [0, rows = 2)", () -> PolicyLoss.forwardBackward(seq, x, 2, 3, y, z, z, one, null, new int[] {2, 0}, g));
        // a masked row may carry −1
        PolicyLoss.forwardBackward(seq, x, 2, 3, y, z, z, new float[] {1f, 0f}, null, new int[] {0, -1}, g);
        expect("epsLow must be in [0, 1], got -0.1", () -> PolicyLossConfig.builder().epsLow(-0.1).build());
        expect("epsHigh must be finite and >= 0, got NaN", () -> PolicyLossConfig.builder().epsHigh(Double.NaN).build());
        expect("dualClipC must be 0 (off) or finite and > 1, got 1.0", () -> PolicyLossConfig.builder().dualClipC(1).build());
        expect("dual clip (dualClipC 3.0) applies to PPO and AEPO only, not CISPO",
                () -> PolicyLossConfig.builder().clipMode(ClipMode.CISPO).dualClipC(3).build());
        expect("GSPO_TOKEN aggregates seq-mean-token-mean (as verl), got TOKEN_MEAN",
                () -> PolicyLossConfig.builder().clipMode(ClipMode.GSPO_TOKEN).build());
        PolicyLossConfig gs = PolicyLossConfig.gspo();
        expect("GSPO_TOKEN through memory", () -> PolicyLoss.forwardBackward(gs, LogitsView.of(MemRef.of(Logits.direct(x, DType.F32)),
                DType.F32, 2, 3), PolicyLoss.Inputs.of(MemRef.of(Logits.direct(y)), DType.I32, MemRef.of(Logits.direct(z, DType.F32)),
                MemRef.of(Logits.direct(z, DType.F32)), MemRef.of(Logits.direct(one, DType.F32)), null),
                MemRef.of(Logits.directFloats(6)), DType.F32, 3, null, null, 0));
        expect("aepoTopEntropyFraction must be in (0, 1], got 0.0", () -> PolicyLossConfig.builder().aepoTopEntropyFraction(0).build());
        expect("klCoef must be finite and >= 0, got -1.0", () -> PolicyLossConfig.builder().klCoef(-1).build());
        expect("temperature must be finite and > 0, got 0.0", () -> PolicyLossConfig.builder().temperature(0).build());
        expect("aggNormalizer must be finite and >= 0", () -> PolicyLossConfig.builder().aggNormalizer(-2).build());
        PolicyLossConfig ent = PolicyLossConfig.builder().entropyCoef(0.1).build();
        expect("entropy is required when entropyCoef", () -> PolicyLoss.loss(ent, z, null, z, z, one, null, null, null, null, null));
        // memory forms: host inputs are scanned too
        PolicyLoss.Inputs bad = PolicyLoss.Inputs.of(MemRef.of(Logits.direct(y)), DType.I32, MemRef.of(Logits.direct(z, DType.F32)),
                MemRef.of(Logits.direct(z, DType.F32)), MemRef.of(Logits.direct(new float[] {1f, 2f}, DType.F32)), null);
        LogitsView v = LogitsView.of(MemRef.of(Logits.direct(x, DType.F32)), DType.F32, 2, 3);
        expect("mask[1] = 2.0", () -> PolicyLoss.forwardBackward(cfg, v, bad, MemRef.of(Logits.directFloats(6)), DType.F32, 3, null, null, 0));
        PolicyLoss.Inputs badLabel = PolicyLoss.Inputs.of(MemRef.of(Logits.direct(new int[] {0, 7})), DType.I32,
                MemRef.of(Logits.direct(z, DType.F32)), MemRef.of(Logits.direct(z, DType.F32)), MemRef.of(Logits.direct(one, DType.F32)), null);
        expect("labels[1] = 7", () -> PolicyLoss.forwardBackward(cfg, v, badLabel, MemRef.of(Logits.directFloats(6)), DType.F32, 3, null, null, 0));
        PolicyLoss.Inputs good = PolicyLoss.Inputs.of(MemRef.of(Logits.direct(y)), DType.I32,
                MemRef.of(Logits.direct(z, DType.F32)), MemRef.of(Logits.direct(z, DType.F32)), MemRef.of(Logits.direct(one, DType.F32)), null);
        expect("workspace needs", () -> PolicyLoss.forwardBackward(cfg, v, good, MemRef.of(Logits.directFloats(6)), DType.F32, 3, null,
                MemRef.of(Logits.directFloats(2)), 0));
    }

    private static void expect(String fragment, Runnable call) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, call::run, fragment);
        assertTrue(e.getMessage().contains(fragment), () -> "message '" + e.getMessage() + "' lacks '" + fragment + "'");
    }

    // ---------------------------------------------------------------------------------------------
    // CUDA (where a device exists)
    // ---------------------------------------------------------------------------------------------

    @Test
    void cudaMatchesCpu() {
        Gpu.assume(Backend.CUDA.isAvailable(), Backend.CUDA::unavailableReason);
        long seed = Logits.seed();
        System.out.println("PolicyLoss cudaMatchesCpu seed=" + seed);
        Random rnd = new Random(seed);
        for (ClipMode clip : ClipMode.values()) {
            // GSPO's memory form is the stages with gspoAnchor's anchors (the CUDA harness checks that kernel)
            if (clip.isGspo()) continue;
            PolicyLossConfig cfg = config(rnd, clip, KlType.K3, LossAgg.SEQ_MEAN_TOKEN_MEAN);
            int rows = 50, vocab = 3001;
            Case k = randomCase(rnd, cfg, rows, vocab, vocab);
            float[] g = new float[rows * vocab];
            PolicyLossResult cpu = PolicyLoss.forwardBackward(cfg, k.logits, rows, vocab, k.labels, k.old, k.adv, k.mask, k.ref, k.seqIds, g);
            try (CudaBuffer x = CudaBuffer.of(k.logits, 0); CudaBuffer lab = CudaBuffer.of(k.labels, 0);
                 CudaBuffer old = CudaBuffer.of(k.old, 0); CudaBuffer adv = CudaBuffer.of(k.adv, 0);
                 CudaBuffer mask = CudaBuffer.of(k.mask, 0); CudaBuffer ref = CudaBuffer.of(k.ref, 0);
                 CudaBuffer ids = CudaBuffer.of(k.seqIds, 0); CudaBuffer gd = CudaBuffer.allocate(4L * rows * vocab, 0)) {
                Supplier<PolicyLossResult> run = () -> PolicyLoss.forwardBackward(cfg,
                        LogitsView.of(x.ref(), DType.F32, rows, vocab),
                        new PolicyLoss.Inputs(lab.ref(), DType.I32, old.ref(), adv.ref(), mask.ref(), ref.ref(), ids.ref(), rows, null),
                        gd.ref(), DType.F32, vocab, null, null, 0);
                PolicyLossResult gpu = run.get();
                float[] gg = new float[rows * vocab];
                gd.copyTo(gg);
                assertMatches(cfg, k, reference(cfg, k, null, Double.NEGATIVE_INFINITY), gpu, gg, "cuda " + clip);
                assertEquals(cpu.clipFracHigh(), gpu.clipFracHigh(), 1e-9);
                assertEquals(gpu, run.get(), "CUDA results are reproducible");
            }
        }
    }
}
