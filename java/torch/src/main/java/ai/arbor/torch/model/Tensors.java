package ai.arbor.torch.model;

import org.bytedeco.javacpp.DoublePointer;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.LongPointer;
import org.bytedeco.javacpp.Pointer;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.DeviceOptional;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * Small conversions between Java arrays and preset tensors used by the model package.
 *
 * <p>Ownership rule of the package: a tensor that outlives the method creating it goes through
 * {@link #own}; everything else is created inside a {@link PointerScope} and freed when it closes.
 */
@SuppressWarnings("try") // PointerScope and NoGradGuard act through their try blocks
final class Tensors {

    private Tensors() {}

    /**
     * Makes {@code p} survive the innermost open {@link PointerScope} (if any); the caller then frees it
     * with {@code close()}.
     */
    static <P extends Pointer> P own(P p) {
        if (PointerScope.getInnerScope() != null) p.retainReference();
        return p;
    }

    static TensorOptions options(ScalarType dtype, Device device) {
        return new TensorOptions().dtype(new ScalarTypeOptional(dtype)).device(new DeviceOptional(device));
    }

    /** A 1-D int64 tensor holding {@code values} on {@code device}. */
    static Tensor longs(long[] values, Device device) {
        return longs(values, new long[] {values.length}, device);
    }

    /** An int64 tensor of the given shape holding {@code values} (row-major) on {@code device}. */
    static Tensor longs(long[] values, long[] shape, Device device) {
        try (LongPointer p = new LongPointer(values)) {
            Tensor cpu = torch.from_blob(p, shape, options(ScalarType.Long, new Device("cpu")));
            // clone / to() copy out of the Java-owned buffer before it is freed
            return device.is_cuda() ? cpu.to(device, ScalarType.Long) : cpu.clone();
        }
    }

    static Tensor longs(int[] values, Device device) {
        long[] v = new long[values.length];
        for (int i = 0; i < v.length; i++) v[i] = values[i];
        return longs(v, device);
    }

    /** A tensor of {@code dtype} and {@code shape} holding {@code values} (row-major) on {@code device}. */
    static Tensor floats(float[] values, long[] shape, ScalarType dtype, Device device) {
        try (FloatPointer p = new FloatPointer(values)) {
            Tensor cpu = torch.from_blob(p, shape, options(ScalarType.Float, new Device("cpu")));
            return cpu.to(device, dtype, false, true, new org.bytedeco.pytorch.MemoryFormatOptional());
        }
    }

    /** As {@link #floats} from doubles (kept in double precision until the final cast). */
    static Tensor doubles(double[] values, long[] shape, ScalarType dtype, Device device) {
        try (DoublePointer p = new DoublePointer(values)) {
            Tensor cpu = torch.from_blob(p, shape, options(ScalarType.Double, new Device("cpu")));
            return cpu.to(device, dtype, false, true, new org.bytedeco.pytorch.MemoryFormatOptional());
        }
    }

    /** The elements of {@code t} as doubles (copied to the CPU, row-major). */
    static double[] toDoubles(Tensor t) {
        try (PointerScope scope = new PointerScope()) {
            Tensor c = t.detach().to(new Device("cpu"), ScalarType.Double).contiguous();
            double[] out = new double[Math.toIntExact(c.numel())];
            if (out.length == 0) return out;
            new DoublePointer(c.data_ptr()).capacity(out.length).get(out);
            return out;
        }
    }

    /** The shape of {@code t}. */
    static long[] shape(Tensor t) {
        long[] s = new long[(int) t.dim()];
        for (int i = 0; i < s.length; i++) s[i] = t.size(i);
        return s;
    }

    static boolean same(ScalarType a, ScalarType b) {
        return a.intern() == b.intern();
    }
}
