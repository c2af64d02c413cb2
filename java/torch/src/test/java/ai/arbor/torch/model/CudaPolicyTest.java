package ai.arbor.torch.model;

import ai.arbor.testing.Gpu;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.AdamW;
import org.bytedeco.pytorch.AdamWOptions;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The policy on a CUDA device: the same weights give the CPU's logits, cached and forked decoding
 * equals recomputation, a training step runs, checkpoints move between devices. Runs only where
 * libtorch sees a GPU (the GPU build of the preset: {@code mvn -Pgpu}); skipped with that reason elsewhere.
 */
@SuppressWarnings("try") // PointerScope and NoGradGuard act through their try blocks
class CudaPolicyTest {

    @TempDir
    Path dir;

    @BeforeEach
    void needsCuda() {
        Gpu.assume(torch.cuda_is_available(),
                "libtorch sees no CUDA device (CPU build of the preset, or no GPU): build with -Pgpu on an NVIDIA machine");
    }

    @Test
    void cudaMatchesCpuAndDecodesLikeRecomputation() throws Exception {
        long seed = NaiveTransformer.seed();
        System.out.println("seed " + seed);
        Random rnd = new Random(seed);
        PolicyConfig config = NaiveTransformer.gqa(seed);
        try (ReferencePolicy cpu = ReferencePolicy.create(config, "cpu", ScalarType.Double);
             PointerScope scope = new PointerScope()) {
            NaiveTransformer.randomize(cpu, rnd, 0.4);
            Path file = dir.resolve("p.safetensors");
            cpu.save(file, ScalarType.Float);
            try (ReferencePolicy gpu = ReferencePolicy.load(file, "cuda", ScalarType.Double);
                 DecodeBatch batch = gpu.newDecodeBatch(4, 2)) {
                assertTrue(gpu.device().is_cuda());
                int[] prompt = NaiveTransformer.randomTokens(rnd, 7, config.vocab());
                double[] onCpu;
                // the checkpoint stored float32 weights: compare the GPU with the CPU model reloaded the same way
                try (ReferencePolicy cpuF = ReferencePolicy.load(file, "cpu", ScalarType.Double)) {
                    onCpu = Tensors.toDoubles(cpuF.forward(new int[][] {prompt}));
                }
                assertArrayEquals(onCpu, Tensors.toDoubles(gpu.forward(new int[][] {prompt})), 1e-9);
                int id = batch.prefill(List.of(prompt))[0];
                int[] kids = batch.fork(id, 5, 2);
                Tensor logits = batch.step(kids, new int[] {3, 4});
                assertTrue(logits.is_cuda());
                for (int i = 0; i < 2; i++) {
                    int[] seq = batch.tokens(kids[i]);
                    double[] all = Tensors.toDoubles(gpu.forward(new int[][] {seq}));
                    double[] want = Arrays.copyOfRange(all, (seq.length - 1) * config.vocab(), seq.length * config.vocab());
                    double[] got = Arrays.copyOfRange(Tensors.toDoubles(logits), i * config.vocab(), (i + 1) * config.vocab());
                    assertArrayEquals(want, got, 1e-9);
                }
            }
        }
    }

    /** A Qwen3 directory loaded on CUDA: float32 logits equal the CPU's; bf16 autocast tracks them; recomputation's gradients equal the plain ones. */
    @Test
    void huggingFaceModelOnCudaWithAutocastAndRecomputation() throws Exception {
        long seed = NaiveTransformer.seed();
        System.out.println("seed " + seed);
        Random rnd = new Random(seed);
        PolicyConfig config = HfCheckpoint.Family.QWEN3.config(61, 32, 2, 4, 2, 12, 48, 64, 1e6, 1e-6, false, true, seed);
        Path model = dir.resolve("qwen3");
        try (ReferencePolicy cpu = ReferencePolicy.create(config)) {
            NaiveTransformer.randomize(cpu, rnd, 0.3);
            HfCheckpoint.save(cpu, model, HfCheckpoint.SaveOptions.defaults().withStoreAs(ScalarType.Float));
        }
        int[][] tokens = {NaiveTransformer.randomTokens(rnd, 40, 61), NaiveTransformer.randomTokens(rnd, 40, 61)};
        try (ReferencePolicy cpu = ReferencePolicy.load(model, "cpu", ScalarType.Float);
             ReferencePolicy gpu = ReferencePolicy.load(model, "cuda", ScalarType.Float);
             PointerScope scope = new PointerScope()) {
            double[] want = Tensors.toDoubles(cpu.forward(tokens));
            double scale = Arrays.stream(want).map(Math::abs).max().orElseThrow();
            double[] f32 = Tensors.toDoubles(gpu.forward(tokens));
            for (int i = 0; i < want.length; i++) assertEquals(want[i], f32[i], 1e-4 * scale);
            gpu.setAutocast(ScalarType.BFloat16);
            Tensor logits = gpu.forward(tokens);
            assertEquals(ScalarType.Float, logits.scalar_type().intern());
            double[] bf = Tensors.toDoubles(logits);
            double worst = 0;
            for (int i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(bf[i] - want[i]) / scale);
            System.out.println("  bf16 autocast on CUDA vs CPU f32: max relative difference " + worst);
            assertTrue(worst < 0.05, "relative difference " + worst);
            // recomputation under autocast: the same gradients as the plain backward (same bf16 arithmetic)
            Tensor ids = Tensors.longs(Arrays.stream(tokens).flatMapToInt(Arrays::stream).asLongStream().toArray(), new long[] {2, 40},
                    gpu.device());
            gpu.forward(ids).pow(new org.bytedeco.pytorch.Scalar(2.0)).mean().backward();
            java.util.Map<String, double[]> plain = new java.util.TreeMap<>();
            for (var e : gpu.namedParameters().entrySet()) {
                plain.put(e.getKey(), Tensors.toDoubles(e.getValue().grad()));
                e.getValue().grad().zero_();
            }
            try (ReferencePolicy.Recomputed r = gpu.forwardRecomputed(ids)) {
                gpu.logits(r.hidden()).pow(new org.bytedeco.pytorch.Scalar(2.0)).mean().backward();
                r.backward();
            }
            for (var e : gpu.namedParameters().entrySet()) {
                double[] g = Tensors.toDoubles(e.getValue().grad()), p = plain.get(e.getKey());
                double gs = Arrays.stream(p).map(Math::abs).max().orElse(0) + 1e-30;
                for (int i = 0; i < g.length; i++) assertEquals(p[i], g[i], 1e-3 * gs, e.getKey());
            }
        }
    }

    @Test
    void trainingStepOnCuda() {
        PolicyConfig config = PolicyConfig.tiny(32);
        try (ReferencePolicy policy = ReferencePolicy.create(config, "cuda", ScalarType.Float); PointerScope scope = new PointerScope()) {
            Random rnd = new Random(1);
            int[][] inputs = new int[4][16];
            long[] targets = new long[64];
            for (int i = 0; i < 4; i++) for (int j = 0; j < 16; j++) inputs[i][j] = rnd.nextInt(32);
            for (int i = 0; i < 64; i++) targets[i] = inputs[i / 16][i % 16]; // learn to copy the input token
            Tensor target = Tensors.longs(targets, policy.device());
            AdamW opt = new AdamW(policy.parameters(), new AdamWOptions(3e-3));
            double first = 0, last = 0;
            for (int s = 0; s < 30; s++) {
                try (PointerScope inner = new PointerScope()) {
                    opt.zero_grad();
                    Tensor loss = torch.cross_entropy(policy.forward(inputs).view(-1, 32), target);
                    loss.backward();
                    opt.step();
                    if (s == 0) first = loss.item_double();
                    last = loss.item_double();
                }
            }
            assertEquals(Math.log(32), first, 0.1);
            assertTrue(last < 0.5 * first, first + " -> " + last);
            opt.close();
        }
    }
}
