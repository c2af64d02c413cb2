package ai.arbor.dist;

import ai.arbor.kernels.LossAgg;
import ai.arbor.kernels.PolicyLossConfig;
import ai.arbor.rl.Sequence;
import ai.arbor.rl.TokenBatch;
import ai.arbor.torch.model.CpuThreads;
import ai.arbor.torch.model.PolicyConfig;
import ai.arbor.torch.model.ReferencePolicy;
import ai.arbor.train.OptimConfig;
import ai.arbor.train.Trainer;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorVector;

/**
 * One rank of {@link DistributedTest}'s jobs, in a JVM of its own (rank, world and master from the environment,
 * as {@code arbor train --nproc} sets them). Also the one-process reference, called in the test's JVM.
 *
 * <p>{@code train OUT}: {@link #STEPS} optimizer steps over this rank's share of a fixed global batch — SFT steps and
 * policy-gradient steps of two aggregations, the last on one sequence (the other ranks' shares empty) — then the parameters and the reported losses to {@code OUT/rank-R.bin}.
 * {@code loop}: SFT steps until killed, printing {@code step N} after each. {@code join}: rendezvous, one barrier.
 */
public final class DataParallelWorker {
    static final PolicyConfig CFG = new PolicyConfig(64, 16, 2, 2, 1, 32, 64, 10_000.0, 1e-6, true, 3);
    static final int STEPS = 7;
    /** Small buckets, so the parameters span several (the embedding alone exceeds one). */
    static final long BUCKET_BYTES = 3000;

    private DataParallelWorker() {}

    public static void main(String[] args) throws Exception {
        CpuThreads.set(1);
        Distributed.Config c = Distributed.Config.fromEnv(System.getenv());
        try (Distributed d = Distributed.init(c, Distributed.Backend.GLOO)) {
            switch (args[0]) {
                case "join" -> {
                    d.barrier();
                    System.out.println("joined " + d.rank() + " of " + d.worldSize());
                }
                case "train" -> {
                    Result r = train(new GradientSync(d, BUCKET_BYTES), d.rank(), d.worldSize());
                    write(Path.of(args[1]).resolve("rank-" + d.rank() + ".bin"), r);
                    d.barrier();
                }
                case "loop" -> {
                    try (ReferencePolicy p = ReferencePolicy.create(CFG);
                         Trainer t = new Trainer(p, OptimConfig.adamW(1e-3), Long.MAX_VALUE / 2, 1 << 14, CFG.vocab())) {
                        t.dataParallel(new GradientSync(d, BUCKET_BYTES));
                        List<Sequence> mine = share(globalBatch(), d.rank(), d.worldSize());
                        for (int s = 1; ; s++) {
                            t.sftStep(mine);
                            System.out.println("step " + s);
                            System.out.flush();
                        }
                    }
                }
                default -> throw new IllegalArgumentException("mode " + args[0]);
            }
        }
    }

    /** The parameters after the steps (flattened in the policy's order) and the loss each step reported. */
    record Result(float[] params, double[] losses) {}

    /**
     * The steps on {@code rank}'s share (sync null: alone, over the whole batch). Every rank starts from other random
     * weights ({@code seed + rank}): the broadcast from rank 0 must make them equal to the one-process run's.
     */
    static Result train(GradientSync sync, int rank, int world) {
        List<Sequence> all = globalBatch();
        List<Sequence> mine = share(all, rank, world);
        TokenBatch sft = TokenBatch.supervised(mine);
        TokenBatch pg = policyBatch(mine, rank, world);
        PolicyLossConfig[] losses = {PolicyLossConfig.builder().agg(LossAgg.SEQ_MEAN_TOKEN_MEAN).build(),
            PolicyLossConfig.builder().agg(LossAgg.SEQ_MEAN_TOKEN_SUM_NORM).build()};
        double[] reported = new double[STEPS];
        try (ReferencePolicy p = ReferencePolicy.create(CFG.withSeed(CFG.seed() + rank));
             // clipping at 0.5 is active (the gradients' norms are larger), so the global norm must be the same everywhere
             Trainer t = new Trainer(p, OptimConfig.adamW(3e-3).withMaxGradNorm(0.5), STEPS, 40, CFG.vocab())) {
            t.dataParallel(sync);
            for (int s = 0; s < STEPS - 1; s++) {
                if (s % 3 == 0) reported[s] = t.sftStep(sft).loss();
                else reported[s] = t.policyStep(pg, losses[s % 3 - 1]).loss().loss();
            }
            // the global batch's first sequence only: every other rank's share is empty (no backward, zero gradients)
            reported[STEPS - 1] = t.policyStep(pg.select(rank == 0 ? new int[] {0} : new int[0]), losses[0]).loss().loss();
            return new Result(flat(p.parameters()), reported);
        }
    }

    /** 7 sequences of 6–29 tokens (seeded), the first 3–5 tokens a prompt, the rest trained but for a masked observation. */
    static List<Sequence> globalBatch() {
        Random rnd = new Random(2026);
        List<Sequence> out = new ArrayList<>();
        for (int i = 0; i < 7; i++) {
            int len = 6 + rnd.nextInt(24), prompt = 3 + rnd.nextInt(3);
            int[] tok = new int[len];
            boolean[] mask = new boolean[len];
            for (int q = 0; q < len; q++) {
                tok[q] = 1 + rnd.nextInt(CFG.vocab() - 1);
                mask[q] = q >= prompt && !(q % 7 == 5);
            }
            out.add(Sequence.sft(tok, mask));
        }
        return out;
    }

    /** Rank r's sequences: every world-th from r (7 over 2 ranks: 4 and 3, of other lengths). */
    static List<Sequence> share(List<Sequence> all, int rank, int world) {
        List<Sequence> out = new ArrayList<>();
        for (int i = rank; i < all.size(); i += world) out.add(all.get(i));
        return out;
    }

    /**
     * The share's policy-gradient batch: old log-probs and advantages that depend on the sequence's index in the global
     * batch only (not on the rank), so the union of the shares is the one-process batch.
     */
    static TokenBatch policyBatch(List<Sequence> mine, int rank, int world) {
        TokenBatch b = TokenBatch.supervised(mine);
        float[] old = new float[b.rows()], adv = new float[b.rows()];
        for (int k = 0; k < b.rows(); k++) {
            int global = rank + world * b.seqId()[k];
            old[k] = (float) (-4.2 + 0.05 * ((global * 31 + b.position()[k] * 7) % 11));
            adv[k] = global % 3 == 0 ? -1f : 1f + 0.25f * global;
        }
        return new TokenBatch(b.sequences(), b.source(), b.seqId(), b.position(), b.label(), old, old, null, adv, b.weight(), null, null);
    }

    static float[] flat(TensorVector params) {
        List<float[]> parts = new ArrayList<>();
        int n = 0;
        for (long i = 0; i < params.size(); i++) {
            Tensor c = params.get(i).detach().cpu().contiguous();
            float[] v = new float[(int) c.numel()];
            new FloatPointer(c.data_ptr()).capacity(v.length).get(v);
            parts.add(v);
            n += v.length;
        }
        float[] out = new float[n];
        int at = 0;
        for (float[] v : parts) {
            System.arraycopy(v, 0, out, at, v.length);
            at += v.length;
        }
        return out;
    }

    static void write(Path file, Result r) throws IOException {
        try (DataOutputStream o = new DataOutputStream(Files.newOutputStream(file))) {
            o.writeInt(r.params().length);
            for (float v : r.params()) o.writeInt(Float.floatToRawIntBits(v));
            o.writeInt(r.losses().length);
            for (double v : r.losses()) o.writeLong(Double.doubleToRawLongBits(v));
        }
    }

    static Result read(Path file) throws IOException {
        try (var in = new java.io.DataInputStream(Files.newInputStream(file))) {
            float[] p = new float[in.readInt()];
            for (int i = 0; i < p.length; i++) p[i] = Float.intBitsToFloat(in.readInt());
            double[] l = new double[in.readInt()];
            for (int i = 0; i < l.length; i++) l[i] = Double.longBitsToDouble(in.readLong());
            return new Result(p, l);
        }
    }
}
