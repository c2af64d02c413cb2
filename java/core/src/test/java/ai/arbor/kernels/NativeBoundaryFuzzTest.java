package ai.arbor.kernels;

import static ai.arbor.kernels.FuzzHarness.ARG;
import static ai.arbor.kernels.FuzzHarness.STATE;
import static ai.arbor.kernels.FuzzHarness.badNegative;
import static ai.arbor.kernels.FuzzHarness.badTemperature;
import static ai.arbor.kernels.FuzzHarness.badUnit;
import static ai.arbor.kernels.FuzzHarness.logit;
import static ai.arbor.kernels.FuzzHarness.rowStats;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.testing.Seeds;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.function.BiConsumer;
import org.bytedeco.javacpp.FloatPointer;
import org.junit.jupiter.api.Test;

/**
 * The native boundary under random malformed arguments (docs/kernels.md, Argument validation): every
 * public entry point that reaches native code — token statistics, policy loss, sampling, token
 * advantages, on Java arrays and on memory ({@link MemRef}: direct buffers, JavaCPP pointers, raw
 * addresses) — is called {@code arbor.fuzz.calls} times (default 100,000) from a valid base call with
 * one (sometimes two) arguments broken. Each mutation kind is declared either <em>must throw</em> (one
 * exception type, the message naming the offending value or argument) or <em>legal</em> (the call runs
 * and its output is checked: NaN logits are data, a label on a masked row is unread, in place is
 * documented). Valid calls in between are checked against a double-precision reference, so a
 * validation bug that corrupts memory shows up. The tensor forms are fuzzed in java/torch.
 *
 * <p>Reproduce a run with {@code -Darbor.seed=N} (printed); {@code -Darbor.fuzz.calls=N} changes its length.
 */
class NativeBoundaryFuzzTest {
    static final int CALLS = Integer.getInteger("arbor.fuzz.calls", 100_000);

    interface Entry {
        void run(Random r);
    }

    final Map<String, Entry> entries = new LinkedHashMap<>();
    final Map<String, Long> nanos = new java.util.TreeMap<>();
    FuzzHarness h;
    final boolean cuda = Backend.CUDA.isAvailable();

    NativeBoundaryFuzzTest() {
        entries.put("TokenStats.forward(float[],int,int,int[],float,float[],float[])", r -> tsFwdArrays(r, true));
        entries.put("TokenStats.forward(float[],int,int,int,int[],float,boolean[],float[],float[],float[])", r -> tsFwdArrays(r, false));
        entries.put("TokenStats.backward(float[],int,int,int[],float,float[],float[],float[])", r -> tsBwdArrays(r, true));
        entries.put("TokenStats.backward(float[],int,int,int,int[],float,boolean[],float[],float[],float[],float[],float[])", r -> tsBwdArrays(r, false));
        entries.put("TokenStats.forward(LogitsView,MemRef,DType,float,MemRef,MemRef,MemRef,MemRef,long)", this::tsFwdMem);
        entries.put("TokenStats.backward(LogitsView,MemRef,DType,float,MemRef,MemRef,MemRef,MemRef,MemRef,MemRef,DType,long,long)", this::tsBwdMem);
        entries.put("PolicyLoss.forwardBackward(PolicyLossConfig,float[],int,int,int[],float[],float[],float[],float[],int[],float[])", r -> plArrays(r, 0));
        entries.put("PolicyLoss.forwardBackward(PolicyLossConfig,float[],int,int,int,int[],float[],float[],float[],float[],int[],float[],float[])", r -> plArrays(r, 1));
        entries.put("PolicyLoss.forwardBackwardComposable(PolicyLossConfig,float[],int,int,int[],float[],float[],float[],float[],int[],float[])", r -> plArrays(r, 2));
        entries.put("PolicyLoss.loss(PolicyLossConfig,float[],float[],float[],float[],float[],float[],int[],float[],float[],float[])", r -> plArrays(r, 3));
        entries.put("PolicyLoss.workspaceBytes(long,long)", this::plWorkspace);
        entries.put("PolicyLoss.forwardBackward(PolicyLossConfig,LogitsView,Inputs,MemRef,DType,long,RowOutputs,MemRef,long)", r -> plMem(r, 0));
        entries.put("PolicyLoss.loss(PolicyLossConfig,long,MemRef,MemRef,Inputs,MemRef,MemRef,MemRef,long)", r -> plMem(r, 1));
        entries.put("PolicyLoss.weights(PolicyLossConfig,long,MemRef,MemRef,long,MemRef,MemRef,MemRef,long)", r -> plMem(r, 2));
        entries.put("PolicyLoss.forwardBackwardAsync(PolicyLossConfig,float,LogitsView,Inputs,MemRef,MemRef,DType,long,RowOutputs,MemRef,MemRef,long)", r -> plMem(r, 3));
        entries.put("PolicyLoss.lossAsync(PolicyLossConfig,float,long,MemRef,MemRef,Inputs,MemRef,MemRef,MemRef,MemRef,MemRef,long)", r -> plMem(r, 4));
        entries.put("Sampler.sample(float[],int,int,SamplingParams,long,long)", r -> sampleArrays(r, 0));
        entries.put("Sampler.sample(float[],int,int,int,SamplingParams,long,long[],long[],boolean[])", r -> sampleArrays(r, 1));
        entries.put("Sampler.sample(float[],int,int,int,SamplingParams[],long,long[],long[],boolean[])", r -> sampleArrays(r, 2));
        entries.put("Sampler.sample(Batch,Outputs,long)", this::sampleMem);
        entries.put("Sampler.uniform(long,long,long,long)", r -> noise(r, false));
        entries.put("Sampler.gumbel(long,long,long,long)", r -> noise(r, true));
        entries.put("Sampler.drawUniform(long,long,long,int)", this::drawUniform);
        entries.put("TokenAdvantages.compute(float[],int[],boolean[],float[],boolean[],TokenShaping)", r -> advArrays(r, 0));
        entries.put("TokenAdvantages.computeInto(float[],int[],boolean[],float[],boolean[],TokenShaping,float[])", r -> advArrays(r, 1));
        entries.put("TokenAdvantages.computePadded(float[],int,boolean[],float[],boolean[],TokenShaping)", r -> advArrays(r, 2));
        entries.put("TokenAdvantages.compute(MemRef,long,MemRef,DType,long,long,MemRef,MemRef,MemRef,TokenShaping,MemRef,MemRef,long)", this::advMem);
    }

    /** Public static methods of the kernel classes that reach native code, and those that do not (with why). */
    static final Class<?>[] KERNEL_CLASSES = {TokenStats.class, PolicyLoss.class, Sampler.class, TokenAdvantages.class};
    static final Map<String, String> NOT_NATIVE = Map.of(
            "PolicyLoss.aepoEntropyThreshold(double,float[],float[])", "Java only (a sort); fuzzed through the AEPO entries",
            "PolicyLoss.gspoAnchor(ClipMode,float[],float[],float[],float[],int[],float[],float[])",
            "Java only (O(T) sums); fuzzed through the GSPO configs of the array entries",
            "TokenAdvantages.postToolFlags(int[],byte[])", "Java only; fuzzed below for exceptions",
            "TokenAdvantages.seqIdsOf(int[])", "Java only; fuzzed below for exceptions");

    @Test
    void everyPublicNativeEntryPointIsFuzzed() {
        FuzzHarness.assertEveryEntryPointFuzzed(KERNEL_CLASSES, entries.keySet(), NOT_NATIVE, "NativeBoundaryFuzzTest");
    }

    @Test
    void malformedCallsThrowNamedExceptionsAndNeverCrash() {
        long seed = Seeds.seed("NativeBoundaryFuzzTest");
        h = new FuzzHarness(seed, 8 << 20);
        List<String> names = new ArrayList<>(entries.keySet());
        long t0 = System.nanoTime();
        try {
            for (long i = 0; h.total() < CALLS; i++) {  // CALLS calls that ran (a case that does not apply is redrawn)
                Random r = h.caseRandom(i);
                if (i % 1000 == 999) Kernels.forceCpuIsa(Kernels.cpuIsas().get(r.nextInt(Kernels.cpuIsas().size())));  // every ISA path
                String name = names.get(r.nextInt(names.size()));
                long c0 = System.nanoTime();
                entries.get(name).run(r);
                nanos.merge(name, System.nanoTime() - c0, Long::sum);
            }
        } finally {
            Kernels.forceCpuIsa(null);
        }
        long ms = (System.nanoTime() - t0) / 1_000_000;
        h.print("NativeBoundaryFuzzTest", ms);
        if (Boolean.getBoolean("arbor.fuzz.profile")) nanos.forEach((k, v) -> System.out.printf("  %8d ms  %s%n", v / 1_000_000, k));
        assertEquals(entries.size(), h.counts().size(), "entries exercised: " + h.counts().keySet());
        h.counts().forEach((n, c) -> assertTrue(c[0] > 0 && c[1] > 0, n + " was not exercised with both valid and malformed calls"));
        assertTrue(ms < 45_000, "the fuzz run took " + ms + " ms; CI allows 60 s for both modules");
    }

    // =============================================================================================
    // Token statistics over arrays
    // =============================================================================================

    static final class TsArrays {
        int rows, vocab, limit;
        float[] x;
        int[] labels;
        float t;
        boolean[] mask;
        float[] lp, ent, lse;
        float[] glp, gh, grad;

        static TsArrays random(Random r, boolean shortForm) {
            TsArrays a = new TsArrays();
            a.rows = r.nextInt(6);
            a.vocab = 1 + r.nextInt(r.nextBoolean() ? 8 : 70);
            a.limit = shortForm ? a.vocab : 1 + r.nextInt(a.vocab);
            a.x = new float[a.rows * a.vocab];
            for (int i = 0; i < a.x.length; i++) a.x[i] = logit(r);
            a.labels = new int[a.rows];
            for (int i = 0; i < a.rows; i++) a.labels[i] = r.nextInt(a.limit);
            a.t = new float[] {1f, 0.5f, 1.7f, 3f}[r.nextInt(4)];
            if (!shortForm && r.nextBoolean()) {
                a.mask = new boolean[a.rows];
                for (int i = 0; i < a.rows; i++) a.mask[i] = r.nextInt(4) != 0;
            }
            a.lp = new float[a.rows];
            a.ent = new float[a.rows];
            a.lse = shortForm ? null : new float[a.rows];
            a.glp = new float[a.rows];
            a.gh = new float[a.rows];
            for (int i = 0; i < a.rows; i++) {
                a.glp[i] = (r.nextInt(9) - 4) / 2f;
                a.gh[i] = (r.nextInt(9) - 4) / 2f;
            }
            a.grad = new float[a.x.length];
            Arrays.fill(a.lp, 99f);
            Arrays.fill(a.ent, 99f);
            return a;
        }

        boolean valid(int row) {
            return mask == null || mask[row];
        }
    }

    void tsFwdArrays(Random r, boolean shortForm) {
        String e = shortForm ? "TokenStats.forward(arrays, 7)" : "TokenStats.forward(arrays, 10)";
        TsArrays a = TsArrays.random(r, shortForm);
        Runnable call = () -> {
            if (shortForm) TokenStats.forward(a.x, a.rows, a.vocab, a.labels, a.t, a.lp, a.ent);
            else TokenStats.forward(a.x, a.rows, a.vocab, a.limit, a.labels, a.t, a.mask, a.lp, a.ent, a.lse);
        };
        int kinds = shortForm ? 14 : 20;
        int k = r.nextInt(4) == 0 ? -1 : r.nextInt(kinds);
        switch (k) {
            case -1 -> {
                h.legal(e, "valid", call::run);
                checkTsForward(e, a);
            }
            case 0 -> {
                int bad = badNegative(r);
                a.rows = bad;
                h.mustThrow(e, "rows < 0", ARG, call::run, "rows must be >= 0, got " + bad);
            }
            case 1 -> {
                a.rows = r.nextBoolean() ? Integer.MAX_VALUE : 1 << 20 + r.nextInt(11);
                h.mustThrow(e, "rows huge", ARG, call::run, "rows * vocab", "logits.length");
            }
            case 2 -> {
                if (a.x.length == 0 && a.vocab > 0) a.rows = 3;
                else a.rows += r.nextBoolean() ? 1 : -1;
                if (a.rows < 0) a.rows = 7;
                h.mustThrow(e, "rows mismatch", ARG, call::run, "logits.length");
            }
            case 3 -> {
                a.vocab = r.nextBoolean() ? 0 : badNegative(r);
                int bad = a.vocab;
                h.mustThrow(e, "vocab <= 0", ARG, call::run, "vocab must be > 0, got " + bad, "vocabLimit");
            }
            case 4 -> {
                a.x = null;
                h.mustThrow(e, "logits null", ARG, call::run, "logits must not be null");
            }
            case 5 -> {
                a.x = new float[a.x.length + 1 + r.nextInt(3)];
                h.mustThrow(e, "logits length", ARG, call::run, "logits.length");
            }
            case 6 -> {
                if (a.rows == 0) return;
                a.labels = null;
                h.mustThrow(e, "labels null", ARG, call::run, "labels must not be null");
            }
            case 7 -> {
                a.labels = new int[a.rows + 1];
                h.mustThrow(e, "labels length", ARG, call::run, "labels.length");
            }
            case 8 -> {
                if (a.rows == 0) return;
                int row = r.nextInt(a.rows);
                int bad = new int[] {-1, a.limit, a.vocab, a.limit + 5, Integer.MAX_VALUE, Integer.MIN_VALUE, -100}[r.nextInt(7)];
                a.labels[row] = bad;
                if (a.valid(row)) {
                    h.mustThrow(e, "label out of range", ARG, call::run, "labels[" + row + "] = " + bad);
                } else {  // legal: a masked row's label is unread
                    h.legal(e, "label on masked row", call::run);
                    checkTsForward(e, a);
                }
            }
            case 9 -> {
                float bad = badTemperature(r);
                a.t = bad;
                h.mustThrow(e, "temperature", ARG, call::run, "temperature must be finite and > 0, got " + (double) bad);
            }
            case 10 -> {  // a huge temperature is legal: uniform over the real vocabulary
                a.t = 1e30f;
                h.legal(e, "huge temperature", call::run);
                checkTsForward(e, a);
            }
            case 11 -> {
                if (r.nextBoolean()) a.lp = new float[a.rows + 1];
                else a.ent = new float[Math.max(0, a.rows - 1) == a.rows ? a.rows + 2 : a.rows - 1];
                h.mustThrow(e, "output length", ARG, call::run, "logprobOut.length", "entropyOut.length");
            }
            case 12 -> {  // NaN / +inf / -inf logits are data: that row is NaN (or finite for some -inf)
                if (a.rows == 0) return;
                int row = r.nextInt(a.rows);
                float v = new float[] {Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY}[r.nextInt(3)];
                a.x[row * a.vocab + r.nextInt(a.limit)] = v;
                if (r.nextInt(4) == 0) for (int j = 0; j < a.vocab; j++) a.x[row * a.vocab + j] = Float.NEGATIVE_INFINITY;
                if (v == Float.NEGATIVE_INFINITY && a.labels != null) a.labels[row] = pickFiniteLabel(a.x, row * a.vocab, a.limit, a.labels[row]);
                h.legal(e, "special logits", call::run);
                checkTsForward(e, a);
            }
            case 13 -> {  // the same array for two outputs would silently keep one of them
                if (a.rows == 0) return;
                a.ent = a.lp;
                h.mustThrow(e, "aliased outputs", ARG, call::run, "logprobOut and entropyOut must be different");
            }
            case 14 -> {
                int bad = r.nextBoolean() ? 0 : r.nextBoolean() ? badNegative(r) : a.vocab + 1 + r.nextInt(3);
                a.limit = bad;
                h.mustThrow(e, "vocabLimit", ARG, call::run, "vocabLimit must be in [1, " + a.vocab + "], got " + bad);
            }
            case 15 -> {
                a.mask = new boolean[a.rows + 1];
                h.mustThrow(e, "rowMask length", ARG, call::run, "rowMask.length");
            }
            case 16 -> {
                a.lse = new float[a.rows + 2];
                h.mustThrow(e, "lse length", ARG, call::run, "lseOut.length");
            }
            case 17 -> {  // outputs may be null; labels are then unread
                a.lp = null;
                if (r.nextBoolean()) a.labels = null;
                if (r.nextBoolean()) a.lse = null;
                h.legal(e, "null outputs", call::run);
                checkTsForward(e, a);
            }
            case 18 -> {  // a label in the padding columns
                if (a.rows == 0 || a.limit == a.vocab) return;
                int row = r.nextInt(a.rows);
                if (!a.valid(row)) return;
                int bad = a.limit + r.nextInt(a.vocab - a.limit);
                a.labels[row] = bad;
                h.mustThrow(e, "label in padding", ARG, call::run, "labels[" + row + "] = " + bad);
            }
            default -> {
                if (a.rows == 0 || a.lse == null) return;
                a.lse = a.ent;
                h.mustThrow(e, "aliased outputs", ARG, call::run, "entropyOut and lseOut must be different");
            }
        }
    }

    static int pickFiniteLabel(float[] x, int off, int limit, int label) {
        if (Float.isFinite(x[off + label])) return label;
        for (int j = 0; j < limit; j++) if (Float.isFinite(x[off + j])) return j;
        return label;
    }

    void checkTsForward(String e, TsArrays a) {
        for (int row = 0; row < a.rows; row++) {
            int lab = a.lp != null ? a.labels[row] : -1;
            boolean valid = a.valid(row);
            double[] s = valid ? rowStats(a.x, row * a.vocab, a.limit, lab, a.t) : new double[] {0, 0, 0};
            double tol = 1e-4 * (1 + Math.log(a.limit)) + 1e-5 * 10 / a.t;
            if (a.lp != null) h.close(e, "logprob[" + row + "]", s[1], a.lp[row], tol);
            if (a.ent != null) h.close(e, "entropy[" + row + "]", s[2], a.ent[row], tol);
            if (a.lse != null) h.close(e, "lse[" + row + "]", s[0], a.lse[row], tol + 1e-5 * Math.abs(s[0]));
        }
    }

    void tsBwdArrays(Random r, boolean shortForm) {
        String e = shortForm ? "TokenStats.backward(arrays, 8)" : "TokenStats.backward(arrays, 12)";
        TsArrays a = TsArrays.random(r, shortForm);
        float[][] saved = {null, null};  // lse, entropy
        if (!shortForm && r.nextBoolean()) {
            saved[0] = new float[a.rows];
            saved[1] = new float[a.rows];
            TokenStats.forward(a.x, a.rows, a.vocab, a.limit, null, a.t, a.mask, null, saved[1], saved[0]);
        }
        Runnable call = () -> {
            if (shortForm) TokenStats.backward(a.x, a.rows, a.vocab, a.labels, a.t, a.glp, a.gh, a.grad);
            else TokenStats.backward(a.x, a.rows, a.vocab, a.limit, a.labels, a.t, a.mask, saved[0], saved[1], a.glp, a.gh, a.grad);
        };
        int k = r.nextInt(4) == 0 ? -1 : r.nextInt(shortForm ? 11 : 14);
        switch (k) {
            case -1 -> {
                h.legal(e, "valid", call::run);
                checkTsBackward(e, a, a.x);
            }
            case 0 -> {
                int bad = badNegative(r);
                a.rows = bad;
                h.mustThrow(e, "rows < 0", ARG, call::run, "rows must be >= 0, got " + bad);
            }
            case 1 -> {
                if (a.rows == 0) return;
                a.vocab = a.vocab * 2 + 1;
                h.mustThrow(e, "vocab mismatch", ARG, call::run, "logits.length", "vocabLimit");
            }
            case 2 -> {
                a.grad = r.nextBoolean() ? null : new float[a.x.length + 1];
                h.mustThrow(e, "grad length", ARG, call::run, "gradLogitsOut");
            }
            case 3 -> {
                if (a.rows == 0) return;
                int row = r.nextInt(a.rows);
                int bad = new int[] {-1, a.limit, Integer.MAX_VALUE, Integer.MIN_VALUE}[r.nextInt(4)];
                a.labels[row] = bad;
                if (a.valid(row)) h.mustThrow(e, "label out of range", ARG, call::run, "labels[" + row + "] = " + bad);
                else {
                    h.legal(e, "label on masked row", call::run);
                    checkTsBackward(e, a, a.x);
                }
            }
            case 4 -> {
                float bad = badTemperature(r);
                a.t = bad;
                h.mustThrow(e, "temperature", ARG, call::run, "temperature must be finite and > 0, got " + (double) bad);
            }
            case 5 -> {
                a.glp = new float[a.rows + 1];
                h.mustThrow(e, "gradLogprob length", ARG, call::run, "gradLogprob.length");
            }
            case 6 -> {  // in place over the logits is documented
                float[] x0 = a.x.clone();
                a.grad = a.x;
                h.legal(e, "in place", call::run);
                checkTsBackward(e, a, x0);
            }
            case 7 -> {  // no upstream gradient for logprob: labels unread
                a.glp = null;
                a.labels = r.nextBoolean() ? null : new int[] {-5};
                h.legal(e, "gradLogprob null", call::run);
                checkTsBackward(e, a, a.x);
            }
            case 8 -> {  // the gradient written over an upstream input (vocab 1: same length)
                if (a.rows == 0) return;
                a.vocab = 1;
                a.limit = 1;
                a.x = new float[a.rows];
                a.labels = new int[a.rows];
                a.grad = a.glp;
                if (!shortForm && saved[0] != null) { saved[0] = null; saved[1] = null; }
                h.mustThrow(e, "grad aliases gradLogprob", ARG, call::run, "gradLogitsOut and gradLogprob must be different");
            }
            case 9 -> {
                if (a.rows == 0) return;
                a.labels = null;
                h.mustThrow(e, "labels null", ARG, call::run, "labels must not be null");
            }
            case 10 -> {
                a.gh = new float[a.rows + 3];
                h.mustThrow(e, "gradEntropy length", ARG, call::run, "gradEntropy.length");
            }
            case 11 -> {
                saved[0] = new float[a.rows];
                saved[1] = null;
                h.mustThrow(e, "lse without entropy", ARG, call::run, "lse and entropy must be given together");
            }
            case 12 -> {
                a.mask = new boolean[Math.max(0, a.rows - 1) == a.rows ? 1 : a.rows - 1];
                h.mustThrow(e, "rowMask length", ARG, call::run, "rowMask.length");
            }
            default -> {
                saved[0] = new float[a.rows + 1];
                saved[1] = new float[a.rows + 1];
                h.mustThrow(e, "saved length", ARG, call::run, "lse.length");
            }
        }
    }

    /** The gradient of every row against the double reference (over the original logits {@code x}). */
    void checkTsBackward(String e, TsArrays a, float[] x) {
        for (int row = 0; row < a.rows; row++) {
            double[] s = rowStats(x, row * a.vocab, a.limit, -1, a.t);
            double pz = 0;
            for (int i = 0; i < a.limit; i++) pz += Math.exp(x[row * a.vocab + i] / a.t - s[0]) * x[row * a.vocab + i] / a.t;
            for (int j = 0; j < a.vocab; j++) {
                double g = 0;
                if (a.valid(row) && j < a.limit) {
                    double p = Math.exp(x[row * a.vocab + j] / a.t - s[0]);
                    double glp = a.glp == null ? 0 : a.glp[row], gh = a.gh == null ? 0 : a.gh[row];
                    int y = a.glp == null ? -1 : a.labels[row];
                    g = (glp * ((j == y ? 1 : 0) - p) - gh * p * (x[row * a.vocab + j] / a.t - pz)) / a.t;
                }
                h.close(e, "grad[" + row + ", " + j + "]", g, a.grad[row * a.vocab + j], 2e-4 * (1 + 10 / a.t));
            }
        }
    }

    // =============================================================================================
    // Token statistics over memory
    // =============================================================================================

    /** A random logits matrix in pool memory (values exact in every dtype) and its float copy (stride-packed [rows, vocab]). */
    final class Mat {
        DType dt;
        long rows, vocab, stride, limit;
        MemRef mem;
        float[] x;  // [rows, vocab]

        Mat(Random r, int maxRows) {
            dt = new DType[] {DType.F32, DType.BF16, DType.F16}[r.nextInt(3)];
            rows = r.nextInt(maxRows + 1);
            vocab = 1 + r.nextInt(r.nextBoolean() ? 6 : 50);
            stride = vocab + (r.nextBoolean() ? 0 : r.nextInt(5));
            limit = r.nextInt(3) == 0 ? 1 + r.nextInt((int) vocab) : vocab;
            mem = h.alloc(LogitsView.elements(rows, vocab, stride) * dt.bytes());
            x = new float[(int) (rows * vocab)];
            for (int i = 0; i < rows; i++)
                for (int j = 0; j < vocab; j++) set(i, j, logit(r));
        }

        void set(long i, long j, float v) {
            x[(int) (i * vocab + j)] = v;
            h.putLogit(mem, i * stride + j, dt, v);
        }

        LogitsView view() {
            return new LogitsView(mem, dt, rows, vocab, stride, limit);
        }

        long bytes() {
            return LogitsView.elements(rows, vocab, stride) * dt.bytes();
        }
    }

    /** Labels of {@code type} in memory. */
    MemRef labels(Random r, long rows, long limit, DType type, long[] out) {
        MemRef m = h.alloc(rows * type.bytes());
        for (int i = 0; i < rows; i++) {
            out[i] = r.nextInt((int) limit);
            if (type == DType.I32) h.putI32(m, i, (int) out[i]);
            else h.putI64(m, i, out[i]);
        }
        return m;
    }

    /** The generic memory mutations of one MemRef argument (index into {@code refs}). */
    enum MemMut { NULL, SMALL, MISALIGNED, CUDA, CLOSED }

    /**
     * Applies {@code kind} to {@code refs[i]} and states the expectation: a required argument set to null
     * throws naming it; too small names it and its size; misaligned names it and "aligned"; on another
     * device names it; a closed owner is an IllegalStateException naming it. Returns false when the
     * mutation does not apply (e.g. null of an optional argument: the caller treats that as legal).
     */
    boolean memMutation(String e, MemMut kind, MemRef[] refs, int i, String name, int elemBytes, boolean required,
                        FuzzHarness.Call call) {
        MemRef m = refs[i];
        switch (kind) {
            case NULL -> {
                if (!required) return false;
                refs[i] = null;
                h.mustThrow(e, name + " null", ARG, call, name + " must not be null");
            }
            case SMALL -> {
                if (m == null || m.bytes() == 0) return false;
                long less = 1 + (m.bytes() > 1 ? new Random(m.bytes()).nextInt((int) Math.min(m.bytes() - 1, 7)) : 0);
                refs[i] = new MemRef(m.address(), m.bytes() - less, m.device(), m.owner());
                h.mustThrow(e, name + " too small", ARG, call, name + " needs ");
            }
            case MISALIGNED -> {
                if (m == null || elemBytes == 1 || m.bytes() == 0) return false;
                refs[i] = h.shifted(m, 1 + (int) (m.address() % (elemBytes - 1)));
                h.mustThrow(e, name + " misaligned", ARG, call, name + " address 0x");
            }
            case CUDA -> {
                if (m == null || cuda || m.bytes() == 0) return false;
                refs[i] = FuzzHarness.onCuda(m);
                h.mustThrow(e, name + " on another device", ARG, call, name + " is on cuda:0", "on cuda:0");
            }
            case CLOSED -> {
                if (m == null || m.bytes() == 0) return false;
                refs[i] = FuzzHarness.closed(m.bytes());
                h.mustThrow(e, name + " closed", STATE, call, name + " is owned by a BytePointer that was closed");
            }
        }
        return true;
    }

    void tsFwdMem(Random r) {
        String e = "TokenStats.forward(memory)";
        Mat x = new Mat(r, 5);
        DType lt = r.nextBoolean() ? DType.I32 : DType.I64;
        long[] y = new long[(int) x.rows];
        long n = x.rows;
        boolean masked = r.nextBoolean();
        byte[] mask = new byte[(int) n];
        MemRef[] m = new MemRef[6];  // logits, labels, rowMask, logprob, entropy, lse
        m[0] = x.mem;
        m[1] = labels(r, n, x.limit, lt, y);
        if (masked) {
            m[2] = h.alloc(n);
            for (int i = 0; i < n; i++) h.putU8(m[2], i, mask[i] = (byte) (r.nextInt(4) == 0 ? 0 : 1));
        } else Arrays.fill(mask, (byte) 1);
        for (int i = 3; i < 6; i++) m[i] = r.nextInt(5) == 0 ? null : h.alloc(4 * n);
        float[] t = {new float[] {1f, 0.5f, 2f}[r.nextInt(3)]};
        DType[] ltp = {lt};
        long[] rowsOverride = {-1};
        FuzzHarness.Call call = () -> TokenStats.forward(
                rowsOverride[0] < 0 ? new LogitsView(m[0], x.dt, x.rows, x.vocab, x.stride, x.limit)
                        : new LogitsView(m[0], x.dt, rowsOverride[0], x.vocab, x.stride, x.limit),
                m[1], ltp[0], t[0], m[2], m[3], m[4], m[5], 0L);
        String[] names = {"logits", "labels", "rowMask", "logprob", "entropy", "lse"};
        int[] elem = {x.dt.bytes(), lt.bytes(), 1, 4, 4, 4};
        int k = r.nextInt(4) == 0 ? -1 : r.nextInt(14);
        switch (k) {
            case -1 -> {
                h.legal(e, "valid", call);
                checkTsMem(e, x, y, mask, t[0], m[3], m[4], m[5]);
            }
            case 0, 1, 2, 3 -> {  // generic mutations of one argument
                int i = r.nextInt(6);
                MemMut kind = MemMut.values()[1 + r.nextInt(4)];
                if (x.rows == 0 && i > 0) return;
                if (i == 1 && m[3] == null) return;  // labels unread without logprob
                // Logits on cuda with every other argument absent is no device mismatch: it is a
                // consistent CUDA call (an unavailable device is another error, not this mutation's).
                if (i == 0 && kind == MemMut.CUDA && m[2] == null && m[3] == null && m[4] == null && m[5] == null) return;
                memMutation(e, kind, m, i, names[i], elem[i], true, call);
            }
            case 4 -> {  // null labels with logprob wanted
                if (m[3] == null) return;
                m[1] = null;
                h.mustThrow(e, "labels null", ARG, call, "labels must not be null");
            }
            case 5 -> {
                DType bad = new DType[] {DType.F32, DType.U8, DType.BF16, null}[r.nextInt(4)];
                if (m[3] == null) return;
                ltp[0] = bad;
                h.mustThrow(e, "labelType", ARG, call, "labelType must be I32 or I64, got " + bad);
            }
            case 6 -> {
                if (n == 0 || m[3] == null) return;
                int row = r.nextInt((int) n);
                long bad = new long[] {-1, x.limit, x.vocab + 3, Integer.MAX_VALUE, -100}[r.nextInt(5)];
                if (lt == DType.I32) h.putI32(m[1], row, (int) bad);
                else h.putI64(m[1], row, bad);
                if (mask[row] != 0) h.mustThrow(e, "label out of range", ARG, call, "labels[" + row + "] = " + bad);
                else {
                    h.legal(e, "label on masked row", call);
                    checkTsMem(e, x, y, mask, t[0], m[3], m[4], m[5]);
                }
            }
            case 7 -> {
                float bad = badTemperature(r);
                t[0] = bad;
                h.mustThrow(e, "temperature", ARG, call, "temperature must be finite and > 0, got " + (double) bad);
            }
            case 8 -> {  // an output overlapping an input or another output
                if (n == 0) return;
                int o = 3 + r.nextInt(3);
                int target = r.nextInt(6);
                if (m[o] == null || target == o || m[target] == null || m[target].bytes() == 0) return;
                if (target == 1 && m[3] == null) return;
                m[o] = h.at(m[target], 0, 4 * n);
                h.mustThrow(e, "output overlaps " + names[target], ARG, call, names[o] + " [0x", "overlaps " + names[o]);
            }
            case 9 -> {  // rows whose byte size overflows, or more rows than the memory holds
                rowsOverride[0] = r.nextBoolean() ? Long.MAX_VALUE / 2 + r.nextInt(1000) : x.rows + 1 + r.nextInt(1 << 20);
                h.mustThrow(e, "rows huge", ARG, call, "overflows", "logits needs ");
            }
            case 10 -> {  // the view's own checks
                long bad = r.nextInt(3);
                int which = r.nextInt(3);
                FuzzHarness.Call c = switch (which) {
                    case 0 -> () -> new LogitsView(m[0], x.dt, x.rows, x.vocab, x.vocab - 1 - bad, x.limit);
                    case 1 -> () -> new LogitsView(m[0], x.dt, x.rows, x.vocab, x.stride, x.vocab + 1 + bad);
                    default -> () -> new LogitsView(m[0], DType.I32, x.rows, x.vocab, x.stride, x.limit);
                };
                h.mustThrow(e, "view", ARG, c, which == 0 ? "rowStride must be >= vocab" : which == 1 ? "vocabLimit must be in" : "logits dtype");
            }
            case 11 -> {  // CUDA memory without a device, or mixed devices
                if (cuda || n == 0) return;
                for (int i = 0; i < 6; i++) if (m[i] != null) m[i] = FuzzHarness.onCuda(m[i]);
                h.mustThrow(e, "cuda without a device", STATE, call, "CUDA memory given but");
            }
            case 12 -> {  // NaN / inf logits are data
                if (n == 0) return;
                int row = r.nextInt((int) n);
                x.set(row, r.nextInt((int) x.limit), new float[] {Float.NaN, Float.POSITIVE_INFINITY}[r.nextInt(2)]);
                h.legal(e, "special logits", call);
                checkTsMem(e, x, y, mask, t[0], m[3], m[4], m[5]);
            }
            default -> {  // optional outputs absent: labels then unread
                m[3] = null;
                if (r.nextBoolean()) m[1] = null;
                h.legal(e, "no logprob", call);
                checkTsMem(e, x, y, mask, t[0], m[3], m[4], m[5]);
            }
        }
    }

    void checkTsMem(String e, Mat x, long[] y, byte[] mask, float t, MemRef lp, MemRef ent, MemRef lse) {
        for (int row = 0; row < x.rows; row++) {
            double[] s = mask[row] != 0 ? rowStats(x.x, (int) (row * x.vocab), (int) x.limit, (int) y[row], t) : new double[] {0, 0, 0};
            double tol = 1e-4 * (1 + Math.log(x.limit)) + 1e-4 / t;
            if (lp != null) h.close(e, "logprob[" + row + "]", s[1], h.getF32(lp, row), tol);
            if (ent != null) h.close(e, "entropy[" + row + "]", s[2], h.getF32(ent, row), tol);
            if (lse != null) h.close(e, "lse[" + row + "]", s[0], h.getF32(lse, row), tol + 1e-5 * Math.abs(s[0]));
        }
    }

    void tsBwdMem(Random r) {
        String e = "TokenStats.backward(memory)";
        Mat x = new Mat(r, 4);
        long n = x.rows;
        DType lt = r.nextBoolean() ? DType.I32 : DType.I64;
        long[] y = new long[(int) n];
        DType[] gt = {r.nextBoolean() ? DType.F32 : x.dt};
        long[] gs = {x.vocab + (r.nextBoolean() ? 0 : r.nextInt(3))};
        MemRef[] m = new MemRef[6];  // logits, labels, gradLogprob, gradEntropy, rowMask, gradLogits
        m[0] = x.mem;
        m[1] = labels(r, n, x.limit, lt, y);
        float[] glp = new float[(int) n], gh = new float[(int) n];
        m[2] = h.alloc(4 * n);
        m[3] = h.alloc(4 * n);
        for (int i = 0; i < n; i++) {
            h.putF32(m[2], i, glp[i] = (r.nextInt(9) - 4) / 2f);
            h.putF32(m[3], i, gh[i] = (r.nextInt(9) - 4) / 2f);
        }
        byte[] mask = new byte[(int) n];
        Arrays.fill(mask, (byte) 1);
        if (r.nextBoolean()) {
            m[4] = h.alloc(n);
            for (int i = 0; i < n; i++) h.putU8(m[4], i, mask[i] = (byte) (r.nextInt(4) == 0 ? 0 : 1));
        }
        m[5] = h.alloc(LogitsView.elements(n, x.vocab, gs[0]) * gt[0].bytes());
        float[] t = {new float[] {1f, 0.5f, 2f}[r.nextInt(3)]};
        FuzzHarness.Call call = () -> TokenStats.backward(new LogitsView(m[0], x.dt, x.rows, x.vocab, x.stride, x.limit),
                m[1], lt, t[0], m[4], null, null, m[2], m[3], m[5], gt[0], gs[0], 0L);
        String[] names = {"logits", "labels", "gradLogprob", "gradEntropy", "rowMask", "gradLogits"};
        int[] elem = {x.dt.bytes(), lt.bytes(), 4, 4, 1, gt[0].bytes()};
        int k = r.nextInt(4) == 0 ? -1 : r.nextInt(10);
        switch (k) {
            case -1 -> {
                h.legal(e, "valid", call);
                checkTsBwdMem(e, x, y, mask, t[0], glp, gh, m[5], gt[0], gs[0]);
            }
            case 0, 1, 2 -> {
                int i = r.nextInt(6);
                if (n == 0) return;
                memMutation(e, MemMut.values()[1 + r.nextInt(4)], m, i, names[i], elem[i], true, call);
            }
            case 3 -> {  // in place: the gradient over the logits' own memory (same dtype and stride)
                gt[0] = x.dt;
                gs[0] = x.stride;
                m[5] = m[0];
                Mat orig = x;
                float[] x0 = x.x.clone();
                h.legal(e, "in place", call);
                Mat copy = orig;
                copy.x = x0;
                checkTsBwdMem(e, copy, y, mask, t[0], glp, gh, m[5], gt[0], gs[0]);
            }
            case 4 -> {  // partial overlap with the logits (shifted by some elements or rows)
                if (n == 0) return;
                gt[0] = x.dt;
                gs[0] = x.stride;
                // a shift that lands a gradient row on a logits row (not in the gap of a strided matrix)
                long shift = x.stride * r.nextInt((int) n) + r.nextInt((int) x.vocab);
                if (shift == 0) return;
                m[5] = h.at(m[0], shift * x.dt.bytes(), x.bytes());
                h.mustThrow(e, "grad overlaps logits", ARG, call, "gradLogits [0x");
            }
            case 5 -> {  // in place with another dtype or stride
                if (n == 0) return;
                boolean dtype = x.dt != DType.F32 && r.nextBoolean();
                gt[0] = dtype ? DType.F32 : x.dt;
                gs[0] = dtype ? x.stride : x.stride + 1;
                m[5] = h.at(m[0], 0, LogitsView.elements(n, x.vocab, gs[0]) * gt[0].bytes());
                h.mustThrow(e, "in place, other layout", ARG, call, "in-place gradient must have", "gradLogits [0x", "logits needs", "gradLogits needs");
            }
            case 6 -> {
                DType bad = new DType[] {DType.I32, DType.U8, DType.I64, x.dt == DType.BF16 ? DType.F16 : DType.BF16}[r.nextInt(4)];
                if (bad == x.dt) return;
                gt[0] = bad;
                h.mustThrow(e, "gradType", ARG, call, "gradType must be F32 or the logits' dtype");
            }
            case 7 -> {
                long bad = x.vocab - 1 - r.nextInt(3);
                gs[0] = bad;
                h.mustThrow(e, "gradRowStride", ARG, call, "gradRowStride must be >= vocab (" + x.vocab + "), got " + bad);
            }
            case 8 -> {  // the gradient over an upstream input
                if (n == 0) return;
                int target = 1 + r.nextInt(4);
                if (m[target] == null) return;
                m[5] = h.at(m[target], 0, LogitsView.elements(n, x.vocab, gs[0]) * gt[0].bytes());
                h.mustThrow(e, "grad overlaps " + names[target], ARG, call, "gradLogits [0x");
            }
            default -> {
                float bad = badTemperature(r);
                t[0] = bad;
                h.mustThrow(e, "temperature", ARG, call, "temperature must be finite and > 0, got " + (double) bad);
            }
        }
    }

    void checkTsBwdMem(String e, Mat x, long[] y, byte[] mask, float t, float[] glp, float[] gh, MemRef g, DType gt, long gs) {
        for (int row = 0; row < x.rows; row++) {
            int off = (int) (row * x.vocab);
            double[] s = rowStats(x.x, off, (int) x.limit, -1, t);
            double pz = 0;
            for (int i = 0; i < x.limit; i++) pz += Math.exp(x.x[off + i] / t - s[0]) * x.x[off + i] / t;
            for (int j = 0; j < x.vocab; j++) {
                double ref = 0;
                if (mask[row] != 0 && j < x.limit) {
                    double p = Math.exp(x.x[off + j] / t - s[0]);
                    ref = (glp[row] * ((j == y[row] ? 1 : 0) - p) - gh[row] * p * (x.x[off + j] / t - pz)) / t;
                }
                double tol = 2e-4 * (1 + 10 / t) + (gt == DType.F32 ? 0 : Math.abs(ref) * 1e-2 + 1e-3);
                h.close(e, "grad[" + row + ", " + j + "]", ref, h.getLogit(g, row * gs + j, gt), tol);
            }
        }
    }

    // =============================================================================================
    // Sampling
    // =============================================================================================

    static SamplingParams randomParams(Random r) {
        SamplingParams p = r.nextInt(4) == 0 ? SamplingParams.greedy() : SamplingParams.temperature(new float[] {0.7f, 1f, 1.5f}[r.nextInt(3)]);
        if (r.nextInt(3) == 0) p = p.withTopK(1 + r.nextInt(5));
        if (r.nextInt(3) == 0) p = p.withTopP(new float[] {0.5f, 0.9f, 1f}[r.nextInt(3)]);
        if (r.nextInt(3) == 0) p = p.withMinP(new float[] {0f, 0.1f}[r.nextInt(2)]);
        return p;
    }

    /** A SamplingParams construction with one bad value, and the fragment its message must contain. */
    static Object[] badParams(Random r) {
        return switch (r.nextInt(4)) {
            case 0 -> {
                float t = new float[] {Float.NaN, -1f, Float.POSITIVE_INFINITY, -Float.MIN_VALUE}[r.nextInt(4)];
                yield new Object[] {(FuzzHarness.Call) () -> new SamplingParams(t, 0, 1f, 0f), "temperature must be finite and >= 0"};
            }
            case 1 -> {
                int k = badNegative(r);
                yield new Object[] {(FuzzHarness.Call) () -> new SamplingParams(1f, k, 1f, 0f), "topK must be >= 0 (0 = off), got " + k};
            }
            case 2 -> {
                float p = new float[] {Float.NaN, 0f, -0.5f, 1.0001f, Float.POSITIVE_INFINITY}[r.nextInt(5)];
                yield new Object[] {(FuzzHarness.Call) () -> new SamplingParams(1f, 0, p, 0f), "topP must be in (0, 1]"};
            }
            default -> {
                float p = new float[] {Float.NaN, -0.1f, 1.5f}[r.nextInt(3)];
                yield new Object[] {(FuzzHarness.Call) () -> new SamplingParams(1f, 0, 1f, p), "minP must be in [0, 1]"};
            }
        };
    }

    void sampleArrays(Random r, int form) {
        String e = "Sampler.sample(arrays, " + new String[] {"uniform", "keyed", "per-row"}[form] + ")";
        int[] rows = {r.nextInt(5)}, vocab = {1 + r.nextInt(r.nextBoolean() ? 5 : 40)};
        int[] limit = {form == 0 ? vocab[0] : 1 + r.nextInt(vocab[0])};
        float[][] x = {new float[rows[0] * vocab[0]]};
        for (int i = 0; i < x[0].length; i++) x[0][i] = logit(r);
        SamplingParams[] p = {randomParams(r)};
        SamplingParams[][] rp = {new SamplingParams[rows[0]]};
        for (int i = 0; i < rows[0]; i++) rp[0][i] = randomParams(r);
        long seed = r.nextLong();
        long[] step = {r.nextInt(1000)};
        long[][] keys = {new long[rows[0]]}, steps = {new long[rows[0]]};
        for (int i = 0; i < rows[0]; i++) {
            keys[0][i] = r.nextLong();
            steps[0][i] = r.nextInt(100);
        }
        boolean[][] mask = {form > 0 && r.nextBoolean() ? new boolean[rows[0]] : null};
        if (mask[0] != null) for (int i = 0; i < rows[0]; i++) mask[0][i] = r.nextInt(4) != 0;
        SampleResult[] out = {null};
        FuzzHarness.Call call = () -> out[0] = switch (form) {
            case 0 -> Sampler.sample(x[0], rows[0], vocab[0], p[0], seed, step[0]);
            case 1 -> Sampler.sample(x[0], rows[0], vocab[0], limit[0], p[0], seed, keys[0], steps[0], mask[0]);
            default -> Sampler.sample(x[0], rows[0], vocab[0], limit[0], rp[0], seed, keys[0], steps[0], mask[0]);
        };
        int k = r.nextInt(4) == 0 ? -1 : r.nextInt(9);
        switch (k) {
            case -1 -> {
                h.legal(e, "valid", call);
                checkSamples(e, x[0], rows[0], vocab[0], limit[0], form == 2 ? rp[0] : null, p[0], mask[0], out[0]);
            }
            case 0 -> {
                if (form == 2) {
                    if (rows[0] == 0) return;
                    int row = r.nextInt(rows[0]);
                    rp[0][row] = null;
                    h.mustThrow(e, "rowParams[r] null", ARG, call, "rowParams[" + row + "] must not be null");
                } else {
                    p[0] = null;
                    h.mustThrow(e, "params null", ARG, call, "params must not be null");
                }
            }
            case 1 -> {
                Object[] b = badParams(r);
                h.mustThrow(e, "bad SamplingParams", ARG, (FuzzHarness.Call) b[0], (String) b[1]);
            }
            case 2 -> {
                long bad = new long[] {-1, Sampler.MAX_STEP + 1, Long.MIN_VALUE, Long.MAX_VALUE}[r.nextInt(4)];
                if (form == 0) {
                    step[0] = bad;
                    h.mustThrow(e, "step", ARG, call, "step must be in [0, 2^32), got " + bad);
                } else {
                    if (rows[0] == 0) return;
                    int row = r.nextInt(rows[0]);
                    steps[0][row] = bad;
                    h.mustThrow(e, "steps[r]", ARG, call, "steps[" + row + "] must be in [0, 2^32), got " + bad);
                }
            }
            case 3 -> {
                int bad = badNegative(r);
                rows[0] = bad;
                h.mustThrow(e, "rows < 0", ARG, call, "" + bad);
            }
            case 4 -> {
                x[0] = r.nextBoolean() ? null : new float[x[0].length + 1];
                h.mustThrow(e, "logits", ARG, call, "logits must not be null", "logits.length");
            }
            case 5 -> {
                if (form == 0) return;
                if (r.nextBoolean()) keys[0] = new long[rows[0] + 1];
                else steps[0] = r.nextBoolean() ? null : new long[rows[0] + 1];
                h.mustThrow(e, "keys/steps", ARG, call, "keys.length", "steps.length", "steps must not be null");
            }
            case 6 -> {
                if (form == 0) return;
                int bad = r.nextBoolean() ? 0 : vocab[0] + 1;
                limit[0] = bad;
                h.mustThrow(e, "vocabLimit", ARG, call, "vocabLimit must be in [1, " + vocab[0] + "], got " + bad);
            }
            case 7 -> {  // a valid row without a distribution throws naming it; a masked one is token -1
                if (rows[0] == 0) return;
                int row = r.nextInt(rows[0]);
                float v = r.nextBoolean() ? Float.NaN : Float.POSITIVE_INFINITY;
                x[0][row * vocab[0] + r.nextInt(limit[0])] = v;
                if (mask[0] == null || mask[0][row]) {
                    int first = row;
                    h.mustThrow(e, "no distribution", ARG, call, "has no distribution");
                } else {
                    h.legal(e, "NaN on a masked row", call);
                    h.check(e, "masked row token -1", out[0].tokens()[row] == -1);
                }
            }
            default -> {
                if (form == 0 || rows[0] == 0) return;
                mask[0] = new boolean[rows[0] + 1];
                h.mustThrow(e, "rowMask length", ARG, call, "rowMask.length");
            }
        }
    }

    void checkSamples(String e, float[] x, int rows, int vocab, int limit, SamplingParams[] rp, SamplingParams p,
                      boolean[] mask, SampleResult s) {
        for (int r = 0; r < rows; r++) {
            int y = s.tokens()[r];
            if (mask != null && !mask[r]) {
                h.check(e, "masked row " + r + " gives -1", y == -1);
                continue;
            }
            h.check(e, "token " + y + " of row " + r + " in [0, " + limit + ")", y >= 0 && y < limit);
            SamplingParams q = rp != null ? rp[r] : p;
            double t = q.isGreedy() ? 1 : q.temperature();
            if (q.isGreedy()) {
                int arg = 0;
                for (int j = 1; j < limit; j++) if (x[r * vocab + j] > x[r * vocab + arg]) arg = j;
                h.check(e, "greedy row " + r + " takes the argmax " + arg + ", got " + y, y == arg);
            }
            double[] st = rowStats(x, r * vocab, limit, y, (float) t);
            h.close(e, "logprob[" + r + "]", st[1], s.logprob()[r], 2e-4);
            h.close(e, "entropy[" + r + "]", st[2], s.entropy()[r], 2e-4);
        }
    }

    void sampleMem(Random r) {
        String e = "Sampler.sample(memory)";
        Mat x = new Mat(r, 4);
        long n = x.rows;
        SamplingParams p = randomParams(r);
        DType[] tt = {r.nextBoolean() ? DType.I32 : DType.I64};
        MemRef[] m = new MemRef[8];  // logits, keys, temperatures, topKs, rowMask, tokens, logprob, entropy
        m[0] = x.mem;
        if (r.nextBoolean()) {
            m[1] = h.alloc(8 * n);
            for (int i = 0; i < n; i++) h.putI64(m[1], i, r.nextLong());
        }
        float[] temps = new float[(int) n];
        if (r.nextBoolean()) {
            m[2] = h.alloc(4 * n);
            for (int i = 0; i < n; i++) h.putF32(m[2], i, temps[i] = new float[] {0f, 1f, 0.5f}[r.nextInt(3)]);
        }
        if (r.nextBoolean()) {
            m[3] = h.alloc(4 * n);
            for (int i = 0; i < n; i++) h.putI32(m[3], i, r.nextInt(4));
        }
        byte[] mask = new byte[(int) n];
        Arrays.fill(mask, (byte) 1);
        if (r.nextBoolean()) {
            m[4] = h.alloc(n);
            for (int i = 0; i < n; i++) h.putU8(m[4], i, mask[i] = (byte) (r.nextInt(4) == 0 ? 0 : 1));
        }
        m[5] = h.alloc(tt[0].bytes() * n);
        m[6] = h.alloc(4 * n);
        m[7] = r.nextBoolean() ? h.alloc(4 * n) : null;
        FuzzHarness.Call call = () -> Sampler.sample(Sampler.Batch.of(new LogitsView(m[0], x.dt, x.rows, x.vocab, x.stride, x.limit), p,
                        7L, 3L).withKeys(m[1]).withRowParams(m[2], m[3], null, null).withRowMask(m[4]),
                new Sampler.Outputs(m[5], tt[0], null, m[6], m[7]), 0L);
        String[] names = {"logits", "keys", "temperatures", "topKs", "rowMask", "tokens", "logprob", "entropy"};
        int[] elem = {x.dt.bytes(), 8, 4, 4, 1, tt[0].bytes(), 4, 4};
        int k = r.nextInt(4) == 0 ? -1 : r.nextInt(7);
        switch (k) {
            case -1 -> {
                h.legal(e, "valid", call);
                for (int i = 0; i < n; i++) {
                    long y = tt[0] == DType.I32 ? h.getI32(m[5], i) : h.getI64(m[5], i);
                    if (mask[i] == 0) {
                        h.check(e, "masked row " + i + " token -1", y == -1);
                        continue;
                    }
                    h.check(e, "row " + i + " token " + y + " in range", y >= 0 && y < x.limit);
                    float t = m[2] != null ? temps[i] : p.temperature();
                    double[] st = rowStats(x.x, (int) (i * x.vocab), (int) x.limit, (int) y, t == 0 ? 1 : t);
                    h.close(e, "logprob[" + i + "]", st[1], h.getF32(m[6], i), 2e-4);
                }
            }
            case 0, 1, 2 -> {
                if (n == 0) return;
                int i = r.nextInt(8);
                memMutation(e, MemMut.values()[1 + r.nextInt(4)], m, i, names[i], elem[i], true, call);
            }
            case 3 -> {  // a bad per-row value on a valid row names the row; on a masked row it is unread
                if (n == 0) return;
                int row = r.nextInt((int) n);
                boolean temp = r.nextBoolean();
                if (temp) {
                    if (m[2] == null) m[2] = h.alloc(4 * n);
                    h.putF32(m[2], row, new float[] {Float.NaN, -1f, Float.POSITIVE_INFINITY}[r.nextInt(3)]);
                } else {
                    if (m[3] == null) m[3] = h.alloc(4 * n);
                    h.putI32(m[3], row, badNegative(r));
                }
                if (mask[row] != 0) h.mustThrow(e, "bad per-row value", ARG, call, "row " + row + ": " + (temp ? "temperature" : "topK"));
                else h.legal(e, "bad value on a masked row", call);
            }
            case 4 -> {  // an output over an input or another output
                if (n == 0) return;
                int o = 5 + r.nextInt(3), target = r.nextInt(8);
                if (m[o] == null || m[target] == null || o == target) return;
                m[o] = h.at(m[target], 0, elem[o] * n);
                h.mustThrow(e, names[o] + " overlaps " + names[target], ARG, call, names[o] + " [0x", "overlaps " + names[o]);
            }
            case 5 -> {
                DType bad = new DType[] {DType.F32, DType.U8, DType.BF16}[r.nextInt(3)];
                h.mustThrow(e, "tokenType", ARG, () -> new Sampler.Outputs(m[5], bad, null, null, null), "tokenType must be I32 or I64, got " + bad);
            }
            default -> {
                long bad = r.nextBoolean() ? -1 : Sampler.MAX_STEP + 1;
                h.mustThrow(e, "step", ARG, () -> Sampler.Batch.of(x.view(), p, 0, bad), "step must be in [0, 2^32), got " + bad);
            }
        }
    }

    void noise(Random r, boolean gumbel) {
        String e = gumbel ? "Sampler.gumbel" : "Sampler.uniform";
        long seed = r.nextLong(), key = r.nextLong(), step = r.nextInt(1 << 30), col = r.nextInt(1 << 20);
        int k = r.nextInt(3);
        if (k == 0) {
            long bad = new long[] {-1, Sampler.MAX_STEP + 1, Long.MIN_VALUE}[r.nextInt(3)];
            h.mustThrow(e, "step", ARG, () -> { if (gumbel) Sampler.gumbel(seed, key, bad, col); else Sampler.uniform(seed, key, bad, col); },
                    "step must be in [0, 2^32), got " + bad);
        } else if (k == 1) {
            long bad = -1 - r.nextInt(1000);
            h.mustThrow(e, "column", ARG, () -> { if (gumbel) Sampler.gumbel(seed, key, step, bad); else Sampler.uniform(seed, key, step, bad); },
                    "column must be >= 0, got " + bad);
        } else {
            float[] v = new float[2];
            h.legal(e, "valid", () -> {
                v[0] = Sampler.uniform(seed, key, step, col);
                v[1] = Sampler.gumbel(seed, key, step, col);
            });
            h.check(e, "u in (0, 1)", v[0] > 0 && v[0] < 1);
            h.close(e, "gumbel = -log(-log u)", -Math.log(-Math.log(v[0])), v[1], 1e-4 * (1 + Math.abs(v[1])));
        }
    }

    void drawUniform(Random r) {
        String e = "Sampler.drawUniform";
        long seed = r.nextLong(), key = r.nextLong(), step = r.nextInt(1 << 30);
        int k = r.nextInt(3);
        if (k == 0) {
            long bad = new long[] {-1, Sampler.MAX_STEP + 1, Long.MIN_VALUE}[r.nextInt(3)];
            h.mustThrow(e, "step", ARG, () -> Sampler.drawUniform(seed, key, bad, 0), "step must be in [0, 2^32), got " + bad);
        } else if (k == 1) {
            int bad = new int[] {-1, 2, Integer.MIN_VALUE, Integer.MAX_VALUE}[r.nextInt(4)];
            h.mustThrow(e, "which", ARG, () -> Sampler.drawUniform(seed, key, step, bad), "which must be 0 or 1, got " + bad);
        } else {
            double[] u = new double[2];
            h.legal(e, "valid", () -> {
                u[0] = Sampler.drawUniform(seed, key, step, 0);
                u[1] = Sampler.drawUniform(seed, key, step, 1);
            });
            h.check(e, "u in (0, 1)", u[0] > 0 && u[0] < 1 && u[1] > 0 && u[1] < 1);
            h.check(e, "two different uniforms", u[0] != u[1]);
        }
    }

    // =============================================================================================
    // Token advantages
    // =============================================================================================

    static TokenShaping randomShaping(Random r) {
        return switch (r.nextInt(3)) {
            case 0 -> TokenShaping.broadcast();
            case 1 -> TokenShaping.aepo();
            default -> TokenShaping.taoRl(0.5f, new double[] {0.2, 0.5, 1.0}[r.nextInt(3)]);
        };
    }

    void advArrays(Random r, int form) {
        String e = "TokenAdvantages." + new String[] {"compute", "computeInto", "computePadded"}[form] + "(arrays)";
        int nSeqs = r.nextInt(5), seqLen = 1 + r.nextInt(6);
        int n = form == 2 ? nSeqs * seqLen : r.nextInt(20);
        float[][] adv = {new float[nSeqs]};
        for (int i = 0; i < nSeqs; i++) adv[0][i] = (r.nextInt(9) - 4) / 2f;
        int[][] ids = {new int[n]};
        for (int i = 0; i < n; i++) ids[0][i] = nSeqs == 0 ? 0 : r.nextInt(nSeqs);
        boolean[][] mask = {form == 2 || r.nextBoolean() ? new boolean[n] : null};
        if (mask[0] != null) for (int i = 0; i < n; i++) mask[0][i] = (nSeqs > 0 || form == 2) && r.nextInt(4) != 0;
        if (form != 2 && nSeqs == 0) mask[0] = new boolean[n];  // no trajectory: every token masked
        float[][] ent = {new float[n]};
        for (int i = 0; i < n; i++) ent[0][i] = r.nextInt(20) / 4f;
        boolean[][] post = {r.nextBoolean() ? new boolean[n] : null};
        if (post[0] != null) for (int i = 0; i < n; i++) post[0][i] = r.nextBoolean();
        TokenShaping[] sh = {randomShaping(r)};
        int[] len = {seqLen};
        float[][] out = {new float[n]};
        Object[] res = {null};
        FuzzHarness.Call call = () -> res[0] = switch (form) {
            case 0 -> TokenAdvantages.compute(adv[0], ids[0], mask[0], ent[0], post[0], sh[0]).advantages();
            case 1 -> { TokenAdvantages.computeInto(adv[0], ids[0], mask[0], ent[0], post[0], sh[0], out[0]); yield out[0]; }
            default -> TokenAdvantages.computePadded(adv[0], len[0], mask[0], ent[0], post[0], sh[0]).advantages();
        };
        int k = r.nextInt(4) == 0 ? -1 : r.nextInt(9);
        switch (k) {
            case -1 -> {
                h.legal(e, "valid", call);
                checkAdv(e, adv[0], form == 2 ? null : ids[0], seqLen, mask[0], ent[0], post[0], sh[0], (float[]) res[0]);
            }
            case 0 -> {
                adv[0] = null;
                h.mustThrow(e, "seqAdvantages null", ARG, call, "seqAdvantages must not be null");
            }
            case 1 -> {  // a bad sequence id names the token; on a masked token it is unread
                if (form == 2 || n == 0) return;
                int t = r.nextInt(n);
                int bad = new int[] {-1, nSeqs, nSeqs + 7, Integer.MAX_VALUE, Integer.MIN_VALUE}[r.nextInt(5)];
                ids[0][t] = bad;
                if (mask[0] == null || mask[0][t]) h.mustThrow(e, "seqId out of range", ARG, call, "seqIds[" + t + "] = " + bad);
                else {
                    h.legal(e, "bad id on a masked token", call);
                    ids[0][t] = 0;
                    checkAdv(e, adv[0], ids[0], seqLen, mask[0], ent[0], post[0], sh[0], (float[]) res[0]);
                }
            }
            case 2 -> {
                if (!sh[0].needsEntropy()) sh[0] = TokenShaping.aepo();
                boolean none = r.nextBoolean();
                int t = n == 0 ? 0 : r.nextInt(n);
                if (none) ent[0] = null;
                else if (n > 0) ent[0][t] = new float[] {Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY}[r.nextInt(3)];
                else return;
                if (none) h.mustThrow(e, "no entropy", ARG, call, "needs token entropies");
                else if (mask[0] == null || mask[0][t]) h.mustThrow(e, "entropy not finite", ARG, call, "entropy[" + t + "] = ");
                else h.legal(e, "non-finite entropy on a masked token", call);
            }
            case 3 -> {
                int which = r.nextInt(3);
                if (which == 0) mask[0] = new boolean[n + 1];
                else if (which == 1) post[0] = new boolean[n + 2];
                else ent[0] = new float[n + 1];
                h.mustThrow(e, "length", ARG, call, "lossMask.length", "postTool.length", "entropy.length");
            }
            case 4 -> {
                sh[0] = null;
                h.mustThrow(e, "shaping null", ARG, call, "shaping must not be null");
            }
            case 5 -> {
                boolean coef = r.nextBoolean();
                h.mustThrow(e, "bad shaping", ARG, () -> {
                    if (coef) new TokenShaping(TokenShaping.Mode.AEPO, Float.NaN, 1.0);
                    else new TokenShaping(TokenShaping.Mode.TAO_RL, 0.1f, badUnit(r) > 0 ? 0 : Double.NaN);
                }, coef ? "coef must be finite, got NaN" : "topFraction (q_H) must be in (0, 1], got ");
            }
            case 6 -> {
                if (form == 1) {
                    if (r.nextBoolean() || n == 0) {
                        out[0] = new float[n + 1];
                        h.mustThrow(e, "out length", ARG, call, "out.length");
                    } else {
                        out[0] = ent[0];
                        h.mustThrow(e, "out aliases entropy", ARG, call, "out and entropy must be different");
                    }
                } else if (form == 2) {
                    int bad = r.nextBoolean() ? 0 : badNegative(r);
                    len[0] = bad;
                    h.mustThrow(e, "seqLen", ARG, call, "seqLen must be > 0, got " + bad);
                } else {
                    ids[0] = null;
                    h.mustThrow(e, "seqIds null", ARG, call, "seqIds must not be null");
                }
            }
            case 7 -> {
                if (form != 2) return;
                adv[0] = new float[1 << 16];
                len[0] = 1 << 16;
                h.mustThrow(e, "nSeqs * seqLen overflows", ARG, call, "nSeqs * seqLen");
            }
            default -> {  // Java-only helpers of the same class: exceptions, not crashes
                int bad = r.nextBoolean() ? Integer.MAX_VALUE : 1 << 30;
                boolean[] f = TokenAdvantages.postToolFlags(new int[] {bad, 0, bad}, new byte[] {TokenAdvantages.ROLE_TOOL, 1, 1});
                h.check(e, "postToolFlags with a sparse id", f[2] && !f[1]);
                int neg = badNegative(r);
                h.mustThrow(e, "seqIdsOf negative", ARG, () -> TokenAdvantages.seqIdsOf(3, neg), "lengths[1] must be >= 0, got " + neg);
            }
        }
    }

    void checkAdv(String e, float[] adv, int[] ids, int seqLen, boolean[] mask, float[] ent, boolean[] post,
                  TokenShaping sh, float[] out) {
        double[] a = new double[adv.length];
        for (int i = 0; i < a.length; i++) a[i] = adv[i];
        double[] hh = null;
        if (ent != null) {
            hh = new double[ent.length];
            for (int i = 0; i < hh.length; i++) hh[i] = ent[i];
        }
        TokenAdvantagesReference.Result ref = TokenAdvantagesReference.compute(a, ids, seqLen, mask, hh, post, sh);
        for (int t = 0; t < out.length; t++) h.close(e, "advantage[" + t + "]", ref.advantages()[t], out[t], 1e-4 * (1 + Math.abs(ref.advantages()[t])));
    }

    void advMem(Random r) {
        String e = "TokenAdvantages.compute(memory)";
        int nSeqs = 1 + r.nextInt(4);
        int n = r.nextInt(16);
        boolean padded = r.nextInt(3) == 0;
        int seqLen = 1 + r.nextInt(4);
        if (padded) n = nSeqs * seqLen;
        DType idt = r.nextBoolean() ? DType.I32 : DType.I64;
        TokenShaping sh = randomShaping(r);
        MemRef[] m = new MemRef[6];  // seqAdvantages, seqIds, lossMask, entropy, out, stats
        float[] adv = new float[nSeqs];
        m[0] = h.alloc(4L * nSeqs);
        for (int i = 0; i < nSeqs; i++) h.putF32(m[0], i, adv[i] = (r.nextInt(9) - 4) / 2f);
        int[] ids = new int[n];
        if (!padded) {
            m[1] = h.alloc((long) idt.bytes() * n);
            for (int i = 0; i < n; i++) {
                ids[i] = r.nextInt(nSeqs);
                if (idt == DType.I32) h.putI32(m[1], i, ids[i]);
                else h.putI64(m[1], i, ids[i]);
            }
        }
        boolean[] mask = new boolean[n];
        m[2] = h.alloc(n);
        for (int i = 0; i < n; i++) h.putU8(m[2], i, (mask[i] = r.nextInt(4) != 0) ? 1 : 0);
        float[] ent = new float[n];
        m[3] = h.alloc(4L * n);
        for (int i = 0; i < n; i++) h.putF32(m[3], i, ent[i] = r.nextInt(20) / 4f);
        m[4] = h.alloc(4L * n);
        m[5] = h.alloc(64);
        long[] ns = {nSeqs}, nt = {n};
        DType[] it = {idt};
        final int nn = n;
        FuzzHarness.Call call = () -> TokenAdvantages.compute(m[0], ns[0], m[1], it[0], nt[0], seqLen, m[2], m[3], null, sh,
                m[4], m[5], 0L);
        String[] names = {"seqAdvantages", "seqIds", "lossMask", "entropy", "out", "stats"};
        int[] elem = {4, idt.bytes(), 1, 4, 4, 8};
        int k = r.nextInt(4) == 0 ? -1 : r.nextInt(7);
        switch (k) {
            case -1 -> {
                h.legal(e, "valid", call);
                float[] out = new float[n];
                for (int i = 0; i < n; i++) out[i] = h.getF32(m[4], i);
                checkAdv(e, adv, padded ? null : ids, seqLen, mask, ent, null, sh, out);
            }
            case 0, 1, 2 -> {
                int i = r.nextInt(6);
                if (m[i] == null || m[i].bytes() == 0) return;
                memMutation(e, MemMut.values()[1 + r.nextInt(4)], m, i, names[i], elem[i], true, call);
            }
            case 3 -> {
                if (padded) {
                    nt[0] = n + 1;
                    h.mustThrow(e, "padded nTokens", ARG, call, "padded layout needs nTokens = nSeqs * seqLen");
                } else {
                    ns[0] = badNegative(r);
                    h.mustThrow(e, "nSeqs < 0", ARG, call, "nSeqs must be >= 0, got " + ns[0]);
                }
            }
            case 4 -> {  // an out-of-range id of a valid token is named
                if (padded || n == 0) return;
                int t = r.nextInt(n);
                long bad = new long[] {-1, nSeqs, Integer.MAX_VALUE}[r.nextInt(3)];
                if (idt == DType.I32) h.putI32(m[1], t, (int) bad);
                else h.putI64(m[1], t, bad);
                if (mask[t]) h.mustThrow(e, "seqId out of range", ARG, call, "seqIds[" + t + "] = " + bad);
                else h.legal(e, "bad id on a masked token", call);
            }
            case 5 -> {  // out over an input, or stats over out
                if (n == 0) return;
                int target = r.nextInt(4);
                if (m[target] == null || m[target].bytes() == 0) return;
                m[4] = h.at(m[target], 0, 4L * nn);
                h.mustThrow(e, "out overlaps " + names[target], ARG, call, "out [0x", "overlaps out");
            }
            default -> {
                if (padded) return;
                it[0] = new DType[] {DType.F32, DType.U8, null}[r.nextInt(3)];
                h.mustThrow(e, "seqIdType", ARG, call, "seqIdType must be I32 or I64, got " + it[0]);
            }
        }
    }

    // =============================================================================================
    // Policy loss
    // =============================================================================================

    static PolicyLossConfig randomConfig(Random r) {
        PolicyLossConfig c = switch (r.nextInt(6)) {
            case 0 -> PolicyLossConfig.grpoTcr();
            case 1 -> PolicyLossConfig.treeGrpo();
            case 2 -> PolicyLossConfig.aepo().toBuilder().aepoTopEntropyFraction(r.nextBoolean() ? 1.0 : 0.5).build();
            case 3 -> PolicyLossConfig.cispo();
            case 4 -> PolicyLossConfig.gspo();
            default -> PolicyLossConfig.defaults();
        };
        if (r.nextInt(3) == 0 && !c.clipMode().isGspo()) c = c.toBuilder().agg(LossAgg.values()[r.nextInt(LossAgg.values().length)]).build();
        if (r.nextInt(4) == 0) c = c.toBuilder().entropyCoef(0.01).temperature(0.7).build();
        return c;
    }

    /** A PolicyLossConfig construction with one bad value and the fragment its message names. */
    static Object[] badConfig(Random r) {
        double v = badUnit(r);
        PolicyLossConfig.Builder b = PolicyLossConfig.builder();
        return switch (r.nextInt(8)) {
            case 0 -> new Object[] {(FuzzHarness.Call) () -> b.epsLow(v).build(), "epsLow must be in [0, 1], got " + v};
            case 1 -> new Object[] {(FuzzHarness.Call) () -> b.epsHigh(-Math.abs(v) - 1e-3).build(), "epsHigh must be finite and >= 0"};
            case 2 -> new Object[] {(FuzzHarness.Call) () -> b.dualClipC((v > 1 && v < 1e9) || v == 0 ? 0.5 : v).build(),
                    "dualClipC must be 0 (off) or finite and > 1"};
            case 3 -> new Object[] {(FuzzHarness.Call) () -> b.aepoTopEntropyFraction(v).build(), "aepoTopEntropyFraction must be in (0, 1], got " + v};
            case 4 -> new Object[] {(FuzzHarness.Call) () -> b.klCoef(-Math.abs(v) - 1e-3).build(), "klCoef must be finite and >= 0"};
            case 5 -> new Object[] {(FuzzHarness.Call) () -> b.entropyCoef(Double.isFinite(v) ? Double.NaN : v).build(), "entropyCoef must be finite"};
            case 6 -> new Object[] {(FuzzHarness.Call) () -> b.aggNormalizer(-Math.abs(v) - 1e-3).build(), "aggNormalizer must be finite and >= 0"};
            default -> new Object[] {(FuzzHarness.Call) () -> b.temperature(Double.isFinite(v) && v > 0 ? -v : v).build(), "temperature must be finite and > 0"};
        };
    }

    /** One policy-loss batch (float logits [rows, vocab]) and its reference loss. */
    static final class Pl {
        PolicyLossConfig cfg;
        int rows, vocab, limit;
        float[] x, old, adv, mask, ref, grad;
        int[] labels, seqIds;

        static Pl random(Random r, boolean padded) {
            Pl p = new Pl();
            p.cfg = randomConfig(r);
            p.rows = r.nextInt(6);
            p.vocab = 1 + r.nextInt(20);
            p.limit = padded ? 1 + r.nextInt(p.vocab) : p.vocab;
            p.x = new float[p.rows * p.vocab];
            for (int i = 0; i < p.x.length; i++) p.x[i] = logit(r);
            p.labels = new int[p.rows];
            p.old = new float[p.rows];
            p.adv = new float[p.rows];
            p.mask = new float[p.rows];
            p.ref = new float[p.rows];
            p.seqIds = new int[p.rows];
            for (int i = 0; i < p.rows; i++) {
                p.labels[i] = r.nextInt(p.limit);
                p.old[i] = -r.nextInt(12) / 4f;
                p.adv[i] = (r.nextInt(9) - 4) / 2f;
                p.mask[i] = new float[] {0f, 0.5f, 1f, 1f}[r.nextInt(4)];
                p.ref[i] = -r.nextInt(12) / 4f;
                p.seqIds[i] = r.nextInt(i + 1);
            }
            p.grad = new float[p.x.length];
            return p;
        }

        double[] d(float[] a) {
            double[] o = new double[a.length];
            for (int i = 0; i < a.length; i++) o[i] = a[i];
            return o;
        }

        /** The reference loss (docs/algorithms.md §2) of this batch. */
        double refLoss() {
            boolean sel = cfg.selectsByEntropy();
            double thr = Double.NEGATIVE_INFINITY;
            double[] ent = null;
            if (sel) {
                float[] h = new float[rows];
                boolean[] m = new boolean[rows];
                for (int i = 0; i < rows; i++) m[i] = mask[i] > 0;
                TokenStats.forward(x, rows, vocab, limit, null, (float) cfg.temperature(), m, null, h, null);
                thr = PolicyLoss.aepoEntropyThreshold(cfg.aepoTopEntropyFraction(), h, mask);
            }
            return PolicyLossReference.compute(cfg, d(x), rows, vocab, limit, labels, d(old), d(adv), d(mask), d(ref),
                    cfg.agg().needsSequences() ? seqIds : null, ent, thr).loss;
        }
    }

    void plArrays(Random r, int form) {
        String e = "PolicyLoss." + new String[] {"forwardBackward(arrays, 11)", "forwardBackward(arrays, 13)",
                "forwardBackwardComposable(arrays)", "loss(arrays)"}[form];
        Pl p = Pl.random(r, form == 1);
        PolicyLossResult[] res = {null};
        float[][] lpH = {null, null, new float[p.rows], new float[p.rows]};  // logprob, entropy, gradLogprob, gradEntropy
        if (form == 3) {
            lpH[0] = new float[p.rows];
            lpH[1] = new float[p.rows];
            boolean[] m = new boolean[p.rows];
            for (int i = 0; i < p.rows; i++) m[i] = p.mask[i] > 0;
            TokenStats.forward(p.x, p.rows, p.vocab, p.vocab, p.labels, (float) p.cfg.temperature(), m, lpH[0], lpH[1], null);
        }
        float[][] sel = {null};
        FuzzHarness.Call call = () -> res[0] = switch (form) {
            case 0 -> PolicyLoss.forwardBackward(p.cfg, p.x, p.rows, p.vocab, p.labels, p.old, p.adv, p.mask, p.ref, p.seqIds, p.grad);
            case 1 -> PolicyLoss.forwardBackward(p.cfg, p.x, p.rows, p.vocab, p.limit, p.labels, p.old, p.adv, p.mask, p.ref,
                    p.seqIds, sel[0], p.grad);
            case 2 -> PolicyLoss.forwardBackwardComposable(p.cfg, p.x, p.rows, p.vocab, p.labels, p.old, p.adv, p.mask, p.ref,
                    p.seqIds, p.grad);
            default -> PolicyLoss.loss(p.cfg, lpH[0], lpH[1], p.old, p.adv, p.mask, p.ref, p.seqIds, sel[0], lpH[2], lpH[3]);
        };
        int k = r.nextInt(4) == 0 ? -1 : r.nextInt(11);
        switch (k) {
            case -1 -> {
                h.legal(e, "valid", call);
                double ref = p.refLoss();
                h.close(e, "loss", ref, res[0].loss(), 1e-4 * (1 + Math.abs(ref)));
            }
            case 0 -> {
                Object[] b = badConfig(r);
                h.mustThrow(e, "bad config", ARG, (FuzzHarness.Call) b[0], (String) b[1]);
            }
            case 1 -> {
                p.cfg = null;
                h.mustThrow(e, "cfg null", ARG, call, "cfg must not be null");
            }
            case 2 -> {  // a bad mask value names the row
                if (p.rows == 0) return;
                int row = r.nextInt(p.rows);
                float bad = new float[] {Float.NaN, -0.5f, 1.5f, Float.POSITIVE_INFINITY, -0f == 0f ? -1e-3f : 0f}[r.nextInt(5)];
                p.mask[row] = bad;
                h.mustThrow(e, "mask value", ARG, call, "mask[" + row + "] = " + bad);
            }
            case 3 -> {  // non-finite inputs on a valid row name it; on a masked row they are unread
                if (p.rows == 0) return;
                int row = r.nextInt(p.rows);
                float bad = new float[] {Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY}[r.nextInt(3)];
                boolean oldOne = r.nextBoolean();
                if (oldOne) p.old[row] = bad;
                else p.adv[row] = bad;
                if (p.mask[row] > 0) h.mustThrow(e, "non-finite input", ARG, call, (oldOne ? "oldLogprob[" : "advantages[") + row + "] = " + bad);
                else {
                    if (oldOne) p.old[row] = 0;
                    else p.adv[row] = 0;
                    h.legal(e, "non-finite on a masked row", call);
                    double ref = p.refLoss();
                    h.close(e, "loss", ref, res[0].loss(), 1e-4 * (1 + Math.abs(ref)));
                }
            }
            case 4 -> {  // labels: out of range on a valid row, -100 on a masked row
                if (p.rows == 0 || form == 3) return;
                int row = r.nextInt(p.rows);
                int bad = new int[] {-1, p.limit, -100, Integer.MAX_VALUE}[r.nextInt(4)];
                p.labels[row] = bad;
                if (p.mask[row] > 0) h.mustThrow(e, "label", ARG, call, "labels[" + row + "] = " + bad);
                else {
                    h.legal(e, "ignore label on a masked row", call);
                    p.labels[row] = 0;
                    double ref = p.refLoss();
                    h.close(e, "loss", ref, res[0].loss(), 1e-4 * (1 + Math.abs(ref)));
                }
            }
            case 5 -> {
                int which = r.nextInt(3);
                if (which == 0) p.old = new float[p.rows + 1];
                else if (which == 1) p.adv = null;
                else p.mask = new float[p.rows + 2];
                h.mustThrow(e, "per-row length", ARG, call, "oldLogprob.length", "advantages must not be null", "mask.length",
                        "logprob");
            }
            case 6 -> {
                if (p.cfg.klType() == KlType.NONE) p.cfg = p.cfg.toBuilder().klType(KlType.K3).build();
                p.ref = null;
                h.mustThrow(e, "refLogprob null", ARG, call, "refLogprob is required for KL type K3", "refLogprob is required");
            }
            case 7 -> {
                if (!p.cfg.agg().needsSequences()) p.cfg = p.cfg.toBuilder().agg(LossAgg.SEQ_MEAN_TOKEN_MEAN).build();
                if (p.rows == 0 || r.nextBoolean()) {
                    p.seqIds = null;
                    h.mustThrow(e, "seqIds null", ARG, call, "seqIds are required for aggregation");
                } else {
                    int row = r.nextInt(p.rows);
                    int bad = r.nextBoolean() ? p.rows + r.nextInt(5) : Integer.MAX_VALUE;
                    p.seqIds[row] = bad;
                    h.mustThrow(e, "seqId", ARG, call, "seqIds[" + row + "] = " + bad);
                }
            }
            case 8 -> {  // in place over the logits is documented: the same loss
                if (form == 3) return;
                p.grad = p.x.clone();
                Pl copy = p;
                float[] x0 = p.x.clone();
                p.grad = p.x;
                h.legal(e, "in place", call);
                copy.x = x0;
                double ref = copy.refLoss();
                h.close(e, "loss", ref, res[0].loss(), 1e-4 * (1 + Math.abs(ref)));
            }
            case 9 -> {  // an output array that is also an input
                if (p.rows == 0) return;
                if (form == 3) {
                    lpH[2] = r.nextBoolean() ? lpH[3] : p.adv;
                    h.mustThrow(e, "aliased output", ARG, call, "gradLogprobOut and ");
                } else {
                    p.vocab = 1;
                    p.limit = 1;
                    p.x = new float[p.rows];
                    Arrays.fill(p.labels, 0);
                    p.grad = p.adv;
                    h.mustThrow(e, "grad aliases advantages", ARG, call, "gradLogitsOut and advantages must be different");
                }
            }
            default -> {
                if (form == 3) {
                    lpH[0] = null;
                    h.mustThrow(e, "logprob null", ARG, call, "logprob must not be null");
                } else {
                    int bad = badNegative(r);
                    p.rows = bad;
                    h.mustThrow(e, "rows < 0", ARG, call, "rows must be >= 0, got " + bad, "" + bad);
                }
            }
        }
    }

    void plWorkspace(Random r) {
        String e = "PolicyLoss.workspaceBytes";
        long rows = r.nextInt(1000), ns = r.nextInt(100);
        switch (r.nextInt(3)) {
            case 0 -> {
                long bad = badNegative(r);
                boolean first = r.nextBoolean();
                h.mustThrow(e, "negative", ARG, () -> PolicyLoss.workspaceBytes(first ? bad : rows, first ? ns : bad),
                        (first ? "rows" : "numSeqs") + " must be >= 0, got " + bad);
            }
            case 1 -> {
                long huge = r.nextBoolean() ? Long.MAX_VALUE : (1L << 41) + r.nextInt(1000);
                h.mustThrow(e, "huge", ARG, () -> PolicyLoss.workspaceBytes(huge, 0), "workspace for rows " + huge);
            }
            default -> {
                long[] b = {0};
                h.legal(e, "valid", () -> b[0] = PolicyLoss.workspaceBytes(rows, ns));
                h.check(e, "workspace grows with rows", b[0] >= 4 * rows && b[0] <= PolicyLoss.workspaceBytes(rows + 1, ns));
            }
        }
    }

    /**
     * The memory forms (0 forwardBackward, 1 loss, 2 weights, 3 forwardBackwardAsync, 4 lossAsync) over
     * f32 logits in pool memory; a valid call's loss must equal the array form's.
     */
    void plMem(Random r, int form) {
        String e = "PolicyLoss." + new String[] {"forwardBackward(memory)", "loss(memory)", "weights(memory)",
                "forwardBackwardAsync(memory)", "lossAsync(memory)"}[form];
        Pl p = Pl.random(r, false);
        int n = p.rows;
        if (p.cfg.selectsByEntropy() && form >= 3) p.cfg = PolicyLossConfig.aepo();  // stages take the threshold
        // GSPO through memory takes the caller's anchors (PolicyLoss.gspoAnchor); the convenience forms reject it
        if (p.cfg.clipMode().isGspo()) p.cfg = PolicyLossConfig.cispo();
        boolean seq = p.cfg.agg().needsSequences();
        long[] ns = {seq ? Math.max(1, n) : 0};
        // refs: 0 logits, 1 labels, 2 old, 3 adv, 4 mask, 5 ref, 6 seqIds, 7 grad, 8 workspace, 9 weights, 10 sums, 11 counts, 12 logprob, 13 entropy
        MemRef[] m = new MemRef[14];
        m[0] = h.alloc(4L * p.x.length);
        for (int i = 0; i < p.x.length; i++) h.putF32(m[0], i, p.x[i]);
        m[1] = h.alloc(4L * n);
        m[2] = h.alloc(4L * n);
        m[3] = h.alloc(4L * n);
        m[4] = h.alloc(4L * n);
        m[5] = h.alloc(4L * n);
        m[6] = h.alloc(4L * n);
        float[] lp = new float[n], ent = new float[n];
        boolean[] valid = new boolean[n];
        for (int i = 0; i < n; i++) valid[i] = p.mask[i] > 0;
        TokenStats.forward(p.x, n, p.vocab, p.vocab, p.labels, (float) p.cfg.temperature(), valid, lp, ent, null);
        m[12] = h.alloc(4L * n);
        m[13] = h.alloc(4L * n);
        for (int i = 0; i < n; i++) {
            h.putI32(m[1], i, p.labels[i]);
            h.putF32(m[2], i, p.old[i]);
            h.putF32(m[3], i, p.adv[i]);
            h.putF32(m[4], i, p.mask[i]);
            h.putF32(m[5], i, p.ref[i]);
            h.putI32(m[6], i, p.seqIds[i]);
            h.putF32(m[12], i, lp[i]);
            h.putF32(m[13], i, ent[i]);
        }
        m[7] = h.alloc(4L * p.x.length);
        m[8] = r.nextBoolean() ? null : h.alloc(PolicyLoss.workspaceBytes(n, Math.max(ns[0], 1)));
        m[9] = h.alloc(4L * n);
        m[10] = h.alloc(72);
        m[11] = h.alloc(32);
        PolicyLossResult[] res = {null};
        // the stages need the weights first (stage 1), as a trainer calls them
        FuzzHarness.Call stage1 = () -> PolicyLoss.weights(p.cfg, n, m[4], m[6], ns[0], m[9], m[11], m[8], 0L);
        FuzzHarness.Call call = () -> {
            PolicyLoss.Inputs in = new PolicyLoss.Inputs(m[1], DType.I32, m[2], m[3], m[4], m[5], m[6], ns[0], null);
            switch (form) {
                case 0 -> res[0] = PolicyLoss.forwardBackward(p.cfg, new LogitsView(m[0], DType.F32, n, p.vocab, p.vocab, p.vocab), in,
                        m[7], DType.F32, p.vocab, new PolicyLoss.RowOutputs(m[12], m[13], null, null), m[8], 0L);
                case 1 -> res[0] = PolicyLoss.loss(p.cfg, n, m[12], m[13], in, null, null, m[8], 0L);
                case 2 -> stage1.run();
                case 3 -> PolicyLoss.forwardBackwardAsync(p.cfg, Float.NEGATIVE_INFINITY,
                        new LogitsView(m[0], DType.F32, n, p.vocab, p.vocab, p.vocab), in, m[9], m[7], DType.F32, p.vocab, null,
                        m[10], m[8], 0L);
                default -> PolicyLoss.lossAsync(p.cfg, Float.NEGATIVE_INFINITY, n, m[12], m[13], in, m[9], null, null, m[10], m[8], 0L);
            }
        };
        if (form >= 3) {
            try {
                stage1.run();
            } catch (Throwable t) {
                throw new AssertionError(e + ": stage 1 of a valid batch failed", t);
            }
        }
        String[] names = {"logits", "labels", "oldLogprob", "advantages", "mask", "refLogprob", "seqIds", "gradLogits",
                "workspace", form == 2 ? "weightsOut" : "weights", "sumsOut", "countsOut", "logprob", "entropy"};
        int k = r.nextInt(4) == 0 ? -1 : r.nextInt(6);
        switch (k) {
            case -1 -> {
                h.legal(e, "valid", call);
                PolicyLossResult expect = form == 1 || form == 4
                        ? PolicyLoss.loss(p.cfg, lp, ent, p.old, p.adv, p.mask, p.ref, p.seqIds, null, null, null)
                        : PolicyLoss.forwardBackward(p.cfg, p.x, n, p.vocab, p.labels, p.old, p.adv, p.mask, p.ref, p.seqIds, new float[p.x.length]);
                if (form == 2) {
                    double sum = 0;
                    for (int i = 0; i < n; i++) sum += h.getF32(m[9], i) * (p.cfg.agg() == LossAgg.TOKEN_MEAN ? 1 : 0);
                    double mass = 0;
                    for (float v : p.mask) mass += v;
                    if (p.cfg.agg() == LossAgg.TOKEN_MEAN && mass > 0 && p.cfg.aggNormalizer() == 0)
                        h.close(e, "token-mean weights sum to 1", 1.0, sum, 1e-5);
                    return;
                }
                double got = form >= 3 ? PolicyLossResult.fromSums(p.cfg, sums(m[10]), h.getF64(m[11], 3), Float.NEGATIVE_INFINITY).loss()
                        : res[0].loss();
                h.close(e, "loss (memory = arrays)", expect.loss(), got, 1e-5 * (1 + Math.abs(expect.loss())));
            }
            case 0, 1 -> {  // generic mutations of one ref the form reads or writes
                int[] used = switch (form) {
                    case 0 -> new int[] {0, 1, 2, 3, 4, 7, 12, 13};
                    case 1 -> new int[] {2, 3, 4, 12, 13};
                    case 2 -> new int[] {4, 9, 11};
                    case 3 -> new int[] {0, 1, 2, 3, 4, 7, 9, 10};
                    default -> new int[] {2, 3, 4, 9, 10, 12};
                };
                int i = used[r.nextInt(used.length)];
                if (n == 0 && i != 10 && i != 11) return;
                if (form == 1 && i == 13 && p.cfg.entropyCoef() == 0) return;  // entropy unread
                memMutation(e, MemMut.values()[1 + r.nextInt(4)], m, i, names[i], i == 4 || i < 8 || i == 9 || i >= 12 ? 4 : 8,
                        true, call);
            }
            case 2 -> {  // the workspace: too small, misaligned
                if (m[8] == null) m[8] = h.alloc(PolicyLoss.workspaceBytes(n, Math.max(ns[0], 1)));
                boolean small = r.nextBoolean();
                m[8] = small ? new MemRef(m[8].address(), 8, Device.CPU, m[8].owner()) : h.shifted(m[8], 4);
                h.mustThrow(e, "workspace", ARG, call, small ? "workspace needs " : "workspace must be 8-byte aligned");
            }
            case 3 -> {  // numSeqs beyond the rows (sized before anything is allocated)
                if (!seq) {
                    p.cfg = p.cfg.toBuilder().agg(LossAgg.SEQ_MEAN_TOKEN_SUM).build();
                }
                long bad = r.nextBoolean() ? Long.MAX_VALUE / 3 : Math.max(1, n) + 1 + r.nextInt(100);
                ns[0] = bad;
                h.mustThrow(e, "numSeqs", ARG, form >= 3 ? stage1 : call, "numSeqs must be in [1, rows = " + n + "], got " + bad);
            }
            case 4 -> {  // an output over an input
                if (n == 0) return;
                int o = switch (form) {
                    case 0, 3 -> 7;
                    case 2 -> 9;
                    default -> 10;
                };
                int[] targets = form == 2 ? new int[] {4, 11} : form == 1 || form == 4 ? new int[] {2, 3, 4, 12} : new int[] {1, 2, 3, 4};
                int tgt = targets[r.nextInt(targets.length)];
                if (form == 1) return;  // the convenience loss owns its sums
                m[o] = h.at(m[tgt], 0, m[o].bytes());
                h.mustThrow(e, names[o] + " overlaps " + names[tgt], ARG, form == 2 ? stage1 : call, "overlaps");
            }
            default -> {  // a bad mask value in memory names the row
                if (n == 0) return;
                int row = r.nextInt(n);
                float bad = new float[] {Float.NaN, 2f, -1f}[r.nextInt(3)];
                h.putF32(m[4], row, bad);
                h.mustThrow(e, "mask value", ARG, form >= 3 ? stage1 : call, "mask[" + row + "] = " + bad);
            }
        }
    }

    double[] sums(MemRef m) {
        double[] s = new double[PolicyLossResult.NUM_SUMS];
        for (int i = 0; i < s.length; i++) s[i] = h.getF64(m, i);
        return s;
    }
}
