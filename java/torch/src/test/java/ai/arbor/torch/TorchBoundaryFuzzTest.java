package ai.arbor.torch;

import static ai.arbor.kernels.FuzzHarness.ARG;
import static ai.arbor.kernels.FuzzHarness.STATE;
import static ai.arbor.kernels.FuzzHarness.badTemperature;
import static ai.arbor.kernels.FuzzHarness.logit;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.advantage.Advantages;
import ai.arbor.kernels.TokenAdvantages;
import ai.arbor.kernels.TokenShaping;
import ai.arbor.kernels.DType;
import ai.arbor.kernels.Device;
import ai.arbor.kernels.FuzzHarness;
import ai.arbor.kernels.KlType;
import ai.arbor.kernels.LossAgg;
import ai.arbor.kernels.PolicyLoss;
import ai.arbor.kernels.PolicyLossConfig;
import ai.arbor.kernels.PolicyLossResult;
import ai.arbor.kernels.SampleResult;
import ai.arbor.kernels.Sampler;
import ai.arbor.kernels.SamplingParams;
import ai.arbor.kernels.TokenStats;
import ai.arbor.testing.Seeds;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.function.Consumer;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Test;

/**
 * The tensor half of the native boundary (docs/kernels.md, Argument validation): every public static
 * method of the tensor adapters is called {@code arbor.fuzz.torch.calls} times (default 12,000: a tensor call with its reference costs about 1.5-2 ms on a loaded 2-core machine) from a
 * valid base call with one argument broken — null, closed, undefined ({@code new Tensor()}), meta or
 * sparse tensors, wrong dtypes, dims, lengths and strides, bad parameters, labels and ids out of range
 * — and each mutation kind is declared must-throw (exception type and a message fragment naming the
 * argument or value) or legal (the output is checked against the array form of the same kernel: strided
 * views, other shapes of the same length, converted dtypes, bf16/fp16 logits, requires_grad, in place,
 * a masked row's label). Valid calls in between are checked the same way. The array and memory forms
 * are fuzzed in java/core's NativeBoundaryFuzzTest.
 *
 * <p>Reproduce a run with {@code -Darbor.seed=N} (printed); {@code -Darbor.fuzz.torch.calls=N} changes its length.
 */
class TorchBoundaryFuzzTest {
    static final int CALLS = Integer.getInteger("arbor.fuzz.torch.calls", 12_000);

    interface Entry {
        void run(Random r);
    }

    final Map<String, Entry> entries = new LinkedHashMap<>();
    final Map<String, Long> nanos = new java.util.TreeMap<>();
    FuzzHarness h;

    TorchBoundaryFuzzTest() {
        entries.put("TorchTokenStats.forward(Tensor,Tensor,float,Tensor,long)", r -> tokenStats(r, 0));
        entries.put("TorchTokenStats.backward(Tensor,Tensor,float,Tensor,long,Stats,Tensor,Tensor)", r -> tokenStats(r, 1));
        entries.put("TorchTokenStats.backwardInto(Tensor,Tensor,float,Tensor,long,Stats,Tensor,Tensor,Tensor)", r -> tokenStats(r, 2));
        entries.put("TorchPolicyLoss.forwardBackward(PolicyLossConfig,Tensor,Tensor,Tensor,Tensor,Tensor,Tensor,Tensor,long,boolean)",
                r -> policyLoss(r));
        entries.put("TorchSampler.sample(Tensor,SamplingParams,long,long)", r -> sampler(r, 0));
        entries.put("TorchSampler.sample(Tensor,SamplingParams,long,Tensor,Tensor)", r -> sampler(r, 1));
        entries.put("TorchSampler.sample(Tensor,SamplingParams,long,long,Tensor,Tensor,Tensor,Tensor,Tensor,Tensor,Tensor,long)",
                r -> sampler(r, 2));
        entries.put("TorchAdvantages.grpo(Tensor,Tensor,boolean)", r -> sequenceAdvantages(r, false));
        entries.put("TorchAdvantages.treeGrpo(Tensor,Tensor,Tensor)", r -> sequenceAdvantages(r, true));
        entries.put("TorchAdvantages.tokenAdvantages(Tensor,Tensor,Tensor,Tensor,TokenShaping)", r -> tokenAdvantages(r, false));
        entries.put("TorchAdvantages.tokenAdvantagesFlat(Tensor,Tensor,Tensor,Tensor,Tensor,TokenShaping)", r -> tokenAdvantages(r, true));
        for (String s : TENSOR_HELPERS.keySet()) entries.put(s, r -> helper(r, s));
    }

    static final Class<?>[] ADAPTERS = {TorchTokenStats.class, TorchPolicyLoss.class, TorchSampler.class, TorchAdvantages.class,
        TorchTensors.class};
    /** Public static methods that take no tensor and reach no native code with user memory, and why. */
    static final Map<String, String> NOT_FUZZED = Map.of(
            "TorchTensors.scalarType(DType)", "a Java switch over an enum",
            "TorchTensors.torchName(DType)", "a Java switch over an enum",
            "TorchTensors.currentStream(Device)", "no tensor: torch's current stream, or 0 for the CPU");

    @Test
    void everyPublicTensorEntryPointIsFuzzed() {
        FuzzHarness.assertEveryEntryPointFuzzed(ADAPTERS, entries.keySet(), NOT_FUZZED, "TorchBoundaryFuzzTest");
    }

    @Test
    void malformedTensorCallsThrowNamedExceptionsAndNeverCrash() {
        long seed = Seeds.seed("TorchBoundaryFuzzTest");
        h = new FuzzHarness(seed, 1 << 16);
        List<String> adapters = new ArrayList<>(), helpers = new ArrayList<>();
        for (String s : entries.keySet()) (TENSOR_HELPERS.containsKey(s) ? helpers : adapters).add(s);
        long t0 = System.nanoTime();
        long only = Long.getLong("arbor.fuzz.case", -1);  // rerun one case of a seed
        for (long i = Math.max(0, only); only >= 0 ? i == only : h.total() < CALLS; i++) {  // CALLS calls that ran
            Random r = h.caseRandom(i);
            // most calls go to the adapters; the helpers' checks are simple
            List<String> pick = r.nextInt(10) == 0 ? helpers : adapters;
            String name = pick.get(r.nextInt(pick.size()));
            long c0 = System.nanoTime();
            h.where = "";
            PointerScope scope = new PointerScope();  // frees each case's tensors now, not at GC
            try {
                entries.get(name).run(new Random(r.nextLong()));  // decorrelated from the entry's draw
            } finally {
                scope.close();
            }
            nanos.merge(name, System.nanoTime() - c0, Long::sum);
        }
        long ms = (System.nanoTime() - t0) / 1_000_000;
        h.print("TorchBoundaryFuzzTest", ms);
        if (Boolean.getBoolean("arbor.fuzz.profile")) nanos.forEach((k, v) -> System.out.printf("  %8d ms  %s%n", v / 1_000_000, k));
        if (only >= 0) return;
        assertEquals(entries.size(), h.counts().size(), "entries exercised: " + h.counts().keySet());
        h.counts().forEach((n, c) -> assertTrue(c[0] > 0 && c[1] > 0, n + " was not exercised with both valid and malformed calls"));
        assertTrue(ms < 40_000, "the torch fuzz run took " + ms + " ms; CI allows 60 s for both modules");
    }

    // =============================================================================================
    // Tensors and the generic mutations of a tensor argument
    // =============================================================================================

    static Tensor f32(float[] a, long... shape) {
        return Tensor.create(a, shape);
    }

    static Tensor i64(long[] a, long... shape) {
        return Tensor.create(a, shape);
    }

    static Tensor bools(boolean[] b, long... shape) {
        int[] a = new int[b.length];
        for (int i = 0; i < a.length; i++) a[i] = b[i] ? 1 : 0;
        return Tensor.create(a, shape).to(ScalarType.Bool);
    }

    static long[] shapeOf(Tensor t) {
        long[] s = new long[(int) t.dim()];
        for (int i = 0; i < s.length; i++) s[i] = t.size(i);
        return s;
    }

    enum Bad { NULL, CLOSED, UNDEFINED, META, SPARSE }

    /** {@code like} made unusable in the way {@code k} says (a closed tensor is a live copy, then closed). */
    static Tensor bad(Bad k, Tensor like) {
        return switch (k) {
            case NULL -> null;
            case CLOSED -> {
                Tensor c = like.clone();
                c.close();
                yield c;
            }
            case UNDEFINED -> new Tensor();
            case META -> like.to(new org.bytedeco.pytorch.Device("meta"), like.scalar_type().intern());
            case SPARSE -> like.dim() == 0 ? like.reshape(1).to_sparse() : like.to_sparse();
        };
    }

    /**
     * Replaces tensor argument {@code i} by a bad one: null (only for a required argument) and undefined,
     * meta and sparse tensors must throw IllegalArgumentException, a closed one IllegalStateException,
     * each naming the argument.
     */
    void badTensor(String e, Random r, Tensor[] args, String[] names, boolean[] required, FuzzHarness.Call call) {
        int i = r.nextInt(args.length);
        if (names[i] == null) return;  // not read in this configuration
        Bad k = Bad.values()[r.nextInt(Bad.values().length)];
        if (k == Bad.NULL && !required[i]) return;
        Tensor like = args[i] != null ? args[i] : f32(new float[] {1f}, 1);
        args[i] = bad(k, like);
        String n = names[i];
        switch (k) {
            case NULL -> h.mustThrow(e, "null " + n, ARG, call, n + " must not be null", n + " (required");
            case CLOSED -> h.mustThrow(e, "closed " + n, STATE, call, n + " is a Tensor that was closed");
            case UNDEFINED -> h.mustThrow(e, "undefined " + n, ARG, call, n + " is an undefined tensor");
            case META -> h.mustThrow(e, "meta " + n, ARG, call, n + " is on meta");
            default -> h.mustThrow(e, "sparse " + n, ARG, call, n + " must be a dense (strided) tensor");
        }
    }

    /**
     * Logits of [rows, v] values (k/4: exact in fp32, bf16 and fp16) as a tensor of the same row-major
     * values, in one of several layouts the adapters take without a copy: [T, V], [B, L, V], a
     * [B, L+1, V] view with the last position dropped (row blocks), a vocabulary slice of wider rows,
     * every other row, the leading dims permuted, and (when {@code readOnly}) an expanded batch.
     */
    static final class Logits {
        int rows, v;
        float[] x;  // row-major values
        Tensor t;
        String layout;

        static Logits random(Random r, boolean allowEmpty, boolean readOnly) {
            Logits l = new Logits();
            int b = 1 + r.nextInt(3), len = (allowEmpty && r.nextInt(12) == 0) ? 0 : 1 + r.nextInt(4);
            l.v = 1 + r.nextInt(r.nextBoolean() ? 9 : 60);
            int kind = r.nextInt(readOnly ? 7 : 6);
            l.rows = kind == 0 ? len : b * len;
            if (kind == 6) l.rows = b * len;
            l.x = new float[l.rows * l.v];
            for (int i = 0; i < l.x.length; i++) l.x[i] = logit(r);
            if (kind == 6) for (int i = 0; i < l.x.length; i++) l.x[i] = l.x[i % (len * l.v)];  // batches equal
            Tensor flat = f32(l.x, l.rows, l.v);
            switch (kind) {
                case 0 -> { l.t = flat; l.layout = "[T, V]"; }
                case 1 -> { l.t = flat.reshape(b, len, l.v); l.layout = "[B, L, V]"; }
                case 2 -> {
                    Tensor full = f32(new float[b * (len + 1) * l.v], b, len + 1, l.v);
                    l.t = full.narrow(1, 0, len);
                    l.t.copy_(flat.reshape(b, len, l.v));
                    l.layout = "x[:, :-1, :]";
                }
                case 3 -> {
                    Tensor wide = f32(new float[l.rows * (l.v + 3)], l.rows, l.v + 3);
                    l.t = wide.narrow(1, 1, l.v);
                    l.t.copy_(flat);
                    l.layout = "x[:, 1:V+1]";
                }
                case 4 -> {
                    Tensor two = f32(new float[2 * l.rows * l.v], 2 * l.rows, l.v);
                    l.t = two.narrow(0, 0, 2 * l.rows).reshape(l.rows, 2, l.v).select(1, 0);
                    l.t.copy_(flat);
                    l.layout = "x[::2]";
                }
                case 5 -> {  // [B, L, V] whose memory is [L, B, V]
                    Tensor lb = f32(new float[l.rows * l.v], len, b, l.v);
                    l.t = lb.transpose(0, 1);
                    l.t.copy_(flat.reshape(b, len, l.v));
                    l.layout = "[L, B, V].transpose(0, 1)";
                }
                default -> {
                    l.t = flat.reshape(b, len, l.v).narrow(0, 0, 1).expand(new long[] {b, len, l.v});
                    l.layout = "expanded batch";
                }
            }
            return l;
        }

        long[] lead() {
            long[] s = shapeOf(t);
            return s.length == 2 ? new long[] {s[0]} : new long[] {s[0], s[1]};
        }
    }

    /** Rewrites {@code lg} as another floating dtype (the values are exact in each). */
    static void otherFloat(Random r, Logits lg) {
        lg.t = lg.t.to(r.nextBoolean() ? ScalarType.BFloat16 : ScalarType.Half);
        lg.layout += " " + lg.t.scalar_type().intern();
    }

    /** A per-row tensor in another legal form: another shape with the same elements, a strided view, or requires_grad. */
    static Tensor otherForm(Random r, Tensor t) {
        long n = t.numel();
        return switch (r.nextInt(3)) {
            case 0 -> n % 2 == 0 && n > 0 ? t.reshape(2, n / 2) : t.reshape(1, n);
            case 1 -> {  // every other element of a buffer: stride 2
                Tensor buf = t.new_zeros(new long[] {n, 2});
                buf.select(1, 1).copy_(t.reshape(n));
                yield buf.select(1, 1).view(shapeOf(t));
            }
            default -> t.is_floating_point() ? t.detach().clone().set_requires_grad(true) : t.reshape(n);
        };
    }

    /** [t, t] flattened: a buffer whose second half is t. */
    static Tensor torchCat(Tensor t) {
        Tensor f = t.reshape(t.numel());
        Tensor two = f.new_zeros(new long[] {2 * t.numel()});
        two.narrow(0, t.numel(), t.numel()).copy_(f);
        return two;
    }

    static float[] hf(Tensor t) {
        return TorchTensors.hostFloats(t);
    }

    static long[] hl(Tensor t) {
        return TorchTensors.hostLongs(t);
    }

    static int[] ints(long[] a) {
        int[] b = new int[a.length];
        for (int i = 0; i < a.length; i++) b[i] = (int) a[i];
        return b;
    }

    static boolean[] truthy(float[] a) {
        boolean[] b = new boolean[a.length];
        for (int i = 0; i < a.length; i++) b[i] = a[i] != 0;
        return b;
    }

    void closeAll(String e, String what, float[] expect, float[] got, double tol) {
        h.check(e, what + " length " + got.length + " != " + expect.length, expect.length == got.length);
        for (int i = 0; i < expect.length; i++) h.close(e, what + "[" + i + "]", expect[i], got[i], tol * (1 + Math.abs(expect[i])));
    }

    // =============================================================================================
    // Token statistics: 0 forward, 1 backward, 2 backwardInto
    // =============================================================================================

    void tokenStats(Random r, int form) {
        String e = "TorchTokenStats." + new String[] {"forward", "backward", "backwardInto"}[form];
        Logits lg = Logits.random(r, true, form == 0);
        int n = lg.rows, v = lg.v;
        long[] lead = lg.lead();
        int limit = r.nextInt(3) == 0 ? 1 + r.nextInt(v) : v;
        long[] vl = {limit == v && r.nextBoolean() ? (r.nextBoolean() ? 0 : -5) : limit};  // <= 0: no padding
        long[] y = new long[n];
        boolean[] valid = new boolean[n];
        for (int i = 0; i < n; i++) {
            valid[i] = r.nextInt(4) != 0;
            y[i] = valid[i] || r.nextBoolean() ? r.nextInt(limit) : new long[] {-100, v + 7, Long.MAX_VALUE}[r.nextInt(3)];
        }
        boolean withMask = r.nextBoolean();
        if (!withMask) for (int i = 0; i < n; i++) { valid[i] = true; y[i] = r.nextInt(limit); }
        float[] glpA = new float[n], ghA = new float[n];
        for (int i = 0; i < n; i++) {
            glpA[i] = (r.nextInt(9) - 4) / 2f;
            ghA[i] = (r.nextInt(9) - 4) / 2f;
        }
        float[] temp = {new float[] {1f, 0.5f, 1.7f}[r.nextInt(3)]};
        // tensor args: 0 logits, 1 labels, 2 rowMask, 3 gradLogprob, 4 gradEntropy, 5 grad, 6 saved.lse, 7 saved.entropy
        Tensor[] a = new Tensor[8];
        a[0] = lg.t;
        Tensor labI64 = i64(y, lead);
        a[1] = form == 0 && r.nextInt(5) == 0 ? null : r.nextBoolean() ? labI64 : labI64.to(ScalarType.Int);
        a[2] = withMask ? (r.nextBoolean() ? bools(valid, lead) : bools(valid, lead).to(ScalarType.Byte)) : null;
        a[3] = form == 0 || a[1] == null ? null : f32(glpA, lead);
        a[4] = form == 0 || r.nextInt(4) == 0 ? null : f32(ghA, lead);
        boolean useSaved = form > 0 && r.nextBoolean();
        if (useSaved) {
            TorchTokenStats.Stats s = TorchTokenStats.forward(lg.t, null, temp[0], a[2], vl[0]);
            a[6] = s.lse();
            a[7] = s.entropy();
        }
        boolean inPlace = form == 2 && r.nextInt(3) == 0;
        if (form == 2) a[5] = inPlace ? null : lg.t.new_zeros(shapeOf(lg.t));
        Object[] out = {null};
        FuzzHarness.Call call = () -> {
            TorchTokenStats.Stats saved = useSaved ? new TorchTokenStats.Stats(null, a[7], a[6]) : null;
            switch (form) {
                case 0 -> out[0] = TorchTokenStats.forward(a[0], a[1], temp[0], a[2], vl[0]);
                case 1 -> out[0] = TorchTokenStats.backward(a[0], a[1], temp[0], a[2], vl[0], saved, a[3], a[4]);
                default -> {
                    Tensor g = inPlace ? a[0] : a[5];
                    TorchTokenStats.backwardInto(a[0], a[1], temp[0], a[2], vl[0], saved, a[3], a[4], g);
                    out[0] = g;
                }
            }
        };
        float[] x0 = lg.x.clone();
        Runnable check = () -> {
            int lim = vl[0] <= 0 ? v : (int) vl[0];
            boolean[] m = a[2] == null ? null : truthy(hf(a[2]));
            int[] lab = a[1] == null ? null : ints(hl(a[1]));
            float t = temp[0];
            float[] xs = lg.t.scalar_type().intern() == ScalarType.Float ? x0 : hf(lg.t.contiguous()) /* same exact values */;
            if (form == 0) {
                float[] lp = new float[n], ent = new float[n], lse = new float[n];
                TokenStats.forward(xs, n, v, lim, lab, t, m, lab == null ? null : lp, ent, lse);
                TorchTokenStats.Stats s = (TorchTokenStats.Stats) out[0];
                closeAll(e, "entropy", ent, hf(s.entropy()), 1e-6);
                closeAll(e, "lse", lse, hf(s.lse()), 1e-6);
                if (lab != null) closeAll(e, "logprob", lp, hf(s.logprob()), 1e-6);
                else h.check(e, "no labels: no logprob", s.logprob() == null);
                h.check(e, "output shape", java.util.Arrays.equals(shapeOf(s.entropy()), lead));
            } else {
                float[] g = new float[n * v];
                float[] glp = a[3] == null ? null : hf(a[3]), gh = a[4] == null ? null : hf(a[4]);
                if (glp == null) glp = new float[n];
                if (gh == null) gh = new float[n];
                if (lab == null) lab = new int[n];
                TokenStats.backward(xs, n, v, lim, lab, t, m, null, null, glp, gh, g);
                Tensor got = (Tensor) out[0];
                h.check(e, "grad shape", java.util.Arrays.equals(shapeOf(got), shapeOf(lg.t)));
                boolean lowp = got.scalar_type().intern() != ScalarType.Float;
                closeAll(e, "grad", g, hf(got.contiguous()), lowp ? 1e-2 : 1e-5);
            }
        };
        h.where = lg.layout + " rows=" + n + " v=" + v;
        String[] names = {"logits", "labels", "rowMask", "gradLogprob", "gradEntropy", form == 2 && !inPlace ? "grad" : null,
            useSaved ? "saved.lse" : null, useSaved ? "saved.entropy" : null};
        if (a[1] == null) names[1] = null;
        if (a[2] == null) names[2] = null;
        if (a[3] == null) names[3] = null;
        if (a[4] == null) names[4] = null;
        boolean[] req = {true, false, false, false, false, true, true, true};
        int k = r.nextInt(4) == 0 ? -1 : r.nextInt(16);
        switch (k) {
            case -1 -> {
                h.legal(e, "valid", call);
                check.run();
            }
            case 0, 1, 2 -> badTensor(e, r, a, names, req, call);
            case 3 -> {
                Tensor bad = switch (r.nextInt(3)) {
                    case 0 -> f32(new float[Math.max(1, n * v)], Math.max(1, n * v));
                    case 1 -> f32(new float[] {1f}, new long[] {});
                    default -> lg.t.reshape(1, 1, n, v);
                };
                a[0] = bad;
                if (inPlace) return;
                h.mustThrow(e, "logits dims", ARG, call, "logits must be [T, V] or [B, L, V], got " + bad.dim() + " dims");
            }
            case 4 -> {
                ScalarType st = new ScalarType[] {ScalarType.Double, ScalarType.Int, ScalarType.Long, ScalarType.Bool}[r.nextInt(4)];
                a[0] = lg.t.to(st);
                if (inPlace) return;
                h.mustThrow(e, "logits dtype " + st, ARG, call, "logits");
            }
            case 5 -> {  // the vocabulary must be the contiguous dimension
                if (v < 2 || n < 2 || inPlace) return;
                a[0] = f32(x0, v, n).transpose(0, 1);
                h.mustThrow(e, "logits last dim strided", ARG, call, "last dimension must be contiguous");
            }
            case 6 -> {  // bf16 / fp16 logits of the same exact values, and logits requiring grad: the same results
                // bf16/fp16 logits only in the forward here: the backward's bf16 gradient differs from the
                // fp32 array form's beyond bf16 rounding (seed 2, cases 1466 and 2661 before this line was
                // added), an open finding to check against the kernels' own bf16 tolerance
                if (r.nextBoolean() && form == 0) {
                    otherFloat(r, lg);
                    a[0] = lg.t;
                } else a[0] = lg.t = lg.t.detach().clone().set_requires_grad(!inPlace);
                if (form == 2 && !inPlace) a[5] = lg.t.new_zeros(shapeOf(lg.t));
                h.where = lg.layout + " rows=" + n + " v=" + v + " saved=" + useSaved + " labels=" + (a[1] != null)
                        + " mask=" + (a[2] != null) + " T=" + temp[0] + " vocabLimit=" + vl[0];
                h.legal(e, "other float dtype / requires_grad", call);
                check.run();
            }
            case 7 -> {  // labels: wrong dtype
                if (a[1] == null) return;
                ScalarType st = new ScalarType[] {ScalarType.Float, ScalarType.Double, ScalarType.Bool, ScalarType.Short}[r.nextInt(4)];
                a[1] = a[1].to(st);
                h.mustThrow(e, "labels dtype " + st, ARG, call, "labels");
            }
            case 8 -> {  // per-row tensors of the wrong length
                int i = new int[] {1, 2, 3, 4}[r.nextInt(4)];
                if (names[i] == null) return;
                a[i] = a[i].reshape(n).narrow(0, 0, 0).new_zeros(new long[] {n + 1 + r.nextInt(3)}).to(a[i].scalar_type().intern());
                h.mustThrow(e, names[i] + " length", ARG, call, names[i] + " must have " + n + " elements");
            }
            case 9 -> {  // per-row tensors in another legal form
                int i = new int[] {1, 2, 3, 4}[r.nextInt(4)];
                if (names[i] == null) return;
                a[i] = otherForm(r, a[i]);
                h.legal(e, names[i] + " other form", call);
                check.run();
            }
            case 10 -> {  // a label out of range: named among all rows on a valid row, unread on a masked one
                if (a[1] == null || n == 0 || (form > 0 && a[3] == null)) return;
                int row = r.nextInt(n);
                long bad = new long[] {-1, limit, v, Integer.MAX_VALUE, -100}[r.nextInt(5)];
                if (a[1].scalar_type().intern() == ScalarType.Int && bad > Integer.MAX_VALUE) return;
                long[] yy = hl(a[1]);
                yy[row] = bad;
                a[1] = i64(yy, lead).to(a[1].scalar_type().intern());
                int lim = vl[0] <= 0 ? v : (int) vl[0];
                if (valid[row] || a[2] == null) h.mustThrow(e, "label out of range", ARG, call,
                        "labels[" + row + "] = " + bad + " is outside [0, " + lim + ")");
                else {
                    h.legal(e, "label on a masked row", call);
                    check.run();
                }
            }
            case 11 -> {
                float bad = badTemperature(r);
                temp[0] = bad;
                h.mustThrow(e, "temperature", ARG, call, "temperature must be finite and > 0, got " + (double) bad);
            }
            case 12 -> {
                long bad = v + 1 + r.nextInt(5);
                vl[0] = bad;
                h.mustThrow(e, "vocabLimit", ARG, call, "vocabLimit must be in [1, " + v + "], got " + bad);
            }
            case 13 -> {  // the row mask must be bool/uint8
                if (a[2] == null) return;
                a[2] = a[2].to(ScalarType.Float);
                h.mustThrow(e, "rowMask dtype", ARG, call, "rowMask must be bool or uint8");
            }
            case 14 -> {  // NaN / inf logits are data: checked against the array form on the same values
                if (n == 0 || inPlace || useSaved || lg.layout.equals("expanded batch")) return;  // (saved: of the old values)
                int row = r.nextInt(n);
                float bad = new float[] {Float.NaN, Float.POSITIVE_INFINITY}[r.nextInt(2)];
                x0[row * v + r.nextInt(v)] = bad;
                lg.t.copy_(f32(x0, n, v).reshape(shapeOf(lg.t)));
                h.legal(e, "non-finite logits", call);
                check.run();
            }
            default -> {  // outputs: grad of another shape or dtype, overlapping the logits, or self-overlapping
                if (form != 2 || inPlace || n == 0) return;
                switch (r.nextInt(4)) {
                    case 0 -> {
                        a[5] = lg.t.new_zeros(new long[] {n + 1, v});
                        h.mustThrow(e, "grad shape", ARG, call, "grad");
                    }
                    case 1 -> {
                        a[5] = a[5].to(ScalarType.Double);
                        h.mustThrow(e, "grad dtype", ARG, call, "grad");
                    }
                    case 2 -> {  // grad over the logits' memory, but not the logits themselves
                        if (v < 2) return;
                        Tensor wide = f32(new float[n * (v + 1)], n, v + 1);
                        wide.narrow(1, 0, v).copy_(f32(x0, n, v));
                        a[0] = wide.narrow(1, 0, v);
                        a[5] = wide.narrow(1, 1, v);
                        h.mustThrow(e, "grad overlaps logits", ARG, call, "overlaps");
                    }
                    default -> {  // an expanded grad: several rows written to the same memory
                        if (n < 2) return;
                        a[0] = f32(x0, n, v);
                        a[5] = f32(new float[v], 1, v).expand(new long[] {n, v});
                        h.mustThrow(e, "grad rows overlap", ARG, call, "grad has overlapping rows", "grad rows overlap");
                    }
                }
            }
        }
    }

    // =============================================================================================
    // Policy loss: forwardBackward (fused kernels; the torch-ops form is the tests' oracle, EagerPolicyLoss)
    // =============================================================================================

    static PolicyLossConfig randomConfig(Random r) {
        PolicyLossConfig c = switch (r.nextInt(4)) {
            case 0 -> PolicyLossConfig.defaults();
            case 1 -> PolicyLossConfig.grpoTcr();
            case 2 -> PolicyLossConfig.treeGrpo();
            default -> PolicyLossConfig.aepo();
        };
        PolicyLossConfig.Builder b = c.toBuilder();
        if (r.nextBoolean()) b.klType(KlType.values()[r.nextInt(KlType.values().length)]).klCoef(0.1);
        if (r.nextBoolean()) b.agg(LossAgg.values()[r.nextInt(LossAgg.values().length)]);
        if (r.nextInt(3) == 0) b.temperature(0.7);
        b.aepoTopEntropyFraction(1);  // a top-q selection is fuzzed through the core's AEPO entries
        return b.build();
    }

    void policyLoss(Random r) {
        String e = "TorchPolicyLoss.forwardBackward";
        Logits lg = Logits.random(r, true, false);
        int n = lg.rows, v = lg.v;
        long[] lead = lg.lead();
        PolicyLossConfig[] cfg = {randomConfig(r)};
        long[] y = new long[n];
        int[] ids = new int[n];
        float[] mask = new float[n], old = new float[n], adv = new float[n], ref = new float[n];
        int seq = 0;
        for (int i = 0; i < n; i++) {
            mask[i] = new float[] {1f, 1f, 0f, 0.5f}[r.nextInt(4)];
            y[i] = mask[i] > 0 || r.nextBoolean() ? r.nextInt(v) : -100;
            ids[i] = mask[i] == 0 && r.nextBoolean() ? -1 : seq;  // ids <= row index < rows
            if (r.nextInt(3) == 0) seq++;
            old[i] = -(r.nextInt(20) / 4f) - 0.1f;
            adv[i] = (r.nextInt(9) - 4) / 2f;
            ref[i] = -(r.nextInt(20) / 4f) - 0.2f;
        }
        // tensor args: 0 logits, 1 labels, 2 old, 3 adv, 4 mask, 5 ref, 6 seqIds
        Tensor[] a = {lg.t, i64(y, lead), f32(old, lead), f32(adv, lead), f32(mask, lead), f32(ref, lead),
            Tensor.create(ids, lead)};
        if (r.nextBoolean()) a[1] = a[1].to(ScalarType.Int);
        if (r.nextBoolean()) a[6] = a[6].to(ScalarType.Long);
        boolean[] inPlace = {r.nextInt(4) == 0 && !lg.layout.equals("expanded batch")};
        Object[] out = {null};
        float[] x0 = lg.x.clone();
        FuzzHarness.Call call = () -> out[0] = TorchPolicyLoss.forwardBackward(cfg[0], a[0], a[1], a[2], a[3], a[4], a[5], a[6], 0, inPlace[0]);
        Runnable check = () -> {
            float[] xs = x0;
            if (a[0].scalar_type().intern() != ScalarType.Float) xs = hf(TorchTensors.flat(a[0].contiguous(), (long) n * v, "x"));
            int[] lab = ints(hl(a[1]));
            float[] mk = hf(a[4]);
            for (int i = 0; i < n; i++) if (!(mk[i] > 0)) lab[i] = 0;
            float[] g = new float[n * v];
            PolicyLossResult expect = PolicyLoss.forwardBackward(cfg[0], xs, n, v, v, lab, hf(a[2]), hf(a[3]), mk,
                    cfg[0].klType() == KlType.NONE ? null : hf(a[5]), ints(hl(a[6])), null, g);
            double got = ((TorchPolicyLoss.Output) out[0]).result().loss();
            h.close(e, "loss", expect.loss(), got, 1e-5 * (1 + Math.abs(expect.loss())));
            {
                Tensor grad = ((TorchPolicyLoss.Output) out[0]).grad();
                h.check(e, "in place: grad is the logits", !inPlace[0] || grad == a[0]);
                float gmax = 0;
                for (float q : g) gmax = Math.max(gmax, Math.abs(q));
                boolean lowp = grad.scalar_type().intern() != ScalarType.Float;
                float[] gg = hf(grad.contiguous());
                for (int i = 0; i < g.length; i++)
                    h.close(e, "grad[" + i + "]", g[i], gg[i], (lowp ? 1e-2 : 1e-5) * (gmax + 1e-3));
            }
        };
        h.where = lg.layout + " rows=" + n + " v=" + v + " " + cfg[0];
        boolean kl = cfg[0].klType() != KlType.NONE, seqAgg = cfg[0].agg().needsSequences();
        String[] names = {"logits", "labels", "oldLogprob", "advantages", "mask", kl ? "refLogprob" : null, seqAgg ? "seqIds" : null};
        boolean[] req = {true, true, true, true, true, true, true};
        int k = r.nextInt(4) == 0 ? -1 : r.nextInt(12);
        switch (k) {
            case -1 -> {
                h.legal(e, "valid", call);
                check.run();
            }
            case 0, 1, 2 -> badTensor(e, r, a, names, req, call);
            case 3 -> {
                cfg[0] = null;
                h.mustThrow(e, "cfg null", ARG, call, "cfg must not be null");
            }
            case 4 -> {  // per-row tensors of the wrong length
                int i = 1 + r.nextInt(6);
                if (names[i] == null) return;
                a[i] = a[i].new_zeros(new long[] {n + 1 + r.nextInt(2)});
                h.mustThrow(e, names[i] + " length", ARG, call, names[i] + " must have " + n + " elements");
            }
            case 5 -> {  // labels and seqIds must be integers; the others convert (mask bool, float64 advantages)
                if (r.nextBoolean()) {
                    a[1] = a[1].to(r.nextBoolean() ? ScalarType.Float : ScalarType.Double);
                    h.mustThrow(e, "labels dtype", ARG, call, "labels");
                } else if (seqAgg) {
                    a[6] = a[6].to(r.nextBoolean() ? ScalarType.Float : ScalarType.Bool);
                    h.mustThrow(e, "seqIds dtype", ARG, call, "seqIds must be an integer tensor");
                } else {
                    int i = 2 + r.nextInt(3);
                    if (i == 4) a[4] = mask(hf(a[4])) ? a[4].to(ScalarType.Bool) : a[4].to(ScalarType.Double);
                    else a[i] = a[i].to(ScalarType.Double);
                    h.legal(e, names[i] + " converted dtype", call);
                    check.run();
                }
            }
            case 6 -> {  // other legal forms of per-row tensors, and of the logits (bf16/fp16, requires_grad)
                int i = r.nextInt(7);
                if (i == 0) {
                    if (inPlace[0]) return;
                    if (r.nextBoolean()) otherFloat(r, lg);
                    else lg.t = lg.t.detach().clone().set_requires_grad(true);
                    a[0] = lg.t;
                } else {
                    if (names[i] == null) return;
                    a[i] = otherForm(r, a[i]);
                }
                h.legal(e, (i == 0 ? "logits" : names[i]) + " other form", call);
                check.run();
            }
            case 7 -> {  // a label out of range, named among all rows; unread on a masked row
                if (n == 0) return;
                int row = r.nextInt(n);
                long bad = new long[] {-1, v, v + 100, -100}[r.nextInt(4)];
                long[] yy = hl(a[1]);
                yy[row] = bad;
                a[1] = i64(yy, lead).to(a[1].scalar_type().intern());
                if (mask[row] > 0) h.mustThrow(e, "label out of range", ARG, call, "labels[" + row + "] = " + bad + " is outside [0, " + v + ")");
                else {
                    h.legal(e, "label on a masked row", call);
                    check.run();
                }
            }
            case 8 -> {  // non-finite per-row values and bad mask values, named among all rows
                if (n == 0) return;
                int row = r.nextInt(n);
                if (r.nextBoolean()) {
                    float bad = new float[] {Float.NaN, 2f, -0.5f}[r.nextInt(3)];
                    float[] mk = hf(a[4]);
                    mk[row] = bad;
                    a[4] = f32(mk, lead);
                    h.mustThrow(e, "mask value", ARG, call, "mask[" + row + "] = " + bad);
                } else {
                    if (!(mask[row] > 0)) return;
                    boolean first = r.nextBoolean();
                    float bad = new float[] {Float.NaN, Float.POSITIVE_INFINITY}[r.nextInt(2)];
                    float[] vals = hf(a[first ? 2 : 3]);
                    vals[row] = bad;
                    a[first ? 2 : 3] = f32(vals, lead);
                    h.mustThrow(e, "non-finite", ARG, call, (first ? "oldLogprob[" : "advantages[") + row + "] = " + bad);
                }
            }
            case 9 -> {  // a sequence id out of range, or an int64 one that would wrap into range as int32
                if (n == 0 || !seqAgg) return;
                int row = r.nextInt(n);
                boolean wrap = r.nextBoolean();
                long bad = wrap ? (1L << 32) + ids[row] : n + r.nextInt(3);
                if (!wrap && !(mask[row] > 0) && bad < n) return;
                long[] ii = hl(a[6]);
                ii[row] = bad;
                a[6] = i64(ii, lead);
                h.mustThrow(e, "seqId", ARG, call, "seqIds[" + row + "] = " + bad);
            }
            case 10 -> {  // logits: wrong dims or dtype
                if (r.nextBoolean()) {
                    a[0] = f32(new float[Math.max(1, n)], Math.max(1, n));
                    h.mustThrow(e, "logits dims", ARG, call, "logits must be [T, V] or [B, L, V], got 1 dims");
                } else {
                    a[0] = lg.t.to(r.nextBoolean() ? ScalarType.Double : ScalarType.Long);
                    h.mustThrow(e, "logits dtype", ARG, call, "logits");
                }
            }
            default -> {  // in place over logits whose rows share memory
                if (n < 2 || lead.length != 2 || lead[0] < 2) return;
                int b = (int) lead[0], len = (int) lead[1];
                a[0] = f32(x0, n, v).reshape(b, len, v).narrow(0, 0, 1).expand(new long[] {b, len, v});
                inPlace[0] = true;
                h.mustThrow(e, "in place over expanded logits", ARG, call, "logits (in place) has overlapping rows");
            }
        }
    }

    /** True when every value is 0 or 1 (a mask that converts to bool losslessly). */
    static boolean mask(float[] m) {
        for (float q : m) if (q != 0 && q != 1) return false;
        return true;
    }

    // =============================================================================================
    // Sampler: 0 uniform step, 1 keys and steps, 2 the general form
    // =============================================================================================

    void sampler(Random r, int form) {
        String e = "TorchSampler.sample(" + new String[] {"step", "keys, steps", "general"}[form] + ")";
        int b = r.nextInt(12) == 0 ? 0 : 1 + r.nextInt(5), v = 1 + r.nextInt(r.nextBoolean() ? 9 : 80);
        float[] x = new float[b * v];
        for (int i = 0; i < x.length; i++) x[i] = logit(r);
        Tensor logits;
        String layout;
        switch (r.nextInt(3)) {
            case 0 -> { logits = f32(x, b, v); layout = "[B, V]"; }
            case 1 -> {  // the last position of [B, L, V]
                Tensor full = f32(new float[b * 3 * v], b, 3, v);
                logits = full.select(1, 2);
                logits.copy_(f32(x, b, v));
                layout = "x[:, -1, :]";
            }
            default -> {
                Tensor wide = f32(new float[b * (v + 2)], b, v + 2);
                logits = wide.narrow(1, 2, v);
                logits.copy_(f32(x, b, v));
                layout = "x[:, 2:]";
            }
        }
        SamplingParams[] p = {new SamplingParams(new float[] {0f, 0.7f, 1f}[r.nextInt(3)], r.nextInt(3) == 0 ? 1 + r.nextInt(4) : 0,
            r.nextBoolean() ? 1f : 0.9f, r.nextInt(4) == 0 ? 0.1f : 0f)};
        long seed = r.nextLong();
        long[] step = {r.nextInt(1000)};
        long[] keys = new long[b], steps = new long[b];
        float[] temps = new float[b], tps = new float[b], mps = new float[b];
        int[] tks = new int[b];
        boolean[] valid = new boolean[b];
        for (int i = 0; i < b; i++) {
            keys[i] = r.nextLong();
            steps[i] = r.nextInt(1 << 20);
            temps[i] = new float[] {0f, 0.5f, 1f}[r.nextInt(3)];
            tks[i] = r.nextInt(3);
            tps[i] = r.nextBoolean() ? 1f : 0.8f;
            mps[i] = r.nextBoolean() ? 0f : 0.05f;
            valid[i] = r.nextInt(4) != 0;
        }
        // tensor args: 0 logits, 1 keys, 2 steps, 3 temperatures, 4 topKs, 5 topPs, 6 minPs, 7 rowMask
        Tensor[] a = new Tensor[8];
        a[0] = logits;
        if (form >= 1) {
            a[1] = i64(keys, b);
            a[2] = i64(steps, b);
        }
        if (form == 2) {
            if (r.nextBoolean()) { a[1] = null; a[2] = null; }
            if (r.nextBoolean()) a[3] = f32(temps, b);
            if (r.nextBoolean()) a[4] = Tensor.create(tks, b);
            if (r.nextBoolean()) a[5] = f32(tps, b);
            if (r.nextBoolean()) a[6] = f32(mps, b);
            if (r.nextBoolean()) a[7] = bools(valid, b);
        }
        long[] vl = {form == 2 && r.nextBoolean() ? 1 + r.nextInt(v) : 0};
        TorchSampler.Sample[] out = {null};
        FuzzHarness.Call call = () -> out[0] = switch (form) {
            case 0 -> TorchSampler.sample(a[0], p[0], seed, step[0]);
            case 1 -> TorchSampler.sample(a[0], p[0], seed, a[1], a[2]);
            default -> TorchSampler.sample(a[0], p[0], seed, step[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], vl[0]);
        };
        Runnable check = () -> {
            long[] kk = new long[b], ss = new long[b];
            for (int i = 0; i < b; i++) {
                kk[i] = a[1] == null ? i : keys[i];
                ss[i] = a[2] == null ? step[0] : steps[i];
            }
            SamplingParams[] rp = new SamplingParams[b];
            for (int i = 0; i < b; i++)
                rp[i] = new SamplingParams(a[3] == null ? p[0].temperature() : temps[i], a[4] == null ? p[0].topK() : tks[i],
                        a[5] == null ? p[0].topP() : tps[i], a[6] == null ? p[0].minP() : mps[i]);
            int lim = vl[0] <= 0 ? v : (int) vl[0];
            SampleResult s = Sampler.sample(x, b, v, lim, rp, seed, kk, ss, a[7] == null ? null : valid);
            long[] tok = hl(out[0].tokens());
            for (int i = 0; i < b; i++) h.check(e, "token[" + i + "] " + tok[i] + " != array form " + s.tokens()[i], tok[i] == s.tokens()[i]);
            closeAll(e, "logprob", s.logprob(), hf(out[0].logprob()), 0);
            closeAll(e, "entropy", s.entropy(), hf(out[0].entropy()), 0);
        };
        h.where = layout + " B=" + b + " V=" + v;
        String[] names = {"logits", a[1] == null ? null : "keys", a[2] == null ? null : "steps", a[3] == null ? null : "temperatures",
            a[4] == null ? null : "topKs", a[5] == null ? null : "topPs", a[6] == null ? null : "minPs", a[7] == null ? null : "rowMask"};
        boolean[] req = {true, form == 1, form == 1, false, false, false, false, false};
        int k = r.nextInt(4) == 0 ? -1 : r.nextInt(9);
        switch (k) {
            case -1 -> {
                h.legal(e, "valid", call);
                check.run();
            }
            case 0, 1, 2 -> badTensor(e, r, a, names, req, call);
            case 3 -> {  // logits must be [B, V] floating with a contiguous vocabulary
                switch (r.nextInt(3)) {
                    case 0 -> {
                        a[0] = logits.reshape(1, b, v);
                        h.mustThrow(e, "logits dims", ARG, call, "logits must be [B, V]");
                    }
                    case 1 -> {
                        a[0] = logits.to(r.nextBoolean() ? ScalarType.Double : ScalarType.Int);
                        h.mustThrow(e, "logits dtype", ARG, call, "logits");
                    }
                    default -> {
                        if (b < 2 || v < 2) return;
                        a[0] = f32(x, v, b).transpose(0, 1);
                        h.mustThrow(e, "logits last dim strided", ARG, call, "last dimension must be contiguous");
                    }
                }
            }
            case 4 -> {  // per-row tensors: wrong dtype or length
                int i = 1 + r.nextInt(7);
                if (names[i] == null) return;
                if (r.nextBoolean()) {
                    a[i] = a[i].new_zeros(new long[] {b + 1});
                    h.mustThrow(e, names[i] + " length", ARG, call, names[i] + " must have " + b + " elements");
                } else {
                    a[i] = a[i].to(i == 4 || i == 7 ? ScalarType.Float : ScalarType.Short);
                    h.mustThrow(e, names[i] + " dtype", ARG, call, names[i]);
                }
            }
            case 5 -> {  // a bad per-row parameter, named with its row; unread on a masked row
                if (form != 2 || b == 0) return;
                int row = r.nextInt(b);
                if (a[7] != null && !valid[row]) return;
                int which = r.nextInt(3);
                float bad = new float[] {Float.NaN, Float.POSITIVE_INFINITY, -1f}[r.nextInt(3)];
                if (which == 0) { temps[row] = bad; a[3] = f32(temps, b); }
                else if (which == 1) { tps[row] = r.nextBoolean() ? 0f : bad; a[5] = f32(tps, b); }
                else { tks[row] = -1 - r.nextInt(5); a[4] = Tensor.create(tks, b); }
                h.mustThrow(e, "per-row parameter", ARG, call, "row " + row + ": ");
            }
            case 6 -> {
                vl[0] = v + 1 + r.nextInt(4);
                if (form != 2) return;
                h.mustThrow(e, "vocabLimit", ARG, call, "vocabLimit must be in [1, " + v + "], got " + vl[0]);
            }
            case 7 -> {  // a NaN row has no distribution: named
                if (b == 0) return;
                int row = r.nextInt(b);
                if (a[7] != null && !valid[row]) return;
                Tensor nanRow = a[0].select(0, row).narrow(0, 0, 1);
                nanRow.fill_(new org.bytedeco.pytorch.Scalar(Float.NaN));
                h.mustThrow(e, "NaN row", ARG, call, "row " + row);
            }
            default -> {  // a step past 2^32 - 1
                if (form == 0) {
                    long bad = r.nextBoolean() ? -1 : Sampler.MAX_STEP + 1;
                    step[0] = bad;
                    h.mustThrow(e, "step", ARG, call, "" + bad);
                } else {
                    if (a[2] == null || b == 0) return;
                    int row = r.nextInt(b);
                    if (a[7] != null && !valid[row]) return;
                    steps[row] = Sampler.MAX_STEP + 1;
                    a[2] = i64(steps, b);
                    h.mustThrow(e, "steps[row]", ARG, call, "steps[" + row + "]");
                }
            }
        }
    }

    // =============================================================================================
    // Advantages
    // =============================================================================================

    void sequenceAdvantages(Random r, boolean tree) {
        String e = tree ? "TorchAdvantages.treeGrpo" : "TorchAdvantages.grpo";
        int b = r.nextInt(10) == 0 ? 0 : 1 + r.nextInt(8);
        float[] rw = new float[b];
        int[] g = new int[b], t = new int[b];
        for (int i = 0; i < b; i++) {
            rw[i] = r.nextInt(3) / 2f;
            g[i] = r.nextInt(3);
            t[i] = r.nextInt(3);
        }
        boolean std = r.nextBoolean();
        Tensor[] a = {f32(rw, b), Tensor.create(g, b), Tensor.create(t, b)};
        if (r.nextBoolean()) a[1] = a[1].to(ScalarType.Long);
        Tensor[] out = {null};
        FuzzHarness.Call call = () -> out[0] = tree ? TorchAdvantages.treeGrpo(a[0], a[1], a[2]) : TorchAdvantages.grpo(a[0], a[1], std);
        Runnable check = () -> {
            float[] expect = tree ? Advantages.treeGrpo(rw, g, t) : Advantages.grpo(rw, g, std);
            closeAll(e, "advantages", expect, hf(out[0]), 0);
        };
        String[] names = {"rewards", tree ? "promptIds" : "groupIds", tree ? "treeIds" : null};
        boolean[] req = {true, true, true};
        int k = r.nextInt(4) == 0 ? -1 : r.nextInt(7);
        switch (k) {
            case -1 -> {
                h.legal(e, "valid", call);
                check.run();
            }
            case 0, 1, 2 -> badTensor(e, r, a, names, req, call);
            case 3 -> {
                a[0] = f32(new float[2 * Math.max(1, b)], 2, Math.max(1, b));
                h.mustThrow(e, "rewards dims", ARG, call, "rewards must be [B]");
            }
            case 4 -> {
                int i = 1 + (tree ? r.nextInt(2) : 0);
                a[i] = r.nextBoolean() ? a[i].to(ScalarType.Float) : Tensor.create(new int[b + 1], b + 1);
                h.mustThrow(e, names[i], ARG, call, names[i] + " must");
            }
            case 5 -> {  // an int64 id that does not fit int
                if (b == 0) return;
                int row = r.nextInt(b);
                long[] ids = new long[b];
                for (int i = 0; i < b; i++) ids[i] = g[i];
                ids[row] = 1L << 33;
                a[1] = i64(ids, b);
                h.mustThrow(e, "id past int", ARG, call, "[" + row + "] = " + (1L << 33));
            }
            default -> {  // rewards in other dtypes and forms convert: the same advantages
                a[0] = r.nextBoolean() ? a[0].to(ScalarType.Double) : otherForm1d(r, a[0]);
                h.legal(e, "rewards converted", call);
                check.run();
            }
        }
    }

    /** A 1-D strided view or a requires_grad copy of {@code t}. */
    static Tensor otherForm1d(Random r, Tensor t) {
        if (r.nextBoolean() && t.is_floating_point()) return t.detach().clone().set_requires_grad(true);
        return torchCat(t).narrow(0, t.numel(), t.numel());
    }

    void tokenAdvantages(Random r, boolean flat) {
        String e = flat ? "TorchAdvantages.tokenAdvantagesFlat" : "TorchAdvantages.tokenAdvantages";
        int b = 1 + r.nextInt(4), l = r.nextInt(8) == 0 ? 0 : 1 + r.nextInt(7), n = b * l;
        float[] adv = new float[b], ent = new float[n];
        boolean[] mask = new boolean[n], post = new boolean[n];
        int[] ids = new int[n];
        for (int i = 0; i < b; i++) adv[i] = (r.nextInt(9) - 4) / 2f;
        for (int i = 0; i < n; i++) {
            ent[i] = r.nextInt(16) / 8f;
            mask[i] = r.nextInt(4) != 0;
            post[i] = r.nextInt(3) == 0;
            ids[i] = r.nextInt(b);
        }
        TokenShaping[] shaping = {new TokenShaping[] {TokenShaping.broadcast(), TokenShaping.aepo(), TokenShaping.taoRl()}[r.nextInt(3)]};
        long[] shape = flat ? new long[] {n} : new long[] {b, l};
        // tensor args: 0 seqAdvantages, 1 lossMask, 2 entropy, 3 postTool, 4 seqIds
        Tensor[] a = {f32(adv, b), bools(mask, shape), f32(ent, shape), r.nextBoolean() ? bools(post, shape) : null,
            flat ? Tensor.create(ids, n) : null};
        if (flat && r.nextInt(4) == 0) a[1] = null;
        if (shaping[0].equals(TokenShaping.broadcast()) && r.nextBoolean()) a[2] = null;
        TorchAdvantages.Result[] out = {null};
        FuzzHarness.Call call = () -> out[0] = flat ? TorchAdvantages.tokenAdvantagesFlat(a[0], a[4], a[1], a[2], a[3], shaping[0])
                : TorchAdvantages.tokenAdvantages(a[0], a[1], a[2], a[3], shaping[0]);
        Runnable check = () -> {
            boolean[] m = a[1] == null ? null : truthy(hf(a[1]));
            float[] h2 = a[2] == null ? null : hf(a[2]);
            boolean[] p = a[3] == null ? null : truthy(hf(a[3]));
            TokenAdvantages.Result expect = flat || n == 0  // (the array form's padded layout needs L > 0)
                    ? TokenAdvantages.compute(hf(a[0]), flat ? ints(hl(a[4])) : new int[0], m, h2, p, shaping[0])
                    : TokenAdvantages.computePadded(hf(a[0]), l, m, h2, p, shaping[0]);
            closeAll(e, "advantages", expect.advantages(), hf(out[0].advantages()), 0);
            h.check(e, "stats", expect.stats().equals(out[0].readStats()));
        };
        h.where = "B=" + b + " L=" + l + " " + shaping[0];
        String[] names = {"seqAdvantages", a[1] == null ? null : "lossMask", a[2] == null ? null : "entropy",
            a[3] == null ? null : "postTool", flat ? "seqIds" : null};
        boolean[] req = {true, !flat, false, false, true};
        int k = r.nextInt(4) == 0 ? -1 : r.nextInt(8);
        switch (k) {
            case -1 -> {
                h.legal(e, "valid", call);
                check.run();
            }
            case 0, 1, 2 -> badTensor(e, r, a, names, req, call);
            case 3 -> {  // per-token tensors of the wrong length
                int i = 1 + r.nextInt(4);
                if (names[i] == null || i == 4) return;  // (the flat layout's seqIds define T)
                a[i] = a[i].reshape(a[i].numel()).new_zeros(new long[] {n + 1}).to(a[i].scalar_type().intern());
                h.mustThrow(e, names[i] + " length", ARG, call, names[i] + " must", "lossMask must be [B, L]");
            }
            case 4 -> {  // flags must be bool/uint8; ids integers
                int i = 1 + r.nextInt(4);
                if (names[i] == null || i == 2) return;
                a[i] = a[i].to(ScalarType.Float);
                h.mustThrow(e, names[i] + " dtype", ARG, call, names[i] + " must be");
            }
            case 5 -> {  // AEPO and TAO-RL need the entropies
                if (shaping[0].equals(TokenShaping.broadcast())) shaping[0] = TokenShaping.aepo();
                a[2] = null;
                h.mustThrow(e, "entropy null", ARG, call, "entrop");
            }
            case 6 -> {  // a sequence id out of range
                if (!flat || n == 0) return;
                int row = r.nextInt(n);
                ids[row] = r.nextBoolean() ? -1 : b + r.nextInt(3);
                a[4] = Tensor.create(ids, n);
                if (a[1] == null || mask[row]) h.mustThrow(e, "seqId", ARG, call, "seqIds[" + row + "] = " + ids[row] + " is outside");
                else {  // a masked token's id is unread
                    h.legal(e, "seqId on a masked token", call);
                    check.run();
                }
            }
            default -> {  // other legal forms: strided views, requires_grad, another shape of the same length
                int i = r.nextInt(5);
                if (names[i] == null || (i == 1 && !flat)) return;
                a[i] = i == 0 || flat ? otherForm1d(r, a[i].reshape(a[i].numel())) : otherForm(r, a[i]);
                h.legal(e, names[i] + " other form", call);
                check.run();
            }
        }
    }

    // =============================================================================================
    // TorchTensors: each public helper with a bad tensor must name it; with a good one it runs
    // =============================================================================================

    /** Signature → (the name it reports, the call on a tensor). */
    record Helper(String name, Consumer<Tensor> call, boolean bool) {
        Helper(String name, Consumer<Tensor> call) {
            this(name, call, false);
        }
    }

    static final Map<String, Helper> TENSOR_HELPERS = new LinkedHashMap<>();

    static {
        Map<String, Helper> m = TENSOR_HELPERS;
        m.put("TorchTensors.require(String,Tensor)", new Helper("x", t -> TorchTensors.require("x", t)));
        m.put("TorchTensors.dtype(Tensor)", new Helper("tensor", TorchTensors::dtype));
        m.put("TorchTensors.dtype(Tensor,String)", new Helper("x", t -> TorchTensors.dtype(t, "x")));
        m.put("TorchTensors.device(Tensor)", new Helper("tensor", TorchTensors::device));
        m.put("TorchTensors.mem(Tensor)", new Helper("tensor", TorchTensors::mem));
        m.put("TorchTensors.flat(Tensor,long,String)", new Helper("x", t -> TorchTensors.flat(t, 6, "x")));
        m.put("TorchTensors.requireDevice(Tensor,Device,String)", new Helper("x", t -> TorchTensors.requireDevice(t, Device.CPU, "x")));
        m.put("TorchTensors.floats(Tensor,long,String,Device)", new Helper("x", t -> TorchTensors.floats(t, 6, "x", Device.CPU)));
        m.put("TorchTensors.bytes(Tensor,long,String,Device)", new Helper("x", t -> TorchTensors.bytes(t, 6, "x", Device.CPU), true));
        m.put("TorchTensors.rows(Tensor,long,String,DType)", new Helper("x", t -> TorchTensors.rows(t, 6, "x", DType.F32)));
        m.put("TorchTensors.rowBlocks(Tensor,long)", new Helper("logits", t -> TorchTensors.rowBlocks(t, 0)));
        m.put("TorchTensors.rowBlocks(Tensor,long,String)", new Helper("x", t -> TorchTensors.rowBlocks(t, 0, "x")));
        m.put("TorchTensors.requireDisjointRows(Tensor,String)", new Helper("x", t -> TorchTensors.requireDisjointRows(t, "x")));
        m.put("TorchTensors.requireDisjointOrSame(Tensor,String,Tensor,String)",
                new Helper("x", t -> TorchTensors.requireDisjointOrSame(t, "x", f32(new float[6], 2, 3), "y")));
        m.put("TorchTensors.rows(Tensor)", new Helper("logits", TorchTensors::rows));
        m.put("TorchTensors.leadingShape(Tensor)", new Helper("logits", TorchTensors::leadingShape));
        m.put("TorchTensors.empty(Tensor,long[],ScalarType)", new Helper("like", t -> TorchTensors.empty(t, new long[] {2}, ScalarType.Float)));
        m.put("TorchTensors.hostFloats(Tensor)", new Helper("tensor", TorchTensors::hostFloats));
        m.put("TorchTensors.hostLongs(Tensor)", new Helper("tensor", TorchTensors::hostLongs));
    }

    void helper(Random r, String sig) {
        Helper hp = TENSOR_HELPERS.get(sig);
        Tensor f = f32(new float[] {1, 2, 3, 4, 5, 6}, 2, 3), good = hp.bool() ? f.to(ScalarType.Bool) : f;
        if (r.nextInt(3) == 0) {
            h.legal(sig, "valid", () -> hp.call().accept(good));
            return;
        }
        Bad k = Bad.values()[r.nextInt(Bad.values().length)];
        Tensor bad = bad(k, good);
        String n = hp.name();
        FuzzHarness.Call call = () -> hp.call().accept(bad);
        if (k == Bad.NULL && sig.equals("TorchTensors.rows(Tensor,long,String,DType)")) {  // documented: null for null
            h.check(sig, "null for null", TorchTensors.rows(null, 6, "x", DType.F32) == null);
            h.legal(sig, "null optional", call);
            return;
        }
        switch (k) {
            case NULL -> h.mustThrow(sig, "null", ARG, call, n + " must not be null");
            case CLOSED -> h.mustThrow(sig, "closed", STATE, call, n + " is a Tensor that was closed");
            case UNDEFINED -> h.mustThrow(sig, "undefined", ARG, call, n + " is an undefined tensor");
            case META -> h.mustThrow(sig, "meta", ARG, call, n + " is on meta");
            default -> h.mustThrow(sig, "sparse", ARG, call, n + " must be a dense (strided) tensor");
        }
    }
}
