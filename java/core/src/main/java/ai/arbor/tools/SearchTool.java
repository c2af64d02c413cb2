package ai.arbor.tools;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.apache.lucene.analysis.Analyzer;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.en.EnglishAnalyzer;
import org.apache.lucene.analysis.tokenattributes.CharTermAttribute;
import org.apache.lucene.document.Document;
import org.apache.lucene.document.Field;
import org.apache.lucene.document.StoredField;
import org.apache.lucene.document.StringField;
import org.apache.lucene.document.TextField;
import org.apache.lucene.index.DirectoryReader;
import org.apache.lucene.index.IndexWriter;
import org.apache.lucene.index.IndexWriterConfig;
import org.apache.lucene.index.Term;
import org.apache.lucene.search.BooleanClause;
import org.apache.lucene.search.BooleanQuery;
import org.apache.lucene.search.IndexSearcher;
import org.apache.lucene.search.ScoreDoc;
import org.apache.lucene.search.TermQuery;
import org.apache.lucene.search.similarities.BM25Similarity;
import org.apache.lucene.store.ByteBuffersDirectory;
import org.apache.lucene.store.Directory;

/**
 * Local search over a corpus with BM25 (Apache Lucene), formatted the way Search-R1 shows retrieved
 * passages to the model: one line per hit, {@code Doc 1(Title: <title>) <text>}. The index is built
 * once, in memory, from a JSONL file of {@code {"id", "title", "text"}} objects or from a list of
 * {@link Doc}s (e.g. a corpus a training task builds itself). Title and text are searched together
 * (Search-R1's wiki corpus indexes {@code "title"\ntext} as one field), analyzed with Lucene's English
 * analyzer (lower case, stop words, Porter stemming). BM25 uses k1 = 0.9, b = 0.4 by default, Pyserini's
 * defaults, which Search-R1's BM25 retriever uses.
 *
 * <p>{@link #call} accepts the query itself or {@code {"query": "...", "top_k": 3}}. Thread-safe
 * for searching; close to release the index.
 */
public final class SearchTool implements Tool, AutoCloseable {

    /** A corpus document. */
    public record Doc(String id, String title, String text) {
        public Doc {
            if (id == null || id.isEmpty()) throw new IllegalArgumentException("document id must not be empty");
            if (title == null) title = "";
            if (text == null) throw new IllegalArgumentException("document " + id + " has no text");
        }
    }

    /** One search result; {@code text} is capped at the tool's snippet length. */
    public record Hit(int rank, String id, String title, String text, float score) {}

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final int MAX_QUERY_TERMS = 256;

    private final Analyzer analyzer = new EnglishAnalyzer();
    private final Directory directory = new ByteBuffersDirectory();
    private final DirectoryReader reader;
    private final IndexSearcher searcher;
    private final int topK;
    private final int maxSnippetChars;
    private final int size;

    /** Indexes {@code docs} with the defaults: top 3, snippets up to 600 characters, BM25 k1 = 0.9, b = 0.4. */
    public SearchTool(List<Doc> docs) {
        this(docs, 3, 600, 0.9f, 0.4f);
    }

    /**
     * Indexes {@code docs}.
     *
     * @param topK            hits returned when the call does not say (Search-R1 uses 3)
     * @param maxSnippetChars cap on each hit's text (cut at a word boundary, marked with "…")
     * @param k1              BM25 term-frequency saturation
     * @param b               BM25 length normalization
     */
    public SearchTool(List<Doc> docs, int topK, int maxSnippetChars, float k1, float b) {
        if (docs == null) throw new IllegalArgumentException("docs must not be null");
        if (topK < 1 || topK > 1000) throw new IllegalArgumentException("topK must be in [1, 1000], got " + topK);
        if (maxSnippetChars < 16) throw new IllegalArgumentException("maxSnippetChars must be at least 16, got " + maxSnippetChars);
        if (!(k1 >= 0) || !(b >= 0 && b <= 1)) throw new IllegalArgumentException("BM25 needs k1 >= 0 and b in [0, 1], got k1=" + k1 + ", b=" + b);
        this.topK = topK;
        this.maxSnippetChars = maxSnippetChars;
        BM25Similarity sim = new BM25Similarity(k1, b);
        Set<String> ids = new LinkedHashSet<>();
        try (IndexWriter w = new IndexWriter(directory, new IndexWriterConfig(analyzer).setSimilarity(sim))) {
            for (Doc d : docs) {
                if (d == null) throw new IllegalArgumentException("docs must not contain null");
                if (!ids.add(d.id())) throw new IllegalArgumentException("duplicate document id " + d.id());
                Document doc = new Document();
                doc.add(new StringField("id", d.id(), Field.Store.YES));
                doc.add(new StoredField("title", d.title()));
                doc.add(new StoredField("text", d.text()));
                doc.add(new TextField("contents", d.title() + "\n" + d.text(), Field.Store.NO));
                w.addDocument(doc);
            }
            w.commit();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot build the search index", e);
        }
        try {
            this.reader = DirectoryReader.open(directory);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot open the search index", e);
        }
        this.searcher = new IndexSearcher(reader);
        this.searcher.setSimilarity(sim);
        this.size = docs.size();
    }

    /** Indexes a JSONL corpus with the defaults (see {@link #SearchTool(List)}). */
    public static SearchTool fromJsonl(Path corpus) {
        return new SearchTool(readJsonl(corpus));
    }

    /**
     * Reads a JSONL corpus: one {@code {"id", "title", "text"}} object per line (id may be a number;
     * blank lines are skipped).
     *
     * @throws IllegalArgumentException naming the line of a malformed record
     */
    public static List<Doc> readJsonl(Path corpus) {
        List<Doc> docs = new ArrayList<>();
        try (BufferedReader r = Files.newBufferedReader(corpus, StandardCharsets.UTF_8)) {
            String line;
            int no = 0;
            while ((line = r.readLine()) != null) {
                no++;
                if (line.isBlank()) continue;
                JsonNode n;
                try {
                    n = JSON.readTree(line);
                } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
                    throw new IllegalArgumentException(corpus + ":" + no + ": not JSON: " + e.getOriginalMessage(), e);
                }
                if (n == null || !n.isObject() || n.get("id") == null || n.get("text") == null || !n.get("text").isTextual()) {
                    throw new IllegalArgumentException(corpus + ":" + no + ": expected {\"id\", \"title\", \"text\"}, got "
                            + (line.length() > 100 ? line.substring(0, 100) + "…" : line));
                }
                JsonNode title = n.get("title");
                docs.add(new Doc(n.get("id").asText(), title == null || title.isNull() ? "" : title.asText(), n.get("text").asText()));
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read corpus " + corpus, e);
        }
        return docs;
    }

    /** Number of indexed documents. */
    public int size() {
        return size;
    }

    @Override
    public String name() {
        return "search";
    }

    @Override
    public String description() {
        return "Searches a local document collection (BM25 keyword search) and returns the " + topK
                + " best passages as 'Doc i(Title: ...) text'. Use specific keywords.";
    }

    @Override
    public String parametersSchema() {
        return "{\"type\":\"object\",\"properties\":{\"query\":{\"type\":\"string\",\"description\":\"search keywords\"},"
                + "\"top_k\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":50}},\"required\":[\"query\"]}";
    }

    @Override
    public Observation call(String arguments) {
        String query = arguments == null ? "" : arguments.strip();
        int k = topK;
        if (query.startsWith("{")) {
            try {
                JsonNode n = JSON.readTree(query);
                if (n != null && n.isObject()) {
                    JsonNode q = n.get("query");
                    if (q == null || !q.isTextual()) return Observation.failure("Error: the arguments need a string field \"query\"", null);
                    query = q.asText();
                    JsonNode kk = n.get("top_k");
                    if (kk != null) {
                        if (!kk.canConvertToInt() || kk.asInt() < 1 || kk.asInt() > 50) {
                            return Observation.failure("Error: top_k must be an integer in [1, 50], got " + kk, null);
                        }
                        k = kk.asInt();
                    }
                }
            } catch (IOException e) {
                // not JSON: search for the text as written
            }
        }
        if (query.isBlank()) return Observation.failure("Error: empty search query", null);
        List<Hit> hits = search(query, k);
        if (hits.isEmpty()) return Observation.ok("No results found for: " + query + "\n", hits);
        return Observation.ok(format(hits), hits);
    }

    /** The best {@code k} documents for {@code query} by BM25 (fewer when fewer match; none for a query of stop words only). */
    public List<Hit> search(String query, int k) {
        if (query == null) throw new IllegalArgumentException("query must not be null");
        if (k < 1) throw new IllegalArgumentException("k must be positive, got " + k);
        BooleanQuery.Builder q = new BooleanQuery.Builder();
        int terms = 0;
        try (TokenStream ts = analyzer.tokenStream("contents", query)) {
            CharTermAttribute term = ts.addAttribute(CharTermAttribute.class);
            ts.reset();
            while (ts.incrementToken() && terms < MAX_QUERY_TERMS) {
                q.add(new TermQuery(new Term("contents", term.toString())), BooleanClause.Occur.SHOULD);
                terms++;
            }
            ts.end();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        if (terms == 0) return List.of();
        try {
            ScoreDoc[] top = searcher.search(q.build(), Math.min(k, Math.max(1, size))).scoreDocs;
            List<Hit> hits = new ArrayList<>(top.length);
            for (int i = 0; i < top.length; i++) {
                Document d = searcher.storedFields().document(top[i].doc);
                hits.add(new Hit(i + 1, d.get("id"), d.get("title"), snippet(d.get("text")), top[i].score));
            }
            return hits;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Search-R1's format: {@code Doc i(Title: title) text} per hit, each line ended by a newline. */
    public static String format(List<Hit> hits) {
        StringBuilder sb = new StringBuilder();
        for (Hit h : hits) sb.append("Doc ").append(h.rank()).append("(Title: ").append(h.title()).append(") ").append(h.text()).append('\n');
        return sb.toString();
    }

    private String snippet(String text) {
        String t = text.replaceAll("\\s+", " ").strip();
        if (t.length() <= maxSnippetChars) return t;
        int cut = t.lastIndexOf(' ', maxSnippetChars - 1);
        if (cut < maxSnippetChars / 2) cut = maxSnippetChars - 1;
        return t.substring(0, cut) + "…";
    }

    @Override
    public void close() {
        try {
            reader.close();
            directory.close();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
