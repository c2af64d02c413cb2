package ai.arbor.cli;

import ai.arbor.rollout.CharTokenizer;
import ai.arbor.torch.model.HfCheckpoint;
import ai.arbor.torch.model.PolicyConfig;
import ai.arbor.torch.model.ReferencePolicy;
import java.nio.file.Path;
import java.util.Locale;
import java.util.concurrent.Callable;
import org.bytedeco.pytorch.global.torch.ScalarType;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code arbor init-model}: a randomly initialised Llama / Qwen2 / Qwen3 model written as a Hugging Face
 * directory (config.json, safetensors, generation_config.json, the tokenizer's files), for
 * {@code arbor train/eval/serve --model DIR} and for transformers, vLLM and SGLang.
 */
@Command(name = "init-model", mixinStandardHelpOptions = true, sortOptions = false,
        description = {"Write a randomly initialised Llama / Qwen2 / Qwen3 model as a Hugging Face directory (docs/models.md)."})
public final class InitModelCommand implements Callable<Integer> {

    @Option(names = "--family", required = true, description = "llama, qwen2 or qwen3.")
    String family;

    @Option(names = "--out", required = true, description = "Directory to write (replaced if it exists).")
    Path out;

    @Option(names = "--tokenizer", description = "A directory with tokenizer.json (and tokenizer_config.json …): its files are copied; the vocabulary must fit.")
    Path tokenizer;

    @Option(names = "--vocab", description = "Embedding rows (default: the tokenizer's ids rounded up to a multiple of 64; without --tokenizer the character tokenizer's).")
    Integer vocab;

    @Option(names = "--hidden", defaultValue = "256", description = "hidden_size (default ${DEFAULT-VALUE}).")
    int hidden;

    @Option(names = "--layers", defaultValue = "4", description = "num_hidden_layers (default ${DEFAULT-VALUE}).")
    int layers;

    @Option(names = "--heads", defaultValue = "4", description = "num_attention_heads (default ${DEFAULT-VALUE}).")
    int heads;

    @Option(names = "--kv-heads", defaultValue = "2", description = "num_key_value_heads (default ${DEFAULT-VALUE}).")
    int kvHeads;

    @Option(names = "--head-dim", description = "head_dim (default hidden / heads; Qwen3 allows any even value).")
    Integer headDim;

    @Option(names = "--ffn", defaultValue = "768", description = "intermediate_size (default ${DEFAULT-VALUE}).")
    int ffn;

    @Option(names = "--max-positions", defaultValue = "4096", description = "max_position_embeddings (default ${DEFAULT-VALUE}).")
    int maxPositions;

    @Option(names = "--rope-theta", defaultValue = "1000000", description = "rope_theta (default ${DEFAULT-VALUE}).")
    double ropeTheta;

    @Option(names = "--rms-norm-eps", defaultValue = "1e-6", description = "rms_norm_eps (default ${DEFAULT-VALUE}).")
    double rmsNormEps;

    @Option(names = "--tie-word-embeddings", negatable = true, defaultValue = "true", fallbackValue = "true",
            description = "Share the embedding with the LM head (default ${DEFAULT-VALUE}; --no-tie-word-embeddings for a separate head).")
    boolean tied;

    @Option(names = "--attention-bias", description = "Llama / Qwen3: biases on q, k, v and o (Qwen2 always has q/k/v biases).")
    boolean attentionBias;

    @Option(names = "--dtype", defaultValue = "float32", description = "Stored dtype: float32, bfloat16 or float16 (default ${DEFAULT-VALUE}).")
    String dtype;

    @Option(names = "--max-shard-mb", defaultValue = "2048", description = "Largest safetensors shard in MiB (default ${DEFAULT-VALUE}).")
    long maxShardMb;

    @Option(names = "--bos-id", description = "bos_token_id written to config.json and generation_config.json.")
    Integer bosId;

    @Option(names = "--eos-id", description = "eos_token_id written to config.json and generation_config.json.")
    Integer eosId;

    @Option(names = "--seed", defaultValue = "1", description = "Seed of the initialisation (default ${DEFAULT-VALUE}).")
    long seed;

    @Override
    public Integer call() throws Exception {
        HfCheckpoint.Family f = HfCheckpoint.Family.of(family);
        int v;
        if (vocab != null) {
            v = vocab;
        } else if (tokenizer != null) {
            int ids = HfCheckpoint.tokenizerVocab(tokenizer.resolve("tokenizer.json"));
            v = (ids + 63) / 64 * 64;
        } else {
            v = CharTokenizer.ascii().vocabSize();
        }
        if (heads < 1) throw new IllegalArgumentException("--heads must be >= 1, got " + heads);
        int hd = headDim != null ? headDim : hidden / heads;
        if (headDim == null && hidden % heads != 0)
            throw new IllegalArgumentException("--hidden " + hidden + " is not a multiple of --heads " + heads + ": give --head-dim");
        PolicyConfig config = f.config(v, hidden, layers, heads, kvHeads, hd, ffn, maxPositions, ropeTheta, rmsNormEps, tied, attentionBias, seed);
        HfCheckpoint.SaveOptions opts = HfCheckpoint.SaveOptions.defaults().withStoreAs(storeAs(dtype))
                .withMaxShardBytes(Math.multiplyExact(maxShardMb, 1L << 20)).withTokenizer(tokenizer).withSpecialTokens(bosId, eosId);
        try (ReferencePolicy policy = ReferencePolicy.create(config)) {
            HfCheckpoint.save(policy, out, opts);
        }
        System.out.printf(Locale.ROOT, "arbor init-model: %s, %,d parameters (vocab %d, hidden %d, %d layers, %d/%d heads of %d, ffn %d) -> %s%n",
                f.architecture(), config.parameterCount(), v, hidden, layers, heads, kvHeads, hd, ffn, out);
        return 0;
    }

    static ScalarType storeAs(String name) {
        return switch (name.trim().toLowerCase(Locale.ROOT)) {
            case "float32", "fp32", "f32" -> ScalarType.Float;
            case "bfloat16", "bf16" -> ScalarType.BFloat16;
            case "float16", "fp16", "f16", "half" -> ScalarType.Half;
            default -> throw new IllegalArgumentException("--dtype must be float32, bfloat16 or float16, got '" + name + "'");
        };
    }
}
