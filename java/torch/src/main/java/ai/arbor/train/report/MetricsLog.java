package ai.arbor.train.report;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Per-step metrics as JSON lines (one object per training step, flushed as written so a crashed run keeps
 * everything up to its last step), and the in-memory series for plots. A resumed run ({@link #resume})
 * starts from the lines a checkpoint kept, so no step is lost or logged twice.
 */
public final class MetricsLog implements AutoCloseable {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final BufferedWriter out;
    private final List<Map<String, Object>> rows = new ArrayList<>();
    private final List<String> lines = new ArrayList<>();

    /** A new, empty log at {@code file} (an existing file is truncated). */
    public MetricsLog(Path file) {
        try {
            if (file.getParent() != null) Files.createDirectories(file.getParent());
            out = Files.newBufferedWriter(file, StandardCharsets.UTF_8, StandardOpenOption.CREATE,
                    StandardOpenOption.TRUNCATE_EXISTING, StandardOpenOption.WRITE);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write metrics to " + file, e);
        }
    }

    private MetricsLog(Path file, List<String> kept) throws IOException {
        for (String line : kept) {
            @SuppressWarnings("unchecked")
            Map<String, Object> row = JSON.readValue(line, LinkedHashMap.class);
            rows.add(row);
            lines.add(line);
        }
        out = Files.newBufferedWriter(file, StandardCharsets.UTF_8, StandardOpenOption.WRITE, StandardOpenOption.APPEND);
    }

    /**
     * Continues the log at {@code file} from {@code kept}, the lines of an earlier run up to its checkpoint: the
     * file is replaced by exactly those lines (through a synced temporary file renamed over it, so a crash
     * leaves either the old file or the new one), then appended to.
     */
    public static MetricsLog resume(Path file, List<String> kept) throws IOException {
        Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
        try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.CREATE, StandardOpenOption.TRUNCATE_EXISTING, StandardOpenOption.WRITE)) {
            StringBuilder sb = new StringBuilder();
            for (String line : kept) sb.append(line).append('\n');
            ByteBuffer buf = ByteBuffer.wrap(sb.toString().getBytes(StandardCharsets.UTF_8));
            while (buf.hasRemaining()) ch.write(buf);
            ch.force(true);
        }
        Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        return new MetricsLog(file, kept);
    }

    /** Appends one step's metrics (insertion order kept). */
    public synchronized void log(Map<String, ?> metrics) {
        Map<String, Object> row = new LinkedHashMap<>(metrics);
        try {
            String line = JSON.writeValueAsString(row);
            rows.add(row);
            lines.add(line);
            out.write(line);
            out.newLine();
            out.flush();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The values of {@code key} over the logged rows (NaN where absent). */
    public synchronized double[] series(String key) {
        double[] v = new double[rows.size()];
        for (int i = 0; i < v.length; i++) {
            Object o = rows.get(i).get(key);
            v[i] = o instanceof Number n ? n.doubleValue() : Double.NaN;
        }
        return v;
    }

    public synchronized List<Map<String, Object>> rows() {
        return List.copyOf(rows);
    }

    /** The logged lines (JSON, without line ends), as written to the file. */
    public synchronized List<String> lines() {
        return List.copyOf(lines);
    }

    @Override
    public synchronized void close() {
        try {
            out.close();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
