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

    /**
     * {@code ref} holds at least {@code elements} of {@code type}, starts on a multiple of the element
     * size (the kernels read it as {@code float*}, {@code int64_t*}, ...: a misaligned address is
     * undefined behaviour in C++), and its owner is still live ({@link #live}).
     */
    public static void fits(String name, MemRef ref, long elements, DType type) {
        notNull(name, ref);
        if (elements < 0) throw new IllegalArgumentException(name + ": element count must be >= 0, got " + elements);
        long need = product(name + " bytes", elements, type.bytes());
        if (ref.bytes() < need)
            throw new IllegalArgumentException(name + " needs " + need + " bytes (" + elements + " x " + type
                    + ") but holds " + ref.bytes());
        aligned(name, ref, type.bytes());
        live(name, ref);
    }

    /** {@code ref}'s address is a multiple of {@code alignment} bytes. */
    public static void aligned(String name, MemRef ref, int alignment) {
        if (ref.address() % alignment != 0)
            throw new IllegalArgumentException(name + " address 0x" + Long.toHexString(ref.address()) + " is not "
                    + alignment + "-byte aligned (its elements need it)");
    }

    /**
     * The memory's owner has not been freed: a JavaCPP {@link org.bytedeco.javacpp.Pointer} (a tensor
     * included) that was closed or deallocated, or a closed {@link CudaBuffer}, throws
     * {@link IllegalStateException}. Memory wrapped by address alone, or a direct buffer freed behind
     * the JVM's back, cannot be checked.
     */
    public static void live(String name, MemRef ref) {
        Object o = ref.owner();
        if (o instanceof org.bytedeco.javacpp.Pointer p && p.isNull() && ref.bytes() > 0)
            throw new IllegalStateException(name + " is owned by a " + o.getClass().getSimpleName()
                    + " that was closed or deallocated (its address is now NULL)");
        if (o instanceof CudaBuffer b && b.isClosed())
            throw new IllegalStateException(name + " is owned by a CudaBuffer that was closed");
    }

    /** Two Java arrays that a call writes (or writes and reads) must not be the same object. */
    public static void notSame(String a, Object x, String b, Object y) {
        if (x != null && x == y)
            throw new IllegalArgumentException(a + " and " + b + " must be different arrays (got the same one for both)");
    }

    /** Starts a check that no output of a call overlaps an input or another output ({@link Overlaps}). */
    public static Overlaps overlaps() {
        return new Overlaps();
    }

    /**
     * The byte ranges a kernel reads and writes, checked for overlap: every output must be disjoint from
     * every input and every other output, except an output declared an exact in-place alias of an input
     * (same start, same row stride, same row size). Strided matrices with the same row stride whose rows
     * interleave without touching are disjoint. A kernel may read a row after another row's output was
     * written, so any other overlap would give wrong results (docs/kernels.md, Argument validation).
     */
    public static final class Overlaps {
        private record Span(String name, long start, long rows, long rowBytes, long strideBytes, boolean out,
                            String aliasOf) {
            long end() {
                return rows == 0 || rowBytes == 0 ? start : start + (rows - 1) * strideBytes + rowBytes;
            }
        }

        private final java.util.ArrayList<Span> spans = new java.util.ArrayList<>();

        private Overlaps() {}

        public Overlaps in(String name, MemRef ref, long elements, DType type) {
            if (ref != null) spans.add(new Span(name, ref.address(), 1, elements * type.bytes(), 0, false, null));
            return this;
        }

        public Overlaps out(String name, MemRef ref, long elements, DType type) {
            if (ref != null) spans.add(new Span(name, ref.address(), 1, elements * type.bytes(), 0, true, null));
            return this;
        }

        /** An output (or scratch) region of {@code bytes} bytes from the start of {@code ref}. */
        public Overlaps outBytes(String name, MemRef ref, long bytes) {
            if (ref != null) spans.add(new Span(name, ref.address(), 1, bytes, 0, true, null));
            return this;
        }

        public Overlaps in(String name, LogitsView v) {
            long e = v.dtype().bytes();
            spans.add(new Span(name, v.data().address(), v.rows(), v.vocab() * e, v.rowStride() * e, false, null));
            return this;
        }

        /** A [rows, cols] output matrix; {@code aliasOf} names the input it may exactly alias (in place), or null. */
        public Overlaps outMatrix(String name, MemRef ref, long rows, long cols, long stride, DType type, String aliasOf) {
            long e = type.bytes();
            spans.add(new Span(name, ref.address(), rows, cols * e, stride * e, true, aliasOf));
            return this;
        }

        public void check() {
            for (int i = 0; i < spans.size(); i++) {
                Span a = spans.get(i);
                if (!a.out) continue;
                for (int j = 0; j < spans.size(); j++) {
                    Span b = spans.get(j);
                    if (i == j || (b.out && j < i)) continue;
                    if (!intersect(a, b)) continue;
                    if (b.name.equals(a.aliasOf) && a.start == b.start && a.rows == b.rows && a.rowBytes == b.rowBytes
                            && (a.rows <= 1 || a.strideBytes == b.strideBytes))
                        continue;  // documented in-place form
                    throw new IllegalArgumentException(a.name + " [0x" + Long.toHexString(a.start) + ", 0x"
                            + Long.toHexString(a.end()) + ") overlaps " + b.name + " [0x" + Long.toHexString(b.start)
                            + ", 0x" + Long.toHexString(b.end()) + ")"
                            + (a.aliasOf != null ? "; only an exact in-place alias of " + a.aliasOf + " is allowed" : ""));
                }
            }
        }

        private static boolean intersect(Span a, Span b) {
            if (a.end() <= a.start || b.end() <= b.start) return false;  // empty
            if (a.start >= b.end() || b.start >= a.end()) return false;
            boolean am = a.rows > 1, bm = b.rows > 1;
            if (!am && !bm) return true;
            if (am && bm && a.strideBytes != b.strideBytes) return true;  // conservative
            long s = am ? a.strideBytes : b.strideBytes;
            if (a.rowBytes > s || b.rowBytes > s) return true;  // a single span wider than the period
            // rows of the matrix with stride s repeat every s bytes: offset of b's rows within a's period
            long e = Math.floorMod(b.start - a.start, s);
            return !(e >= a.rowBytes && e + b.rowBytes <= s);
        }
    }

    /** Optional memory: null, or it fits. */
    public static void fitsOrNull(String name, MemRef ref, long elements, DType type) {
        if (ref != null) fits(name, ref, elements, type);
    }

    /**
     * Host memory: every label of a valid row ({@code rowMask} null = all valid, else U8, 0 = masked) is
     * in [0, limit), naming the first bad row and value (native code could only say that one is bad).
     */
    public static void hostLabels(String name, MemRef labels, DType type, long rows, MemRef rowMask, long limit) {
        if (rows == 0 || labels.device().isCuda()) return;
        org.bytedeco.javacpp.BytePointer m = rowMask == null ? null : new org.bytedeco.javacpp.BytePointer(hostPointer(rowMask));
        org.bytedeco.javacpp.Pointer p = hostPointer(labels);
        org.bytedeco.javacpp.IntPointer i32 = type == DType.I32 ? new org.bytedeco.javacpp.IntPointer(p) : null;
        org.bytedeco.javacpp.LongPointer i64 = type == DType.I64 ? new org.bytedeco.javacpp.LongPointer(p) : null;
        for (long r = 0; r < rows; r++) {
            if (m != null && m.get(r) == 0) continue;
            long y = i32 != null ? i32.get(r) : i64.get(r);
            if (y < 0 || y >= limit)
                throw new IllegalArgumentException(name + "[" + r + "] = " + y + " is outside [0, " + limit + ")");
        }
        keepAlive(labels, rowMask);
    }

    /** A pointer over host memory owned elsewhere (read use only, never freed here). */
    static org.bytedeco.javacpp.Pointer hostPointer(MemRef ref) {
        return new org.bytedeco.javacpp.Pointer() {
            {
                address = ref.address();
                capacity = ref.bytes();
                limit = ref.bytes();
            }
        };
    }

    /** All non-null refs live on {@code device}. */
    public static void sameDevice(Device device, String[] names, MemRef... refs) {
        sameDevice(device, "the logits", names, refs);
    }

    /** All non-null refs live on {@code device}, where {@code deviceOf} (e.g. "logprob") lives. */
    public static void sameDevice(Device device, String deviceOf, String[] names, MemRef... refs) {
        for (int i = 0; i < refs.length; i++)
            if (refs[i] != null && !refs[i].device().equals(device))
                throw new IllegalArgumentException(names[i] + " is on " + refs[i].device() + " but " + deviceOf + " "
                        + (deviceOf.startsWith("the ") ? "are" : "is") + " on " + device);
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
