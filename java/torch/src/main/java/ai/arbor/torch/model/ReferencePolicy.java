package ai.arbor.torch.model;

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
 * The reference policy: a small decoder-only transformer on the JavaCPP PyTorch preset, in the
 * Llama / Qwen2 layout so that its checkpoints use the same tensor names and conventions.
 *
 * <pre>
 *   h⁰ = E[x]                                         token embedding, E ∈ R^{V×D}
 *   for each block l:
 *     a  = RMSNorm(h; g_attn)                          RMSNorm(x; g) = x / sqrt(mean(x²) + ε) ⊙ g
 *     q  = RoPE(a W_qᵀ), k = RoPE(a W_kᵀ), v = a W_vᵀ  H query heads, K ≤ H key/value heads (GQA)
 *     h += softmax(q kᵀ / sqrt(d_h) + causal mask) v W_oᵀ    query head j reads kv head ⌊j / (H/K)⌋
 *     m  = RMSNorm(h; g_mlp)
 *     h += (SiLU(m W_gateᵀ) ⊙ m W_upᵀ) W_downᵀ                SwiGLU (Shazeer 2020)
 *   logits = RMSNorm(h; g_final) W_lmᵀ                   W_lm = E when the embeddings are tied
 * </pre>
 *
 * Rotary positions (Su et al. 2021, RoFormer) in the "rotate half" form of the Llama code: with
 * {@code x = [x₁, x₂]} split into halves and angles {@code θ_i(p) = p · ropeTheta^(-2i/d_h)},
 * {@code RoPE(x, p) = [x₁ cos θ − x₂ sin θ, x₂ cos θ + x₁ sin θ]}.
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

    /** The weights of one transformer block. */
    private record Block(Tensor attnNorm, Tensor wq, Tensor wk, Tensor wv, Tensor wo,
                         Tensor mlpNorm, Tensor wGate, Tensor wUp, Tensor wDown) {}

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
            blocks[l] = new Block(
                    param(p + "input_layernorm.weight", new long[] {d}, -1, initialise),
                    param(p + "self_attn.q_proj.weight", new long[] {(long) config.heads() * hd, d}, std, initialise),
                    param(p + "self_attn.k_proj.weight", new long[] {(long) config.kvHeads() * hd, d}, std, initialise),
                    param(p + "self_attn.v_proj.weight", new long[] {(long) config.kvHeads() * hd, d}, std, initialise),
                    param(p + "self_attn.o_proj.weight", new long[] {d, (long) config.heads() * hd}, residualStd, initialise),
                    param(p + "post_attention_layernorm.weight", new long[] {d}, -1, initialise),
                    param(p + "mlp.gate_proj.weight", new long[] {f, d}, std, initialise),
                    param(p + "mlp.up_proj.weight", new long[] {f, d}, std, initialise),
                    param(p + "mlp.down_proj.weight", new long[] {d, f}, residualStd, initialise));
        }
        finalNorm = param(FINAL_NORM, new long[] {d}, -1, initialise);
        lmHead = config.tiedEmbeddings() ? embed : param(LM_HEAD, new long[] {config.vocab(), d}, std, initialise);
        // rotary table in double precision, cast once: cos/sin[p][i] of θ_i(p) = p · θ^(-2i/d_h)
        int half = hd / 2, n = config.maxSeq();
        double[] cos = new double[n * half], sin = new double[n * half];
        for (int p = 0; p < n; p++)
            for (int i = 0; i < half; i++) {
                double angle = p * Math.pow(config.ropeTheta(), -2.0 * i / hd);
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

    /** Loads a checkpoint written by {@link #save}: its configuration comes from the file's metadata. */
    public static ReferencePolicy load(Path checkpoint, String device, ScalarType dtype) throws IOException {
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

    private Tensor hiddenInScope(Tensor tokens) {
        ensureOpen();
        if (tokens == null) throw new IllegalArgumentException("tokens is null");
        if (tokens.dim() != 2) throw new IllegalArgumentException("tokens must be [B, T], got " + tokens.dim() + "-D");
        long b = tokens.size(0), t = tokens.size(1);
        if (b < 1 || t < 1) throw new IllegalArgumentException("tokens must be non-empty, got [" + b + ", " + t + "]");
        if (t > config.maxSeq())
            throw new IllegalArgumentException("sequence length " + t + " exceeds maxSeq " + config.maxSeq());
        Tensor tok = tokens.to(device, ScalarType.Long);
        checkRange("token", tok, config.vocab());
        int hd = config.headDim(), h = config.heads(), kv = config.kvHeads();
        Tensor x = embed.index_select(0, tok.reshape(b * t)).view(b, t, config.dModel());
        Tensor cos = ropeCos.narrow(0, 0, t).view(1, t, 1, hd / 2);
        Tensor sin = ropeSin.narrow(0, 0, t).view(1, t, 1, hd / 2);
        for (Block blk : blocks) {
            Tensor a = rmsNorm(x, blk.attnNorm);
            Tensor q = rope(torch.linear(a, blk.wq).view(b, t, h, hd), cos, sin).transpose(1, 2);
            Tensor k = rope(torch.linear(a, blk.wk).view(b, t, kv, hd), cos, sin).transpose(1, 2);
            Tensor v = torch.linear(a, blk.wv).view(b, t, kv, hd).transpose(1, 2);
            Tensor o = torch.scaled_dot_product_attention(q, k, v, new TensorOptional(), 0.0, true,
                    new DoubleOptional(), kv != h);
            x = x.add(torch.linear(o.transpose(1, 2).reshape(b, t, (long) h * hd), blk.wo));
            x = x.add(mlp(rmsNorm(x, blk.mlpNorm), blk));
        }
        return rmsNorm(x, finalNorm);
    }

    /**
     * One cached forward over a ragged batch of new tokens (see {@link DecodeBatch}): writes their
     * keys and values into the cache slots, attends over each sequence's blocks, and returns the
     * logits [n, V] at each sequence's last new token. Runs in the caller's no-grad scope.
     */
    Tensor forwardCached(KvCache cache, DecodeBatch.Plan plan) {
        int hd = config.headDim(), h = config.heads(), kv = config.kvHeads();
        long n = plan.sequences(), total = plan.newTokens(), lq = plan.queryLength(), lk = plan.keyLength();
        Tensor x = embed.index_select(0, plan.tokens());
        Tensor cos = ropeCos.index_select(0, plan.positions()).view(total, 1, hd / 2);
        Tensor sin = ropeSin.index_select(0, plan.positions()).view(total, 1, hd / 2);
        for (int l = 0; l < blocks.length; l++) {
            Block blk = blocks[l];
            Tensor a = rmsNorm(x, blk.attnNorm);
            Tensor q = rope(torch.linear(a, blk.wq).view(total, h, hd), cos, sin);
            Tensor k = rope(torch.linear(a, blk.wk).view(total, kv, hd), cos, sin);
            Tensor v = torch.linear(a, blk.wv).view(total, kv, hd);
            cache.keys(l).index_copy_(0, plan.slots(), k);
            cache.values(l).index_copy_(0, plan.slots(), v);
            Tensor keys = cache.gather(cache.keys(l), plan.blocks(), n, lk).transpose(1, 2);     // [n, kv, Lk, hd]
            Tensor values = cache.gather(cache.values(l), plan.blocks(), n, lk).transpose(1, 2);
            Tensor queries = lq == 1 ? q.view(n, 1, h, hd)
                    : q.new_zeros(n * lq, h, hd).index_copy(0, plan.queryScatter(), q).view(n, lq, h, hd);
            Tensor o = torch.scaled_dot_product_attention(queries.transpose(1, 2), keys, values,
                    new TensorOptional(plan.mask()), 0.0, false, new DoubleOptional(), kv != h);
            Tensor flat = o.transpose(1, 2).reshape(n * lq, (long) h * hd);
            if (lq != 1) flat = flat.index_select(0, plan.queryScatter());
            x = x.add(torch.linear(flat, blk.wo));
            x = x.add(mlp(rmsNorm(x, blk.mlpNorm), blk));
        }
        return logits(rmsNorm(x.index_select(0, plan.lastRows()), finalNorm));
    }

    private Tensor mlp(Tensor m, Block blk) {
        return torch.linear(torch.silu(torch.linear(m, blk.wGate)).mul(torch.linear(m, blk.wUp)), blk.wDown);
    }

    /** RMSNorm over the last dimension; bf16/fp16 inputs are normalised in float32. */
    private Tensor rmsNorm(Tensor x, Tensor gain) {
        Tensor xf = lowPrecision ? x.to(ScalarType.Float) : x;
        Tensor inv = xf.pow(new Scalar(2.0)).mean(new long[] {-1}, true, new ScalarTypeOptional())
                .add(new Scalar(config.normEps())).rsqrt();
        Tensor y = xf.mul(inv);
        if (lowPrecision) y = y.to(dtype);
        return y.mul(gain);
    }

    /** Rotate-half RoPE of {@code x [..., d_h]} with cos/sin broadcastable to {@code [..., d_h/2]}. */
    private Tensor rope(Tensor x, Tensor cos, Tensor sin) {
        long half = config.headDim() / 2;
        Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
        return torch.cat(new TensorVector(x1.mul(cos).sub(x2.mul(sin)), x2.mul(cos).add(x1.mul(sin))), -1);
    }

    // ---------------------------------------------------------------- helpers

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
                } else {
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
