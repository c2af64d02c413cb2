package ai.arbor.kernels;

import static org.junit.jupiter.api.Assertions.fail;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import org.bytedeco.javacpp.BytePointer;

/**
 * The bookkeeping of the native-boundary fuzz tests (docs/kernels.md, Argument validation): the
 * expectation of each case — must throw a given exception type whose message names the offending value,
 * or legal (runs, and the caller checks the output) — a pool of real host memory that arguments are
 * carved from (so a missing check reads or writes memory that exists), and per-entry counts.
 */
public final class FuzzHarness {
    /** Allowed exceptions: bad argument values, and unusable objects (closed memory, no CUDA). */
    public static final Class<IllegalArgumentException> ARG = IllegalArgumentException.class;
    public static final Class<IllegalStateException> STATE = IllegalStateException.class;

    private final long seed;
    private final Map<String, long[]> counts = new TreeMap<>();  // entry -> {valid, threw, legal}
    public long caseIndex;
    public String where = "";

    // host memory pool: arguments are carved from it (64-byte aligned), reset per case
    private final ByteBuffer pool;
    private final long base, poolAddress;
    private final int size;
    private int top;

    public FuzzHarness(long seed, int poolBytes) {
        this.seed = seed;
        this.size = poolBytes;
        this.pool = ByteBuffer.allocateDirect(poolBytes + 4096).order(ByteOrder.nativeOrder());
        poolAddress = MemRef.of(pool).address();
        this.base = (poolAddress + 63) / 64 * 64;
    }

    public Random caseRandom(long i) {
        caseIndex = i;
        top = 0;
        return new Random(seed * 0x9E3779B97F4A7C15L + i);
    }

    /** Fresh 64-byte-aligned host memory of the pool ({@code bytes} may be 0). */
    public MemRef alloc(long bytes) {
        int off = top;
        long need = (bytes + 63) / 64 * 64 + 64;
        if (off + need > size) throw new AssertionError("fuzz pool exhausted (" + size + " bytes)");
        top += (int) need;
        int at = (int) (base - poolAddress) + off;
        for (int i = 0; i < need && i < 256; i++) pool.put(at + i, (byte) 0x5a);  // garbage head: outputs must be written
        return MemRef.owned(base + off, bytes, Device.CPU, pool);
    }

    /** {@code ref} moved by {@code delta} bytes (inside the pool), same size. */
    public MemRef shifted(MemRef ref, long delta) {
        return MemRef.owned(ref.address() + delta, ref.bytes(), ref.device(), ref.owner());
    }

    /** A ref of {@code bytes} bytes starting at {@code at}'s address + {@code delta} (inside the pool). */
    public MemRef at(MemRef at, long delta, long bytes) {
        return MemRef.owned(at.address() + delta, bytes, Device.CPU, pool);
    }

    /** Memory of a JavaCPP pointer that is deallocated before the call: the MemRef still holds the old address. */
    /**
     * Fails when a public static method of {@code classes} has neither a fuzz case in {@code fuzzed} nor a
     * reason in {@code exempt}, or when a fuzz case names a method that no longer exists: a new entry point
     * cannot go unfuzzed. Signatures are {@code Class.method(ParamType,...)} with simple names.
     */
    public static void assertEveryEntryPointFuzzed(Class<?>[] classes, java.util.Set<String> fuzzed,
                                                   Map<String, String> exempt, String testClass) {
        java.util.TreeSet<String> missing = new java.util.TreeSet<>(), stale = new java.util.TreeSet<>(fuzzed);
        for (Class<?> c : classes)
            for (java.lang.reflect.Method m : c.getDeclaredMethods()) {
                int mod = m.getModifiers();
                if (!java.lang.reflect.Modifier.isPublic(mod) || !java.lang.reflect.Modifier.isStatic(mod)) continue;
                String s = signature(m);
                stale.remove(s);
                if (!fuzzed.contains(s) && !exempt.containsKey(s)) missing.add(s);
            }
        org.junit.jupiter.api.Assertions.assertTrue(missing.isEmpty(),
                "public entry points without a fuzz case (add one to " + testClass + "): " + missing);
        org.junit.jupiter.api.Assertions.assertTrue(stale.isEmpty(), "fuzz cases of entry points that no longer exist: " + stale);
    }

    static String signature(java.lang.reflect.Method m) {
        StringBuilder b = new StringBuilder(m.getDeclaringClass().getSimpleName()).append('.').append(m.getName()).append('(');
        Class<?>[] p = m.getParameterTypes();
        for (int i = 0; i < p.length; i++) b.append(i > 0 ? "," : "").append(p[i].getSimpleName());
        return b.append(')').toString();
    }

    public static MemRef closed(long bytes) {
        BytePointer p = new BytePointer(Math.max(8, bytes));
        MemRef m = MemRef.of(p).slice(0, bytes);
        p.close();
        return m;
    }

    /** The same address claimed as CUDA memory (never dispatched: only used when CUDA is unavailable or mixed with host refs). */
    public static MemRef onCuda(MemRef ref) {
        return MemRef.cuda(ref.address(), ref.bytes(), 0);
    }

    private int idx(MemRef r, long i, int elem) {
        long off = r.address() - poolAddress + i * elem;
        if (off < 0 || off + elem > size + 4096L) throw new AssertionError("write outside the pool");
        return (int) off;
    }

    public void putF32(MemRef r, long i, float v) { pool.putFloat(idx(r, i, 4), v); }
    public float getF32(MemRef r, long i) { return pool.getFloat(idx(r, i, 4)); }
    public void putI32(MemRef r, long i, int v) { pool.putInt(idx(r, i, 4), v); }
    public int getI32(MemRef r, long i) { return pool.getInt(idx(r, i, 4)); }
    public void putI64(MemRef r, long i, long v) { pool.putLong(idx(r, i, 8), v); }
    public long getI64(MemRef r, long i) { return pool.getLong(idx(r, i, 8)); }
    public double getF64(MemRef r, long i) { return pool.getDouble(idx(r, i, 8)); }
    public void putU8(MemRef r, long i, int v) { pool.put(idx(r, i, 1), (byte) v); }
    public void putU16(MemRef r, long i, short v) { pool.putShort(idx(r, i, 2), v); }
    public short getU16(MemRef r, long i) { return pool.getShort(idx(r, i, 2)); }

    /** Writes {@code v} (exactly representable: the fuzz logits are multiples of 1/4 below 64) as {@code t}. */
    public void putLogit(MemRef r, long i, DType t, float v) {
        switch (t) {
            case F32 -> putF32(r, i, v);
            case BF16 -> putU16(r, i, (short) (Float.floatToRawIntBits(v) >>> 16));
            default -> putU16(r, i, toHalf(v));
        }
    }

    /** Reads element {@code i} of a gradient matrix of {@code t} as a float. */
    public float getLogit(MemRef r, long i, DType t) {
        return switch (t) {
            case F32 -> getF32(r, i);
            case BF16 -> Float.intBitsToFloat((getU16(r, i) & 0xffff) << 16);
            default -> fromHalf(getU16(r, i));
        };
    }

    static short toHalf(float v) {
        if (Float.isNaN(v)) return (short) 0x7e00;
        int b = Float.floatToRawIntBits(v);
        int sign = (b >>> 16) & 0x8000;
        if (Float.isInfinite(v)) return (short) (sign | 0x7c00);
        if (v == 0f) return (short) sign;
        int e = ((b >>> 23) & 0xff) - 127, m = b & 0x7fffff;
        if (e < -14 || e > 15 || (m & 0x1fff) != 0) throw new AssertionError(v + " is not exact in fp16");
        return (short) (sign | ((e + 15) << 10) | (m >>> 13));
    }

    static float fromHalf(short h) {
        int s = (h >>> 15) & 1, e = (h >>> 10) & 0x1f, m = h & 0x3ff;
        float v;
        if (e == 0) v = m * 0x1p-24f;
        else if (e == 31) v = m == 0 ? Float.POSITIVE_INFINITY : Float.NaN;
        else v = Float.intBitsToFloat(((e - 15 + 127) << 23) | (m << 13));
        return s == 1 ? -v : v;
    }

    public interface Call {
        void run() throws Throwable;
    }

    private String ctx(String entry, String kind) {
        return "case " + caseIndex + " (seed " + seed + ") " + entry + " / " + kind + (where.isEmpty() ? "" : " [" + where + "]");
    }

    /**
     * The call must throw exactly {@code type} (a subclass counts) with a message containing at least one
     * of {@code mention} (the offending value, or the argument's name).
     */
    public void mustThrow(String entry, String kind, Class<? extends RuntimeException> type, Call call, String... mention) {
        Throwable t = null;
        try {
            call.run();
        } catch (Throwable e) {
            t = e;
        }
        if (t == null) fail(ctx(entry, kind) + ": expected " + type.getSimpleName() + " mentioning one of "
                + String.join(" | ", mention) + ", but the call returned normally");
        if (!type.isInstance(t)) {
            AssertionError a = new AssertionError(ctx(entry, kind) + ": expected " + type.getSimpleName() + ", got " + t);
            a.initCause(t);
            throw a;
        }
        String msg = String.valueOf(t.getMessage());
        boolean ok = false;
        for (String m : mention) ok |= msg.contains(m);
        if (!ok) fail(ctx(entry, kind) + ": message '" + msg + "' names none of " + String.join(" | ", mention));
        count(entry)[1]++;
    }

    /** A legal call: runs without an exception; {@code check} then asserts its outputs. */
    public void legal(String entry, String kind, Call call) {
        try {
            call.run();
        } catch (Throwable e) {
            AssertionError a = new AssertionError(ctx(entry, kind) + ": a legal call failed: " + e);
            a.initCause(e);
            throw a;
        }
        count(entry)[kind.equals("valid") ? 0 : 2]++;
    }

    /** |expected − actual| ≤ tol (NaN matches NaN, ±inf matches itself). */
    public void close(String entry, String what, double expected, double actual, double tol) {
        if (Double.isNaN(expected) && Double.isNaN(actual)) return;
        if (Double.isInfinite(expected) && expected == actual) return;
        if (!(Math.abs(expected - actual) <= tol))
            fail(ctx(entry, "output") + ": " + what + " expected " + expected + " got " + actual + " (tol " + tol + ")");
    }

    public void check(String entry, String what, boolean ok) {
        if (!ok) fail(ctx(entry, "output") + ": " + what);
    }

    private long[] count(String entry) {
        return counts.computeIfAbsent(entry, k -> new long[3]);
    }

    public Map<String, long[]> counts() {
        return counts;
    }

    public long total() {
        long n = 0;
        for (long[] c : counts.values()) n += c[0] + c[1] + c[2];
        return n;
    }

    public void print(String test, long millis) {
        System.out.printf("%s: %d calls in %d ms (valid / threw / legal mutation per entry)%n", test, total(), millis);
        counts.forEach((k, v) -> System.out.printf("  %-60s %6d %6d %6d%n", k, v[0], v[1], v[2]));
    }

    // ---- random values ------------------------------------------------------------------------

    public static int badNegative(Random r) {
        int[] v = {-1, -2, -7, Integer.MIN_VALUE, -65536};
        return v[r.nextInt(v.length)];
    }

    public static float badTemperature(Random r) {
        float[] v = {Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, 0f, -0f, -1f, -Float.MIN_VALUE,
                Float.intBitsToFloat(0x7fc00001)};
        return v[r.nextInt(v.length)];
    }

    public static double badUnit(Random r) {
        double[] v = {Double.NaN, -0.01, 1.01, Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY, -1e300, 2};
        return v[r.nextInt(v.length)];
    }

    /** A logit value exactly representable in fp32, bf16 and fp16: k / 4, |k| ≤ 40. */
    public static float logit(Random r) {
        return (r.nextInt(81) - 40) / 4f;
    }

    /** Reference token statistics of one row in double: {lse, logprob(label), entropy} (NaN row: all NaN). */
    public static double[] rowStats(float[] x, int off, int vocabLimit, int label, double temperature) {
        double m = Double.NEGATIVE_INFINITY;
        for (int j = 0; j < vocabLimit; j++) {
            double v = x[off + j];
            if (Double.isNaN(v) || v == Double.POSITIVE_INFINITY) return new double[] {Double.NaN, Double.NaN, Double.NaN};
            m = Math.max(m, v / temperature);
        }
        if (m == Double.NEGATIVE_INFINITY) return new double[] {Double.NaN, Double.NaN, Double.NaN};
        double s = 0, u = 0;
        for (int j = 0; j < vocabLimit; j++) {
            double z = x[off + j] / temperature;
            if (z == Double.NEGATIVE_INFINITY) continue;
            double e = Math.exp(z - m);
            s += e;
            u += e * (z - m);
        }
        double lse = m + Math.log(s);
        double lp = label >= 0 ? x[off + label] / temperature - lse : Double.NaN;
        return new double[] {lse, lp, Math.log(s) - u / s};
    }
}
