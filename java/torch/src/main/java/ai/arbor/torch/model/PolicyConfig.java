package ai.arbor.torch.model;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * Shape of the {@link ReferencePolicy}: a decoder-only transformer of the Llama / Qwen2 / Qwen3 dense
 * families (pre-norm RMSNorm, rotary positions, SwiGLU MLP, causal multi-head attention with optional
 * grouped-query heads, tied or untied LM head). The project's own character model is one configuration
 * of it (no biases, no q/k norms, {@code headDim = dModel / heads}). {@link HfCheckpoint} maps it to and
 * from a Hugging Face {@code config.json}.
 *
 * @param vocab          vocabulary size V (rows of the embedding and the LM head); may exceed the tokenizer's
 * @param dModel         residual width D (HF {@code hidden_size})
 * @param layers         number of transformer blocks
 * @param heads          query heads H
 * @param kvHeads        key/value heads; {@code heads % kvHeads == 0} (1 = multi-query, = heads = plain MHA)
 * @param ffnDim         hidden width of the SwiGLU MLP
 * @param maxSeq         longest sequence (positions 0 … maxSeq-1) the rotary table and the KV cache accept
 * @param ropeTheta      rotary base θ (inverse frequencies θ^(-2i/headDim))
 * @param normEps        ε inside the RMSNorm square root
 * @param tiedEmbeddings true: the LM head reuses the token embedding matrix
 * @param seed           seed of the parameter initialisation (same seed → same weights on every device)
 * @param headDim        per-head width d_h (even, for the rotary halves); independent of {@code dModel / heads}
 * @param qkvBias        biases on the q, k and v projections (Qwen2; Llama/Qwen3 {@code attention_bias})
 * @param outputBias     a bias on the output projection (Llama/Qwen3 {@code attention_bias}; never Qwen2)
 * @param qkNorm         Qwen3's per-head RMSNorm of q and k over d_h, before the rotary positions
 * @param ropeScaling    Llama 3's frequency-dependent rotary scaling, or null for none
 */
public record PolicyConfig(int vocab, int dModel, int layers, int heads, int kvHeads, int ffnDim, int maxSeq,
                           double ropeTheta, double normEps, boolean tiedEmbeddings, long seed,
                           int headDim, boolean qkvBias, boolean outputBias, boolean qkNorm, RopeScaling ropeScaling) {

    private static final ObjectMapper JSON = new ObjectMapper()
            .configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, true)
            .configure(DeserializationFeature.FAIL_ON_MISSING_CREATOR_PROPERTIES, true)
            .configure(DeserializationFeature.FAIL_ON_NULL_FOR_PRIMITIVES, true);

    /**
     * Llama 3's rotary scaling ({@code rope_scaling} of type "llama3"): with wavelength λ_i = 2π / f_i of
     * the inverse frequency f_i, λ_L = L₀ / lowFreqFactor, λ_H = L₀ / highFreqFactor (L₀ the original
     * context): f_i stays for λ_i < λ_H, becomes f_i / factor for λ_i > λ_L, and in between is
     * {@code (1 − s) f_i / factor + s f_i} with {@code s = (L₀ / λ_i − lowFreqFactor) / (highFreqFactor − lowFreqFactor)}.
     */
    public record RopeScaling(double factor, double lowFreqFactor, double highFreqFactor, int originalMaxPositions) {
        public RopeScaling {
            if (!(factor >= 1) || Double.isInfinite(factor)) throw new IllegalArgumentException("rope_scaling factor must be >= 1, got " + factor);
            if (!(lowFreqFactor > 0) || !(highFreqFactor > lowFreqFactor) || Double.isInfinite(highFreqFactor))
                throw new IllegalArgumentException("rope_scaling needs 0 < low_freq_factor < high_freq_factor, got "
                        + lowFreqFactor + " and " + highFreqFactor);
            if (originalMaxPositions < 1)
                throw new IllegalArgumentException("rope_scaling original_max_position_embeddings must be >= 1, got " + originalMaxPositions);
        }

        /** The scaled inverse frequency of one rotary pair. */
        public double scale(double invFreq) {
            double wavelen = 2 * Math.PI / invFreq;
            double lowWavelen = originalMaxPositions / lowFreqFactor, highWavelen = originalMaxPositions / highFreqFactor;
            if (wavelen < highWavelen) return invFreq;
            if (wavelen > lowWavelen) return invFreq / factor;
            double s = (originalMaxPositions / wavelen - lowFreqFactor) / (highFreqFactor - lowFreqFactor);
            return (1 - s) * invFreq / factor + s * invFreq;
        }
    }

    public PolicyConfig {
        positive("vocab", vocab);
        positive("dModel", dModel);
        positive("layers", layers);
        positive("heads", heads);
        positive("kvHeads", kvHeads);
        positive("ffnDim", ffnDim);
        positive("maxSeq", maxSeq);
        positive("headDim", headDim);
        if (headDim % 2 != 0)
            throw new IllegalArgumentException("headDim must be even for rotary positions, got " + headDim);
        if (heads % kvHeads != 0)
            throw new IllegalArgumentException("heads (" + heads + ") must be a multiple of kvHeads (" + kvHeads + ")");
        if (!(ropeTheta > 1) || Double.isInfinite(ropeTheta))
            throw new IllegalArgumentException("ropeTheta must be a finite number > 1, got " + ropeTheta);
        if (!(normEps > 0) || Double.isInfinite(normEps))
            throw new IllegalArgumentException("normEps must be a finite number > 0, got " + normEps);
    }

    /**
     * The project's own model family: {@code headDim = dModel / heads}, no biases, no q/k norms, no rotary
     * scaling (the configuration of checkpoints written before the other fields existed).
     */
    public PolicyConfig(int vocab, int dModel, int layers, int heads, int kvHeads, int ffnDim, int maxSeq,
                        double ropeTheta, double normEps, boolean tiedEmbeddings, long seed) {
        this(vocab, dModel, layers, heads, kvHeads, ffnDim, maxSeq, ropeTheta, normEps, tiedEmbeddings, seed,
                splitHeads(dModel, heads), false, false, false, null);
    }

    /** A tiny configuration for tests and laptop runs: 78 k parameters for a 64-token vocabulary (d=64, 2 layers, 4 query / 2 KV heads). */
    public static PolicyConfig tiny(int vocab) {
        return new PolicyConfig(vocab, 64, 2, 4, 2, 128, 512, 10_000.0, 1e-6, true, 1234);
    }

    /** Query heads sharing one key/value head. */
    public int groupSize() {
        return heads / kvHeads;
    }

    /** Number of scalar parameters. */
    public long parameterCount() {
        long hd = headDim;
        long attn = (long) dModel * heads * hd + 2L * dModel * kvHeads * hd + (long) heads * hd * dModel
                + (qkvBias ? (long) (heads + 2 * kvHeads) * hd : 0) + (outputBias ? dModel : 0) + (qkNorm ? 2 * hd : 0);
        long mlp = 3L * dModel * ffnDim;
        long perLayer = attn + mlp + 2L * dModel;
        long embed = (long) vocab * dModel;
        return embed + (tiedEmbeddings ? 0 : embed) + layers * perLayer + dModel;
    }

    /** This configuration with another seed. */
    public PolicyConfig withSeed(long newSeed) {
        return new PolicyConfig(vocab, dModel, layers, heads, kvHeads, ffnDim, maxSeq, ropeTheta, normEps, tiedEmbeddings, newSeed,
                headDim, qkvBias, outputBias, qkNorm, ropeScaling);
    }

    /** This configuration with another maximum sequence length. */
    public PolicyConfig withMaxSeq(int newMaxSeq) {
        return new PolicyConfig(vocab, dModel, layers, heads, kvHeads, ffnDim, newMaxSeq, ropeTheta, normEps, tiedEmbeddings, seed,
                headDim, qkvBias, outputBias, qkNorm, ropeScaling);
    }

    /** The JSON form stored in a checkpoint's {@code __metadata__}. */
    public String toJson() {
        try {
            return JSON.writeValueAsString(this);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("cannot serialise " + this, e);
        }
    }

    /**
     * Parses {@link #toJson()}; unknown or missing fields are an error, except that the fields after
     * {@code seed} take the defaults of the project's own family when absent (checkpoints written before
     * they existed).
     */
    public static PolicyConfig fromJson(String json) {
        try {
            com.fasterxml.jackson.databind.JsonNode tree = JSON.readTree(json);
            if (tree instanceof com.fasterxml.jackson.databind.node.ObjectNode o && !o.has("headDim")) {
                if (o.path("dModel").isInt() && o.path("heads").isInt() && o.get("heads").asInt() > 0)
                    o.put("headDim", splitHeads(o.get("dModel").asInt(), o.get("heads").asInt()));
                if (!o.has("qkvBias")) o.put("qkvBias", false);
                if (!o.has("outputBias")) o.put("outputBias", false);
                if (!o.has("qkNorm")) o.put("qkNorm", false);
                if (!o.has("ropeScaling")) o.putNull("ropeScaling");
            }
            return JSON.treeToValue(tree, PolicyConfig.class);
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException("not a PolicyConfig JSON: " + e.getOriginalMessage() + " in " + json, e);
        }
    }

    private static int splitHeads(int dModel, int heads) {
        if (heads > 0 && dModel % heads != 0)
            throw new IllegalArgumentException("dModel (" + dModel + ") must be a multiple of heads (" + heads + ")");
        if (heads > 0 && (dModel / heads) % 2 != 0)
            throw new IllegalArgumentException("head dimension dModel/heads must be even for rotary positions, got " + dModel / heads);
        return heads > 0 ? dModel / heads : 0;
    }

    private static void positive(String name, int value) {
        if (value <= 0) throw new IllegalArgumentException(name + " must be > 0, got " + value);
    }
}
