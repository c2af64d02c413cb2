package ai.arbor.torch;

import ai.arbor.advantage.Advantages;
import ai.arbor.kernels.ShapingStats;
import ai.arbor.kernels.TokenAdvantages;
import ai.arbor.kernels.TokenShaping;
import ai.arbor.kernels.Check;
import ai.arbor.kernels.DType;
import ai.arbor.kernels.Device;
import ai.arbor.kernels.MemRef;
import ai.arbor.rl.Sequence;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * Advantages (docs/algorithms.md §3, {@code ai.arbor.advantage}) on PyTorch-preset tensors.
 *
 * <p>Sequence level ({@link #grpo}, {@link #treeGrpo}): B rewards, B ≤ a few thousand — the values make one
 * round trip to the host (a synchronizing copy for CUDA tensors) and the result is a float32 [B] tensor on
 * the rewards' device. Token level ({@link #tokenAdvantages}, {@link #tokenAdvantagesFlat}): the native
 * kernels run on the tensors' memory in place — CPU tensors on the CPU kernel, CUDA tensors on the CUDA
 * kernel on torch's current stream — writing a new float32 tensor.
 *
 * <p>Typical step of a trainer with [B, L] response tensors:
 * <pre>{@code
 * Tensor seqAdv = TorchAdvantages.grpo(rewards, promptIds, true);                     // [B]
 * TorchAdvantages.Result r = TorchAdvantages.tokenAdvantages(seqAdv, lossMask, entropy, postTool,
 *         TokenShaping.taoRl());                                                      // [B, L]
 * // ... policy loss with r.advantages(); log r.readStats().metrics("adv/") ...
 * }</pre>
 */
public final class TorchAdvantages {
    private TorchAdvantages() {}

    /** Token advantages (float32, the token layout's shape) and the batch statistics (float64 [8], same device). */
    public record Result(Tensor advantages, Tensor stats) {
        /** The statistics on the host (synchronizes a CUDA stream). */
        public ShapingStats readStats() {
            double[] s = new double[ShapingStats.LENGTH];
            Tensor h = stats.cpu().contiguous();
            h.data_ptr_double().get(s);
            return ShapingStats.of(s);
        }
    }

    /** GRPO ({@code scaleByStd}) or Dr.GRPO over [B] rewards; group ids int32/int64 [B]. See {@link Advantages#grpo}. */
    public static Tensor grpo(Tensor rewards, Tensor groupIds, boolean scaleByStd) {
        float[] r = hostFloats(rewards, "rewards");
        return onDevice(Advantages.grpo(r, hostInts(groupIds, r.length, "groupIds"), scaleByStd), rewards);
    }

    /** Tree-GRPO over [B] leaf rewards with [B] prompt and tree ids. See {@link Advantages#treeGrpo}. */
    public static Tensor treeGrpo(Tensor rewards, Tensor promptIds, Tensor treeIds) {
        float[] r = hostFloats(rewards, "rewards");
        return onDevice(Advantages.treeGrpo(r, hostInts(promptIds, r.length, "promptIds"), hostInts(treeIds, r.length, "treeIds")),
                rewards);
    }

    /**
     * Padded [B, L] layout: row b holds trajectory b.
     *
     * @param seqAdvantages [B] float32 sequence advantages
     * @param lossMask      [B, L] bool/uint8 (padding, prompt and tool tokens false)
     * @param entropy       [B, L] float32 token entropies (other float types are converted); required by
     *                      AEPO/TAO-RL, may be null for broadcast
     * @param postTool      [B, L] bool/uint8 M_post flags, or null
     */
    public static Result tokenAdvantages(Tensor seqAdvantages, Tensor lossMask, Tensor entropy, Tensor postTool,
                                         TokenShaping shaping) {
        TorchTensors.require("lossMask", lossMask);
        if (lossMask.dim() != 2) throw new IllegalArgumentException("lossMask must be [B, L], got " + lossMask.dim() + " dims");
        long b = lossMask.size(0), l = lossMask.size(1);
        TorchTensors.require("seqAdvantages", seqAdvantages);
        if (seqAdvantages.numel() != b)
            throw new IllegalArgumentException("seqAdvantages must have B = " + b + " elements, got " + seqAdvantages.numel());
        return run(seqAdvantages, null, b * l, Math.max(1, l), new long[] {b, l}, lossMask, entropy, postTool, shaping);
    }

    /**
     * Flat layout: T tokens of many trajectories in any order.
     *
     * @param seqIds   [T] int32/int64, the trajectory of each token, in [0, seqAdvantages.numel())
     * @param lossMask [T] bool/uint8, or null (all tokens trained)
     */
    public static Result tokenAdvantagesFlat(Tensor seqAdvantages, Tensor seqIds, Tensor lossMask, Tensor entropy,
                                             Tensor postTool, TokenShaping shaping) {
        TorchTensors.require("seqIds", seqIds);
        TorchTensors.require("seqAdvantages", seqAdvantages);
        long n = seqIds.numel();
        return run(seqAdvantages, seqIds, n, 0, new long[] {n}, lossMask, entropy, postTool, shaping);
    }

    private static Result run(Tensor seqAdv, Tensor seqIds, long n, long seqLen, long[] shape, Tensor lossMask,
                              Tensor entropy, Tensor postTool, TokenShaping shaping) {
        Check.notNull("shaping", shaping);
        Tensor like = seqIds != null ? seqIds : lossMask;
        Device dev = TorchTensors.device(like);
        long nSeqs = seqAdv.numel();
        Tensor adv = TorchTensors.floats(seqAdv, nSeqs, "seqAdvantages", dev);
        Tensor ids = null;
        DType idType = DType.I32;
        if (seqIds != null) {
            ids = TorchTensors.flat(seqIds, n, "seqIds");
            idType = TorchTensors.dtype(ids, "seqIds");
            if (idType != DType.I32 && idType != DType.I64) throw new IllegalArgumentException("seqIds must be int32 or int64, got " + idType);
            TorchTensors.requireDevice(ids, dev, "seqIds");
        }
        Tensor mask = lossMask == null ? null : TorchTensors.bytes(lossMask, n, "lossMask", dev);
        Tensor post = postTool == null ? null : TorchTensors.bytes(postTool, n, "postTool", dev);
        Tensor h = entropy == null ? null : TorchTensors.floats(entropy, n, "entropy", dev);
        Tensor out = TorchTensors.empty(like, shape, ScalarType.Float);
        Tensor stats = TorchTensors.empty(like, new long[] {ShapingStats.LENGTH}, ScalarType.Double);
        // No tokens: an empty tensor's memory has address 0, which the kernel reads as "no ids" (the padded
        // layout, which then rejects 0 tokens for B sequences); the array form computes the empty result.
        if (n == 0) {
            ShapingStats st = TokenAdvantages.compute(TorchTensors.hostFloats(adv), new int[0], null, h == null ? null : new float[0],
                    null, shaping).stats();
            double[] s = {st.validTokens(), st.postToolTokens(), st.shapedTokens(), st.entropyMean(), st.entropyStd(),
                st.threshold(), st.scale(), st.nonFiniteEntropy()};
            Tensor hs = Tensor.create(s, s.length);
            return new Result(out, like.is_cuda() ? hs.to(like.device(), ScalarType.Double) : hs);
        }
        TokenAdvantages.compute(mem(adv), nSeqs, mem(ids), idType, n, seqLen, mem(mask), mem(h), mem(post), shaping,
                TorchTensors.mem(out), TorchTensors.mem(stats), TorchTensors.currentStream(dev));
        return new Result(out, stats);
    }

    private static MemRef mem(Tensor t) {
        return t == null ? null : TorchTensors.mem(t);
    }

    private static float[] hostFloats(Tensor t, String name) {
        TorchTensors.require(name, t);
        if (t.dim() > 1) throw new IllegalArgumentException(name + " must be [B], got " + t.dim() + " dims");
        return TorchTensors.hostFloats(t);
    }

    private static int[] hostInts(Tensor t, int n, String name) {
        TorchTensors.require(name, t);
        if (t.numel() != n) throw new IllegalArgumentException(name + " must have " + n + " elements, got " + t.numel());
        if (t.is_floating_point()) throw new IllegalArgumentException(name + " must be an integer tensor");
        long[] l = new long[n];
        if (n > 0) t.to(ScalarType.Long).cpu().contiguous().data_ptr_long().get(l);
        int[] a = new int[n];
        for (int i = 0; i < n; i++) {
            if (l[i] != (int) l[i]) throw new IllegalArgumentException(name + "[" + i + "] = " + l[i] + " does not fit an int");
            a[i] = (int) l[i];
        }
        return a;
    }

    private static Tensor onDevice(float[] a, Tensor like) {
        Tensor t = Tensor.create(a, a.length);
        return like.is_cuda() ? t.to(like.device(), ScalarType.Float) : t;
    }
}
