package ai.arbor.torch.model;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * Reads and writes the safetensors format (Hugging Face): an unsigned 64-bit little-endian header
 * length N, N bytes of UTF-8 JSON, then the raw little-endian tensor data. The JSON maps each tensor
 * name to {@code {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}} (byte offsets into
 * the data section, end exclusive) and may hold a {@code "__metadata__"} object of string → string.
 *
 * <p>Written files pad the header with spaces to a multiple of 8 bytes (so the data section is
 * aligned), store tensors back to back in the order given, and write through a temporary file that is
 * moved into place, so a crash never leaves a half-written checkpoint under the final name.
 * Reading validates what the reference implementation validates: a header inside the file, known
 * dtypes, sizes that match shapes, and data offsets that tile the data section exactly.
 */
@SuppressWarnings("try") // PointerScope and NoGradGuard act through their try blocks
public final class Safetensors {

    /** The largest header accepted (the reference implementation's limit). */
    public static final long MAX_HEADER_BYTES = 100L << 20;

    /** Bytes moved per read/write call (a ByteBuffer spans at most 2 GiB); tests lower it. */
    static int chunkBytes = 1 << 30;

    private static final ObjectMapper JSON = new ObjectMapper()
            .configure(com.fasterxml.jackson.core.JsonParser.Feature.STRICT_DUPLICATE_DETECTION, true);

    private Safetensors() {}

    /** Element types of the format (the subset libtorch holds), with their libtorch scalar types. */
    public enum Dtype {
        F64(8, ScalarType.Double), F32(4, ScalarType.Float), F16(2, ScalarType.Half), BF16(2, ScalarType.BFloat16),
        I64(8, ScalarType.Long), I32(4, ScalarType.Int), I16(2, ScalarType.Short), I8(1, ScalarType.Char),
        U8(1, ScalarType.Byte), BOOL(1, ScalarType.Bool);

        private final int bytes;
        private final ScalarType scalarType;

        Dtype(int bytes, ScalarType scalarType) {
            this.bytes = bytes;
            this.scalarType = scalarType;
        }

        public int bytes() {
            return bytes;
        }

        public ScalarType scalarType() {
            return scalarType;
        }

        public boolean isFloating() {
            return this == F64 || this == F32 || this == F16 || this == BF16;
        }

        /** The format's dtype of a libtorch scalar type. */
        public static Dtype of(ScalarType t) {
            if (t == null) throw new IllegalArgumentException("dtype is null");
            ScalarType s = t.intern();
            for (Dtype d : values()) if (d.scalarType == s) return d;
            throw new IllegalArgumentException("safetensors cannot store scalar type " + t);
        }

        static Dtype parse(String name) {
            for (Dtype d : values()) if (d.name().equals(name)) return d;
            throw new IllegalArgumentException("unsupported safetensors dtype '" + name + "' (supported: " + Arrays.toString(values()) + ")");
        }
    }

    /** One tensor's header entry: offsets are relative to the start of the data section. */
    public record Entry(String name, Dtype dtype, long[] shape, long begin, long end) {
        public long numel() {
            long n = 1;
            for (long s : shape) n = Math.multiplyExact(n, s);
            return n;
        }
    }

    /** A parsed header: metadata, entries in file order, and the absolute offset of the data section. */
    public record Header(Map<String, String> metadata, List<Entry> entries, long dataStart) {}

    /** A file's metadata and its tensors on the CPU; closing frees the tensors. */
    public record Contents(Map<String, String> metadata, Map<String, Tensor> tensors) implements AutoCloseable {
        @Override
        public void close() {
            for (Tensor t : tensors.values()) t.close();
        }
    }

    /**
     * Writes {@code tensors} (any device; stored in their own dtype) and {@code metadata} to {@code file}.
     */
    public static void write(Path file, Map<String, Tensor> tensors, Map<String, String> metadata) throws IOException {
        if (file == null) throw new IllegalArgumentException("file is null");
        if (tensors == null) throw new IllegalArgumentException("tensors is null");
        ObjectNode header = JSON.createObjectNode();
        if (metadata != null && !metadata.isEmpty()) {
            ObjectNode meta = header.putObject("__metadata__");
            for (Map.Entry<String, String> e : metadata.entrySet()) {
                if (e.getKey() == null || e.getValue() == null)
                    throw new IllegalArgumentException("metadata keys and values must be non-null: " + e);
                meta.put(e.getKey(), e.getValue());
            }
        }
        try (PointerScope scope = new PointerScope()) {
            List<Tensor> data = new ArrayList<>();
            long offset = 0;
            for (Map.Entry<String, Tensor> e : tensors.entrySet()) {
                String name = e.getKey();
                if (name == null || name.isEmpty() || name.equals("__metadata__"))
                    throw new IllegalArgumentException("invalid tensor name '" + name + "'");
                Tensor t = e.getValue();
                if (t == null || !t.defined()) throw new IllegalArgumentException("tensor " + name + " is undefined");
                Dtype dtype = Dtype.of(t.scalar_type());
                Tensor c = t.detach().to(new Device("cpu"), t.scalar_type()).contiguous();
                long bytes = c.nbytes();
                ObjectNode entry = header.putObject(name);
                entry.put("dtype", dtype.name());
                ArrayNode shape = entry.putArray("shape");
                for (long s : Tensors.shape(c)) shape.add(s);
                entry.putArray("data_offsets").add(offset).add(offset + bytes);
                offset += bytes;
                data.add(c);
            }
            byte[] json = JSON.writeValueAsBytes(header);
            int padded = (json.length + 7) / 8 * 8;
            byte[] headerBytes = Arrays.copyOf(json, padded);
            Arrays.fill(headerBytes, json.length, padded, (byte) ' ');
            Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
            try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.CREATE, StandardOpenOption.TRUNCATE_EXISTING,
                    StandardOpenOption.WRITE)) {
                ByteBuffer len = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(padded).flip();
                writeFully(ch, len);
                writeFully(ch, ByteBuffer.wrap(headerBytes));
                checkLittleEndian();
                for (Tensor c : data) {
                    long bytes = c.nbytes();
                    if (bytes == 0) continue;
                    BytePointer base = new BytePointer(c.data_ptr()).capacity(bytes);
                    for (long done = 0; done < bytes; ) {
                        int n = (int) Math.min(chunkBytes, bytes - done);
                        writeFully(ch, base.position(done).limit(done + n).asByteBuffer());
                        done += n;
                    }
                }
                ch.force(true);
            }
            Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        }
    }

    /** Parses and validates the header of {@code file}. */
    public static Header readHeader(Path file) throws IOException {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            return readHeader(ch, file);
        }
    }

    /** Reads every tensor of {@code file} into CPU tensors of its stored dtype. */
    public static Contents read(Path file) throws IOException {
        checkLittleEndian();
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            Header header = readHeader(ch, file);
            Map<String, Tensor> tensors = new LinkedHashMap<>();
            try {
                for (Entry e : header.entries()) tensors.put(e.name(), readTensor(ch, header.dataStart(), e, file));
            } catch (IOException | RuntimeException ex) {
                for (Tensor t : tensors.values()) t.close();
                throw ex;
            }
            return new Contents(header.metadata(), Collections.unmodifiableMap(tensors));
        }
    }

    // ------------------------------------------------------------------ internals

    private static Header readHeader(FileChannel ch, Path file) throws IOException {
        long size = ch.size();
        if (size < 8) throw new IllegalArgumentException(file + ": " + size + " bytes, too short for a safetensors header length");
        ByteBuffer lenBuf = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
        readFully(ch, lenBuf, 0, file);
        long n = lenBuf.flip().getLong();
        if (n < 2 || n > MAX_HEADER_BYTES || n > size - 8)
            throw new IllegalArgumentException(file + ": header length " + Long.toUnsignedString(n) + " invalid for a file of " + size + " bytes");
        ByteBuffer json = ByteBuffer.allocate((int) n);
        readFully(ch, json, 8, file);
        JsonNode root;
        try {
            root = JSON.readTree(new String(json.array(), StandardCharsets.UTF_8));
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException(file + ": header is not JSON: " + e.getOriginalMessage(), e);
        }
        if (root == null || !root.isObject()) throw new IllegalArgumentException(file + ": header is not a JSON object");
        long dataStart = 8 + n, dataBytes = size - dataStart;
        Map<String, String> metadata = new LinkedHashMap<>();
        List<Entry> entries = new ArrayList<>();
        for (Map.Entry<String, JsonNode> f : root.properties()) {
            String name = f.getKey();
            JsonNode v = f.getValue();
            if (name.equals("__metadata__")) {
                if (!v.isObject()) throw new IllegalArgumentException(file + ": __metadata__ must be an object");
                for (Map.Entry<String, JsonNode> kv : v.properties()) {
                    if (!kv.getValue().isTextual())
                        throw new IllegalArgumentException(file + ": __metadata__ value of '" + kv.getKey() + "' is not a string");
                    metadata.put(kv.getKey(), kv.getValue().asText());
                }
                continue;
            }
            entries.add(parseEntry(name, v, file));
        }
        // the data offsets must tile [0, dataBytes) exactly: no gaps, no overlaps, nothing outside
        List<Entry> byOffset = new ArrayList<>(entries);
        byOffset.sort(Comparator.comparingLong(Entry::begin).thenComparingLong(Entry::end));
        long expected = 0;
        for (Entry e : byOffset) {
            if (e.begin() != expected)
                throw new IllegalArgumentException(file + ": tensor " + e.name() + " starts at data offset " + e.begin()
                        + ", expected " + expected + " (gap or overlap)");
            expected = e.end();
        }
        if (expected > dataBytes) {
            // name the first tensor that does not fit: a truncated download or copy
            Entry cut = byOffset.stream().filter(e -> e.end() > dataBytes).findFirst().orElseThrow();
            throw new IllegalArgumentException(file + ": truncated: tensor " + cut.name() + " ends at data byte " + cut.end()
                    + " but the file holds " + dataBytes + " data bytes");
        }
        if (expected != dataBytes)
            throw new IllegalArgumentException(file + ": tensors cover " + expected + " data bytes but the file holds " + dataBytes);
        return new Header(Collections.unmodifiableMap(metadata), Collections.unmodifiableList(entries), dataStart);
    }

    private static Entry parseEntry(String name, JsonNode v, Path file) {
        if (!v.isObject()) throw new IllegalArgumentException(file + ": entry " + name + " is not an object");
        JsonNode dtype = v.get("dtype"), shape = v.get("shape"), offsets = v.get("data_offsets");
        if (dtype == null || !dtype.isTextual()) throw new IllegalArgumentException(file + ": tensor " + name + " has no dtype");
        if (shape == null || !shape.isArray()) throw new IllegalArgumentException(file + ": tensor " + name + " has no shape");
        if (offsets == null || !offsets.isArray() || offsets.size() != 2)
            throw new IllegalArgumentException(file + ": tensor " + name + " needs data_offsets [begin, end]");
        Dtype d;
        try {
            d = Dtype.parse(dtype.asText());
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(file + ": tensor " + name + ": " + e.getMessage(), e);
        }
        long[] dims = new long[shape.size()];
        for (int i = 0; i < dims.length; i++) {
            JsonNode s = shape.get(i);
            if (!s.canConvertToLong() || !s.isIntegralNumber() || s.asLong() < 0)
                throw new IllegalArgumentException(file + ": tensor " + name + " has invalid shape " + shape);
            dims[i] = s.asLong();
        }
        for (JsonNode o : offsets)
            if (!o.isIntegralNumber() || !o.canConvertToLong() || o.asLong() < 0)
                throw new IllegalArgumentException(file + ": tensor " + name + " has invalid data_offsets " + offsets);
        long begin = offsets.get(0).asLong(), end = offsets.get(1).asLong();
        Entry e = new Entry(name, d, dims, begin, end);
        long want;
        try {
            want = Math.multiplyExact(e.numel(), (long) d.bytes());
        } catch (ArithmeticException ex) {
            throw new IllegalArgumentException(file + ": tensor " + name + " shape " + shape + " overflows", ex);
        }
        if (end < begin || end - begin != want)
            throw new IllegalArgumentException(file + ": tensor " + name + " (" + d + " " + shape + ") needs " + want
                    + " bytes but data_offsets " + offsets + " span " + (end - begin));
        return e;
    }

    private static Tensor readTensor(FileChannel ch, long dataStart, Entry e, Path file) throws IOException {
        long bytes = e.end() - e.begin();
        try (PointerScope scope = new PointerScope()) {
            Tensor out;
            if (bytes == 0) {
                out = torch.empty(e.shape(), Tensors.options(e.dtype().scalarType(), new Device("cpu")), new MemoryFormatOptional());
            } else {
                BytePointer buf = new BytePointer(bytes);
                for (long done = 0; done < bytes; ) {
                    int n = (int) Math.min(chunkBytes, bytes - done);
                    readFully(ch, buf.position(done).limit(done + n).asByteBuffer(), dataStart + e.begin() + done, file);
                    done += n;
                }
                buf.position(0);
                // clone copies out of the buffer, which the scope frees
                out = torch.from_blob(buf, e.shape(), Tensors.options(e.dtype().scalarType(), new Device("cpu"))).clone();
            }
            out.retainReference();
            return out;
        }
    }

    private static void readFully(FileChannel ch, ByteBuffer dst, long position, Path file) throws IOException {
        long pos = position;
        while (dst.hasRemaining()) {
            int n = ch.read(dst, pos);
            if (n < 0) throw new IOException(file + ": unexpected end of file at byte " + pos);
            pos += n;
        }
    }

    private static void writeFully(FileChannel ch, ByteBuffer src) throws IOException {
        while (src.hasRemaining()) ch.write(src);
    }

    private static void checkLittleEndian() {
        if (ByteOrder.nativeOrder() != ByteOrder.LITTLE_ENDIAN)
            throw new UnsupportedOperationException("safetensors I/O assumes a little-endian machine");
    }
}
