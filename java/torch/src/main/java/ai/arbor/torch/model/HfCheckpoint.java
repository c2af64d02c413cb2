package ai.arbor.torch.model;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * Hugging Face checkpoint directories of the Llama, Qwen2 and Qwen3 dense families ({@code LlamaForCausalLM},
 * {@code Qwen2ForCausalLM}, {@code Qwen3ForCausalLM}): {@code config.json}, {@code model.safetensors} or shards
 * {@code model-0000i-of-0000n.safetensors} with {@code model.safetensors.index.json}, {@code generation_config.json}
 * and the tokenizer's files, read into and written from a {@link ReferencePolicy}.
 *
 * <p>Loading reads every header first and checks every tensor's name, shape and dtype against the
 * configuration, then copies tensor by tensor from a memory map of the file straight into the parameter
 * (converted to the policy's dtype): the weights are in memory once, plus the page cache. A file that
 * fails a check is an {@link IllegalArgumentException} naming the file and the tensor, and no policy is
 * returned. Configuration fields the model does not implement (sliding-window layers, experts, other
 * {@code model_type}s, rotary scalings other than "llama3", MLP biases, partial rotary) are refused by name.
 *
 * <p>Writing uses the field names and defaults of the transformers configuration classes, so transformers,
 * vLLM and SGLang load the directory as the family it is.
 */
@SuppressWarnings("try") // PointerScope and NoGradGuard act through their try blocks
public final class HfCheckpoint {

    public static final String CONFIG = "config.json";
    public static final String WEIGHTS = "model.safetensors";
    public static final String INDEX = "model.safetensors.index.json";
    public static final String GENERATION_CONFIG = "generation_config.json";
    /** Files copied from a tokenizer directory when present (tokenizer.json is required). */
    public static final List<String> TOKENIZER_FILES = List.of("tokenizer.json", "tokenizer_config.json",
            "special_tokens_map.json", "added_tokens.json", "vocab.json", "merges.txt", "chat_template.jinja");

    /** The largest piece of a tensor mapped at once (a mapping spans at most 2 GiB); tests lower it. */
    static long mapBytes = 1L << 30;

    private static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

    private HfCheckpoint() {}

    /** A model family: its {@code model_type} and its {@code architectures} entry. */
    public enum Family {
        LLAMA("llama", "LlamaForCausalLM"), QWEN2("qwen2", "Qwen2ForCausalLM"), QWEN3("qwen3", "Qwen3ForCausalLM");

        private final String modelType;
        private final String architecture;

        Family(String modelType, String architecture) {
            this.modelType = modelType;
            this.architecture = architecture;
        }

        public String modelType() {
            return modelType;
        }

        public String architecture() {
            return architecture;
        }

        /** By {@code model_type} (llama, qwen2, qwen3; case-insensitive). */
        public static Family of(String modelType) {
            for (Family f : values()) if (f.modelType.equalsIgnoreCase(modelType)) return f;
            throw new IllegalArgumentException("model_type '" + modelType + "' is not supported (supported: llama, qwen2, qwen3)");
        }

        /**
         * The family a configuration is written as: q/k norms make it Qwen3; q/k/v biases without an output
         * bias make it Qwen2 (whose attention has exactly those); anything else is Llama.
         */
        public static Family of(PolicyConfig c) {
            if (c.qkNorm()) return QWEN3;
            if (c.qkvBias() && !c.outputBias()) return QWEN2;
            if (c.qkvBias() != c.outputBias())
                throw new IllegalArgumentException("no supported family has an output bias without q/k/v biases");
            return LLAMA;
        }

        /** The configuration of this family with these sizes (its biases and norms; no rotary scaling). */
        public PolicyConfig config(int vocab, int hidden, int layers, int heads, int kvHeads, int headDim, int ffn,
                                   int maxPositions, double ropeTheta, double rmsNormEps, boolean tied, boolean attentionBias, long seed) {
            boolean qkv = this == QWEN2 || attentionBias;
            boolean out = this != QWEN2 && attentionBias;
            PolicyConfig c = new PolicyConfig(vocab, hidden, layers, heads, kvHeads, ffn, maxPositions, ropeTheta, rmsNormEps, tied, seed,
                    headDim, qkv, out, this == QWEN3, null);
            checkWritable(c);
            return c;
        }
    }

    /** What {@link #save} writes besides the weights. */
    public record SaveOptions(ScalarType storeAs, long maxShardBytes, Path tokenizerDir, Integer bosTokenId, Integer eosTokenId) {
        public SaveOptions {
            if (storeAs == null) throw new IllegalArgumentException("storeAs is null");
            if (!Safetensors.Dtype.of(storeAs).isFloating())
                throw new IllegalArgumentException("checkpoint dtype must be floating point, got " + storeAs);
            if (maxShardBytes < 1) throw new IllegalArgumentException("maxShardBytes must be >= 1, got " + maxShardBytes);
        }

        /** bfloat16 (the families' release dtype), 2 GiB shards, no tokenizer, no special token ids. */
        public static SaveOptions defaults() {
            return new SaveOptions(ScalarType.BFloat16, 2L << 30, null, null, null);
        }

        public SaveOptions withStoreAs(ScalarType t) {
            return new SaveOptions(t, maxShardBytes, tokenizerDir, bosTokenId, eosTokenId);
        }

        public SaveOptions withMaxShardBytes(long b) {
            return new SaveOptions(storeAs, b, tokenizerDir, bosTokenId, eosTokenId);
        }

        public SaveOptions withTokenizer(Path dir) {
            return new SaveOptions(storeAs, maxShardBytes, dir, bosTokenId, eosTokenId);
        }

        public SaveOptions withSpecialTokens(Integer bos, Integer eos) {
            return new SaveOptions(storeAs, maxShardBytes, tokenizerDir, bos, eos);
        }
    }

    // ------------------------------------------------------------------ config.json

    /** Parses and checks a {@code config.json}; the policy seed is 0 (the weights come from the files). */
    public static PolicyConfig readConfig(Path configJson) throws IOException {
        JsonNode root;
        try {
            root = JSON.readTree(Files.readString(configJson, StandardCharsets.UTF_8));
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException(configJson + ": not JSON: " + e.getOriginalMessage(), e);
        }
        if (root == null || !root.isObject()) throw new IllegalArgumentException(configJson + ": not a JSON object");
        try {
            return parseConfig(root);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(configJson + ": " + e.getMessage(), e);
        }
    }

    private static PolicyConfig parseConfig(JsonNode c) {
        if (!c.hasNonNull("model_type")) throw new IllegalArgumentException("no model_type");
        Family family = Family.of(c.get("model_type").asText());
        JsonNode arch = c.get("architectures");
        if (arch != null && !arch.isNull()) {
            boolean found = false;
            for (JsonNode a : arch) found |= a.asText().equals(family.architecture());
            if (!found) throw new IllegalArgumentException("architectures " + arch + " is not supported (" + family.architecture() + ")");
        }
        refuseIf(c, "quantization_config", c.hasNonNull("quantization_config"), "quantized weights are not supported");
        refuseIf(c, "use_sliding_window", c.path("use_sliding_window").asBoolean(false), "sliding-window attention is not supported");
        JsonNode layerTypes = c.get("layer_types");
        if (layerTypes != null && layerTypes.isArray())
            for (JsonNode t : layerTypes)
                if (!t.asText().equals("full_attention"))
                    throw new IllegalArgumentException("layer_types contains '" + t.asText() + "': only full_attention layers are supported");
        for (String moe : List.of("num_experts", "num_local_experts", "n_routed_experts"))
            refuseIf(c, moe, c.path(moe).asInt(0) > 0, "mixture-of-experts layers are not supported");
        refuseIf(c, "mlp_bias", c.path("mlp_bias").asBoolean(false), "MLP biases are not supported");
        String act = c.path("hidden_act").asText("silu");
        refuseIf(c, "hidden_act", !act.equals("silu"), "hidden_act '" + act + "' is not supported (silu)");
        refuseIf(c, "partial_rotary_factor", c.has("partial_rotary_factor") && c.get("partial_rotary_factor").asDouble() != 1.0,
                "partial rotary embeddings are not supported");

        int vocab = required(c, "vocab_size"), hidden = required(c, "hidden_size"), ffn = required(c, "intermediate_size");
        int layers = required(c, "num_hidden_layers"), heads = required(c, "num_attention_heads");
        int kvHeads = c.hasNonNull("num_key_value_heads") ? required(c, "num_key_value_heads") : heads;
        // transformers' defaults: Qwen3Config.head_dim = 128; Llama and Qwen2 split the hidden size
        int headDim = c.hasNonNull("head_dim") ? required(c, "head_dim")
                : family == Family.QWEN3 ? 128 : splitHidden(hidden, heads);
        int maxPositions = c.hasNonNull("max_position_embeddings") ? required(c, "max_position_embeddings")
                : family == Family.LLAMA ? 2048 : 32768;
        double eps = c.hasNonNull("rms_norm_eps") ? c.get("rms_norm_eps").asDouble() : 1e-6;
        boolean tied = c.path("tie_word_embeddings").asBoolean(false);
        boolean attentionBias = c.path("attention_bias").asBoolean(false);
        // newer transformers keep rope_theta and the scaling in rope_parameters
        JsonNode ropeParams = c.get("rope_parameters");
        JsonNode scalingNode = ropeParams != null && !ropeParams.isNull() ? ropeParams : c.get("rope_scaling");
        double theta = c.hasNonNull("rope_theta") ? c.get("rope_theta").asDouble()
                : ropeParams != null && ropeParams.hasNonNull("rope_theta") ? ropeParams.get("rope_theta").asDouble() : 10_000.0;
        PolicyConfig.RopeScaling scaling = ropeScaling(scalingNode, ropeParams != null && !ropeParams.isNull() ? "rope_parameters" : "rope_scaling");
        boolean qkv = family == Family.QWEN2 || attentionBias;
        boolean out = family != Family.QWEN2 && attentionBias;
        return new PolicyConfig(vocab, hidden, layers, heads, kvHeads, ffn, maxPositions, theta, eps, tied, 0,
                headDim, qkv, out, family == Family.QWEN3, scaling);
    }

    private static PolicyConfig.RopeScaling ropeScaling(JsonNode s, String field) {
        if (s == null || s.isNull()) return null;
        if (!s.isObject()) throw new IllegalArgumentException(field + " must be an object or null, got " + s);
        String type = s.hasNonNull("rope_type") ? s.get("rope_type").asText() : s.path("type").asText("default");
        if (type.equals("default")) return null;
        if (!type.equals("llama3"))
            throw new IllegalArgumentException(field + ".rope_type '" + type + "' is not supported (default, llama3)");
        for (String k : List.of("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"))
            if (!s.hasNonNull(k) || !s.get(k).isNumber()) throw new IllegalArgumentException(field + " of type llama3 needs a number " + k);
        return new PolicyConfig.RopeScaling(s.get("factor").asDouble(), s.get("low_freq_factor").asDouble(),
                s.get("high_freq_factor").asDouble(), s.get("original_max_position_embeddings").asInt());
    }

    /** The {@code config.json} text transformers expects for {@code c} (its family from {@link Family#of(PolicyConfig)}). */
    public static String configJson(PolicyConfig c, ScalarType storedAs, Integer bos, Integer eos) {
        checkWritable(c);
        Family f = Family.of(c);
        ObjectNode o = JSON.createObjectNode();
        o.putArray("architectures").add(f.architecture());
        o.put("model_type", f.modelType());
        if (f != Family.QWEN2) o.put("attention_bias", c.outputBias());
        o.put("attention_dropout", 0.0);
        putId(o, "bos_token_id", bos);
        putId(o, "eos_token_id", eos);
        o.put("head_dim", c.headDim());
        o.put("hidden_act", "silu");
        o.put("hidden_size", c.dModel());
        o.put("initializer_range", 0.02);
        o.put("intermediate_size", c.ffnDim());
        o.put("max_position_embeddings", c.maxSeq());
        if (f == Family.LLAMA) {
            o.put("mlp_bias", false);
            o.put("pretraining_tp", 1);
        } else {
            o.put("max_window_layers", c.layers());
            o.put("use_sliding_window", false);
            o.putNull("sliding_window");
        }
        o.put("num_attention_heads", c.heads());
        o.put("num_hidden_layers", c.layers());
        o.put("num_key_value_heads", c.kvHeads());
        o.put("rms_norm_eps", c.normEps());
        PolicyConfig.RopeScaling s = c.ropeScaling();
        if (s == null) {
            o.putNull("rope_scaling");
        } else {
            ObjectNode r = o.putObject("rope_scaling");
            r.put("factor", s.factor());
            r.put("high_freq_factor", s.highFreqFactor());
            r.put("low_freq_factor", s.lowFreqFactor());
            r.put("original_max_position_embeddings", s.originalMaxPositions());
            r.put("rope_type", "llama3");
        }
        o.put("rope_theta", c.ropeTheta());
        o.put("tie_word_embeddings", c.tiedEmbeddings());
        o.put("torch_dtype", dtypeName(storedAs));
        o.put("transformers_version", "4.51.0");
        o.put("use_cache", true);
        o.put("vocab_size", c.vocab());
        return pretty(o);
    }

    /**
     * Refuses a configuration its family's reference code would not load as written: Qwen2's attention
     * (and older transformers and vLLM releases) take {@code head_dim = hidden_size / num_attention_heads}.
     */
    static void checkWritable(PolicyConfig c) {
        Family f = Family.of(c);
        if (f == Family.QWEN2 && (long) c.headDim() * c.heads() != c.dModel())
            throw new IllegalArgumentException("qwen2 needs head_dim = hidden_size / num_attention_heads, got head_dim " + c.headDim()
                    + " with hidden_size " + c.dModel() + " and " + c.heads() + " heads");
    }

    // ------------------------------------------------------------------ load

    /**
     * Loads a checkpoint directory into a new policy on {@code device} in {@code dtype}.
     *
     * @throws IllegalArgumentException naming the file (and tensor) of a missing, malformed or inconsistent
     *                                  piece; nothing stays allocated
     */
    public static ReferencePolicy load(Path dir, String device, ScalarType dtype) throws IOException {
        if (dir == null) throw new IllegalArgumentException("model directory is null");
        if (!Files.isDirectory(dir)) throw new IllegalArgumentException(dir + " is not a directory");
        Path configFile = dir.resolve(CONFIG);
        if (!Files.isRegularFile(configFile)) throw new IllegalArgumentException(dir + " has no " + CONFIG + ": not a Hugging Face model directory");
        PolicyConfig config = readConfig(configFile);
        Device dev = ReferencePolicy.resolveDevice(device);
        Map<Path, List<Safetensors.Entry>> plan = plan(dir, config);
        ReferencePolicy policy = ReferencePolicy.allocate(config, dev, dtype);
        try {
            copyWeights(plan, policy);
        } catch (IOException | RuntimeException e) {
            policy.close();
            throw e;
        }
        return policy;
    }

    /** The files to read and, per file, the entries to copy; every name, shape and dtype checked. */
    private static Map<Path, List<Safetensors.Entry>> plan(Path dir, PolicyConfig config) throws IOException {
        Map<String, long[]> want = expectedShapes(config);
        Map<String, Path> where = new LinkedHashMap<>();
        Path index = dir.resolve(INDEX), single = dir.resolve(WEIGHTS);
        if (Files.isRegularFile(index)) {
            JsonNode root;
            try {
                root = JSON.readTree(Files.readString(index, StandardCharsets.UTF_8));
            } catch (JsonProcessingException e) {
                throw new IllegalArgumentException(index + ": not JSON: " + e.getOriginalMessage(), e);
            }
            JsonNode map = root == null ? null : root.get("weight_map");
            if (map == null || !map.isObject()) throw new IllegalArgumentException(index + ": no weight_map object");
            for (Map.Entry<String, JsonNode> e : map.properties()) {
                String file = e.getValue().asText();
                Path p = dir.resolve(file).normalize();
                if (!e.getValue().isTextual() || !p.getParent().equals(dir.normalize()))
                    throw new IllegalArgumentException(index + ": tensor " + e.getKey() + " maps to '" + e.getValue() + "', not a file of " + dir);
                where.put(e.getKey(), p);
            }
        } else if (!Files.isRegularFile(single)) {
            throw new IllegalArgumentException(dir + " has neither " + WEIGHTS + " nor " + INDEX);
        }
        List<Path> files = where.isEmpty() ? List.of(single) : where.values().stream().distinct().toList();
        Map<Path, List<Safetensors.Entry>> plan = new LinkedHashMap<>();
        Map<String, Path> found = new TreeMap<>();
        for (Path file : files) {
            if (!Files.isRegularFile(file)) throw new IllegalArgumentException(file + " (listed in " + INDEX + ") does not exist");
            Safetensors.Header h = Safetensors.readHeader(file);
            List<Safetensors.Entry> copy = new ArrayList<>();
            for (Safetensors.Entry e : h.entries()) {
                if (ignorable(e.name(), config)) continue;
                if (!where.isEmpty() && !file.equals(where.get(e.name())))
                    throw new IllegalArgumentException(file + ": tensor " + e.name() + " is not mapped to this file by " + INDEX);
                long[] shape = want.get(e.name());
                if (shape == null) throw new IllegalArgumentException(file + ": unexpected tensor " + e.name() + " for this config.json");
                if (!e.dtype().isFloating())
                    throw new IllegalArgumentException(file + ": tensor " + e.name() + " has dtype " + e.dtype() + ", expected F32, BF16 or F16");
                if (!Arrays.equals(shape, e.shape()))
                    throw new IllegalArgumentException(file + ": tensor " + e.name() + " has shape " + Arrays.toString(e.shape())
                            + ", config.json implies " + Arrays.toString(shape));
                if (found.put(e.name(), file) != null) throw new IllegalArgumentException(file + ": tensor " + e.name() + " appears twice");
                copy.add(new Safetensors.Entry(e.name(), e.dtype(), e.shape(), h.dataStart() + e.begin(), h.dataStart() + e.end()));
            }
            plan.put(file, copy);
        }
        List<String> missing = want.keySet().stream().filter(n -> !found.containsKey(n)).toList();
        if (!missing.isEmpty()) {
            String first = missing.get(0);
            if (where.containsKey(first))
                throw new IllegalArgumentException(where.get(first) + ": tensor " + first + ", mapped to this file by " + INDEX
                        + ", is absent (missing: " + missing + ")");
            throw new IllegalArgumentException((where.isEmpty() ? single : index) + ": missing tensors " + missing);
        }
        return plan;
    }

    /** Tensors a checkpoint may hold that the model does not read: a tied head's copy, old rotary buffers. */
    private static boolean ignorable(String name, PolicyConfig c) {
        return (c.tiedEmbeddings() && name.equals(ReferencePolicy.LM_HEAD)) || name.endsWith(".rotary_emb.inv_freq");
    }

    private static Map<String, long[]> expectedShapes(PolicyConfig config) {
        // the policy's own parameter list is the one definition of the names and shapes; meta tensors cost nothing
        try (ReferencePolicy meta = ReferencePolicy.allocate(config, new Device("meta"), ScalarType.Float)) {
            Map<String, long[]> out = new LinkedHashMap<>();
            for (Map.Entry<String, Tensor> e : meta.namedParameters().entrySet()) out.put(e.getKey(), Tensors.shape(e.getValue()));
            return out;
        }
    }

    private static void copyWeights(Map<Path, List<Safetensors.Entry>> plan, ReferencePolicy policy) throws IOException {
        if (ByteOrder.nativeOrder() != ByteOrder.LITTLE_ENDIAN)
            throw new UnsupportedOperationException("safetensors I/O assumes a little-endian machine");
        Map<String, Tensor> params = policy.namedParameters();
        for (Map.Entry<Path, List<Safetensors.Entry>> f : plan.entrySet()) {
            try (FileChannel ch = FileChannel.open(f.getKey(), StandardOpenOption.READ);
                 NoGradGuard guard = new NoGradGuard()) {
                for (Safetensors.Entry e : f.getValue()) copyTensor(ch, e, params.get(e.name()));
            }
        }
    }

    /** Copies one tensor from the mapped file into {@code param}, a slab of leading-dimension rows at a time. */
    private static void copyTensor(FileChannel ch, Safetensors.Entry e, Tensor param) throws IOException {
        long bytes = e.end() - e.begin();
        if (bytes == 0) return;
        long rows = e.shape().length == 0 ? 1 : e.shape()[0];
        long rowBytes = bytes / rows;
        long rowsPerSlab = Math.max(1, mapBytes / rowBytes);
        long[] slabShape = e.shape().length == 0 ? new long[0] : e.shape().clone();
        for (long r0 = 0; r0 < rows; r0 += rowsPerSlab) {
            long n = Math.min(rowsPerSlab, rows - r0);
            if (n * rowBytes > Integer.MAX_VALUE)
                throw new IllegalArgumentException("tensor " + e.name() + " has rows of " + rowBytes + " bytes, too large to map");
            MappedByteBuffer map = ch.map(FileChannel.MapMode.READ_ONLY, e.begin() + r0 * rowBytes, n * rowBytes);
            try (PointerScope scope = new PointerScope()) {
                if (slabShape.length > 0) slabShape[0] = n;
                Tensor src = torch.from_blob(new BytePointer(map), slabShape,
                        Tensors.options(e.dtype().scalarType(), new Device("cpu")));
                Tensor dst = slabShape.length == 0 ? param : param.narrow(0, r0, n);
                dst.copy_(src);
                // the mapping must outlive the copy: nothing else holds `map` once the pointer has its address, and a
                // GC in between unmaps it (SIGSEGV in the copy kernel, seen once in a full test run)
                java.lang.ref.Reference.reachabilityFence(map);
            }
        }
    }

    // ------------------------------------------------------------------ save

    /**
     * Writes {@code policy} as a checkpoint directory: config.json, generation_config.json, the weights
     * ({@link SaveOptions#storeAs}; shards of at most {@link SaveOptions#maxShardBytes} with an index when
     * they do not fit one file) and the tokenizer's files. The directory is assembled beside {@code dir}
     * and moved into place, replacing an older one.
     */
    public static void save(ReferencePolicy policy, Path dir, SaveOptions options) throws IOException {
        if (policy == null || dir == null || options == null) throw new IllegalArgumentException("policy, dir and options are required");
        PolicyConfig c = policy.config();
        Path tokenizerJson = null;
        if (options.tokenizerDir() != null) {
            tokenizerJson = options.tokenizerDir().resolve("tokenizer.json");
            if (!Files.isRegularFile(tokenizerJson)) throw new IllegalArgumentException(options.tokenizerDir() + " has no tokenizer.json");
            int need = tokenizerVocab(tokenizerJson);
            if (need > c.vocab())
                throw new IllegalArgumentException(tokenizerJson + " has " + need + " token ids but the model's embedding has "
                        + c.vocab() + " rows (vocab_size must be >= the tokenizer's)");
        }
        String config = configJson(c, options.storeAs(), options.bosTokenId(), options.eosTokenId());
        Path parent = dir.toAbsolutePath().getParent();
        Files.createDirectories(parent);
        Path tmp = Files.createTempDirectory(parent, dir.getFileName() + ".tmp");
        try {
            Files.writeString(tmp.resolve(CONFIG), config, StandardCharsets.UTF_8);
            ObjectNode gen = JSON.createObjectNode();
            gen.put("_from_model_config", true);
            putId(gen, "bos_token_id", options.bosTokenId());
            putId(gen, "eos_token_id", options.eosTokenId());
            gen.put("transformers_version", "4.51.0");
            Files.writeString(tmp.resolve(GENERATION_CONFIG), pretty(gen), StandardCharsets.UTF_8);
            writeWeights(policy, tmp, options);
            if (options.tokenizerDir() != null)
                for (String name : TOKENIZER_FILES) {
                    Path src = options.tokenizerDir().resolve(name);
                    if (Files.isRegularFile(src)) Files.copy(src, tmp.resolve(name));
                }
            if (Files.exists(dir)) {
                Path old = Files.createTempDirectory(parent, dir.getFileName() + ".old");
                Files.move(dir, old.resolve("m"), StandardCopyOption.ATOMIC_MOVE);
                Files.move(tmp, dir, StandardCopyOption.ATOMIC_MOVE);
                deleteTree(old);
            } else {
                Files.move(tmp, dir, StandardCopyOption.ATOMIC_MOVE);
            }
        } catch (IOException | RuntimeException e) {
            deleteTree(tmp);
            throw e;
        }
    }

    private static void writeWeights(ReferencePolicy policy, Path dir, SaveOptions options) throws IOException {
        long elem = Safetensors.Dtype.of(options.storeAs()).bytes();
        List<List<String>> shards = new ArrayList<>();
        List<String> current = new ArrayList<>();
        long size = 0, total = 0;
        for (Map.Entry<String, Tensor> e : policy.namedParameters().entrySet()) {
            long bytes = e.getValue().numel() * elem;
            if (!current.isEmpty() && size + bytes > options.maxShardBytes()) {
                shards.add(current);
                current = new ArrayList<>();
                size = 0;
            }
            current.add(e.getKey());
            size += bytes;
            total += bytes;
        }
        shards.add(current);
        Map<String, String> weightMap = new TreeMap<>();
        for (int i = 0; i < shards.size(); i++) {
            String name = shards.size() == 1 ? WEIGHTS
                    : String.format(Locale.ROOT, "model-%05d-of-%05d.safetensors", i + 1, shards.size());
            try (PointerScope scope = new PointerScope()) {
                Map<String, Tensor> converted = new LinkedHashMap<>();
                for (String t : shards.get(i)) {
                    converted.put(t, policy.namedParameters().get(t).detach().to(new Device("cpu"), options.storeAs()));
                    weightMap.put(t, name);
                }
                Safetensors.write(dir.resolve(name), converted, Map.of("format", "pt"));
            }
        }
        if (shards.size() > 1) {
            ObjectNode index = JSON.createObjectNode();
            index.putObject("metadata").put("total_size", total);
            ObjectNode map = index.putObject("weight_map");
            weightMap.forEach(map::put);
            Files.writeString(dir.resolve(INDEX), pretty(index), StandardCharsets.UTF_8);
        }
    }

    /**
     * The number of token ids a tokenizer.json uses: one more than the largest id of its model vocabulary
     * and its added tokens (the embedding needs at least that many rows).
     */
    public static int tokenizerVocab(Path tokenizerJson) throws IOException {
        JsonNode root;
        try {
            root = JSON.readTree(Files.readString(tokenizerJson, StandardCharsets.UTF_8));
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException(tokenizerJson + ": not JSON: " + e.getOriginalMessage(), e);
        }
        long max = -1;
        JsonNode vocab = root.path("model").path("vocab");
        if (vocab.isObject()) for (JsonNode id : vocab) max = Math.max(max, id.asLong());
        else if (vocab.isArray()) max = vocab.size() - 1; // Unigram: a list of [piece, score]
        for (JsonNode t : root.path("added_tokens")) max = Math.max(max, t.path("id").asLong(-1));
        if (max < 0) throw new IllegalArgumentException(tokenizerJson + ": no model.vocab or added_tokens");
        return Math.toIntExact(max + 1);
    }

    // ------------------------------------------------------------------ helpers

    private static int required(JsonNode c, String field) {
        JsonNode v = c.get(field);
        if (v == null || !v.canConvertToInt() || !v.isIntegralNumber() || v.asInt() < 1)
            throw new IllegalArgumentException(field + " must be a positive integer, got " + v);
        return v.asInt();
    }

    private static int splitHidden(int hidden, int heads) {
        if (heads < 1 || hidden % heads != 0)
            throw new IllegalArgumentException("hidden_size " + hidden + " is not a multiple of num_attention_heads " + heads + " and head_dim is absent");
        return hidden / heads;
    }

    private static void refuseIf(JsonNode c, String field, boolean refuse, String why) {
        if (refuse) throw new IllegalArgumentException(field + " = " + c.get(field) + ": " + why);
    }

    private static void putId(ObjectNode o, String field, Integer id) {
        if (id == null) o.putNull(field);
        else o.put(field, id.intValue());
    }

    private static String dtypeName(ScalarType t) {
        ScalarType s = t.intern();
        if (s == ScalarType.BFloat16) return "bfloat16";
        if (s == ScalarType.Half) return "float16";
        if (s == ScalarType.Float) return "float32";
        if (s == ScalarType.Double) return "float64";
        throw new IllegalArgumentException("not a floating dtype: " + t);
    }

    private static String pretty(ObjectNode o) {
        try {
            return JSON.writeValueAsString(o) + "\n";
        } catch (JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }

    private static void deleteTree(Path p) throws IOException {
        if (!Files.exists(p)) return;
        try (Stream<Path> walk = Files.walk(p)) {
            for (Path q : walk.sorted(Comparator.reverseOrder()).toList()) Files.deleteIfExists(q);
        }
    }
}
