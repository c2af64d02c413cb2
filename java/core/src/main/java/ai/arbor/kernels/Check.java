package ai.arbor.kernels;

/**
 * Argument checks shared by every kernel entry point (here and in other packages). Each throws
 * {@link IllegalArgumentException} naming the offending argument and value, so native code never sees
 * an unchecked size.
 */
public final class Check {
    private Check() {}

    public static void positive(String name, long v) {
        if (v <= 0) throw new IllegalArgumentException(name + " must be > 0, got " + v);
    }

    public static void nonNegative(String name, long v) {
        if (v < 0) throw new IllegalArgumentException(name + " must be >= 0, got " + v);
    }

    public static void finite(String name, double v) {
        if (!Double.isFinite(v)) throw new IllegalArgumentException(name + " must be finite, got " + v);
    }

    public static void finitePositive(String name, double v) {
        if (!(v > 0) || Double.isInfinite(v)) throw new IllegalArgumentException(name + " must be finite and > 0, got " + v);
    }

    public static void notNull(String name, Object o) {
        if (o == null) throw new IllegalArgumentException(name + " must not be null");
    }

    /** {@code a * b} or an exception naming both when it overflows a long. */
    public static long product(String what, long a, long b) {
        try {
            return Math.multiplyExact(a, b);
        } catch (ArithmeticException e) {
            throw new IllegalArgumentException(what + " = " + a + " * " + b + " overflows");
        }
    }

    /** {@code rows * cols} as an int array length, or an exception when it overflows an int. */
    public static int arrayProduct(String what, int rows, int cols) {
        long p = (long) rows * cols;
        if (p > Integer.MAX_VALUE - 8)
            throw new IllegalArgumentException(what + " = " + rows + " * " + cols + " = " + p + " exceeds a Java array's size");
        return (int) p;
    }

    public static void length(String name, float[] a, long expected) {
        if (a == null) throw new IllegalArgumentException(name + " must not be null");
        if (a.length != expected) throw new IllegalArgumentException(name + ".length must be " + expected + ", got " + a.length);
    }

    public static void length(String name, int[] a, long expected) {
        if (a == null) throw new IllegalArgumentException(name + " must not be null");
        if (a.length != expected) throw new IllegalArgumentException(name + ".length must be " + expected + ", got " + a.length);
    }

    public static void length(String name, boolean[] a, long expected) {
        if (a == null) throw new IllegalArgumentException(name + " must not be null");
        if (a.length != expected) throw new IllegalArgumentException(name + ".length must be " + expected + ", got " + a.length);
    }

    /** Optional array: null or of the expected length. */
    public static void lengthOrNull(String name, float[] a, long expected) {
        if (a != null) length(name, a, expected);
    }

    /** Every label of a valid row (mask null = all valid) is in [0, limit). */
    public static void labels(String name, int[] labels, boolean[] rowMask, long limit) {
        for (int r = 0; r < labels.length; r++) {
            if (rowMask != null && !rowMask[r]) continue;
            if (labels[r] < 0 || labels[r] >= limit)
                throw new IllegalArgumentException(name + "[" + r + "] = " + labels[r] + " is outside [0, " + limit + ")");
        }
    }

    /** Every value is finite. */
    public static void allFinite(String name, float[] a) {
        if (a == null) return;
        for (int i = 0; i < a.length; i++)
            if (!Float.isFinite(a[i])) throw new IllegalArgumentException(name + "[" + i + "] = " + a[i] + " is not finite");
    }

    /** {@code ref} holds at least {@code elements} of {@code type}. */
    public static void fits(String name, MemRef ref, long elements, DType type) {
        notNull(name, ref);
        long need = product(name + " bytes", elements, type.bytes());
        if (ref.bytes() < need)
            throw new IllegalArgumentException(name + " needs " + need + " bytes (" + elements + " x " + type
                    + ") but holds " + ref.bytes());
    }

    /** Optional memory: null, or it fits. */
    public static void fitsOrNull(String name, MemRef ref, long elements, DType type) {
        if (ref != null) fits(name, ref, elements, type);
    }

    /** All non-null refs live on {@code device}. */
    public static void sameDevice(Device device, String[] names, MemRef... refs) {
        for (int i = 0; i < refs.length; i++)
            if (refs[i] != null && !refs[i].device().equals(device))
                throw new IllegalArgumentException(names[i] + " is on " + refs[i].device() + " but the logits are on " + device);
    }

    /** Address of an optional ref (0 = NULL). */
    public static long addr(MemRef ref) {
        return ref == null ? 0L : ref.address();
    }

    /**
     * Keeps {@code objects} (MemRefs and, through them, their owners) reachable up to this point: call
     * after a native call that used their memory.
     */
    public static void keepAlive(Object... objects) {
        java.lang.ref.Reference.reachabilityFence(objects);
    }

    public static byte[] mask(boolean[] mask) {
        if (mask == null) return null;
        byte[] m = new byte[mask.length];
        for (int i = 0; i < m.length; i++) m[i] = (byte) (mask[i] ? 1 : 0);
        return m;
    }
}
