package ai.arbor.rollout;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A Hugging Face {@code tokenizer.json} (BPE, byte-level BPE, WordPiece, Unigram — whatever the Rust
 * {@code tokenizers} library reads) through DJL's {@code ai.djl.huggingface:tokenizers} binding.
 *
 * <p>DJL's jar carries the native library for linux-x86_64/aarch64, macOS and Windows; on first use it is
 * extracted to {@code ~/.djl.ai/tokenizers/} (override with the {@code DJL_CACHE_DIR} environment variable).
 * Nothing is downloaded: this works offline.
 *
 * <p>Special tokens are the {@code added_tokens} flagged {@code "special": true} in the file. The EOS token
 * is, in order: the one named by the caller; {@code eos_token} of a {@code tokenizer_config.json} next to
 * the file; the first of {@code <|endoftext|>, <|im_end|>, </s>, <eos>, <|eot_id|>} present. The BOS token
 * is the config's {@code bos_token} ({@code null} there: none, as for Qwen), else the first added token of
 * {@code <s>, <bos>, <|begin_of_text|>}. Close it to free the native handle.
 */
public final class HuggingFaceTokenizer implements Tokenizer, AutoCloseable {
    private static final List<String> EOS_GUESSES = List.of("<|endoftext|>", "<|im_end|>", "</s>", "<eos>", "<|eot_id|>");
    private static final List<String> PAD_GUESSES = List.of("<|endoftext|>", "<pad>", "[PAD]", "<|pad|>");
    private static final List<String> BOS_GUESSES = List.of("<s>", "<bos>", "<|begin_of_text|>");

    private final ai.djl.huggingface.tokenizers.HuggingFaceTokenizer djl;
    private final int vocabSize;
    private final Set<Integer> specials;
    private final Map<String, Integer> addedTokens;
    private final Map<String, Integer> vocab;
    private final int eos, pad, bos;

    private HuggingFaceTokenizer(ai.djl.huggingface.tokenizers.HuggingFaceTokenizer djl, int vocabSize, Set<Integer> specials,
                                 Map<String, Integer> addedTokens, Map<String, Integer> vocab, int eos, int pad, int bos) {
        this.djl = djl;
        this.vocabSize = vocabSize;
        this.specials = specials;
        this.addedTokens = addedTokens;
        this.vocab = vocab;
        this.eos = eos;
        this.pad = pad;
        this.bos = bos;
    }

    /** Loads {@code tokenizer.json} (or a directory holding one), guessing the EOS token (see class doc). */
    public static HuggingFaceTokenizer load(Path path) throws IOException {
        return load(path, null);
    }

    /**
     * Loads {@code tokenizer.json} (or a directory holding one).
     *
     * @param eosToken the EOS token's text, or null to find it (see class doc)
     * @throws IllegalArgumentException when the file is not a tokenizer.json or {@code eosToken} is not in it
     */
    public static HuggingFaceTokenizer load(Path path, String eosToken) throws IOException {
        if (path == null) throw new IllegalArgumentException("path must not be null");
        Path file = Files.isDirectory(path) ? path.resolve("tokenizer.json") : path;
        if (!Files.isRegularFile(file)) throw new IllegalArgumentException("no tokenizer.json at " + file);
        ObjectMapper json = new ObjectMapper();
        JsonNode root;
        try {
            root = json.readTree(file.toFile());
        } catch (IOException e) {
            throw new IllegalArgumentException(file + " is not valid JSON: " + e.getMessage(), e);
        }
        JsonNode model = root.path("model");
        if (model.isMissingNode()) throw new IllegalArgumentException(file + " has no \"model\": not a Hugging Face tokenizer.json");

        Map<String, Integer> vocab = new HashMap<>();
        int maxId = -1;
        JsonNode v = model.path("vocab");
        if (v.isObject()) {                       // BPE, WordPiece, WordLevel: {token: id}
            for (Iterator<Map.Entry<String, JsonNode>> it = v.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> e = it.next();
                int id = e.getValue().asInt();
                vocab.put(e.getKey(), id);
                maxId = Math.max(maxId, id);
            }
        } else if (v.isArray()) {                 // Unigram: [[piece, score], ...], id = position
            for (int i = 0; i < v.size(); i++) {
                vocab.put(v.get(i).path(0).asText(), i);
                maxId = Math.max(maxId, i);
            }
        }
        Map<String, Integer> added = new HashMap<>();
        Set<Integer> specials = new HashSet<>();
        for (JsonNode t : root.path("added_tokens")) {
            int id = t.path("id").asInt();
            String content = t.path("content").asText();
            added.put(content, id);
            if (t.path("special").asBoolean(false)) specials.add(id);
            maxId = Math.max(maxId, id);
        }
        if (maxId < 0) throw new IllegalArgumentException(file + " has an empty vocabulary");

        String eosName = eosToken != null ? eosToken : configEos(json, file.resolveSibling("tokenizer_config.json"));
        int eos = -1;
        if (eosName != null) {
            eos = lookup(eosName, added, vocab);
            if (eos < 0) throw new IllegalArgumentException("EOS token " + eosName + " is not in " + file);
        } else {
            for (String g : EOS_GUESSES) if ((eos = lookup(g, added, vocab)) >= 0) break;
        }
        int pad = -1, bos = -1;
        for (String g : PAD_GUESSES) if ((pad = lookup(g, added, vocab)) >= 0) break;
        // BOS: the config's bos_token when it names one (Qwen's says null: none); else a guess among the added
        // tokens only — a plain vocabulary entry spelled "<s>" (Qwen has one) is text, not a BOS.
        JsonNode configBos = configField(json, file.resolveSibling("tokenizer_config.json"), "bos_token");
        String bosName = configBos == null ? null : configBos.isTextual() ? configBos.asText()
                : configBos.isObject() && configBos.path("content").isTextual() ? configBos.path("content").asText() : null;
        if (bosName != null) {
            if ((bos = lookup(bosName, added, vocab)) < 0) throw new IllegalArgumentException("BOS token " + bosName + " is not in " + file);
        } else if (configBos == null || configBos.isMissingNode()) {
            for (String g : BOS_GUESSES) if ((bos = lookup(g, added, Map.of())) >= 0) break;
        }

        // Explicit options: DJL's defaults add special tokens and may truncate; a rollout needs neither.
        Map<String, String> options = Map.of("addSpecialTokens", "false", "truncation", "false", "padding", "false");
        ai.djl.huggingface.tokenizers.HuggingFaceTokenizer djl = ai.djl.huggingface.tokenizers.HuggingFaceTokenizer.newInstance(file, options);
        return new HuggingFaceTokenizer(djl, maxId + 1, Set.copyOf(specials), Map.copyOf(added), Map.copyOf(vocab), eos, pad, bos);
    }

    private static String configEos(ObjectMapper json, Path config) {
        if (!Files.isRegularFile(config)) return null;
        try {
            JsonNode e = json.readTree(config.toFile()).path("eos_token");
            if (e.isTextual()) return e.asText();
            if (e.isObject() && e.path("content").isTextual()) return e.path("content").asText();
        } catch (IOException ignored) {
            // An unreadable config is not fatal: fall back to the common names.
        }
        return null;
    }

    /** A field of the config next to the tokenizer, or null when there is no readable config (missing node when it lacks the field). */
    private static JsonNode configField(ObjectMapper json, Path config, String field) {
        if (!Files.isRegularFile(config)) return null;
        try {
            return json.readTree(config.toFile()).path(field);
        } catch (IOException e) {
            return null;
        }
    }

    private static int lookup(String token, Map<String, Integer> added, Map<String, Integer> vocab) {
        Integer id = added.get(token);
        if (id == null) id = vocab.get(token);
        return id == null ? -1 : id;
    }

    @Override
    public int[] encode(String text) {
        if (text == null) throw new IllegalArgumentException("text must not be null");
        if (text.isEmpty()) return new int[0];
        long[] ids = djl.encode(text, false, false).getIds();
        int[] out = new int[ids.length];
        for (int i = 0; i < ids.length; i++) out[i] = Math.toIntExact(ids[i]);
        return out;
    }

    @Override
    public String decode(int[] ids, int from, int to) {
        if (ids == null) throw new IllegalArgumentException("ids must not be null");
        if (from < 0 || to > ids.length || from > to)
            throw new IllegalArgumentException("range [" + from + ", " + to + ") is invalid for " + ids.length + " ids");
        if (from == to) return "";
        long[] l = new long[to - from];
        for (int i = from; i < to; i++) {
            if (ids[i] < 0 || ids[i] >= vocabSize)
                throw new IllegalArgumentException("ids[" + i + "] = " + ids[i] + " is outside [0, " + vocabSize + ")");
            l[i - from] = ids[i];
        }
        return djl.decode(l, true);
    }

    @Override
    public int vocabSize() {
        return vocabSize;
    }

    @Override
    public int eosId() {
        return eos;
    }

    @Override
    public int padId() {
        return pad;
    }

    @Override
    public int bosId() {
        return bos;
    }

    @Override
    public boolean isSpecial(int id) {
        return specials.contains(id);
    }

    @Override
    public int tokenId(String token) {
        return token == null ? -1 : lookup(token, addedTokens, vocab);
    }

    @Override
    public void close() {
        djl.close();
    }
}
