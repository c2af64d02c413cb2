package ai.arbor.kernels;

import ai.arbor.bindings.ArborCuda;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.IntPointer;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.ShortPointer;

/**
 * Device memory owned by Java (cudaMalloc / cudaFree), with synchronous copies from and to Java arrays:
 * for tests, small tools and callers without another CUDA binding. Trainers normally pass tensor
 * memory instead ({@code ai.arbor.torch}).
 */
public final class CudaBuffer implements AutoCloseable {
    private final MemRef ref;
    private volatile boolean closed;

    private CudaBuffer(long address, long bytes, int device) {
        // owned by this buffer, so a kernel call given the ref after close() throws (Check.live)
        this.ref = MemRef.owned(address, bytes, Device.cuda(device), this);
    }

    /** Allocates {@code bytes} bytes on CUDA device {@code device}. */
    public static CudaBuffer allocate(long bytes, int device) {
        Check.positive("bytes", bytes);
        Check.nonNegative("device", device);
        long[] p = new long[1];
        Kernels.onCudaDevice(device, () -> {
            Kernels.check(ArborCuda.arbor_cuda_malloc(p, bytes), "cudaMalloc(" + bytes + ")");
            return 0;
        });
        return new CudaBuffer(p[0], bytes, device);
    }

    /** A device copy of {@code a}. */
    public static CudaBuffer of(float[] a, int device) {
        Check.notNull("a", a);
        try (FloatPointer h = new FloatPointer(a)) {
            return copyOf(h, device);
        }
    }

    public static CudaBuffer of(int[] a, int device) {
        Check.notNull("a", a);
        try (IntPointer h = new IntPointer(a)) {
            return copyOf(h, device);
        }
    }

    public static CudaBuffer of(long[] a, int device) {
        Check.notNull("a", a);
        try (LongPointer h = new LongPointer(a)) {
            return copyOf(h, device);
        }
    }

    public static CudaBuffer of(short[] a, int device) {
        Check.notNull("a", a);
        try (ShortPointer h = new ShortPointer(a)) {
            return copyOf(h, device);
        }
    }

    public static CudaBuffer of(byte[] a, int device) {
        Check.notNull("a", a);
        try (BytePointer h = new BytePointer(a)) {
            return copyOf(h, device);
        }
    }

    private static CudaBuffer copyOf(Pointer host, int device) {
        MemRef src = MemRef.of(host);
        CudaBuffer b = allocate(Math.max(1, src.bytes()), device);
        b.copy(true, src.address(), src.bytes());
        return b;
    }

    /** The device memory. */
    public MemRef ref() {
        ensureOpen();
        return ref;
    }

    /** Copies the first {@code out.length} floats back to the host (synchronizes the device). */
    public void copyTo(float[] out) {
        Check.notNull("out", out);
        try (FloatPointer h = new FloatPointer(out.length)) {
            copy(false, h.address(), 4L * out.length);
            h.get(out);
        }
    }

    public void copyTo(short[] out) {
        Check.notNull("out", out);
        try (ShortPointer h = new ShortPointer(out.length)) {
            copy(false, h.address(), 2L * out.length);
            h.get(out);
        }
    }

    private void copy(boolean toDevice, long host, long bytes) {
        ensureOpen();
        if (bytes > ref.bytes()) throw new IllegalArgumentException("copy of " + bytes + " bytes exceeds buffer of " + ref.bytes());
        if (bytes == 0) return;
        Kernels.onCudaDevice(ref.device().index(), () -> {
            Kernels.check(toDevice ? ArborCuda.arbor_cuda_memcpy_htod(ref.address(), host, bytes)
                    : ArborCuda.arbor_cuda_memcpy_dtoh(host, ref.address(), bytes), "cudaMemcpy");
            return 0;
        });
    }

    /** True after {@link #close()}: its memory is freed and every ref of it is rejected by the kernels. */
    public boolean isClosed() {
        return closed;
    }

    private void ensureOpen() {
        if (closed) throw new IllegalStateException("CudaBuffer is closed");
    }

    @Override
    public void close() {
        if (closed) return;
        closed = true;
        Kernels.onCudaDevice(ref.device().index(), () -> ArborCuda.arbor_cuda_free(ref.address()));
    }
}
