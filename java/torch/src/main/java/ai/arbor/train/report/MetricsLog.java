package ai.arbor.train.report;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Per-step metrics as JSON lines (one object per training step, flushed as written so a crashed run keeps
 * everything up to its last step), and the in-memory series for plots.
 */
public final class MetricsLog implements AutoCloseable {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final BufferedWriter out;
    private final List<Map<String, Object>> rows = new ArrayList<>();

    public MetricsLog(Path file) {
        try {
            if (file.getParent() != null) Files.createDirectories(file.getParent());
            out = Files.newBufferedWriter(file, StandardCharsets.UTF_8, StandardOpenOption.CREATE,
                    StandardOpenOption.TRUNCATE_EXISTING, StandardOpenOption.WRITE);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write metrics to " + file, e);
        }
    }

    /** Appends one step's metrics (insertion order kept). */
    public synchronized void log(Map<String, ?> metrics) {
        Map<String, Object> row = new LinkedHashMap<>(metrics);
        rows.add(row);
        try {
            out.write(JSON.writeValueAsString(row));
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

    @Override
    public synchronized void close() {
        try {
            out.close();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
