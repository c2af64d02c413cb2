package ai.arbor.torch;

import ai.arbor.kernels.Check;
import ai.arbor.kernels.DType;
import ai.arbor.kernels.LogitsView;
import ai.arbor.kernels.Sampler;
import ai.arbor.kernels.SamplingParams;
import java.util.List;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * Next-token sampling ({@link Sampler}) on PyTorch-preset tensors, with no copy of the logits: CPU tensors
 * go to the CPU kernels, CUDA tensors to the CUDA kernels on the tensor's device and torch's current
 * stream. Tokens are bitwise the same on both.
 *
 * <p>Logits are [B, V] (float32, bfloat16 or float16) with a contiguous last dimension; other row strides
 * are fine, e.g. the last position of a [B, L, V] forward, {@code logits.select(1, L - 1)}. Outputs are
 * tensors of shape [B] on the logits' device: int64 tokens (−1 for masked rows) and float32 logprobs and
 * entropies. Store {@link Sample#logprob()} as the behaviour logprob for PPO/GRPO (see {@link Sampler}).
 *
 * <p>A decoding loop over trajectories that come and go, keyed by trajectory id so each trajectory's
 * tokens do not depend on the batch it is decoded in:
 * <pre>{@code
 * TorchSampler.Sample s = TorchSampler.sample(lastLogits, SamplingParams.temperature(1f), seed, trajectoryIds, positions);
 * Tensor next = s.tokens();          // [B] int64
 * Tensor oldLogprob = s.logprob();   // for the trainer's ratio
 * Tensor entropy = s.entropy();      // for ARPO/AEPO branching
 * }</pre>
 */
public final class TorchSampler {
    private TorchSampler() {}

    /** Per-row outputs, shape [B]: int64 tokens, float32 logprobs and entropy. */
    public record Sample(Tensor tokens, Tensor logprobSampled, Tensor logprob, Tensor entropy) {}

    /** Every row with the same parameters, seed and step; row r's stream is keyed by r. */
    public static Sample sample(Tensor logits, SamplingParams params, long seed, long step) {
        return sample(logits, params, seed, step, null, null, null, null, null, null, null, 0);
    }

    /**
     * Row r draws from the stream (seed, keys[r], steps[r]).
     *
     * @param keys  int64 [B] stream keys on the logits' device (e.g. trajectory ids)
     * @param steps int64 [B] steps in [0, 2^32) on the logits' device (e.g. decode positions)
     */
    public static Sample sample(Tensor logits, SamplingParams params, long seed, Tensor keys, Tensor steps) {
        TorchTensors.require("keys", keys);
        TorchTensors.require("steps", steps);
        return sample(logits, params, seed, 0, keys, steps, null, null, null, null, null, 0);
    }

    /**
     * The general form. Every tensor argument but {@code logits} may be null (= the uniform value of
     * {@code params}, {@code seed}, {@code step}; keys = row index; no mask).
     *
     * @param temperatures float32 [B]; likewise {@code topPs}, {@code minPs}; {@code topKs} int32 [B]
     * @param rowMask      bool/uint8 [B] (false = masked)
     * @param vocabLimit   columns from here on are padding and never sampled; {@code <= 0} for none
     */
    public static Sample sample(Tensor logits, SamplingParams params, long seed, long step, Tensor keys, Tensor steps,
                                Tensor temperatures, Tensor topKs, Tensor topPs, Tensor minPs, Tensor rowMask,
                                long vocabLimit) {
        TorchTensors.require("logits", logits);
        Check.notNull("params", params);
        if (logits.dim() != 2)
            throw new IllegalArgumentException("logits must be [B, V] (e.g. logits.select(1, L - 1) of a [B, L, V] forward), got "
                    + logits.dim() + " dims");
        List<TorchTensors.RowBlock> blocks = TorchTensors.rowBlocks(logits, vocabLimit);
        LogitsView view = blocks.get(0).view();  // [B, V] is always a single block
        long rows = view.rows();
        Sampler.Batch in = Sampler.Batch.of(view, params, seed, step)
                .withKeys(TorchTensors.rows(keys, rows, "keys", DType.I64))
                .withSteps(TorchTensors.rows(steps, rows, "steps", DType.I64))
                .withRowParams(TorchTensors.rows(temperatures, rows, "temperatures", DType.F32),
                        TorchTensors.rows(topKs, rows, "topKs", DType.I32), TorchTensors.rows(topPs, rows, "topPs", DType.F32),
                        TorchTensors.rows(minPs, rows, "minPs", DType.F32))
                .withRowMask(TorchTensors.rows(rowMask, rows, "rowMask", DType.U8));
        long[] shape = {rows};
        Tensor tokens = TorchTensors.empty(logits, shape, ScalarType.Long);
        Tensor lps = TorchTensors.empty(logits, shape, ScalarType.Float);
        Tensor lp = TorchTensors.empty(logits, shape, ScalarType.Float);
        Tensor h = TorchTensors.empty(logits, shape, ScalarType.Float);
        Sampler.sample(in, new Sampler.Outputs(TorchTensors.mem(tokens), DType.I64, TorchTensors.mem(lps),
                TorchTensors.mem(lp), TorchTensors.mem(h)), TorchTensors.currentStream(view.device()));
        return new Sample(tokens, lps, lp, h);
    }
}
