package ai.arbor.kernels;

/**
 * Where a block of memory lives: host memory ({@link #CPU}) or a CUDA device by index.
 *
 * @param kind  host or CUDA
 * @param index CUDA device ordinal; 0 for the host
 */
public record Device(Kind kind, int index) {
    /** Host memory. */
    public static final Device CPU = new Device(Kind.CPU, 0);

    /** Memory kinds. */
    public enum Kind { CPU, CUDA }

    public Device {
        if (kind == null) throw new IllegalArgumentException("device kind must not be null");
        if (index < 0) throw new IllegalArgumentException("device index must be >= 0, got " + index);
        if (kind == Kind.CPU && index != 0) throw new IllegalArgumentException("CPU device index must be 0, got " + index);
    }

    /** CUDA device {@code index}. */
    public static Device cuda(int index) {
        return new Device(Kind.CUDA, index);
    }

    public boolean isCuda() {
        return kind == Kind.CUDA;
    }

    @Override
    public String toString() {
        return kind == Kind.CPU ? "cpu" : "cuda:" + index;
    }
}
