package ai.arbor.reward;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Assumptions;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/**
 * The math benchmarks' rows (MATH-500, AIME 2024/2025, AMC 2023) from {@code shared/data/math/*.jsonl},
 * found from {@code -Darbor.data.math=DIR} or by walking up from the working directory. Tests that need
 * them abort with a visible reason when they are absent.
 */
final class MathData {
    private MathData() {}

    record Row(String source, int index, String problem, String gold) {
    }

    static Path dir() {
        String prop = System.getProperty("arbor.data.math");
        if (prop != null && !prop.isBlank()) return Paths.get(prop);
        for (Path p = Paths.get("").toAbsolutePath(); p != null; p = p.getParent()) {
            Path c = p.resolve("shared/data/math");
            if (Files.isDirectory(c)) return c;
        }
        return null;
    }

    /** All rows, in file order (files sorted by name); aborts the test when the data is not there. */
    static List<Row> rows() throws IOException {
        Path d = dir();
        Assumptions.assumeTrue(d != null && Files.isDirectory(d),
                "math data not found: set -Darbor.data.math=DIR or run below a directory containing shared/data/math");
        ObjectMapper om = new ObjectMapper();
        List<Row> rows = new ArrayList<>();
        List<Path> files;
        try (Stream<Path> s = Files.list(d)) {
            files = s.filter(f -> f.toString().endsWith(".jsonl")).sorted().toList();
        }
        for (Path f : files) {
            int i = 0;
            for (String line : Files.readAllLines(f)) {
                if (line.isBlank()) continue;
                JsonNode n = om.readTree(line);
                rows.add(new Row(f.getFileName().toString(), i++, n.path("problem").asText(), n.path("gt_answer").asText()));
            }
        }
        return rows;
    }
}
