package ai.arbor.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Off-policy importance weights (docs/algorithms.md §7) reach the policy-loss kernel through its advantage input,
 * A' = w·A ({@code ai.arbor.rl.RolloutCorrection}): for w &gt; 0 the kernel's loss, gradient and clip counts must be
 * those of a double-precision reference that multiplies only the policy-gradient term by w (the KL and entropy
 * terms untouched), for every surrogate that takes token weights.
 */
class ImportanceWeightTest {

    static Stream<Arguments> modes() {
        List<Arguments> out = new ArrayList<>();
        for (ClipMode c : ClipMode.values())
            if (c != ClipMode.GSPO_SEQUENCE)  // averages A over a sequence: sequence-level weights only (tested below)
                for (KlType k : new KlType[] {KlType.NONE, KlType.K3})
                    out.add(Arguments.of(c, k));
        return out.stream();
    }

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("modes")
    void weightedAdvantagesEqualAReferenceThatWeightsOnlyThePolicyGradientTerm(ClipMode clip, KlType kl) {
        long seed = Logits.seed();
        System.out.println("ImportanceWeightTest " + clip + " " + kl + " seed=" + seed);
        Random rnd = new Random(seed);
        for (int c = 0; c < 4; c++) {
            LossAgg agg = clip.isGspo() ? LossAgg.SEQ_MEAN_TOKEN_MEAN : LossAgg.values()[rnd.nextInt(LossAgg.values().length)];
            PolicyLossConfig cfg = PolicyLossTest.config(rnd, clip, kl, agg).toBuilder().entropyCoef(0.01).build();
            int vocab = 1 + rnd.nextInt(200), rows = 1 + rnd.nextInt(50);
            PolicyLossTest.Case k = PolicyLossTest.randomCase(rnd, cfg, rows, vocab, vocab);
            double[] w = weights(rnd, k, cfg, false);
            float[] adv = k.adv.clone();
            for (int r = 0; r < rows; r++) if (k.mask[r] > 0) adv[r] = (float) (k.adv[r] * (float) w[r]);
            double[] wf = new double[rows];
            for (int r = 0; r < rows; r++) wf[r] = (float) w[r];
            assertAgree(cfg, k, adv, wf, cfg + " rows=" + rows + " vocab=" + vocab);
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("gspoForms")
    void sequenceWeightsWithGspo(ClipMode clip) {
        long seed = Logits.seed();
        System.out.println("ImportanceWeightTest sequence weights " + clip + " seed=" + seed);
        Random rnd = new Random(seed);
        for (int c = 0; c < 4; c++) {
            PolicyLossConfig cfg = PolicyLossTest.config(rnd, clip, KlType.K3, LossAgg.SEQ_MEAN_TOKEN_MEAN);
            int vocab = 1 + rnd.nextInt(200), rows = 1 + rnd.nextInt(50);
            PolicyLossTest.Case k = PolicyLossTest.randomCase(rnd, cfg, rows, vocab, vocab);
            double[] w = weights(rnd, k, cfg, true);
            float[] adv = k.adv.clone();
            double[] wf = new double[rows];
            for (int r = 0; r < rows; r++) {
                wf[r] = (float) w[r];
                if (k.mask[r] > 0) adv[r] = (float) (k.adv[r] * (float) w[r]);
            }
            assertAgree(cfg, k, adv, wf, cfg + " rows=" + rows + " vocab=" + vocab);
        }
    }

    static Stream<Arguments> gspoForms() {
        return Stream.of(Arguments.of(ClipMode.GSPO_TOKEN), Arguments.of(ClipMode.GSPO_SEQUENCE));
    }

    /** Truncated-IS-like weights in (0, 2]: mostly near 1, some tiny, some at the cap; per sequence when asked. */
    private static double[] weights(Random rnd, PolicyLossTest.Case k, PolicyLossConfig cfg, boolean perSequence) {
        double[] w = new double[k.rows];
        double[] seqW = new double[k.rows + 1];
        for (int s = 0; s < seqW.length; s++) seqW[s] = draw(rnd);
        for (int r = 0; r < k.rows; r++) w[r] = perSequence ? seqW[Math.max(0, k.seqIds[r])] : draw(rnd);
        return w;
    }

    private static double draw(Random rnd) {
        double u = rnd.nextDouble();
        return u < 0.6 ? Math.exp(rnd.nextGaussian() * 0.2) : u < 0.8 ? 2.0 : u < 0.9 ? 1e-6 + 1e-3 * rnd.nextDouble() : 0.5 + rnd.nextDouble();
    }

    private static void assertAgree(PolicyLossConfig cfg, PolicyLossTest.Case k, float[] weightedAdv, double[] w, String where) {
        float[] g = new float[k.rows * k.vocab];
        PolicyLossResult res = PolicyLoss.forwardBackward(cfg, k.logits, k.rows, k.vocab, k.labels, k.old, weightedAdv, k.mask,
                PolicyLossTest.refFor(cfg, k), PolicyLossTest.seqIdsFor(cfg, k), g);
        PolicyLossReference.Out ref = PolicyLossReference.compute(cfg, k.x, k.rows, k.vocab, k.vocabLimit, k.labels, k.oldD,
                k.advD, k.maskD, k.refD, cfg.agg().needsSequences() ? k.seqIds : null, null, Double.NEGATIVE_INFINITY, w);
        PolicyLossTest.assertMatches(cfg, k, ref, res, g, where);
        // the weight is not a loss weight: the KL and entropy sums are the unweighted reference's
        PolicyLossReference.Out plain = PolicyLossReference.compute(cfg, k.x, k.rows, k.vocab, k.vocabLimit, k.labels, k.oldD,
                k.advD, k.maskD, k.refD, cfg.agg().needsSequences() ? k.seqIds : null, null, Double.NEGATIVE_INFINITY);
        assertEquals(plain.kl, ref.kl, 0, where + ": KL untouched by w");
        assertEquals(plain.ent, ref.ent, 0, where + ": entropy untouched by w");
        boolean differs = false;
        for (int r = 0; r < k.rows; r++) differs |= k.mask[r] > 0 && k.advD[r] != 0 && Math.abs(w[r] - 1) > 1e-3;
        if (differs) assertTrue(Math.abs(plain.pg - ref.pg) > 0 || plain.pg == 0, where + ": w changes the policy-gradient term");
    }
}
