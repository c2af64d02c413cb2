package ai.arbor.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** BM25 search over a small corpus built in the test, and Search-R1 formatting. */
class SearchToolTest {

    static final List<SearchTool.Doc> CORPUS = List.of(
            new SearchTool.Doc("1", "Paris", "Paris is the capital and largest city of France."),
            new SearchTool.Doc("2", "Berlin", "Berlin is the capital of Germany. Berlin has many museums and museums and museums."),
            new SearchTool.Doc("3", "Python (programming language)", "Python is a programming language created by Guido van Rossum."),
            new SearchTool.Doc("4", "Python (genus)", "Python is a genus of constricting snakes found in Africa and Asia."),
            new SearchTool.Doc("5", "Mount Everest", "Mount Everest is Earth's highest mountain above sea level, in the Himalayas."));

    @Test
    void ranksByBm25AndFormatsLikeSearchR1() {
        try (SearchTool t = new SearchTool(CORPUS)) {
            assertEquals(5, t.size());
            List<SearchTool.Hit> hits = t.search("capital of France", 3);
            assertEquals("1", hits.get(0).id(), "France appears only in doc 1");
            assertEquals("2", hits.get(1).id(), "capital also matches doc 2");
            assertEquals(2, hits.size(), "no other document shares a term");
            assertTrue(hits.get(0).score() > hits.get(1).score());
            Observation o = t.call("capital of France");
            assertTrue(o.success());
            assertEquals("Doc 1(Title: Paris) Paris is the capital and largest city of France.\n"
                    + "Doc 2(Title: Berlin) Berlin is the capital of Germany. Berlin has many museums and museums and museums.\n", o.text());
        }
    }

    @Test
    void bm25ScoreMatchesTheFormula() {
        // One-term query "himalayas" matches only doc 5. Lucene's BM25 (k1, b), ignoring the (1 + k1)
        // factor Lucene 9 dropped: idf * tf / (tf + k1 * (1 - b + b * dl / avgdl)), idf = ln(1 + (N - n + 0.5) / (n + 0.5)).
        float k1 = 0.9f, b = 0.4f;
        try (SearchTool t = new SearchTool(CORPUS, 3, 600, k1, b)) {
            List<SearchTool.Hit> hits = t.search("Himalayas", 5);
            assertEquals(1, hits.size());
            // document lengths = analyzed tokens of title + "\n" + text (stop words dropped)
            double[] lengths = CORPUS.stream().mapToDouble(d -> tokens(d.title() + "\n" + d.text())).toArray();
            double avg = java.util.Arrays.stream(lengths).average().orElseThrow();
            double idf = Math.log(1 + (5 - 1 + 0.5) / (1 + 0.5));
            double expected = idf * 1 / (1 + k1 * (1 - b + b * lengths[4] / avg));
            // Lucene stores document lengths in one byte: exact for lengths this small
            assertEquals(expected, hits.get(0).score(), 1e-5, "BM25 of a single matching term");
        }
    }

    private static int tokens(String text) {
        try (var analyzer = new org.apache.lucene.analysis.en.EnglishAnalyzer();
             var ts = analyzer.tokenStream("contents", text)) {
            ts.reset();
            int n = 0;
            while (ts.incrementToken()) n++;
            ts.end();
            return n;
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    @Test
    void stemmingAndStopWords() {
        try (SearchTool t = new SearchTool(CORPUS)) {
            assertEquals("4", t.search("snake", 1).get(0).id(), "snakes ~ snake (Porter stemming)");
            assertTrue(t.search("the of and", 3).isEmpty(), "stop words only");
            Observation none = t.call("the of and");
            assertTrue(none.success());
            assertTrue(none.text().startsWith("No results found"), none.text());
            assertEquals(List.of("3", "4"), t.search("python", 5).stream().map(SearchTool.Hit::id).sorted().toList());
            assertEquals("3", t.search("python programming language", 1).get(0).id(), "title terms count too");
        }
    }

    @Test
    void snippetsAreCapped() {
        String longText = "alpha beta gamma delta ".repeat(100);
        try (SearchTool t = new SearchTool(List.of(new SearchTool.Doc("x", "Long", longText)), 3, 40, 0.9f, 0.4f)) {
            SearchTool.Hit h = t.search("gamma", 1).get(0);
            assertTrue(h.text().length() <= 40, h.text());
            assertTrue(h.text().endsWith("…"));
            assertTrue(h.text().startsWith("alpha beta gamma delta"));
            assertFalse(h.text().contains("  "));
        }
    }

    @Test
    void jsonlCorpusAndJsonArguments(@TempDir Path dir) throws Exception {
        Path corpus = dir.resolve("corpus.jsonl");
        ObjectMapper m = new ObjectMapper();
        StringBuilder sb = new StringBuilder();
        for (SearchTool.Doc d : CORPUS) {
            sb.append(m.writeValueAsString(java.util.Map.of("id", Integer.parseInt(d.id()), "title", d.title(), "text", d.text()))).append("\n\n");
        }
        Files.writeString(corpus, sb.toString());
        try (SearchTool t = SearchTool.fromJsonl(corpus)) {
            assertEquals(5, t.size());
            Observation o = t.call("{\"query\": \"highest mountain\", \"top_k\": 1}");
            assertEquals("Doc 1(Title: Mount Everest) Mount Everest is Earth's highest mountain above sea level, in the Himalayas.\n", o.text());
            assertFalse(t.call("{\"query\": \"x\", \"top_k\": 0}").success());
            assertFalse(t.call("{\"q\": \"x\"}").success());
            assertFalse(t.call("   ").success());
            assertEquals("search", t.name());
            assertEquals("query", m.readTree(t.parametersSchema()).at("/required/0").asText());
        }
        Path bad = dir.resolve("bad.jsonl");
        Files.writeString(bad, "{\"id\": 1, \"title\": \"a\", \"text\": \"b\"}\n{\"id\": 2, \"title\": \"no text\"}\n");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> SearchTool.readJsonl(bad));
        assertTrue(e.getMessage().contains("bad.jsonl:2"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> new SearchTool(List.of(new SearchTool.Doc("a", "", "x"), new SearchTool.Doc("a", "", "y"))));
    }
}
