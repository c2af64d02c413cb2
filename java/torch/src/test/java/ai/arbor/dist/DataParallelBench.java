package ai.arbor.dist;

import ai.arbor.rl.Sequence;
import ai.arbor.torch.model.CpuThreads;
import ai.arbor.torch.model.PolicyConfig;
import ai.arbor.torch.model.ReferencePolicy;
import ai.arbor.train.OptimConfig;
import ai.arbor.train.Trainer;
import ai.arbor.train.TrainingRun;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;

/**
 * Data parallelism's cost on this machine (bench/RESULTS.md, "Data-parallel training"): the SFT step time of the
 * default policy with one process and with N ({@code --nproc}) over the same global batch, the gradient all-reduce's
 * share of it, and Gloo's all-reduce throughput against a memcpy of the same bytes.
 *
 * <pre>
 * java -cp java/torch/target/test-classes:java/torch/target/classes:$(cat java/torch/target/classpath.txt) \
 *     ai.arbor.dist.DataParallelBench [nproc=2] [steps=10] [batch=32]
 * </pre>
 * Runs the one-process steps in this JVM, then starts the N ranks as child JVMs ({@link LocalLauncher}) running
 * {@code rank} mode; rank 0 prints.
 */
public final class DataParallelBench {
    private DataParallelBench() {}

    public static void main(String[] args) throws Exception {
        CpuThreads.set(1);
        if (args.length > 0 && args[0].equals("rank")) {
            rank(Integer.parseInt(args[1]), Integer.parseInt(args[2]));
            return;
        }
        int nproc = args.length > 0 ? Integer.parseInt(args[0]) : 2;
        int steps = args.length > 1 ? Integer.parseInt(args[1]) : 10, batch = args.length > 2 ? Integer.parseInt(args[2]) : 32;
        System.out.printf(Locale.ROOT, "model %,d parameters, global batch %d sequences, %d timed steps (after 2 warm-up), 1 thread per process%n",
                model().parameterCount(), batch, steps);
        double[] one = sftSteps(null, steps, batch, 0, 1);
        System.out.printf(Locale.ROOT, "1 process : SFT step median %.1f ms (min %.1f)%n", median(one) * 1e3, min(one) * 1e3);
        List<String> cmd = LocalLauncher.javaCommand(DataParallelBench.class);
        cmd.addAll(List.of("rank", Integer.toString(steps), Integer.toString(batch)));
        int code = LocalLauncher.run(new LocalLauncher.Job(cmd, nproc, 1, 0, "127.0.0.1", LocalLauncher.freePort(), Duration.ofSeconds(120),
                Path.of(System.getProperty("java.io.tmpdir"), "arbor-dp-bench"), 0));
        if (code != 0) throw new IllegalStateException("a rank failed with exit code " + code);
    }

    private static void rank(int steps, int batch) {
        try (Distributed d = Distributed.init(Distributed.Config.fromEnv(System.getenv()), Distributed.Backend.GLOO)) {
            GradientSync sync = new GradientSync(d);
            double[] t = sftSteps(sync, steps, batch, d.rank(), d.worldSize());
            double[] sumT = d.max(median(t));
            if (d.isMain())
                System.out.printf(Locale.ROOT, "%d processes: SFT step median %.1f ms (slowest rank's median; each rank %d sequences)%n", d.worldSize(),
                        sumT[0] * 1e3, batch / d.worldSize());
            // the gradient all-reduce alone, on the policy's gradients
            try (ReferencePolicy p = ReferencePolicy.create(model()); TensorVector params = p.parameters()) {
                for (long i = 0; i < params.size(); i++) params.get(i).mutable_grad().put(torch.ones_like(params.get(i)));
                double[] s = new double[steps];
                for (int k = -2; k < steps; k++) {
                    d.barrier();   // the collective's own cost, not the ranks' skew
                    long t0 = System.nanoTime();
                    sync.allReduceGradients(params);
                    if (k >= 0) s[k] = (System.nanoTime() - t0) / 1e9;
                }
                if (d.isMain())
                    System.out.printf(Locale.ROOT, "%d processes: gradient all-reduce of %,d floats (%.2f MB) median %.2f ms%n", d.worldSize(),
                            model().parameterCount(), model().parameterCount() * 4 / 1e6, median(s) * 1e3);
            }
            for (long bytes : new long[] {64 << 10, 1 << 20, 16 << 20, 64 << 20}) {
                long n = bytes / 4;
                Tensor x = torch.ones(n), y = torch.empty(n);
                int reps = bytes >= (16 << 20) ? 5 : 20;
                double[] ar = new double[reps], cp = new double[reps];
                for (int k = -2; k < reps; k++) {
                    d.barrier();
                    long t0 = System.nanoTime();
                    d.allReduceSum(x);
                    long t1 = System.nanoTime();
                    y.copy_(x);
                    long t2 = System.nanoTime();
                    if (k >= 0) {
                        ar[k] = (t1 - t0) / 1e9;
                        cp[k] = (t2 - t1) / 1e9;
                    }
                }
                double arMax = d.max(median(ar))[0];
                if (d.isMain())
                    System.out.printf(Locale.ROOT, "all-reduce %8.2f MB: %8.3f ms = %6.2f GB/s of the buffer; memcpy %7.3f ms = %6.2f GB/s; ratio %.1fx%n",
                            bytes / 1e6, arMax * 1e3, bytes / arMax / 1e9, median(cp) * 1e3, bytes / median(cp) / 1e9, arMax / median(cp));
                x.close();
                y.close();
            }
        }
    }

    static PolicyConfig model() {
        return TrainingRun.Setup.defaultModel();
    }

    /** Seconds of each timed SFT step over this rank's share of a seeded global batch (96–160 tokens a sequence). */
    static double[] sftSteps(GradientSync sync, int steps, int batch, int rank, int world) {
        Random rnd = new Random(7);
        List<Sequence> all = new ArrayList<>();
        for (int i = 0; i < batch; i++) {
            int len = 96 + rnd.nextInt(65);
            int[] tok = new int[len];
            boolean[] mask = new boolean[len];
            for (int q = 0; q < len; q++) {
                tok[q] = 1 + rnd.nextInt(model().vocab() - 1);
                mask[q] = q >= 40;
            }
            all.add(Sequence.sft(tok, mask));
        }
        List<Sequence> mine = all.subList(rank * batch / world, (rank + 1) * batch / world);
        double[] t = new double[steps];
        try (ReferencePolicy p = ReferencePolicy.create(model());
             Trainer tr = new Trainer(p, OptimConfig.adamW(1e-3), steps + 2, 2048, model().vocab()).dataParallel(sync)) {
            for (int k = -2; k < steps; k++) {
                long t0 = System.nanoTime();
                tr.sftStep(mine);
                if (k >= 0) t[k] = (System.nanoTime() - t0) / 1e9;
            }
        }
        return t;
    }

    static double median(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        return s[s.length / 2];
    }

    static double min(double[] v) {
        return Arrays.stream(v).min().orElse(Double.NaN);
    }
}
