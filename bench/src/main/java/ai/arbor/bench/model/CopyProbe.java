package ai.arbor.bench.model;

import ai.arbor.chat.ChatFormat;
import ai.arbor.rl.Sequence;
import ai.arbor.rl.TokenBatch;
import ai.arbor.task.DemoStyle;
import ai.arbor.task.TrainingTask;
import ai.arbor.torch.model.CpuThreads;
import ai.arbor.torch.model.ReferencePolicy;
import ai.arbor.train.Demonstrations;
import ai.arbor.train.Trainer;
import java.nio.file.Path;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * Has a policy learnt to copy? Teacher-forced log-probs of held-out tool demonstrations of an arith task in the Qwen3
 * chat format, split by token: the copied tokens of the program (the expression's digits and operators), the copied
 * tokens of the answer (the result's digits and sign, after the tool response) and the format tokens. Without any
 * copying a digit costs ≈ ln 10 = 2.30 nats and an operator ≈ ln 3 = 1.10. Also reported: the mean probability
 * that a τ = 1 sample reproduces the whole demonstration (a lower bound of sampled accuracy for a tool-only cold
 * start) and the share of demonstrations whose every trained token has probability > 1/2 (then greedy decoding
 * writes it: a lower bound of greedy accuracy).
 *
 * <pre>
 *   bench/run.sh --main ai.arbor.bench.model.CopyProbe CHECKPOINT [task=arith-small] [problems=64] [seed=1] [train-size=3000]
 *       [tokenizer=third_party/qwen3-tokenizer]
 * </pre>
 * {@code seed} and {@code train-size} must be the training run's, so that the held-out split is the run's.
 */
public final class CopyProbe {
    private CopyProbe() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 1) throw new IllegalArgumentException("usage: CopyProbe CHECKPOINT [task=…] [problems=…] [seed=…] [train-size=…] [tokenizer=…]");
        Path checkpoint = Path.of(args[0]);
        String taskName = "arith-small";
        int problems = 64, trainSize = 3000;
        long seed = 1;
        Path tokDir = Path.of("third_party/qwen3-tokenizer");
        for (int i = 1; i < args.length; i++) {
            String[] kv = args[i].split("=", 2);
            if (kv.length != 2) throw new IllegalArgumentException("arguments after the checkpoint are key=value, got " + args[i]);
            switch (kv[0]) {
                case "task" -> taskName = kv[1];
                case "problems" -> problems = Integer.parseInt(kv[1]);
                case "seed" -> seed = Long.parseLong(kv[1]);
                case "train-size" -> trainSize = Integer.parseInt(kv[1]);
                case "tokenizer" -> tokDir = Path.of(kv[1]);
                default -> throw new IllegalArgumentException("unknown argument " + args[i]);
            }
        }
        CpuThreads.set(1);
        try (ChatFormat chat = ChatFormat.qwen3(tokDir, false);
             TrainingTask task = TrainingTask.create(taskName, seed, trainSize, Math.max(problems, 200), chat);
             ReferencePolicy p = ReferencePolicy.load(checkpoint, "cpu", ScalarType.Float)) {
            List<Sequence> test = Demonstrations.render(task, chat.tokenizer(), task.heldOut().subList(0, problems),
                    Collections.nCopies(problems, DemoStyle.TOOL), 2).sequences();
            Set<Integer> copied = new HashSet<>();
            for (String c : "0123456789+-*".split("")) copied.add(chat.tokenizer().encode(c)[0]);
            int imEnd = chat.tokenizer().eosId();
            double[] nats = new double[3];
            int[] count = new int[3];
            double pSample = 0;
            int sure = 0;
            for (int from = 0; from < test.size(); from += 16) {
                List<Sequence> sub = test.subList(from, Math.min(test.size(), from + 16));
                TokenBatch tb = TokenBatch.supervised(sub);
                float[] lp = Trainer.score(p, tb, 1f, 8192, chat.tokenizer().vocabSize()).logprobs();
                int k = 0;
                for (int s = 0; s < sub.size(); s++) {
                    int turn = 0;
                    double seqLp = 0;
                    boolean ok = true;
                    for (; k < tb.rows() && tb.seqId()[k] == s; k++) {
                        int label = tb.label()[k];
                        int kind = !copied.contains(label) ? 2 : turn == 0 ? 0 : 1;
                        nats[kind] -= lp[k];
                        count[kind]++;
                        seqLp += lp[k];
                        ok &= lp[k] > Math.log(0.5);
                        if (label == imEnd) turn++;
                    }
                    pSample += Math.exp(seqLp);
                    if (ok) sure++;
                }
            }
            System.out.printf(Locale.ROOT, "%s on %d held-out %s tool demonstrations: nats per token: program copy %.3f, answer copy %.3f, format %.3f; "
                            + "P(τ=1 sample = demonstration) %.3f; every token p > 1/2: %.3f%n", checkpoint, test.size(), taskName,
                    nats[0] / count[0], nats[1] / count[1], nats[2] / count[2], pSample / test.size(), sure / (double) test.size());
        }
    }
}
