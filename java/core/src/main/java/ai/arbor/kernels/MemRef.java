package ai.arbor.kernels;

import java.nio.Buffer;
import java.nio.ByteBuffer;
import java.nio.DoubleBuffer;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.nio.LongBuffer;
import java.nio.ShortBuffer;
import org.bytedeco.javacpp.Pointer;

/**
 * A block of memory the kernels may read or write: a start address, its size in bytes, and the device
 * it lives on. The kernels use the memory in place (no copy); every entry point checks that the
 * elements it will touch fit in {@link #bytes()} before native code runs.
 *
 * <p>A MemRef made from a buffer or pointer keeps that object as its {@link #owner()}, and every
 * kernel entry point keeps the owners reachable until the native call returns, so a temporary buffer
 * cannot be freed by the garbage collector mid-call. Memory wrapped by address alone must be kept
 * alive by the caller — for CUDA, until the stream has finished with it.
 *
 * @param address start address (host or device)
 * @param bytes   usable size in bytes, from {@code address}
 * @param device  where the memory lives
 * @param owner   the object that owns the memory (buffer, pointer, tensor), or null
 */
public record MemRef(long address, long bytes, Device device, Object owner) {

    /** Memory owned elsewhere. */
    public MemRef(long address, long bytes, Device device) {
        this(address, bytes, device, null);
    }

    public MemRef {
        if (device == null) throw new IllegalArgumentException("device must not be null");
        if (bytes < 0) throw new IllegalArgumentException("bytes must be >= 0, got " + bytes);
        if (address == 0 && bytes > 0) throw new IllegalArgumentException("null address with " + bytes + " bytes");
    }

    /** Host memory at {@code address} of {@code bytes} bytes (e.g. from a foreign allocator). */
    public static MemRef host(long address, long bytes) {
        return new MemRef(address, bytes, Device.CPU);
    }

    /** Device memory of CUDA device {@code deviceIndex}. */
    public static MemRef cuda(long address, long bytes, int deviceIndex) {
        return new MemRef(address, bytes, Device.cuda(deviceIndex));
    }

    /**
     * The remaining elements of a direct NIO buffer, from its position to its limit. Heap buffers are
     * rejected: their memory can move.
     */
    public static MemRef of(Buffer buffer) {
        if (buffer == null) throw new IllegalArgumentException("buffer must not be null");
        if (!buffer.isDirect()) throw new IllegalArgumentException("buffer must be direct, got a heap " + buffer.getClass().getSimpleName());
        int elem = elementSize(buffer);
        long base = new Pointer(buffer).address();
        return new MemRef(base + (long) buffer.position() * elem, (long) buffer.remaining() * elem, Device.CPU, buffer);
    }

    /**
     * A JavaCPP pointer from its position to its limit (or capacity when no limit is set). Pointers of
     * unknown size (capacity 0, as returned by many native calls) are rejected: wrap them with
     * {@link #host(long, long)} stating the size.
     */
    public static MemRef of(Pointer pointer) {
        if (pointer == null || pointer.isNull()) throw new IllegalArgumentException("pointer must not be null");
        long end = pointer.limit() > 0 ? pointer.limit() : pointer.capacity();
        if (end <= 0) throw new IllegalArgumentException("pointer has unknown capacity (0); use MemRef.host(address, bytes)");
        long elem = pointer.sizeof();
        long pos = pointer.position();
        if (pos > end) throw new IllegalArgumentException("pointer position " + pos + " beyond its limit " + end);
        return new MemRef(pointer.address() + pos * elem, (end - pos) * elem, Device.CPU, pointer);
    }

    /** The sub-range starting {@code offsetBytes} into this one. */
    public MemRef slice(long offsetBytes, long lengthBytes) {
        if (offsetBytes < 0 || lengthBytes < 0 || offsetBytes > bytes - lengthBytes)
            throw new IllegalArgumentException("slice [" + offsetBytes + ", +" + lengthBytes + ") outside " + bytes + " bytes");
        return new MemRef(address + offsetBytes, lengthBytes, device, owner);
    }

    /** Memory owned by {@code owner} (e.g. a tensor), which the kernels keep reachable during calls. */
    public static MemRef owned(long address, long bytes, Device device, Object owner) {
        return new MemRef(address, bytes, device, owner);
    }

    private static int elementSize(Buffer b) {
        if (b instanceof ByteBuffer) return 1;
        if (b instanceof ShortBuffer) return 2;
        if (b instanceof IntBuffer || b instanceof FloatBuffer) return 4;
        if (b instanceof LongBuffer || b instanceof DoubleBuffer) return 8;
        throw new IllegalArgumentException("unsupported buffer type " + b.getClass().getName());
    }
}
