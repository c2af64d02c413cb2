package ai.arbor.torch;

import ai.arbor.kernels.Check;
import ai.arbor.kernels.DType;
import ai.arbor.kernels.Device;
import ai.arbor.kernels.LogitsView;
import ai.arbor.kernels.MemRef;
import ai.arbor.kernels.NativeExit;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.pytorch.BoolOptional;
import org.bytedeco.pytorch.DeviceOptional;
import org.bytedeco.pytorch.LayoutOptional;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.Layout;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * Adapters from PyTorch-preset tensors to the kernels' memory descriptors, without copies: dtype and
 * device mapping, the memory a tensor's data pointer may address, row views of [T, V] and [B, L, V]
 * logits (including strided views such as a sequence with its last position dropped), and torch's
 * current CUDA stream.
 */
public final class TorchTensors {
    static {
        NativeExit.install(); // exiting during a torch call must not crash the JVM
    }

    private TorchTensors() {}

    /**
     * {@code t} itself, or an exception naming {@code name} when it is not a tensor the kernels can read:
     * null or undefined ({@code new Tensor()}: dim() answers 1 and numel() 0, so without this check it
     * would pass a size check) throw {@link IllegalArgumentException}; a closed or deallocated tensor
     * (its JavaCPP address is NULL: any method call would throw an unnamed NullPointerException) throws
     * {@link IllegalStateException}; a tensor that is not dense memory on the CPU or a CUDA device (meta:
     * no memory at all, its data pointer is null; sparse and other layouts: no data pointer) throws
     * {@link IllegalArgumentException}.
     */
    public static Tensor require(String name, Tensor t) {
        if (t == null) throw new IllegalArgumentException(name + " must not be null");
        if (t.isNull())
            throw new IllegalStateException(name + " is a Tensor that was closed or deallocated (its address is now NULL)");
        if (!t.defined()) throw new IllegalArgumentException(name + " is an undefined tensor (e.g. new Tensor())");
        if (t.layout().intern() != Layout.Strided)
            throw new IllegalArgumentException(name + " must be a dense (strided) tensor, got layout " + t.layout());
        if (!t.is_cpu() && !t.is_cuda())
            throw new IllegalArgumentException(name + " is on " + t.device().str().getString()
                    + "; the kernels take CPU or CUDA tensors");
        if (t.is_quantized()) throw new IllegalArgumentException(name + " is a quantized tensor");
        return t;
    }

    /** The kernels' dtype of a tensor; throws for types the kernels do not take. */
    public static DType dtype(Tensor t) {
        return dtype(t, "tensor");
    }

    /** The kernels' dtype of {@code t}, or an exception naming {@code name} for types the kernels do not take. */
    public static DType dtype(Tensor t, String name) {
        require(name, t);
        ScalarType s = t.scalar_type().intern();
        if (s == ScalarType.Float) return DType.F32;
        if (s == ScalarType.BFloat16) return DType.BF16;
        if (s == ScalarType.Half) return DType.F16;
        if (s == ScalarType.Int) return DType.I32;
        if (s == ScalarType.Long) return DType.I64;
        if (s == ScalarType.Byte || s == ScalarType.Bool) return DType.U8;
        throw new IllegalArgumentException(name + ": unsupported tensor dtype " + s);
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
        require("tensor", t);
        return t.is_cuda() ? Device.cuda(t.device().index()) : Device.CPU;
    }

    /**
     * The memory from the tensor's first element to the end of its storage (the most any view of it may
     * address), owned by the tensor so the kernels keep it reachable during calls.
     */
    public static MemRef mem(Tensor t) {
        require("tensor", t);
        if (t.numel() == 0) return MemRef.owned(0, 0, device(t), t);
        long item = t.element_size();
        long bytes = t.storage().nbytes() - t.storage_offset() * item;
        return MemRef.owned(t.data_ptr().address(), Math.max(0, bytes), device(t), t);
    }

    /** A 1-D contiguous view of {@code t} with {@code n} elements (copies only if {@code t} is not contiguous). */
    public static Tensor flat(Tensor t, long n, String name) {
        require(name, t);
        if (t.numel() != n) throw new IllegalArgumentException(name + " must have " + n + " elements, got " + t.numel());
        Tensor c = t.is_contiguous() ? t : t.contiguous();
        return c.reshape(n);
    }

    /** Throws unless {@code t} lives on {@code device}. */
    public static void requireDevice(Tensor t, Device device, String name) {
        require(name, t);
        Device d = device(t);
        if (!d.equals(device)) throw new IllegalArgumentException(name + " is on " + d + " but must be on " + device + " (with the logits)");
    }

    /**
     * A per-token (or per-row) input as a contiguous float32 vector of {@code n} elements on {@code device}:
     * a view when it already is one, else a converted copy (any numeric or bool dtype).
     */
    public static Tensor floats(Tensor t, long n, String name, Device device) {
        requireDevice(t, device, name);
        Tensor f = flat(t, n, name);
        return f.scalar_type().intern() == ScalarType.Float ? f : f.to(ScalarType.Float).contiguous();
    }

    /** A per-token flag input (bool or uint8) as a contiguous vector of {@code n} bytes on {@code device}. */
    public static Tensor bytes(Tensor t, long n, String name, Device device) {
        requireDevice(t, device, name);
        Tensor f = flat(t, n, name);
        if (dtype(f, name) != DType.U8) throw new IllegalArgumentException(name + " must be bool or uint8, got " + f.scalar_type().intern());
        return f;
    }

    /**
     * The memory of an optional per-row tensor of exactly {@code type} with {@code n} elements (null for
     * null), for passing per-row parameters to the kernels without a copy.
     */
    public static MemRef rows(Tensor t, long n, String name, DType type) {
        if (t == null) return null;
        Tensor f = flat(t, n, name);
        DType actual = dtype(f, name);
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
        return rowBlocks(logits, vocabLimit, "logits");
    }

    /** As {@link #rowBlocks(Tensor, long)}, naming the tensor {@code name} in exceptions (e.g. "grad"). */
    public static List<RowBlock> rowBlocks(Tensor logits, long vocabLimit, String name) {
        long dim = requireLogitsShape(name, logits);
        DType dt = dtype(logits, name);
        if (!dt.isFloating()) throw new IllegalArgumentException(name + " must be float32, bfloat16 or float16, got " + dt);
        long v = logits.size(dim - 1);
        if (v <= 0) throw new IllegalArgumentException(name + " must have a vocabulary (last dimension) > 0, got " + v);
        if (logits.stride(dim - 1) != 1 && v > 1)
            throw new IllegalArgumentException(name + "' last dimension must be contiguous (stride 1), got stride " + logits.stride(dim - 1));
        long limit = vocabLimit <= 0 ? v : vocabLimit;
        MemRef mem = mem(logits);
        List<RowBlock> out = new ArrayList<>();
        if (dim == 2) {
            long rows = logits.size(0), stride = rows > 1 ? logits.stride(0) : v;
            if (stride < v) throw new IllegalArgumentException(name + " rows overlap (row stride " + stride + " < vocab " + v + ")");
            out.add(new RowBlock(new LogitsView(mem, dt, rows, v, stride, limit), 0));
            return out;
        }
        long b = logits.size(0), l = logits.size(1), sb = logits.stride(0), sl = l > 1 ? logits.stride(1) : v;
        if (sl < v) throw new IllegalArgumentException(name + " rows overlap (stride " + sl + " < vocab " + v + ")");
        if (b <= 1 || l == 0 || sb == l * sl) {  // evenly spaced rows, or none (an empty view has no memory to slice)
            out.add(new RowBlock(new LogitsView(mem, dt, b * l, v, sl, limit), 0));
            return out;
        }
        if (sb < 0) throw new IllegalArgumentException(name + ": negative batch stride " + sb);
        for (long i = 0; i < b; i++) {
            long off = Check.product("batch offset", i * sb, dt.bytes());
            MemRef sub = mem.slice(off, mem.bytes() - off);
            out.add(new RowBlock(new LogitsView(sub, dt, l, v, sl, limit), i * l));
        }
        return out;
    }

    /** The dims of [T, V] or [B, L, V] logits, or an exception naming {@code name}. */
    private static long requireLogitsShape(String name, Tensor logits) {
        require(name, logits);
        long dim = logits.dim();
        if (dim != 2 && dim != 3) throw new IllegalArgumentException(name + " must be [T, V] or [B, L, V], got " + dim + " dims");
        return dim;
    }

    /**
     * Throws unless the rows of [T, V] or [B, L, V] {@code t} (an output the kernels write) are disjoint:
     * an expanded or otherwise self-overlapping view would have several rows written to the same memory.
     * Sufficient test on the two leading (size, stride) pairs, smallest stride first: each stride spans
     * everything of the dimension inside it.
     */
    public static void requireDisjointRows(Tensor t, String name) {
        long dim = requireLogitsShape(name, t);
        long v = t.size(dim - 1);
        long[][] d = dim == 2 ? new long[][] {{t.size(0), t.stride(0)}} : new long[][] {{t.size(0), t.stride(0)}, {t.size(1), t.stride(1)}};
        java.util.Arrays.sort(d, (a, b) -> Long.compare(a[1], b[1]));
        long span = v;  // elements one step of the next dimension must clear
        for (long[] sz : d) {
            if (sz[0] <= 1) continue;
            if (sz[1] < span)
                throw new IllegalArgumentException(name + " has overlapping rows (stride " + sz[1] + " over " + sz[0]
                        + " positions, each needing " + span + " elements); write into a contiguous tensor");
            span = (sz[0] - 1) * sz[1] + span;
        }
    }

    /**
     * Throws unless output {@code out} and input {@code in} are disjoint, or {@code out} is exactly {@code in}
     * (same start, sizes and strides: the documented in-place form). The test is on the element ranges
     * each addresses, so strided views that interleave without touching are rejected too (conservative).
     */
    public static void requireDisjointOrSame(Tensor out, String outName, Tensor in, String inName) {
        require(outName, out);
        require(inName, in);
        if (out.numel() == 0 || in.numel() == 0) return;
        long a0 = out.data_ptr().address(), b0 = in.data_ptr().address();
        if (a0 == b0 && sameLayout(out, in)) return;
        long a1 = a0 + span(out), b1 = b0 + span(in);
        if (a0 < b1 && b0 < a1)
            throw new IllegalArgumentException(outName + " [0x" + Long.toHexString(a0) + ", 0x" + Long.toHexString(a1)
                    + ") overlaps " + inName + " [0x" + Long.toHexString(b0) + ", 0x" + Long.toHexString(b1)
                    + "); only " + outName + " = " + inName + " exactly (in place) is allowed");
    }

    private static boolean sameLayout(Tensor a, Tensor b) {
        if (a.dim() != b.dim() || a.scalar_type().intern() != b.scalar_type().intern()) return false;
        for (int i = 0; i < a.dim(); i++)
            if (a.size(i) != b.size(i) || (a.size(i) > 1 && a.stride(i) != b.stride(i))) return false;
        return true;
    }

    /** Bytes from a tensor's first element to the end of its last one. */
    private static long span(Tensor t) {
        long e = 0;
        for (int i = 0; i < t.dim(); i++) e += (t.size(i) - 1) * t.stride(i);
        return (e + 1) * t.element_size();
    }

    /** Number of rows (token positions) of [T, V] or [B, L, V] logits. */
    public static long rows(Tensor logits) {
        requireLogitsShape("logits", logits);
        return logits.dim() == 2 ? logits.size(0) : logits.size(0) * logits.size(1);
    }

    /** The leading shape of logits ([T] or [B, L]), for outputs. */
    public static long[] leadingShape(Tensor logits) {
        requireLogitsShape("logits", logits);
        return logits.dim() == 2 ? new long[] {logits.size(0)} : new long[] {logits.size(0), logits.size(1)};
    }

    /** A new uninitialized tensor of {@code shape} and {@code type} on {@code like}'s device. */
    public static Tensor empty(Tensor like, long[] shape, ScalarType type) {
        require("like", like);
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
        require("tensor", t);
        Tensor c = t.to(ScalarType.Float).cpu().contiguous();
        float[] a = new float[Math.toIntExact(c.numel())];
        if (a.length > 0) new org.bytedeco.javacpp.FloatPointer(c.data_ptr()).capacity(a.length).get(a);
        return a;
    }

    /** A host copy of {@code t}'s elements as int64, in row-major order (any integer dtype, device and strides). */
    public static long[] hostLongs(Tensor t) {
        require("tensor", t);
        Tensor c = t.to(ScalarType.Long).cpu().contiguous();
        long[] a = new long[Math.toIntExact(c.numel())];
        if (a.length > 0) new org.bytedeco.javacpp.LongPointer(c.data_ptr()).capacity(a.length).get(a);
        return a;
    }
}
