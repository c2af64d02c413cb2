package ai.arbor.torch;

import ai.arbor.kernels.Check;
import ai.arbor.kernels.DType;
import ai.arbor.kernels.Device;
import ai.arbor.kernels.LogitsView;
import ai.arbor.kernels.MemRef;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.BoolOptional;
import org.bytedeco.pytorch.DeviceOptional;
import org.bytedeco.pytorch.LayoutOptional;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * Adapters from PyTorch-preset tensors to the kernels' memory descriptors, without copies: dtype and
 * device mapping, the memory a tensor's data pointer may address, row views of [T, V] and [B, L, V]
 * logits (including strided views such as a sequence with its last position dropped), and torch's
 * current CUDA stream.
 */
public final class TorchTensors {
    private TorchTensors() {}

    /** The kernels' dtype of a tensor; throws for types the kernels do not take. */
    public static DType dtype(Tensor t) {
        ScalarType s = t.scalar_type().intern();
        if (s == ScalarType.Float) return DType.F32;
        if (s == ScalarType.BFloat16) return DType.BF16;
        if (s == ScalarType.Half) return DType.F16;
        if (s == ScalarType.Int) return DType.I32;
        if (s == ScalarType.Long) return DType.I64;
        if (s == ScalarType.Byte || s == ScalarType.Bool) return DType.U8;
        throw new IllegalArgumentException("unsupported tensor dtype " + s);
    }

    /** The torch scalar type of a kernel dtype. */
    public static ScalarType scalarType(DType d) {
        return switch (d) {
            case F32 -> ScalarType.Float;
            case BF16 -> ScalarType.BFloat16;
            case F16 -> ScalarType.Half;
            case I32 -> ScalarType.Int;
            case I64 -> ScalarType.Long;
            case U8 -> ScalarType.Byte;
        };
    }

    public static Device device(Tensor t) {
        return t.is_cuda() ? Device.cuda(t.device().index()) : Device.CPU;
    }

    /**
     * The memory from the tensor's first element to the end of its storage (the most any view of it may
     * address), owned by the tensor so the kernels keep it reachable during calls.
     */
    public static MemRef mem(Tensor t) {
        Check.notNull("tensor", t);
        if (t.numel() == 0) return MemRef.owned(0, 0, device(t), t);
        long item = t.element_size();
        long bytes = t.storage().nbytes() - t.storage_offset() * item;
        return MemRef.owned(t.data_ptr().address(), Math.max(0, bytes), device(t), t);
    }

    /** A 1-D contiguous view of {@code t} with {@code n} elements (copies only if {@code t} is not contiguous). */
    public static Tensor flat(Tensor t, long n, String name) {
        Check.notNull(name, t);
        if (t.numel() != n) throw new IllegalArgumentException(name + " must have " + n + " elements, got " + t.numel());
        Tensor c = t.is_contiguous() ? t : t.contiguous();
        return c.reshape(n);
    }

    /** Throws unless {@code t} lives on {@code device}. */
    public static void requireDevice(Tensor t, Device device, String name) {
        Device d = device(t);
        if (!d.equals(device)) throw new IllegalArgumentException(name + " is on " + d + " but must be on " + device + " (with the logits)");
    }

    /**
     * A per-token (or per-row) input as a contiguous float32 vector of {@code n} elements on {@code device}:
     * a view when it already is one, else a converted copy (any numeric or bool dtype).
     */
    public static Tensor floats(Tensor t, long n, String name, Device device) {
        Check.notNull(name, t);
        requireDevice(t, device, name);
        Tensor f = flat(t, n, name);
        return f.scalar_type().intern() == ScalarType.Float ? f : f.to(ScalarType.Float).contiguous();
    }

    /** A per-token flag input (bool or uint8) as a contiguous vector of {@code n} bytes on {@code device}. */
    public static Tensor bytes(Tensor t, long n, String name, Device device) {
        Check.notNull(name, t);
        requireDevice(t, device, name);
        Tensor f = flat(t, n, name);
        if (dtype(f) != DType.U8) throw new IllegalArgumentException(name + " must be bool or uint8, got " + f.scalar_type().intern());
        return f;
    }

    /**
     * The memory of an optional per-row tensor of exactly {@code type} with {@code n} elements (null for
     * null), for passing per-row parameters to the kernels without a copy.
     */
    public static MemRef rows(Tensor t, long n, String name, DType type) {
        if (t == null) return null;
        Tensor f = flat(t, n, name);
        DType actual = dtype(f);
        if (actual != type) throw new IllegalArgumentException(name + " must be " + torchName(type) + ", got " + actual);
        return mem(f);
    }

    /** The torch name of a kernel dtype, for messages. */
    public static String torchName(DType t) {
        return switch (t) {
            case F32 -> "float32";
            case BF16 -> "bfloat16";
            case F16 -> "float16";
            case I32 -> "int32";
            case I64 -> "int64";
            case U8 -> "bool or uint8";
        };
    }

    /** One [rows, vocab] view of logits and the index of its first row among all rows. */
    public record RowBlock(LogitsView view, long firstRow) {}

    /**
     * Row views of [T, V] or [B, L, V] logits whose last dimension is contiguous. A [B, L, V] tensor whose
     * rows are not evenly spaced (e.g. {@code x[:, :-1, :]}) gives one block per batch element — still
     * no copy. Rows are numbered in row-major order of the leading dimensions.
     */
    public static List<RowBlock> rowBlocks(Tensor logits, long vocabLimit) {
        Check.notNull("logits", logits);
        long dim = logits.dim();
        if (dim != 2 && dim != 3) throw new IllegalArgumentException("logits must be [T, V] or [B, L, V], got " + dim + " dims");
        DType dt = dtype(logits);
        if (!dt.isFloating()) throw new IllegalArgumentException("logits must be float32, bfloat16 or float16, got " + dt);
        long v = logits.size(dim - 1);
        if (logits.stride(dim - 1) != 1 && v > 1)
            throw new IllegalArgumentException("logits' last dimension must be contiguous (stride 1), got stride " + logits.stride(dim - 1));
        long limit = vocabLimit <= 0 ? v : vocabLimit;
        MemRef mem = mem(logits);
        List<RowBlock> out = new ArrayList<>();
        if (dim == 2) {
            long rows = logits.size(0), stride = rows > 1 ? logits.stride(0) : v;
            out.add(new RowBlock(new LogitsView(mem, dt, rows, v, stride, limit), 0));
            return out;
        }
        long b = logits.size(0), l = logits.size(1), sb = logits.stride(0), sl = l > 1 ? logits.stride(1) : v;
        if (sl < v) throw new IllegalArgumentException("logits rows overlap (stride " + sl + " < vocab " + v + ")");
        if (b == 1 || sb == l * sl) {
            out.add(new RowBlock(new LogitsView(mem, dt, b * l, v, sl, limit), 0));
            return out;
        }
        if (sb < 0) throw new IllegalArgumentException("negative batch stride " + sb);
        for (long i = 0; i < b; i++) {
            long off = Check.product("batch offset", i * sb, dt.bytes());
            MemRef sub = mem.slice(off, mem.bytes() - off);
            out.add(new RowBlock(new LogitsView(sub, dt, l, v, sl, limit), i * l));
        }
        return out;
    }

    /** Number of rows (token positions) of [T, V] or [B, L, V] logits. */
    public static long rows(Tensor logits) {
        return logits.dim() == 2 ? logits.size(0) : logits.size(0) * logits.size(1);
    }

    /** The leading shape of logits ([T] or [B, L]), for outputs. */
    public static long[] leadingShape(Tensor logits) {
        return logits.dim() == 2 ? new long[] {logits.size(0)} : new long[] {logits.size(0), logits.size(1)};
    }

    /** A new uninitialized tensor of {@code shape} and {@code type} on {@code like}'s device. */
    public static Tensor empty(Tensor like, long[] shape, ScalarType type) {
        return like.new_empty(shape, new ScalarTypeOptional(type), new LayoutOptional(), new DeviceOptional(), new BoolOptional());
    }

    /**
     * torch's current CUDA stream on {@code device} as a raw cudaStream_t, or 0 (the legacy default
     * stream, torch's default) when the CUDA build of the preset is not on the classpath.
     */
    public static long currentStream(Device device) {
        if (!device.isCuda()) return 0L;
        try {
            return org.bytedeco.pytorch.global.torch_cuda.getCurrentCUDAStream((byte) device.index()).stream().address();
        } catch (LinkageError e) {
            return 0L;
        }
    }

    /** A host copy of {@code t}'s elements as float32, in row-major order (any dtype, device and strides). */
    public static float[] hostFloats(Tensor t) {
        Tensor c = t.to(ScalarType.Float).cpu().contiguous();
        float[] a = new float[Math.toIntExact(c.numel())];
        if (a.length > 0) new org.bytedeco.javacpp.FloatPointer(c.data_ptr()).capacity(a.length).get(a);
        return a;
    }

    /** A host copy of {@code t}'s elements as int64, in row-major order (any integer dtype, device and strides). */
    public static long[] hostLongs(Tensor t) {
        Tensor c = t.to(ScalarType.Long).cpu().contiguous();
        long[] a = new long[Math.toIntExact(c.numel())];
        if (a.length > 0) new org.bytedeco.javacpp.LongPointer(c.data_ptr()).capacity(a.length).get(a);
        return a;
    }
}
