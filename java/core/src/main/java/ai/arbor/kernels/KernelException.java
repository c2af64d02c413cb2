package ai.arbor.kernels;

/** A native kernel reported a failure that Java-side validation could not rule out (e.g. a CUDA fault). */
public class KernelException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final int code;

    public KernelException(String message, int code) {
        super(message);
        this.code = code;
    }

    /** The ABI return code ({@code ARBOR_ERR_*}). */
    public int code() {
        return code;
    }
}
