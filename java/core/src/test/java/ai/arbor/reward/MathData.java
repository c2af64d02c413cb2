package ai.arbor.reward;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import ai.arbor.testing.Repository;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/**
 * The math benchmarks' rows (MATH-500, AIME 2024/2025, AMC 2023) from the repository's
 * {@code data/math/*.jsonl} (sources and licences: {@code data/README.md}), or from
 * {@code -Darbor.data.math=DIR}. Missing data fails the test that needs it. The benchmarks read it here too
 * (arbor-core's test jar).
 */
public final class MathData {
    private MathData() {}

    /** One row: file, index in the file, problem, reference answer. */
    public record Row(String source, int index, String problem, String gold) {
    }

    public static Path dir() {
        String prop = System.getProperty("arbor.data.math");
        return prop != null && !prop.isBlank() ? Paths.get(prop) : Repository.file("data/math");
    }

    /** All rows, in file order (files sorted by name); fails when the data is not there. */
    public static List<Row> rows() throws IOException {
        Path d = dir();
        if (!Files.isDirectory(d)) throw new IllegalStateException("math data directory " + d + " does not exist");
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
