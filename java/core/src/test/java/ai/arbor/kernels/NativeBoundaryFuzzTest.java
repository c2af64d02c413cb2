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

import ai.arbor.advantage.ShapingStats;
import ai.arbor.advantage.TokenAdvantages;
import ai.arbor.advantage.TokenShaping;
import ai.arbor.testing.Seeds;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeSet;
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
    FuzzHarness h;
    final boolean cuda = Backend.CUDA.isAvailable();

    NativeBoundaryFuzzTest() {
        entries.put("TokenStats.forward(float[],int,int,int[],float,float[],float[])", r -> tsFwdArrays(r, true));
        entries.put("TokenStats.forward(float[],int,int,int,int[],float,boolean[],float[],float[],float[])", r -> tsFwdArrays(r, false));
        entries.put("TokenStats.backward(float[],int,int,int[],float,float[],float[],float[])", r -> tsBwdArrays(r, true));
        entries.put("TokenStats.backward(float[],int,int,int,int[],float,boolean[],float[],float[],float[],float[],float[])", r -> tsBwdArrays(r, false));
        entries.put("TokenStats.forward(LogitsView,MemRef,DType,float,MemRef,MemRef,MemRef,MemRef,long)", this::tsFwdMem);
        entries.put("TokenStats.backward(LogitsView,MemRef,DType,float,MemRef,MemRef,MemRef,MemRef,MemRef,MemRef,DType,long,long)", this::tsBwdMem);
    }

    /** Public static methods of the kernel classes that reach native code, and those that do not (with why). */
    static final Class<?>[] KERNEL_CLASSES = {TokenStats.class, PolicyLoss.class, Sampler.class, TokenAdvantages.class};
    static final Map<String, String> NOT_NATIVE = Map.of(
            "PolicyLoss.aepoEntropyThreshold(double,float[],float[])", "Java only (a sort); fuzzed through the AEPO entries",
            "TokenAdvantages.reference(double[],int[],int,boolean[],double[],boolean[],TokenShaping)", "the Java test oracle",
            "TokenAdvantages.postToolFlags(int[],byte[])", "Java only; fuzzed below for exceptions",
            "TokenAdvantages.seqIdsOf(int[])", "Java only; fuzzed below for exceptions");

    static String signature(Method m) {
        StringBuilder b = new StringBuilder(m.getDeclaringClass().getSimpleName()).append('.').append(m.getName()).append('(');
        Class<?>[] p = m.getParameterTypes();
        for (int i = 0; i < p.length; i++) b.append(i > 0 ? "," : "").append(p[i].getSimpleName());
        return b.append(')').toString();
    }

    @Test
    void everyPublicNativeEntryPointIsFuzzed() {
        TreeSet<String> missing = new TreeSet<>(), stale = new TreeSet<>(entries.keySet());
        for (Class<?> c : KERNEL_CLASSES)
            for (Method m : c.getDeclaredMethods()) {
                if (!Modifier.isPublic(m.getModifiers()) || !Modifier.isStatic(m.getModifiers())) continue;
                String s = signature(m);
                stale.remove(s);
                if (!entries.containsKey(s) && !NOT_NATIVE.containsKey(s)) missing.add(s);
            }
        assertTrue(missing.isEmpty(), "public entry points without a fuzz case (add one to NativeBoundaryFuzzTest): " + missing);
        assertTrue(stale.isEmpty(), "fuzz cases of entry points that no longer exist: " + stale);
    }

    @Test
    void malformedCallsThrowNamedExceptionsAndNeverCrash() {
        long seed = Seeds.seed("NativeBoundaryFuzzTest");
        h = new FuzzHarness(seed, 8 << 20);
        List<String> names = new ArrayList<>(entries.keySet());
        long t0 = System.nanoTime();
        try {
            for (long i = 0; i < CALLS; i++) {
                Random r = h.caseRandom(i);
                if (i % 1000 == 999) Kernels.forceScalarCpu(r.nextBoolean());  // both ISA paths
                String name = names.get(r.nextInt(names.size()));
                entries.get(name).run(r);
            }
        } finally {
            Kernels.forceScalarCpu(false);
        }
        long ms = (System.nanoTime() - t0) / 1_000_000;
        h.print("NativeBoundaryFuzzTest", ms);
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
}
