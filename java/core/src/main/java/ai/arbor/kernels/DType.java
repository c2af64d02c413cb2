package ai.arbor.kernels;

/** Element types of the C ABI ({@code ARBOR_F32 …} in {@code native/include/arbor/arbor.h}). */
public enum DType {
    F32(0, 4),
    BF16(1, 2),
    F16(2, 2),
    I32(3, 4),
    I64(4, 8),
    U8(5, 1);

    private final int code;
    private final int bytes;

    DType(int code, int bytes) {
        this.code = code;
        this.bytes = bytes;
    }

    /** The ABI's integer code. */
    public int code() {
        return code;
    }

    /** Size of one element in bytes. */
    public int bytes() {
        return bytes;
    }

    /** True for the floating-point logits types F32, BF16 and F16. */
    public boolean isFloating() {
        return this == F32 || this == BF16 || this == F16;
    }
}
