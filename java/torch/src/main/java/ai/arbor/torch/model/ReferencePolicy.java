package ai.arbor.torch.model;

import ai.arbor.kernels.NativeExit;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.DoubleOptional;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptional;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * The policy: a decoder-only transformer on the JavaCPP PyTorch preset, covering the Llama, Qwen2 and
 * Qwen3 dense families (Hugging Face layout, names and conventions; {@link HfCheckpoint} loads and
 * writes their checkpoint directories). The project's small character model is one configuration.
 *
 * <pre>
 *   h⁰ = E[x]                                         token embedding, E ∈ R^{V×D}
 *   for each block l:
 *     a  = RMSNorm(h; g_attn)                          RMSNorm(x; g) = x / sqrt(mean(x²) + ε) ⊙ g
 *     q  = a W_qᵀ + b_q, k = a W_kᵀ + b_k, v = a W_vᵀ + b_v     H query heads, K ≤ H key/value heads (GQA)
 *     q, k = RMSNorm(q; g_q), RMSNorm(k; g_k)          Qwen3 only, per head over d_h
 *     q, k = RoPE(q), RoPE(k)
 *     h += softmax(q kᵀ / sqrt(d_h) + causal mask) v W_oᵀ + b_o    query head j reads kv head ⌊j / (H/K)⌋
 *     m  = RMSNorm(h; g_mlp)
 *     h += (SiLU(m W_gateᵀ) ⊙ m W_upᵀ) W_downᵀ                SwiGLU (Shazeer 2020)
 *   logits = RMSNorm(h; g_final) W_lmᵀ                   W_lm = E when the embeddings are tied
 * </pre>
 * Biases: Qwen2 has b_q, b_k, b_v and no b_o; Llama / Qwen3 with {@code attention_bias} have all four.
 * The block is written once ({@code block}); the training forward and the cached decode differ only in
 * how attention reads keys and values.
 *
 * Rotary positions (Su et al. 2021, RoFormer) in the "rotate half" form of the Llama code: with
 * {@code x = [x₁, x₂]} split into halves and angles {@code θ_i(p) = p · f_i}, {@code f_i = ropeTheta^(-2i/d_h)}
 * (rescaled by {@link PolicyConfig.RopeScaling} for Llama 3), {@code RoPE(x, p) = [x₁ cos θ − x₂ sin θ, x₂ cos θ + x₁ sin θ]}.
 *
 * <p>Mixed precision: {@link #setAutocast} runs the forward under libtorch autocast (bf16 matmuls and
 * attention with fp32 accumulation, fp32 weights, residual stream and norms) — the GPU path. Long
 * sequences can trade compute for memory with {@link #forwardRecomputed} (activations recomputed per block).
 *
 * <p>Parameters are leaf tensors with {@code requires_grad}; {@link #forward} builds the libtorch
 * autograd graph, so a trainer calls {@code backward} on a loss (or {@code logits.backward(grad)}
 * with a kernel's gradient) and steps an {@link org.bytedeco.pytorch.AdamW} over {@link #parameters()}.
 * Generation goes through {@link #newDecodeBatch} (paged KV cache with prefix forking).
 *
 * <p>Ownership: the policy owns its parameters and frees them in {@link #close()}. Tensors returned
 * by its methods belong to the caller: they join the caller's innermost open {@link PointerScope}
 * if there is one, otherwise the caller closes them (or leaves them to the GC, outside hot loops).
 * Not thread-safe.
 */
@SuppressWarnings("try") // PointerScope and NoGradGuard act through their try blocks
public final class ReferencePolicy implements AutoCloseable {

    /** Tensor names of the Hugging Face Llama layout, used in checkpoints. */
    static final String EMBED = "model.embed_tokens.weight";
    static final String FINAL_NORM = "model.norm.weight";
    static final String LM_HEAD = "lm_head.weight";

    static {
        NativeExit.install(); // exiting during a forward or backward must not crash the JVM
    }

    private final PolicyConfig config;
    private final Device device;
    private final ScalarType dtype;
    private final boolean lowPrecision;
    private final LinkedHashMap<String, Tensor> params = new LinkedHashMap<>();
    private final Tensor embed;
    private final Tensor finalNorm;
    private final Tensor lmHead;
    private final Block[] blocks;
    private final Tensor ropeCos;
    private final Tensor ropeSin;
    private boolean closed;

    /** The weights of one transformer block; biases and q/k norms are null where the family has none. */
    private record Block(Tensor attnNorm, Tensor wq, Tensor bq, Tensor wk, Tensor bk, Tensor wv, Tensor bv,
                         Tensor qNorm, Tensor kNorm, Tensor wo, Tensor bo,
                         Tensor mlpNorm, Tensor wGate, Tensor wUp, Tensor wDown) {}

    /** Attention of one block: q [..., H, d_h], k and v [..., K, d_h] (after RoPE) → [..., H·d_h]. */
    private interface Attention {
        Tensor attend(int layer, Tensor q, Tensor k, Tensor v);
    }

    private ScalarType autocast;

    private ReferencePolicy(PolicyConfig config, Device device, ScalarType dtype, boolean initialise) {
        this.config = config;
        this.device = Tensors.own(device);
        this.dtype = dtype.intern();
        this.lowPrecision = Tensors.same(dtype, ScalarType.BFloat16) || Tensors.same(dtype, ScalarType.Half);
        int d = config.dModel(), hd = config.headDim(), f = config.ffnDim();
        double std = 0.02;
        // GPT-2 / Llama practice: residual-branch outputs scaled by 1/sqrt(2·layers) at init
        double residualStd = std / Math.sqrt(2.0 * config.layers());
        embed = param(EMBED, new long[] {config.vocab(), d}, std, initialise);
        blocks = new Block[config.layers()];
        for (int l = 0; l < config.layers(); l++) {
            String p = "model.layers." + l + ".";
            long qRows = (long) config.heads() * hd, kvRows = (long) config.kvHeads() * hd;
            boolean qkvBias = config.qkvBias(), norm = config.qkNorm();
            blocks[l] = new Block(
                    param(p + "input_layernorm.weight", new long[] {d}, -1, initialise),
                    param(p + "self_attn.q_proj.weight", new long[] {qRows, d}, std, initialise),
                    qkvBias ? param(p + "self_attn.q_proj.bias", new long[] {qRows}, 0, initialise) : null,
                    param(p + "self_attn.k_proj.weight", new long[] {kvRows, d}, std, initialise),
                    qkvBias ? param(p + "self_attn.k_proj.bias", new long[] {kvRows}, 0, initialise) : null,
                    param(p + "self_attn.v_proj.weight", new long[] {kvRows, d}, std, initialise),
                    qkvBias ? param(p + "self_attn.v_proj.bias", new long[] {kvRows}, 0, initialise) : null,
                    norm ? param(p + "self_attn.q_norm.weight", new long[] {hd}, -1, initialise) : null,
                    norm ? param(p + "self_attn.k_norm.weight", new long[] {hd}, -1, initialise) : null,
                    param(p + "self_attn.o_proj.weight", new long[] {d, qRows}, residualStd, initialise),
                    config.outputBias() ? param(p + "self_attn.o_proj.bias", new long[] {d}, 0, initialise) : null,
                    param(p + "post_attention_layernorm.weight", new long[] {d}, -1, initialise),
                    param(p + "mlp.gate_proj.weight", new long[] {f, d}, std, initialise),
                    param(p + "mlp.up_proj.weight", new long[] {f, d}, std, initialise),
                    param(p + "mlp.down_proj.weight", new long[] {d, f}, residualStd, initialise));
        }
        finalNorm = param(FINAL_NORM, new long[] {d}, -1, initialise);
        lmHead = config.tiedEmbeddings() ? embed : param(LM_HEAD, new long[] {config.vocab(), d}, std, initialise);
        // rotary table in double precision, cast once: cos/sin[p][i] of θ_i(p) = p · f_i, f_i = θ^(-2i/d_h) (scaled)
        int half = hd / 2, n = config.maxSeq();
        double[] invFreq = new double[half];
        for (int i = 0; i < half; i++) {
            invFreq[i] = Math.pow(config.ropeTheta(), -2.0 * i / hd);
            if (config.ropeScaling() != null) invFreq[i] = config.ropeScaling().scale(invFreq[i]);
        }
        double[] cos = new double[Math.multiplyExact(n, half)], sin = new double[n * half];
        for (int p = 0; p < n; p++)
            for (int i = 0; i < half; i++) {
                double angle = p * invFreq[i];
                cos[p * half + i] = Math.cos(angle);
                sin[p * half + i] = Math.sin(angle);
            }
        try (PointerScope scope = new PointerScope()) {
            ropeCos = Tensors.own(Tensors.doubles(cos, new long[] {n, half}, dtype, device));
            ropeSin = Tensors.own(Tensors.doubles(sin, new long[] {n, half}, dtype, device));
        }
    }

    /** A freshly initialised policy on the CPU in float32. */
    public static ReferencePolicy create(PolicyConfig config) {
        return create(config, "cpu", ScalarType.Float);
    }

    /**
     * A freshly initialised policy: weights N(0, 0.02²) (residual output projections N(0, 0.02²/(2·layers))),
     * norm gains 1, drawn from {@code config.seed()} in Java so the same seed gives the same weights on
     * every device.
     *
     * @param device "cpu", "cuda", "cuda:N", or "auto" (CUDA when available)
     * @param dtype  parameter type: Float for training; Double for numerical tests; BFloat16 / Half for
     *               inference (norms and softmax then run in float32)
     */
    public static ReferencePolicy create(PolicyConfig config, String device, ScalarType dtype) {
        if (config == null) throw new IllegalArgumentException("config is null");
        return new ReferencePolicy(config, resolveDevice(device), checkDtype(dtype), true);
    }

    /** A policy whose parameters are allocated but not initialised (a loader fills them). */
    static ReferencePolicy allocate(PolicyConfig config, Device device, ScalarType dtype) {
        return new ReferencePolicy(config, device, checkDtype(dtype), false);
    }

    /**
     * Loads a checkpoint: a Hugging Face model directory (config.json + safetensors, see {@link HfCheckpoint}),
     * or a file written by {@link #save} (its configuration comes from the file's metadata).
     */
    public static ReferencePolicy load(Path checkpoint, String device, ScalarType dtype) throws IOException {
        if (checkpoint == null) throw new IllegalArgumentException("the checkpoint path must not be null");
        if (!java.nio.file.Files.exists(checkpoint))
            throw new java.nio.file.NoSuchFileException(checkpoint.toString(), null,
                    "no such checkpoint (a Hugging Face model directory or a file written by ReferencePolicy.save)");
        if (java.nio.file.Files.isDirectory(checkpoint)) return HfCheckpoint.load(checkpoint, device, dtype);
        Device dev = resolveDevice(device);
        ScalarType type = checkDtype(dtype);
        try (Safetensors.Contents contents = Safetensors.read(checkpoint)) {
            String json = contents.metadata().get(CONFIG_KEY);
            if (json == null)
                throw new IllegalArgumentException(checkpoint + " has no '" + CONFIG_KEY + "' metadata: not a ReferencePolicy checkpoint");
            ReferencePolicy policy = new ReferencePolicy(PolicyConfig.fromJson(json), dev, type, false);
            try {
                policy.loadParameters(contents.tensors());
            } catch (RuntimeException e) {
                policy.close();
                throw e;
            }
            return policy;
        }
    }

    /** Metadata key holding the {@link PolicyConfig} JSON in a checkpoint. */
    public static final String CONFIG_KEY = "arbor.policy_config";

    /** Saves the parameters in float32 (see {@link #save(Path, ScalarType)}). */
    public void save(Path checkpoint) throws IOException {
        save(checkpoint, ScalarType.Float);
    }

    /**
     * Writes a safetensors checkpoint: every parameter under its Llama-layout name, stored as
     * {@code storeAs} (Float, BFloat16 or Half), and the configuration in {@code __metadata__}.
     */
    public void save(Path checkpoint, ScalarType storeAs) throws IOException {
        ensureOpen();
        Safetensors.Dtype stored = Safetensors.Dtype.of(storeAs);
        if (!stored.isFloating())
            throw new IllegalArgumentException("checkpoint dtype must be floating point, got " + storeAs);
        Map<String, String> meta = new LinkedHashMap<>();
        meta.put("format", "pt");
        meta.put(CONFIG_KEY, config.toJson());
        try (PointerScope scope = new PointerScope()) {
            Map<String, Tensor> converted = new LinkedHashMap<>();
            for (Map.Entry<String, Tensor> e : params.entrySet())
                converted.put(e.getKey(), e.getValue().detach().to(new Device("cpu"), storeAs));
            Safetensors.write(checkpoint, converted, meta);
        }
    }

    /**
     * Copies {@code source} into the parameters (converted to this policy's dtype and device); the
     * names and shapes must match exactly — a missing, extra or mis-shaped tensor is an error naming it.
     */
    public void loadParameters(Map<String, Tensor> source) {
        ensureOpen();
        List<String> missing = new ArrayList<>(), unexpected = new ArrayList<>();
        for (String name : params.keySet()) if (!source.containsKey(name)) missing.add(name);
        for (String name : source.keySet()) if (!params.containsKey(name)) unexpected.add(name);
        if (!missing.isEmpty() || !unexpected.isEmpty())
            throw new IllegalArgumentException("parameter names do not match: missing " + missing + ", unexpected " + unexpected);
        for (Map.Entry<String, Tensor> e : params.entrySet()) {
            long[] want = Tensors.shape(e.getValue()), got = Tensors.shape(source.get(e.getKey()));
            if (!java.util.Arrays.equals(want, got))
                throw new IllegalArgumentException("parameter " + e.getKey() + " has shape " + java.util.Arrays.toString(got)
                        + ", expected " + java.util.Arrays.toString(want));
        }
        try (NoGradGuard guard = new NoGradGuard(); PointerScope scope = new PointerScope()) {
            for (Map.Entry<String, Tensor> e : params.entrySet()) e.getValue().copy_(source.get(e.getKey()));
        }
    }

    public PolicyConfig config() {
        return config;
    }

    public Device device() {
        return device;
    }

    public ScalarType dtype() {
        return dtype;
    }

    /** Parameters by name (Llama layout), in a fixed order; the tensors stay owned by the policy. */
    public Map<String, Tensor> namedParameters() {
        return Collections.unmodifiableMap(params);
    }

    /** A new vector of the parameters for an optimizer (e.g. {@code new AdamW(policy.parameters(), opts)}). */
    public TensorVector parameters() {
        return new TensorVector(params.values().toArray(new Tensor[0]));
    }

    /**
     * Training forward: logits [B, T, V] of every position of {@code tokens} [B, T] (int64 or int32,
     * any device). Sequences in a batch start at position 0; right padding is harmless (causal
     * attention never looks forward) and is masked out by the loss.
     */
    public Tensor forward(Tensor tokens) {
        return scoped(() -> logits(hiddenInScope(tokens)));
    }

    /** Training forward from Java arrays: {@code tokens[b]} are the rows, all of one length. */
    public Tensor forward(int[][] tokens) {
        return scoped(() -> logits(hiddenInScope(tokenMatrix(tokens))));
    }

    /**
     * Logits only at selected positions, to save memory when the loss needs few of them:
     * {@code rows} (int64, 1-D) index the flattened [B·T] positions of {@code tokens}; the result is
     * a contiguous [rows, V] matrix (the layout the token-statistics kernels read in place).
     */
    public Tensor forwardRows(Tensor tokens, Tensor rows) {
        return scoped(() -> {
            Tensor h = hiddenInScope(tokens);
            Tensor flat = h.reshape(h.size(0) * h.size(1), h.size(2));
            Tensor idx = rows.to(device, ScalarType.Long);
            if (idx.dim() != 1) throw new IllegalArgumentException("rows must be 1-D, got " + idx.dim() + "-D");
            checkRange("row", idx, flat.size(0));
            return logits(flat.index_select(0, idx));
        });
    }

    /** Final hidden states [B, T, D] (after the last RMSNorm), for callers computing logits in chunks. */
    public Tensor hidden(Tensor tokens) {
        return scoped(() -> hiddenInScope(tokens));
    }

    /**
     * Tree-packed training forward (docs/algorithms.md §9): logits only at {@code rows} (as {@link #forwardRows})
     * of packed sequences {@code tokens} [B, T] whose slot t sits at rotary position {@code positions[b][t]} and
     * reads the keys of the slots {@code mask[b][t][·]} admits (bool [B, T, T]; each row must admit at least its
     * own slot). With the ancestor mask of a prefix trie and position ids = depth, every slot's logits equal those
     * of the unpacked sequences through it.
     */
    public Tensor forwardRows(Tensor tokens, Tensor rows, Tensor positions, Tensor mask) {
        return scoped(() -> {
            Tensor h = maskedHiddenInScope(tokens, positions, mask);
            Tensor flat = h.reshape(h.size(0) * h.size(1), h.size(2));
            Tensor idx = rows.to(device, ScalarType.Long);
            if (idx.dim() != 1) throw new IllegalArgumentException("rows must be 1-D, got " + idx.dim() + "-D");
            checkRange("row", idx, flat.size(0));
            return logits(flat.index_select(0, idx));
        });
    }

    /**
     * The inputs of a path-attention forward ({@link #forwardPathRows}): unique tokens computed once, attention
     * per sequence along its path (the layout of {@code ai.arbor.rl.TreePacking.PathAttention}).
     *
     * @param tokens     [U] token ids
     * @param positions  [U] rotary positions (depths)
     * @param queryIndex [n·Lq] per attention row the slots whose outputs it computes (padding: any slot)
     * @param keyIndex   [n·Lk] per attention row the slots it reads (padding: any slot, masked out)
     * @param mask       bool [n, Lq, Lk]: query j of row i reads key t (every row admits at least one key); null =
     *                   causal attention along each row's path (then {@code queryIndex} must equal {@code keyIndex},
     *                   Lq = Lk, given by {@code rows})
     * @param scatter    [U] per slot, its row in the flattened [n·Lq] attention output
     * @param rows       n, the attention rows (read when {@code mask} is null)
     */
    public record PathBatch(Tensor tokens, Tensor positions, Tensor queryIndex, Tensor keyIndex, Tensor mask, Tensor scatter, long rows) {}

    /**
     * Tree-packed training forward without a dense mask (docs/algorithms.md §9): logits [rows, V] at {@code rows}
     * (indices into the U slots). Projections, MLP and norms run once per unique slot; attention gathers each
     * row's queries and its path's keys and values ({@code index_select}, whose backward adds into the shared
     * slots), so its cost is that of the unpacked sequences.
     */
    public Tensor forwardPathRows(PathBatch in, Tensor rows) {
        return scoped(() -> {
            Tensor h = pathHiddenInScope(in);
            Tensor idx = rows.to(device, ScalarType.Long);
            if (idx.dim() != 1) throw new IllegalArgumentException("rows must be 1-D, got " + idx.dim() + "-D");
            checkRange("row", idx, h.size(0));
            return logits(h.index_select(0, idx));
        });
    }

    /** Final hidden states [U, D] of a path-attention batch. */
    public Tensor pathHidden(PathBatch in) {
        return scoped(() -> pathHiddenInScope(in));
    }

    private Tensor pathHiddenInScope(PathBatch in) {
        ensureOpen();
        if (in == null) throw new IllegalArgumentException("path batch is null");
        Tensor tok = in.tokens().to(device, ScalarType.Long);
        if (tok.dim() != 1 || tok.size(0) < 1) throw new IllegalArgumentException("tokens must be [U], U >= 1, got " + java.util.Arrays.toString(Tensors.shape(tok)));
        long u = tok.size(0);
        checkRange("token", tok, config.vocab());
        Tensor pos = in.positions().to(device, ScalarType.Long);
        if (pos.dim() != 1 || pos.size(0) != u) throw new IllegalArgumentException("positions must be [" + u + "], got " + java.util.Arrays.toString(Tensors.shape(pos)));
        checkRange("position", pos, config.maxSeq());
        boolean causal = in.mask() == null;
        Tensor m = causal ? null : in.mask().to(device, ScalarType.Bool);
        if (!causal && m.dim() != 3) throw new IllegalArgumentException("mask must be [n, Lq, Lk], got " + java.util.Arrays.toString(Tensors.shape(m)));
        if (causal && (in.rows() < 1 || in.keyIndex().numel() % in.rows() != 0))
            throw new IllegalArgumentException("causal path attention: keyIndex (" + in.keyIndex().numel() + " entries) is not rows (" + in.rows() + ") × length");
        long n = causal ? in.rows() : m.size(0), lk = causal ? in.keyIndex().numel() / n : m.size(2), lq = causal ? lk : m.size(1);
        Tensor qi = in.queryIndex().to(device, ScalarType.Long), ki = in.keyIndex().to(device, ScalarType.Long), sc = in.scatter().to(device, ScalarType.Long);
        if (qi.dim() != 1 || qi.size(0) != n * lq) throw new IllegalArgumentException("queryIndex must have " + n * lq + " entries, got " + qi.numel());
        if (ki.dim() != 1 || ki.size(0) != n * lk) throw new IllegalArgumentException("keyIndex must have " + n * lk + " entries, got " + ki.numel());
        if (sc.dim() != 1 || sc.size(0) != u) throw new IllegalArgumentException("scatter must have " + u + " entries, got " + sc.numel());
        checkRange("query slot", qi, u);
        checkRange("key slot", ki, u);
        checkRange("scatter row", sc, n * lq);
        TensorOptional m4 = causal ? new TensorOptional() : new TensorOptional(m.unsqueeze(1));   // [n, 1, Lq, Lk], broadcast over heads
        int hd = config.headDim(), h = config.heads(), kv = config.kvHeads();
        long half = hd / 2;
        return autocasting(() -> {
            Tensor x = embed.index_select(0, tok);                                   // [U, D]
            Tensor cos = ropeCos.index_select(0, pos).view(u, 1, half), sin = ropeSin.index_select(0, pos).view(u, 1, half);
            Attention paths = (l, q, k, v) -> {                                      // q [U, H, hd], k and v [U, K, hd]
                Tensor qs = q.index_select(0, qi).view(n, lq, h, hd).transpose(1, 2);
                Tensor ks = k.index_select(0, ki).view(n, lk, kv, hd).transpose(1, 2);
                Tensor vs = v.index_select(0, ki).view(n, lk, kv, hd).transpose(1, 2);
                Tensor o = torch.scaled_dot_product_attention(qs, ks, vs, m4, 0.0, causal, new DoubleOptional(), kv != h);
                return o.transpose(1, 2).reshape(n * lq, (long) h * hd).index_select(0, sc);   // [U, H·hd]
            };
            for (int l = 0; l < blocks.length; l++) x = block(l, x, cos, sin, paths);
            return rmsNorm(x, finalNorm);
        });
    }

    /** Final hidden states [B, T, D] of packed sequences (positions and mask as in {@link #forwardRows(Tensor, Tensor, Tensor, Tensor)}). */
    public Tensor hidden(Tensor tokens, Tensor positions, Tensor mask) {
        return scoped(() -> maskedHiddenInScope(tokens, positions, mask));
    }

    /**
     * The LM-head weight {@code [V, D]} (the embedding matrix itself when the embeddings are tied), for
     * callers that fuse the head with the loss ({@code ai.arbor.torch.TorchFusedLinear}).
     */
    public Tensor lmHeadWeight() {
        ensureOpen();
        return lmHead;
    }

    /** The LM head: {@code hidden [..., D] → logits [..., V]}. */
    public Tensor logits(Tensor hidden) {
        ensureOpen();
        return torch.linear(hidden, lmHead);
    }

    /** A decode batch with 16-token KV blocks and room for 64 blocks to start (it grows as needed). */
    public DecodeBatch newDecodeBatch() {
        return newDecodeBatch(16, 64);
    }

    /**
     * A decode batch over a new paged KV cache.
     *
     * @param blockSize     tokens per KV block (the unit of sharing between forked sequences)
     * @param initialBlocks blocks allocated up front; the pool doubles when it runs out
     */
    public DecodeBatch newDecodeBatch(int blockSize, int initialBlocks) {
        ensureOpen();
        return new DecodeBatch(this, new KvCache(config, device, dtype, blockSize, initialBlocks));
    }

    /** "cuda" when libtorch sees a CUDA device (the GPU build of the preset is on the classpath), else "cpu". */
    public static String defaultDevice() {
        return torch.cuda_is_available() ? "cuda" : "cpu";
    }

    @Override
    public void close() {
        if (closed) return;
        closed = true;
        for (Tensor t : params.values()) t.close();
        params.clear();
        ropeCos.close();
        ropeSin.close();
    }

    // ---------------------------------------------------------------- model math (shared by both paths)

    /** Validates {@code tokens} [B, T] and returns them as int64 on this policy's device. */
    private Tensor checkedTokens(Tensor tokens) {
        return checkedTokens(tokens, true);
    }

    /** As {@link #checkedTokens(Tensor)}; a packed batch's width may exceed maxSeq (its positions may not). */
    private Tensor checkedTokens(Tensor tokens, boolean lengthWithinMaxSeq) {
        ensureOpen();
        if (tokens == null) throw new IllegalArgumentException("tokens is null");
        if (tokens.dim() != 2) throw new IllegalArgumentException("tokens must be [B, T], got " + tokens.dim() + "-D");
        long b = tokens.size(0), t = tokens.size(1);
        if (b < 1 || t < 1) throw new IllegalArgumentException("tokens must be non-empty, got [" + b + ", " + t + "]");
        if (lengthWithinMaxSeq && t > config.maxSeq())
            throw new IllegalArgumentException("sequence length " + t + " exceeds maxSeq " + config.maxSeq());
        Tensor tok = tokens.to(device, ScalarType.Long);
        checkRange("token", tok, config.vocab());
        return tok;
    }

    private Tensor hiddenInScope(Tensor tokens) {
        Tensor tok = checkedTokens(tokens);
        return autocasting(() -> {
            Tensor x = embedRows(tok);
            Tensor[] cs = fullRope(tok.size(1));
            for (int l = 0; l < blocks.length; l++) x = block(l, x, cs[0], cs[1], this::causalAttention);
            return rmsNorm(x, finalNorm);
        });
    }

    /** The hidden states of packed sequences: rotary angles at {@code positions}, attention under {@code mask}. */
    private Tensor maskedHiddenInScope(Tensor tokens, Tensor positions, Tensor mask) {
        Tensor tok = checkedTokens(tokens, false);
        long b = tok.size(0), t = tok.size(1);
        if (positions == null || mask == null) throw new IllegalArgumentException("positions and mask are required");
        if (positions.dim() != 2 || positions.size(0) != b || positions.size(1) != t)
            throw new IllegalArgumentException("positions must be [" + b + ", " + t + "], got " + java.util.Arrays.toString(Tensors.shape(positions)));
        if (mask.dim() != 3 || mask.size(0) != b || mask.size(1) != t || mask.size(2) != t)
            throw new IllegalArgumentException("mask must be [" + b + ", " + t + ", " + t + "], got " + java.util.Arrays.toString(Tensors.shape(mask)));
        Tensor pos = positions.to(device, ScalarType.Long).reshape(b * t);
        checkRange("position", pos, config.maxSeq());
        Tensor m = mask.to(device, ScalarType.Bool).unsqueeze(1);   // [B, 1, T, T], broadcast over heads
        long half = config.headDim() / 2;
        return autocasting(() -> {
            Tensor x = embedRows(tok);
            Tensor cos = ropeCos.index_select(0, pos).view(b, t, 1, half), sin = ropeSin.index_select(0, pos).view(b, t, 1, half);
            Attention masked = (l, q, k, v) -> {
                Tensor o = torch.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                        new TensorOptional(m), 0.0, false, new DoubleOptional(), config.kvHeads() != config.heads());
                return o.transpose(1, 2).reshape(b, t, (long) config.heads() * config.headDim());
            };
            for (int l = 0; l < blocks.length; l++) x = block(l, x, cos, sin, masked);
            return rmsNorm(x, finalNorm);
        });
    }

    private Tensor embedRows(Tensor tok) {
        long b = tok.size(0), t = tok.size(1);
        return embed.index_select(0, tok.reshape(b * t)).view(b, t, config.dModel());
    }

    /** cos, sin of positions 0 … t-1, broadcastable to q [B, T, H, d_h/2]. */
    private Tensor[] fullRope(long t) {
        long half = config.headDim() / 2;
        return new Tensor[] {ropeCos.narrow(0, 0, t).view(1, t, 1, half), ropeSin.narrow(0, 0, t).view(1, t, 1, half)};
    }

    /** Causal attention over whole sequences: q [B, T, H, d_h], k and v [B, T, K, d_h]. */
    private Tensor causalAttention(int layer, Tensor q, Tensor k, Tensor v) {
        long b = q.size(0), t = q.size(1);
        Tensor o = torch.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                new TensorOptional(), 0.0, true, new DoubleOptional(), config.kvHeads() != config.heads());
        return o.transpose(1, 2).reshape(b, t, (long) config.heads() * config.headDim());
    }

    /**
     * One transformer block over rows {@code x [..., D]} (the formula in the class comment): the one place
     * the block math is written. {@code attention} decides which keys and values the queries read.
     */
    private Tensor block(int l, Tensor x, Tensor cos, Tensor sin, Attention attention) {
        Block blk = blocks[l];
        Tensor a = rmsNorm(x, blk.attnNorm);
        Tensor q = splitHeads(linear(a, blk.wq, blk.bq), config.heads());
        Tensor k = splitHeads(linear(a, blk.wk, blk.bk), config.kvHeads());
        Tensor v = splitHeads(linear(a, blk.wv, blk.bv), config.kvHeads());
        if (blk.qNorm != null) {
            q = rmsNorm(q, blk.qNorm);
            k = rmsNorm(k, blk.kNorm);
        }
        Tensor o = attention.attend(l, rope(q, cos, sin), rope(k, cos, sin), v);
        x = x.add(linear(o, blk.wo, blk.bo));
        return x.add(mlp(rmsNorm(x, blk.mlpNorm), blk));
    }

    /** {@code t [..., n·d_h] → [..., n, d_h]}. */
    private Tensor splitHeads(Tensor t, int n) {
        long[] s = Tensors.shape(t);
        long[] shape = java.util.Arrays.copyOf(s, s.length + 1);
        shape[s.length - 1] = n;
        shape[s.length] = config.headDim();
        return t.view(shape);
    }

    private static Tensor linear(Tensor x, Tensor w, Tensor bias) {
        return bias == null ? torch.linear(x, w) : torch.linear(x, w, new TensorOptional(bias));
    }

    /**
     * One cached forward over a ragged batch of new tokens (see {@link DecodeBatch}): writes their
     * keys and values into the cache slots, attends over each sequence's blocks, and returns the
     * logits [n, V] at each sequence's last new token. Runs in the caller's no-grad scope.
     */
    Tensor forwardCached(KvCache cache, DecodeBatch.Plan plan) {
        int hd = config.headDim(), h = config.heads(), kv = config.kvHeads();
        long n = plan.sequences(), total = plan.newTokens(), lq = plan.queryLength(), lk = plan.keyLength();
        Attention cached = (l, q, k, v) -> {
            cache.keys(l).index_copy_(0, plan.slots(), k);
            cache.values(l).index_copy_(0, plan.slots(), v);
            Tensor keys = cache.gather(cache.keys(l), plan.blocks(), n, lk).transpose(1, 2);     // [n, kv, Lk, hd]
            Tensor values = cache.gather(cache.values(l), plan.blocks(), n, lk).transpose(1, 2);
            Tensor queries = lq == 1 ? q.view(n, 1, h, hd)
                    : q.new_zeros(n * lq, h, hd).index_copy(0, plan.queryScatter(), q).view(n, lq, h, hd);
            Tensor o = torch.scaled_dot_product_attention(queries.transpose(1, 2), keys, values,
                    new TensorOptional(plan.mask()), 0.0, false, new DoubleOptional(), kv != h);
            Tensor flat = o.transpose(1, 2).reshape(n * lq, (long) h * hd);
            return lq == 1 ? flat : flat.index_select(0, plan.queryScatter());
        };
        return autocasting(() -> {
            Tensor x = embed.index_select(0, plan.tokens());
            Tensor cos = ropeCos.index_select(0, plan.positions()).view(total, 1, hd / 2);
            Tensor sin = ropeSin.index_select(0, plan.positions()).view(total, 1, hd / 2);
            for (int l = 0; l < blocks.length; l++) x = block(l, x, cos, sin, cached);
            return logits(rmsNorm(x.index_select(0, plan.lastRows()), finalNorm));
        });
    }

    private Tensor mlp(Tensor m, Block blk) {
        return torch.linear(torch.silu(torch.linear(m, blk.wGate)).mul(torch.linear(m, blk.wUp)), blk.wDown);
    }

    /**
     * RMSNorm over the last dimension, computed in float32 when the input is bf16/fp16 (low-precision
     * weights, or a matmul output under autocast), then cast back as Hugging Face does.
     */
    private Tensor rmsNorm(Tensor x, Tensor gain) {
        ScalarType in = x.scalar_type();
        boolean low = Tensors.same(in, ScalarType.BFloat16) || Tensors.same(in, ScalarType.Half);
        Tensor xf = low ? x.to(ScalarType.Float) : x;
        Tensor inv = xf.pow(new Scalar(2.0)).mean(new long[] {-1}, true, new ScalarTypeOptional())
                .add(new Scalar(config.normEps())).rsqrt();
        Tensor y = xf.mul(inv);
        if (low) y = y.to(in);
        return y.mul(gain);
    }

    /** Rotate-half RoPE of {@code x [..., d_h]} with cos/sin broadcastable to {@code [..., d_h/2]}. */
    private Tensor rope(Tensor x, Tensor cos, Tensor sin) {
        long half = config.headDim() / 2;
        Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
        return torch.cat(new TensorVector(x1.mul(cos).sub(x2.mul(sin)), x2.mul(cos).add(x1.mul(sin))), -1);
    }

    // ---------------------------------------------------------------- mixed precision, recomputation

    /**
     * Runs every later forward (training and decode) under libtorch autocast to {@code lowPrecision}
     * (BFloat16 or Half; null turns it off): matmuls and attention in that type with fp32 accumulation,
     * while the parameters (and so the optimizer), the residual stream and the norms stay in the policy's
     * dtype. Meant for float32 policies on a GPU; it also runs on the CPU (bf16).
     */
    public void setAutocast(ScalarType lowPrecision) {
        ensureOpen();
        if (lowPrecision != null) {
            ScalarType t = lowPrecision.intern();
            if (t != ScalarType.BFloat16 && t != ScalarType.Half)
                throw new IllegalArgumentException("autocast type must be BFloat16 or Half, got " + lowPrecision);
            if (this.lowPrecision) throw new IllegalArgumentException("autocast needs float32 or float64 parameters, the policy holds " + dtype);
            this.autocast = t;
        } else {
            this.autocast = null;
        }
    }

    /** The autocast type, or null when the forward runs in the parameters' dtype. */
    public ScalarType autocast() {
        return autocast;
    }

    private Tensor autocasting(java.util.function.Supplier<Tensor> body) {
        if (autocast == null) return body.get();
        torch.DeviceType type = device.type();
        boolean wasEnabled = torch.is_autocast_enabled(type), wasCaching = torch.is_autocast_cache_enabled();
        ScalarType wasType = torch.get_autocast_dtype(type);
        torch.set_autocast_enabled(type, true);
        torch.set_autocast_dtype(type, autocast);
        // no weight-cast cache: it would keep bf16 copies of the weights past an optimizer step
        torch.set_autocast_cache_enabled(false);
        try {
            return body.get();
        } finally {
            torch.set_autocast_enabled(type, wasEnabled);
            torch.set_autocast_dtype(type, wasType);
            torch.set_autocast_cache_enabled(wasCaching);
        }
    }

    /**
     * A training forward that keeps only each block's input and recomputes the block's activations
     * during the backward (activation checkpointing, Chen et al. 2016, "Training Deep Nets with Sublinear
     * Memory Cost"): memory of one block's activations instead of all of them, for one more forward.
     * Use: {@code hidden()} → logits → loss {@code backward}, then {@link Recomputed#backward()} carries
     * the gradient through the blocks into the parameters. Parameter gradients equal the plain
     * {@link #forward}'s.
     */
    public Recomputed forwardRecomputed(Tensor tokens) {
        return new Recomputed(tokens);
    }

    /** The state of one {@link #forwardRecomputed} pass; closing frees the saved block inputs. */
    public final class Recomputed implements AutoCloseable {
        private final Tensor tok;
        private final Tensor[] inputs;
        private final Tensor top;
        private final Tensor hidden;
        private boolean done;

        private Recomputed(Tensor tokens) {
            inputs = new Tensor[blocks.length];
            try (PointerScope scope = new PointerScope()) {
                Tensor ids = Tensors.own(checkedTokens(tokens));
                tok = ids;
                Tensor[] cs = fullRope(ids.size(1));
                Tensor x;
                try (NoGradGuard guard = new NoGradGuard()) {
                    x = autocasting(() -> embedRows(ids));
                    for (int l = 0; l < blocks.length; l++) {
                        inputs[l] = Tensors.own(x);
                        int layer = l;
                        Tensor in = x;
                        x = autocasting(() -> block(layer, in, cs[0], cs[1], ReferencePolicy.this::causalAttention));
                    }
                }
                top = Tensors.own(x.detach());
                top.set_requires_grad(true);
                hidden = Tensors.own(autocasting(() -> rmsNorm(top, finalNorm)));
            }
        }

        /** Final hidden states [B, T, D] (after the last RMSNorm), with autograd back to the last block's output. */
        public Tensor hidden() {
            return hidden;
        }

        /**
         * After the loss's backward has reached {@link #hidden()}: recomputes block by block, last first,
         * and accumulates every parameter's gradient. Once only.
         */
        public void backward() {
            if (done) throw new IllegalStateException("backward already ran");
            done = true;
            if (!top.grad().defined()) throw new IllegalStateException("no gradient reached hidden(): run the loss's backward first");
            try (PointerScope scope = new PointerScope()) {
                Tensor[] cs = fullRope(tok.size(1));
                Tensor grad = top.grad();
                for (int l = blocks.length - 1; l >= 0; l--) {
                    Tensor in = inputs[l].detach();
                    in.set_requires_grad(true);
                    int layer = l;
                    Tensor out = autocasting(() -> block(layer, in, cs[0], cs[1], ReferencePolicy.this::causalAttention));
                    out.backward(grad, new org.bytedeco.pytorch.BoolOptional(), false, new org.bytedeco.pytorch.TensorArrayRefOptional());
                    grad = in.grad();
                }
                autocasting(() -> embedRows(tok)).backward(grad, new org.bytedeco.pytorch.BoolOptional(), false,
                        new org.bytedeco.pytorch.TensorArrayRefOptional());
            }
        }

        @Override
        public void close() {
            for (Tensor t : inputs) if (t != null) t.close();
            tok.close();
            top.close();
            hidden.close();
        }
    }

    // ---------------------------------------------------------------- helpers

    /** A parameter: std > 0 draws N(0, std²), std = 0 zeros (biases), std < 0 ones (norm gains). */
    private Tensor param(String name, long[] shape, double std, boolean initialise) {
        Tensor t;
        try (PointerScope scope = new PointerScope()) {
            if (!initialise) {
                t = torch.empty(shape, Tensors.options(dtype, device), new org.bytedeco.pytorch.MemoryFormatOptional());
            } else {
                long count = 1;
                for (long s : shape) count *= s;
                float[] values = new float[Math.toIntExact(count)];
                if (std < 0) {
                    java.util.Arrays.fill(values, 1f);
                } else if (std > 0) {
                    // one stream per tensor, keyed by name: adding a layer does not reshuffle the others
                    SplittableRandom rnd = new SplittableRandom(config.seed() * 0x9E3779B97F4A7C15L ^ name.hashCode());
                    for (int i = 0; i < values.length; i++) values[i] = (float) (rnd.nextGaussian() * std);
                }
                t = Tensors.floats(values, shape, dtype, device);
            }
            t.set_requires_grad(true);
            Tensors.own(t);
        }
        params.put(name, t);
        return t;
    }

    /** Runs {@code body} in a private scope and hands its result to the caller's scope (if any). */
    static Tensor scoped(java.util.function.Supplier<Tensor> body) {
        Tensor out;
        try (PointerScope scope = new PointerScope()) {
            out = body.get();
            out.retainReference();
        }
        PointerScope outer = PointerScope.getInnerScope();
        if (outer != null) {
            outer.attach(out);
            out.releaseReference();
        }
        return out;
    }

    private Tensor tokenMatrix(int[][] rows) {
        if (rows == null || rows.length == 0) throw new IllegalArgumentException("tokens must have at least one row");
        int t = rows[0] == null ? 0 : rows[0].length;
        long[] flat = new long[Math.multiplyExact(rows.length, t)];
        for (int r = 0; r < rows.length; r++) {
            if (rows[r] == null || rows[r].length != t)
                throw new IllegalArgumentException("row " + r + " has length " + (rows[r] == null ? "null" : rows[r].length)
                        + ", expected " + t + " (pad rows to one length)");
            for (int j = 0; j < t; j++) flat[r * t + j] = rows[r][j];
        }
        return Tensors.longs(flat, new long[] {rows.length, t}, device);
    }

    private static void checkRange(String what, Tensor idx, long limit) {
        if (idx.numel() == 0) return;
        long lo = idx.min().item_long(), hi = idx.max().item_long();
        if (lo < 0 || hi >= limit)
            throw new IllegalArgumentException(what + " ids must be in [0, " + limit + "), got " + (lo < 0 ? lo : hi));
    }

    static Device resolveDevice(String device) {
        if (device == null) throw new IllegalArgumentException("device is null");
        String d = device.trim().toLowerCase(java.util.Locale.ROOT);
        if (d.equals("auto")) d = defaultDevice();
        if (d.equals("cpu")) return new Device("cpu");
        if (d.equals("cuda") || d.matches("cuda:\\d+")) {
            if (!torch.cuda_is_available())
                throw new IllegalArgumentException("device " + device + " requested but libtorch sees no CUDA device"
                        + " (build with -Pgpu to put the GPU build of the PyTorch preset on the classpath; see docs/policy.md)");
            int index = d.equals("cuda") ? 0 : Integer.parseInt(d.substring(5));
            int count = torch.cuda_device_count();
            if (index >= count) throw new IllegalArgumentException("device " + device + " but only " + count + " CUDA devices");
            return new Device(d.equals("cuda") ? "cuda:0" : d);
        }
        throw new IllegalArgumentException("device must be cpu, cuda, cuda:N or auto, got '" + device + "'");
    }

    private static ScalarType checkDtype(ScalarType dtype) {
        if (dtype == null) throw new IllegalArgumentException("dtype is null");
        ScalarType t = dtype.intern();
        if (t != ScalarType.Float && t != ScalarType.Double && t != ScalarType.BFloat16 && t != ScalarType.Half)
            throw new IllegalArgumentException("policy dtype must be Float, Double, BFloat16 or Half, got " + dtype);
        return t;
    }

    private void ensureOpen() {
        if (closed) throw new IllegalStateException("policy is closed");
    }
}
