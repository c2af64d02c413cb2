package ai.arbor.torch.model;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * Shape of the {@link ReferencePolicy}: a decoder-only transformer in the Llama/Qwen layout
 * (pre-norm RMSNorm, rotary positions, SwiGLU MLP, causal multi-head attention with optional
 * grouped-query heads, tied or untied LM head).
 *
 * @param vocab          vocabulary size V (rows of the embedding and the LM head)
 * @param dModel         residual width D; {@code dModel = heads * headDim}
 * @param layers         number of transformer blocks
 * @param heads          query heads H
 * @param kvHeads        key/value heads; {@code heads % kvHeads == 0} (1 = multi-query, = heads = plain MHA)
 * @param ffnDim         hidden width of the SwiGLU MLP
 * @param maxSeq         longest sequence (positions 0 … maxSeq-1) the rotary table and the KV cache accept
 * @param ropeTheta      rotary base θ (inverse frequencies θ^(-2i/headDim))
 * @param normEps        ε inside the RMSNorm square root
 * @param tiedEmbeddings true: the LM head reuses the token embedding matrix
 * @param seed           seed of the parameter initialisation (same seed → same weights on every device)
 */
public record PolicyConfig(int vocab, int dModel, int layers, int heads, int kvHeads, int ffnDim, int maxSeq,
                           double ropeTheta, double normEps, boolean tiedEmbeddings, long seed) {

    private static final ObjectMapper JSON = new ObjectMapper()
            .configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, true)
            .configure(DeserializationFeature.FAIL_ON_MISSING_CREATOR_PROPERTIES, true)
            .configure(DeserializationFeature.FAIL_ON_NULL_CREATOR_PROPERTIES, true);

    public PolicyConfig {
        positive("vocab", vocab);
        positive("dModel", dModel);
        positive("layers", layers);
        positive("heads", heads);
        positive("kvHeads", kvHeads);
        positive("ffnDim", ffnDim);
        positive("maxSeq", maxSeq);
        if (dModel % heads != 0)
            throw new IllegalArgumentException("dModel (" + dModel + ") must be a multiple of heads (" + heads + ")");
        if ((dModel / heads) % 2 != 0)
            throw new IllegalArgumentException("head dimension dModel/heads must be even for rotary positions, got " + dModel / heads);
        if (heads % kvHeads != 0)
            throw new IllegalArgumentException("heads (" + heads + ") must be a multiple of kvHeads (" + kvHeads + ")");
        if (!(ropeTheta > 1) || Double.isInfinite(ropeTheta))
            throw new IllegalArgumentException("ropeTheta must be a finite number > 1, got " + ropeTheta);
        if (!(normEps > 0) || Double.isInfinite(normEps))
            throw new IllegalArgumentException("normEps must be a finite number > 0, got " + normEps);
    }

    /** A tiny configuration for tests and laptop runs: 78 k parameters for a 64-token vocabulary (d=64, 2 layers, 4 query / 2 KV heads). */
    public static PolicyConfig tiny(int vocab) {
        return new PolicyConfig(vocab, 64, 2, 4, 2, 128, 512, 10_000.0, 1e-6, true, 1234);
    }

    /** Per-head width {@code dModel / heads}. */
    public int headDim() {
        return dModel / heads;
    }

    /** Query heads sharing one key/value head. */
    public int groupSize() {
        return heads / kvHeads;
    }

    /** Number of scalar parameters. */
    public long parameterCount() {
        long hd = headDim();
        long attn = (long) dModel * heads * hd + 2L * dModel * kvHeads * hd + (long) heads * hd * dModel;
        long mlp = 3L * dModel * ffnDim;
        long perLayer = attn + mlp + 2L * dModel;
        long embed = (long) vocab * dModel;
        return embed + (tiedEmbeddings ? 0 : embed) + layers * perLayer + dModel;
    }

    /** This configuration with another seed. */
    public PolicyConfig withSeed(long newSeed) {
        return new PolicyConfig(vocab, dModel, layers, heads, kvHeads, ffnDim, maxSeq, ropeTheta, normEps, tiedEmbeddings, newSeed);
    }

    /** This configuration with another maximum sequence length. */
    public PolicyConfig withMaxSeq(int newMaxSeq) {
        return new PolicyConfig(vocab, dModel, layers, heads, kvHeads, ffnDim, newMaxSeq, ropeTheta, normEps, tiedEmbeddings, seed);
    }

    /** The JSON form stored in a checkpoint's {@code __metadata__}. */
    public String toJson() {
        try {
            return JSON.writeValueAsString(this);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("cannot serialise " + this, e);
        }
    }

    /** Parses {@link #toJson()}; unknown or missing fields are an error. */
    public static PolicyConfig fromJson(String json) {
        try {
            return JSON.readValue(json, PolicyConfig.class);
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException("not a PolicyConfig JSON: " + e.getOriginalMessage() + " in " + json, e);
        }
    }

    private static void positive(String name, int value) {
        if (value <= 0) throw new IllegalArgumentException(name + " must be > 0, got " + value);
    }
}
