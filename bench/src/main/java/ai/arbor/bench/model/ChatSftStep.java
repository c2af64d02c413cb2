package ai.arbor.bench.model;

import ai.arbor.chat.ChatFormat;
import ai.arbor.rl.Sequence;
import ai.arbor.rl.TokenBatch;
import ai.arbor.task.Problem;
import ai.arbor.task.TrainingTask;
import ai.arbor.torch.TorchTokenStats;
import ai.arbor.torch.TorchTensors;
import ai.arbor.torch.model.CpuThreads;
import ai.arbor.torch.model.HfCheckpoint;
import ai.arbor.torch.model.PolicyConfig;
import ai.arbor.torch.model.ReferencePolicy;
import ai.arbor.train.Demonstrations;
import ai.arbor.train.OptimConfig;
import ai.arbor.train.Trainer;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.AdamW;
import org.bytedeco.pytorch.AdamWOptions;
import org.bytedeco.pytorch.BoolOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorArrayRefOptional;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * Where the time of one SFT step goes at the real Qwen3 vocabulary: {@code arith} demonstrations in the Qwen3
 * chat format (the tokenizer of {@code third_party/qwen3-tokenizer}), a random Qwen3 model with 151,936 tied
 * embedding rows, the step split into its phases — the transformer body's forward over the whole sequences, the
 * LM head at the trained rows, the token-statistics kernel forward and backward, the LM head's backward (the
 * tied embedding's dense gradient), the body's backward, gradient clipping, AdamW and zeroing the gradients —
 * then whole {@link Trainer#sftStep}s for comparison ({@code mode=phases} or {@code mode=trainer} runs only one of the two).
 *
 * <p>Each phase is reported as wall time and as the calling thread's CPU time. With one libtorch / OpenBLAS thread every
 * kernel runs on the calling thread, so its CPU time is what the phase costs on an idle core, also on a machine shared
 * with other work (where the wall time mostly measures the wait for a core).
 *
 * <pre>
 *   bench/run.sh --main ai.arbor.bench.model.ChatSftStep [threads=1] [blas=1] [batch=4] [steps=5] [hidden=64] [layers=3]
 *       [heads=4] [kv=2] [headdim=24] [ffn=160] [tokenizer=third_party/qwen3-tokenizer] [task=arith|arith-small]
 *       [mode=both|phases|trainer]
 * </pre>
 */
@SuppressWarnings("try")
public final class ChatSftStep {

    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

    private ChatSftStep() {}

    public static void main(String[] args) throws Exception {
        int threads = 1, blas = 1, batch = 4, steps = 5, hidden = 64, layers = 3, heads = 4, kv = 2, headDim = 24, ffn = 160;
        Path tokDir = Path.of("third_party/qwen3-tokenizer");
        String taskName = "arith";
        boolean phases = true, trainer = true;
        for (String a : args) {
            String[] kvp = a.split("=", 2);
            if (kvp.length != 2) throw new IllegalArgumentException("arguments are key=value, got " + a);
            switch (kvp[0]) {
                case "threads" -> threads = Integer.parseInt(kvp[1]);
                case "blas" -> blas = Integer.parseInt(kvp[1]);
                case "batch" -> batch = Integer.parseInt(kvp[1]);
                case "steps" -> steps = Integer.parseInt(kvp[1]);
                case "hidden" -> hidden = Integer.parseInt(kvp[1]);
                case "layers" -> layers = Integer.parseInt(kvp[1]);
                case "heads" -> heads = Integer.parseInt(kvp[1]);
                case "kv" -> kv = Integer.parseInt(kvp[1]);
                case "headdim" -> headDim = Integer.parseInt(kvp[1]);
                case "ffn" -> ffn = Integer.parseInt(kvp[1]);
                case "tokenizer" -> tokDir = Path.of(kvp[1]);
                case "task" -> taskName = kvp[1];
                case "mode" -> {
                    phases = !kvp[1].equals("trainer");
                    trainer = !kvp[1].equals("phases");
                }
                default -> throw new IllegalArgumentException("unknown argument " + a);
            }
        }
        CpuThreads.set(threads, blas); // libtorch's pool and OpenBLAS's apart (before the blas option both were threads)
        try (ChatFormat chat = ChatFormat.qwen3(tokDir, false);
             TrainingTask task = TrainingTask.create(taskName, 1, 64, 0, chat)) {
            List<Problem> problems = new ArrayList<>(task.train());
            List<Sequence> demos = Demonstrations.render(task, chat.tokenizer(), problems, 11, 2).sequences();
            PolicyConfig c = HfCheckpoint.Family.QWEN3.config(151_936, hidden, layers, heads, kv, headDim, ffn, 2048, 1e6, 1e-6, true, false, 1);
            System.out.printf(Locale.ROOT, "threads %d (torch %d, blas %d); model %.2f M parameters (vocab %d, hidden %d, %d layers, %d/%d heads of %d, ffn %d); "
                            + "task %s, %d demonstrations, batch %d%n", threads, CpuThreads.torchThreads(), CpuThreads.blasThreads(), c.parameterCount() / 1e6,
                    c.vocab(), hidden, layers, heads, kv, headDim, ffn, taskName, demos.size(), batch);
            int vocabLimit = chat.tokenizer().vocabSize();
            String[] names = {"body forward", "LM head forward (rows)", "token stats forward", "token stats backward", "LM head backward",
                    "body backward", "clip grad norm", "AdamW step", "zero grad"};
            double[][] t = new double[names.length][steps], cpu = new double[names.length][steps];
            int[] rowsPerStep = new int[steps], tokensPerStep = new int[steps];
            if (phases) try (ReferencePolicy p = ReferencePolicy.create(c, "cpu", ScalarType.Float);
                 TensorVector params = p.parameters();
                 AdamW opt = new AdamW(params, adamW(1e-3))) {
                for (int it = -1; it < steps; it++) {
                    List<Sequence> b = new ArrayList<>();
                    for (int k = 0; k < batch; k++) b.add(demos.get(Math.floorMod((it + 1) * batch + k, demos.size())));
                    TokenBatch tb = TokenBatch.supervised(b);
                    double[] ph = new double[names.length], phCpu = new double[names.length];
                    long[] marks = new long[names.length + 1], cpuMarks = new long[names.length + 1];
                    try (PointerScope scope = new PointerScope()) {
                        int tmax = 0;
                        for (int s = 0; s < tb.sequenceCount(); s++) tmax = Math.max(tmax, tb.length(s));
                        long[] tok = new long[tb.sequenceCount() * tmax];
                        for (int s = 0; s < tb.sequenceCount(); s++) {
                            int[] seq = tb.sequences().get(s);
                            for (int j = 0; j < seq.length; j++) tok[s * tmax + j] = seq[j];
                        }
                        int n = tb.rows();
                        long[] rows = new long[n], labels = new long[n];
                        for (int k = 0; k < n; k++) {
                            rows[k] = (long) tb.seqId()[k] * tmax + tb.position()[k] - 1;
                            labels[k] = tb.label()[k];
                        }
                        Tensor tokens = Tensor.create(tok, tb.sequenceCount(), tmax), rowIdx = Tensor.create(rows, n), lab = Tensor.create(labels, n);
                        marks[0] = System.nanoTime();
                        cpuMarks[0] = THREADS.getCurrentThreadCpuTime();
                        Tensor h = p.hidden(tokens);
                        marks[1] = System.nanoTime();
                        cpuMarks[1] = THREADS.getCurrentThreadCpuTime();
                        Tensor hd = h.detach();
                        hd.set_requires_grad(true);
                        Tensor logits = p.logits(hd.reshape(hd.size(0) * hd.size(1), hd.size(2)).index_select(0, rowIdx));
                        marks[2] = System.nanoTime();
                        cpuMarks[2] = THREADS.getCurrentThreadCpuTime();
                        Tensor data = logits.detach();
                        TorchTokenStats.Stats st = TorchTokenStats.forward(data, lab, 1f, null, vocabLimit);
                        TorchTensors.hostFloats(st.logprob());
                        marks[3] = System.nanoTime();
                        cpuMarks[3] = THREADS.getCurrentThreadCpuTime();
                        float[] g = new float[n];
                        Arrays.fill(g, (float) (-1.0 / n));
                        Tensor grad = TorchTokenStats.backward(data, lab, 1f, null, vocabLimit, st, Tensor.create(g, n), null);
                        marks[4] = System.nanoTime();
                        cpuMarks[4] = THREADS.getCurrentThreadCpuTime();
                        logits.backward(grad, new BoolOptional(), false, new TensorArrayRefOptional());
                        marks[5] = System.nanoTime();
                        cpuMarks[5] = THREADS.getCurrentThreadCpuTime();
                        h.backward(hd.grad(), new BoolOptional(), false, new TensorArrayRefOptional());
                        marks[6] = System.nanoTime();
                        cpuMarks[6] = THREADS.getCurrentThreadCpuTime();
                        torch.clip_grad_norm_(params, 1.0);
                        marks[7] = System.nanoTime();
                        cpuMarks[7] = THREADS.getCurrentThreadCpuTime();
                        opt.step();
                        marks[8] = System.nanoTime();
                        cpuMarks[8] = THREADS.getCurrentThreadCpuTime();
                        opt.zero_grad();
                        marks[9] = System.nanoTime();
                        cpuMarks[9] = THREADS.getCurrentThreadCpuTime();
                        for (int k = 0; k < names.length; k++) {
                            ph[k] = (marks[k + 1] - marks[k]) / 1e9;
                            phCpu[k] = (cpuMarks[k + 1] - cpuMarks[k]) / 1e9;
                        }
                        if (it >= 0) {
                            for (int k = 0; k < names.length; k++) {
                                t[k][it] = ph[k];
                                cpu[k][it] = phCpu[k];
                            }
                            rowsPerStep[it] = n;
                            tokensPerStep[it] = tb.sequenceCount() * tmax;
                        }
                    }
                    System.out.printf(Locale.ROOT, "  step %d: wall %s | thread CPU %s%n", it, fmt(ph), fmt(phCpu));
                }
            }
            if (phases) {
            double total = 0, totalCpu = 0;
            System.out.printf(Locale.ROOT, "%n| phase | wall s (median) | thread CPU s (median) | share of CPU |%n|---|---:|---:|---:|%n");
            double[] med = new double[names.length], medCpu = new double[names.length];
            for (int k = 0; k < names.length; k++) {
                total += med[k] = median(t[k]);
                totalCpu += medCpu[k] = median(cpu[k]);
            }
            for (int k = 0; k < names.length; k++)
                System.out.printf(Locale.ROOT, "| %s | %.4f | %.4f | %.0f %% |%n", names[k], med[k], medCpu[k], 100 * medCpu[k] / totalCpu);
            System.out.printf(Locale.ROOT, "| sum | %.4f | %.4f | |%n(padded tokens per step %d, trained rows %d, medians)%n", total, totalCpu,
                    (int) median(Arrays.stream(tokensPerStep).asDoubleStream().toArray()), (int) median(Arrays.stream(rowsPerStep).asDoubleStream().toArray()));
            }
            // whole Trainer steps (its own micro-batching, schedule, clipping)
            if (trainer) try (ReferencePolicy p = ReferencePolicy.create(c, "cpu", ScalarType.Float);
                 Trainer tr = new Trainer(p, OptimConfig.adamW(1e-3).withMaxGradNorm(1.0), steps + 1, 4096, vocabLimit)) {
                double[] s = new double[steps], sc = new double[steps];
                for (int it = -1; it < steps; it++) {
                    List<Sequence> b = new ArrayList<>();
                    for (int k = 0; k < batch; k++) b.add(demos.get(Math.floorMod((it + 1) * batch + k, demos.size())));
                    long c0 = THREADS.getCurrentThreadCpuTime();
                    Trainer.SftStats st = tr.sftStep(b);
                    if (it >= 0) {
                        s[it] = st.seconds();
                        sc[it] = (THREADS.getCurrentThreadCpuTime() - c0) / 1e9;
                    }
                }
                System.out.printf(Locale.ROOT, "Trainer.sftStep: median %.4f s wall, %.4f s thread CPU over %d steps (wall %s)%n", median(s), median(sc), steps, fmt(s));
            }
        }
    }

    private static AdamWOptions adamW(double lr) {
        AdamWOptions o = new AdamWOptions(lr);
        o.weight_decay().put(0.0);
        return o;
    }

    private static String fmt(double[] v) {
        StringBuilder sb = new StringBuilder();
        for (double x : v) sb.append(sb.length() == 0 ? "" : " ").append(String.format(Locale.ROOT, "%.3f", x));
        return sb.toString();
    }

    private static double median(double[] x) {
        double[] s = x.clone();
        Arrays.sort(s);
        return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    }
}
