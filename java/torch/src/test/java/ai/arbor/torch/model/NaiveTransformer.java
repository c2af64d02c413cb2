package ai.arbor.torch.model;

import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import org.bytedeco.pytorch.Tensor;

/**
 * An independent reference of the policy's forward pass in plain Java doubles: explicit loops for
 * the embedding lookup, RMSNorm, matrix-vector products, rotary positions, causal softmax attention
 * with grouped key/value heads, SwiGLU and the LM head. It shares nothing with the model's code but
 * the parameter values.
 */
@SuppressWarnings("try") // PointerScope and NoGradGuard act through their try blocks
final class NaiveTransformer {

    private final PolicyConfig c;
    private final Map<String, double[]> w = new HashMap<>();

    NaiveTransformer(ReferencePolicy policy) {
        this.c = policy.config();
        for (Map.Entry<String, Tensor> e : policy.namedParameters().entrySet()) w.put(e.getKey(), Tensors.toDoubles(e.getValue()));
    }

    /** Logits [T][V] of every position of one sequence. */
    double[][] forward(int[] tokens) {
        int t = tokens.length, d = c.dModel(), h = c.heads(), kvh = c.kvHeads(), hd = c.headDim(), f = c.ffnDim();
        double[] embed = w.get("model.embed_tokens.weight");
        double[][] x = new double[t][d];
        for (int i = 0; i < t; i++) System.arraycopy(embed, tokens[i] * d, x[i], 0, d);
        for (int l = 0; l < c.layers(); l++) {
            String p = "model.layers." + l + ".";
            double[][] q = new double[t][], k = new double[t][], v = new double[t][];
            for (int i = 0; i < t; i++) {
                double[] a = rmsNorm(x[i], w.get(p + "input_layernorm.weight"));
                q[i] = rope(matVec(w.get(p + "self_attn.q_proj.weight"), h * hd, d, a), i, h);
                k[i] = rope(matVec(w.get(p + "self_attn.k_proj.weight"), kvh * hd, d, a), i, kvh);
                v[i] = matVec(w.get(p + "self_attn.v_proj.weight"), kvh * hd, d, a);
            }
            for (int i = 0; i < t; i++) {
                double[] o = new double[h * hd];
                for (int head = 0; head < h; head++) {
                    int g = head / (h / kvh);
                    double[] s = new double[i + 1];
                    double max = Double.NEGATIVE_INFINITY;
                    for (int j = 0; j <= i; j++) {
                        double dot = 0;
                        for (int e = 0; e < hd; e++) dot += q[i][head * hd + e] * k[j][g * hd + e];
                        s[j] = dot / Math.sqrt(hd);
                        max = Math.max(max, s[j]);
                    }
                    double z = 0;
                    for (int j = 0; j <= i; j++) z += s[j] = Math.exp(s[j] - max);
                    for (int j = 0; j <= i; j++)
                        for (int e = 0; e < hd; e++) o[head * hd + e] += s[j] / z * v[j][g * hd + e];
                }
                add(x[i], matVec(w.get(p + "self_attn.o_proj.weight"), d, h * hd, o));
            }
            for (int i = 0; i < t; i++) {
                double[] m = rmsNorm(x[i], w.get(p + "post_attention_layernorm.weight"));
                double[] gate = matVec(w.get(p + "mlp.gate_proj.weight"), f, d, m);
                double[] up = matVec(w.get(p + "mlp.up_proj.weight"), f, d, m);
                double[] act = new double[f];
                for (int e = 0; e < f; e++) act[e] = gate[e] / (1 + Math.exp(-gate[e])) * up[e];
                add(x[i], matVec(w.get(p + "mlp.down_proj.weight"), d, f, act));
            }
        }
        double[] head = c.tiedEmbeddings() ? embed : w.get("lm_head.weight");
        double[][] logits = new double[t][];
        for (int i = 0; i < t; i++) logits[i] = matVec(head, c.vocab(), d, rmsNorm(x[i], w.get("model.norm.weight")));
        return logits;
    }

    private double[] rmsNorm(double[] x, double[] g) {
        double ms = 0;
        for (double e : x) ms += e * e;
        double inv = 1 / Math.sqrt(ms / x.length + c.normEps());
        double[] y = new double[x.length];
        for (int i = 0; i < x.length; i++) y[i] = x[i] * inv * g[i];
        return y;
    }

    /** Rotate-half RoPE of each head's vector at position {@code pos}. */
    private double[] rope(double[] x, int pos, int heads) {
        int hd = c.headDim(), half = hd / 2;
        double[] y = x.clone();
        for (int head = 0; head < heads; head++)
            for (int i = 0; i < half; i++) {
                double angle = pos / Math.pow(c.ropeTheta(), 2.0 * i / hd);
                double x1 = x[head * hd + i], x2 = x[head * hd + half + i];
                y[head * hd + i] = x1 * Math.cos(angle) - x2 * Math.sin(angle);
                y[head * hd + half + i] = x2 * Math.cos(angle) + x1 * Math.sin(angle);
            }
        return y;
    }

    /** W [rows, cols] (row-major) times x. */
    private static double[] matVec(double[] wm, int rows, int cols, double[] x) {
        double[] y = new double[rows];
        for (int r = 0; r < rows; r++) {
            double s = 0;
            for (int j = 0; j < cols; j++) s += wm[r * cols + j] * x[j];
            y[r] = s;
        }
        return y;
    }

    private static void add(double[] x, double[] y) {
        for (int i = 0; i < x.length; i++) x[i] += y[i];
    }

    // ------------------------------------------------------------------ shared test helpers

    /** One CPU thread for the tests (tiny configurations; see {@link CpuThreads} for why). */
    static void singleThreaded() {
        CpuThreads.set(1);
    }

    /** Seed from -Darbor.seed or the clock (the convention of the core tests); printed by the caller. */
    static long seed() {
        return ai.arbor.testing.Seeds.seed();
    }

    /**
     * Replaces the policy's weights by N(0, std²) values (norm gains 1 + N(0, 0.3²), biases N(0, std²)) so that attention
     * is far from uniform and every term of the forward moves the logits visibly.
     */
    static void randomize(ReferencePolicy policy, Random rnd, double std) {
        Map<String, Tensor> values = new java.util.LinkedHashMap<>();
        try (org.bytedeco.javacpp.PointerScope scope = new org.bytedeco.javacpp.PointerScope()) {
            for (Map.Entry<String, Tensor> e : policy.namedParameters().entrySet()) {
                long[] shape = Tensors.shape(e.getValue());
                double[] v = new double[Math.toIntExact(e.getValue().numel())];
                boolean norm = shape.length == 1 && !e.getKey().endsWith(".bias");
                for (int i = 0; i < v.length; i++) v[i] = norm ? 1 + 0.3 * rnd.nextGaussian() : std * rnd.nextGaussian();
                values.put(e.getKey(), Tensors.doubles(v, shape, org.bytedeco.pytorch.global.torch.ScalarType.Double,
                        new org.bytedeco.pytorch.Device("cpu")));
            }
            policy.loadParameters(values);
        }
    }

    static int[] randomTokens(Random rnd, int length, int vocab) {
        int[] t = new int[length];
        for (int i = 0; i < length; i++) t[i] = rnd.nextInt(vocab);
        return t;
    }

    static int[] concat(int[] a, int[] b) {
        int[] out = java.util.Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }

    /** Tiny configurations: grouped-query with tied head; plain multi-head with untied head; multi-query. */
    static PolicyConfig gqa(long seed) {
        return new PolicyConfig(23, 16, 2, 4, 2, 24, 64, 10_000.0, 1e-6, true, seed);
    }

    static PolicyConfig mha(long seed) {
        return new PolicyConfig(19, 12, 2, 3, 3, 20, 64, 500.0, 1e-5, false, seed);
    }

    static PolicyConfig mqa(long seed) {
        return new PolicyConfig(17, 16, 1, 4, 1, 16, 64, 10_000.0, 1e-6, true, seed);
    }
}
