package ai.arbor.rl;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.kernels.ClipMode;
import ai.arbor.kernels.LossAgg;
import ai.arbor.rl.RolloutCorrection.IsLevel;
import ai.arbor.rl.RolloutCorrection.RejectLevel;
import ai.arbor.testing.Seeds;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * Off-policy correction (docs/algorithms.md §7) against hand-computed cases and an independent double-precision
 * transcription of verl's rollout-correction formulas (truncated IS at token and sequence level, rejection by
 * token, sequence product and geometric mean, the token veto, the mismatch metrics).
 */
class RolloutCorrectionTest {

    /** Sequences of the given row counts (each a prompt token then its rows), behaviour and old log-probs given. */
    static TokenBatch batch(int[] rowsPerSeq, float[] beh, float[] old, float[] adv, float[] weight) {
        List<int[]> seqs = new ArrayList<>();
        int n = Arrays.stream(rowsPerSeq).sum();
        int[] seqId = new int[n], pos = new int[n], label = new int[n], src = new int[rowsPerSeq.length];
        int k = 0;
        for (int s = 0; s < rowsPerSeq.length; s++) {
            int[] toks = new int[rowsPerSeq[s] + 1];
            for (int i = 0; i < toks.length; i++) toks[i] = 3 + i;
            seqs.add(toks);
            src[s] = s;
            for (int i = 0; i < rowsPerSeq[s]; i++) {
                seqId[k] = s;
                pos[k] = i + 1;
                label[k] = toks[i + 1];
                k++;
            }
        }
        return new TokenBatch(seqs, src, seqId, pos, label, beh, old, null, adv, weight, null, null);
    }

    static float[] f(double... v) {
        float[] a = new float[v.length];
        for (int i = 0; i < v.length; i++) a[i] = (float) v[i];
        return a;
    }

    @Test
    void tokenTisByHand() {
        // δ = old − behaviour: 0.5, −0.2, 1.0 (e^1 = 2.718 truncated to 2), then a second sequence δ = 0
        TokenBatch b = batch(new int[] {3, 1}, f(-1.5, -0.8, -2.0, -0.3), f(-1.0, -1.0, -1.0, -0.3), f(1, 1, -2, 0.5), f(1, 1, 1, 1));
        RolloutCorrection.Applied a = RolloutCorrection.tokenIs(2).apply(b);
        float[] w = {(float) Math.exp(0.5), (float) Math.exp(-0.2), 2f, 1f};
        assertArrayEquals(w, a.isWeight(), 1e-6f);
        assertArrayEquals(f(w[0], w[1], -2 * 2, 0.5), a.batch().advantage(), 1e-6f);
        assertArrayEquals(b.weight(), a.batch().weight(), "no rejection: the loss weights stay");
        assertEquals((w[0] + w[1] + w[2] + w[3]) / 4, a.metrics().get("rc_is_mean"), 1e-6);
        assertEquals(2.0, a.metrics().get("rc_is_max"), 1e-6);
        assertEquals(Math.exp(-0.2), a.metrics().get("rc_is_min"), 1e-6);
        assertEquals((0.5 + 0.2 + 1.0 + 0) / 4, a.metrics().get("rc_mean_abs_delta"), 1e-6);
        assertEquals(-(0.5 - 0.2 + 1.0) / 4, a.metrics().get("rc_kl"), 1e-6);
        double k3 = (Math.exp(0.5) - 1.5) + (Math.exp(-0.2) - 0.8) + (Math.exp(1.0) - 2.0);
        assertEquals(k3 / 4, a.metrics().get("rc_k3_kl"), 1e-6);
    }

    @Test
    void sequenceTisAndRejectionAndVetoByHand() {
        // sequence 0: δ = 0.3, 0.4 (Σ 0.7, mean 0.35); sequence 1: δ = −0.1, −3 (Σ −3.1, mean −1.55); sequence 2: δ = 0.05
        float[] beh = f(-1, -1, -1, -1, -1), old = f(-0.7, -0.6, -1.1, -4, -0.95);
        TokenBatch b = batch(new int[] {2, 2, 1}, beh, old, f(1, 1, 1, 1, -1), f(1, 1, 1, 1, 1));
        RolloutCorrection.Applied s = RolloutCorrection.sequenceIs(5).apply(b);
        float w0 = (float) Math.exp(0.7), w1 = (float) Math.exp(-3.1), w2 = (float) Math.exp(0.05);
        assertArrayEquals(new float[] {w0, w0, w1, w1, w2}, s.isWeight(), 1e-6f);
        // geometric rejection outside [0.5, 1.5]: sequence 1 (e^−1.55 = 0.21) goes, 0 (e^0.35 = 1.42) and 2 stay
        RolloutCorrection.Applied g = RolloutCorrection.NONE.withRejection(RejectLevel.GEOMETRIC, 0.5, 1.5).apply(b);
        assertArrayEquals(f(1, 1, 0, 0, 1), g.batch().weight());
        assertSame(b.advantage(), g.batch().advantage(), "rejection alone leaves the advantages");
        assertNull(g.isWeight());
        assertEquals(2 / 5.0, g.metrics().get("rc_rejected_frac"), 1e-9);
        assertEquals(1 / 3.0, g.metrics().get("rc_rejected_seq_frac"), 1e-9);
        // sequence rejection outside [0.5, 2]: e^0.7 = 2.01 > 2 rejects sequence 0 too
        RolloutCorrection.Applied q = RolloutCorrection.NONE.withRejection(RejectLevel.SEQUENCE, 0.5, 2).apply(b);
        assertArrayEquals(f(0, 0, 0, 0, 1), q.batch().weight());
        // token rejection with lo = 1/hi = 0.8
        RolloutCorrection.Applied t = RolloutCorrection.NONE.withRejection(RejectLevel.TOKEN, Double.NaN, 1.25).apply(b);
        assertArrayEquals(f(0, 0, 1, 0, 1), t.batch().weight(), "e^0.3 = 1.35 and e^0.4 = 1.49 > 1.25, e^−3 < 0.8: rejected");
        // veto below 0.1: the whole of sequence 1
        RolloutCorrection.Applied v = RolloutCorrection.NONE.withVeto(0.1).apply(b);
        assertArrayEquals(f(1, 1, 0, 0, 1), v.batch().weight());
        assertEquals(1 / 3.0, v.metrics().get("rc_veto_seq_frac"), 1e-9);
        // the normalizers no longer count rejected rows (the kernel's own N and B do not either)
        assertEquals(3, v.batch().normalizer(LossAgg.TOKEN_MEAN), 0);
        assertEquals(2, v.batch().normalizer(LossAgg.SEQ_MEAN_TOKEN_MEAN), 0);
        assertEquals(5, b.normalizer(LossAgg.TOKEN_MEAN), 0);
    }

    @Test
    void randomBatchesEqualAnIndependentTranscriptionOfVerl() {
        long seed = Seeds.seed();
        System.out.println("RolloutCorrectionTest seed=" + seed);
        Random rnd = new Random(seed);
        for (int c = 0; c < 200; c++) {
            int seqs = 1 + rnd.nextInt(6);
            int[] len = new int[seqs];
            for (int s = 0; s < seqs; s++) len[s] = 1 + rnd.nextInt(9);
            int n = Arrays.stream(len).sum();
            float[] beh = new float[n], old = new float[n], adv = new float[n], m = new float[n];
            for (int r = 0; r < n; r++) {
                beh[r] = (float) -(0.01 + 4 * rnd.nextDouble());
                double d = rnd.nextInt(10) == 0 ? (rnd.nextBoolean() ? 25 : -25) * rnd.nextDouble() : rnd.nextGaussian() * 0.3;
                old[r] = (float) Math.min(0, beh[r] + d);
                adv[r] = (float) rnd.nextGaussian();
                m[r] = rnd.nextInt(6) == 0 ? 0f : 1f;
            }
            TokenBatch b = batch(len, beh, old, adv, m);
            IsLevel is = IsLevel.values()[rnd.nextInt(3)];
            RejectLevel rj = RejectLevel.values()[rnd.nextInt(4)];
            double cap = 1 + 3 * rnd.nextDouble(), hi = 1.05 + 2 * rnd.nextDouble(), lo = rnd.nextBoolean() ? Double.NaN : 0.2 + 0.7 / hi;
            double veto = rnd.nextBoolean() ? 0 : 1e-3;
            RolloutCorrection rc = new RolloutCorrection(is, cap, rj, lo, hi, veto);
            RolloutCorrection.Applied got = rc.apply(b);
            Expected e = verl(len, beh, old, m, is, cap, rj, Double.isNaN(lo) ? 1 / hi : lo, hi, veto);
            String where = "case " + c + " " + rc;
            for (int r = 0; r < n; r++) {
                if (!(m[r] > 0)) continue;
                if (is != IsLevel.NONE) {
                    assertEquals(e.w[r], got.isWeight()[r], 1e-6 * e.w[r] + 1e-12, where + " w[" + r + "]");
                    assertEquals(adv[r] * (float) e.w[r], got.batch().advantage()[r], 1e-6 * Math.abs(adv[r] * e.w[r]) + 1e-12, where + " A'[" + r + "]");
                }
                assertEquals(e.keep[r] ? 1f : 0f, got.batch().weight()[r], where + " kept[" + r + "]");
            }
            Map<String, Double> mt = got.metrics();
            assertEquals(e.absDelta, mt.get("rc_mean_abs_delta"), 1e-9 * (1 + e.absDelta), where);
            assertEquals(e.kl, mt.get("rc_kl"), 1e-9 * (1 + Math.abs(e.kl)), where);
            assertEquals(e.k3, mt.get("rc_k3_kl"), 1e-9 * (1 + Math.abs(e.k3)), where);
            assertEquals(e.rejected, mt.get("rc_rejected_frac"), 1e-12, where);
        }
    }

    record Expected(double[] w, boolean[] keep, double absDelta, double kl, double k3, double rejected) {}

    /** verl's rollout_corr_helper, written out per sequence (a row of the padded [batch, length] layout). */
    static Expected verl(int[] len, float[] beh, float[] old, float[] mask, IsLevel is, double cap, RejectLevel rj,
                         double lo, double hi, double veto) {
        int n = beh.length;
        double[] w = new double[n];
        boolean[] keep = new boolean[n];
        double tokens = 0, absD = 0, kl = 0, k3 = 0, rejected = 0;
        int at = 0;
        for (int L : len) {
            double sum = 0, cnt = 0;
            boolean vetoed = false;
            for (int i = at; i < at + L; i++) {
                if (mask[i] == 0) continue;
                double d = (double) old[i] - beh[i];
                sum += d;
                cnt++;
                if (veto > 0 && d < Math.log(veto)) vetoed = true;
            }
            for (int i = at; i < at + L; i++) {
                if (mask[i] == 0) continue;
                double d = (double) old[i] - beh[i];
                double logW = is == IsLevel.TOKEN ? d : sum;
                w[i] = Math.min(Math.exp(Math.max(-20, Math.min(20, logW))), cap);
                double logR = switch (rj) {
                    case TOKEN -> d;
                    case SEQUENCE -> sum;
                    case GEOMETRIC -> sum / cnt;
                    case NONE -> 0;
                };
                double ratio = Math.exp(Math.max(-20, Math.min(20, logR)));
                keep[i] = !vetoed && (rj == RejectLevel.NONE || (ratio >= lo && ratio <= hi));
                tokens++;
                absD += Math.abs(d);
                kl += -d;
                k3 += Math.exp(d) - d - 1;
                if (!keep[i]) rejected++;
            }
            at += L;
        }
        double inv = tokens > 0 ? 1 / tokens : 0;
        return new Expected(w, keep, absD * inv, kl * inv, k3 * inv, rejected * inv);
    }

    @Test
    void badInputAndUnsupportedCombinationsAreRefusedByName() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> RolloutCorrection.tokenIs(0));
        assertTrue(e.getMessage().contains("isThreshold"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> RolloutCorrection.NONE.withRejection(RejectLevel.TOKEN, 3, 2));
        assertTrue(e.getMessage().contains("rejectLow"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> RolloutCorrection.tokenIs(2).check(ClipMode.GSPO_SEQUENCE));
        assertTrue(e.getMessage().contains("GSPO_SEQUENCE"), e.getMessage());
        RolloutCorrection.sequenceIs(2).check(ClipMode.GSPO_SEQUENCE);
        TokenBatch noAdv = batch(new int[] {1}, f(-1), f(-1), null, f(1));
        e = assertThrows(IllegalArgumentException.class, () -> RolloutCorrection.tokenIs(2).apply(noAdv));
        assertTrue(e.getMessage().contains("advantages"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> RolloutCorrection.parse("is=token,cap=3"));
        assertTrue(e.getMessage().contains("cap"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> RolloutCorrection.parse("is=tokens"));
        assertTrue(e.getMessage().contains("tokens"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> RolloutCorrection.parse("reject-high=x"));
        assertTrue(e.getMessage().contains("'x'"), e.getMessage());
        assertEquals(new RolloutCorrection(IsLevel.TOKEN, 3, RejectLevel.GEOMETRIC, 0.999, 1.001, 1e-4),
                RolloutCorrection.parse("is=token, is-threshold=3, reject=geometric, reject-high=1.001, reject-low=0.999, veto=1e-4"));
        assertSame(RolloutCorrection.NONE, RolloutCorrection.parse("none"));
    }
}
