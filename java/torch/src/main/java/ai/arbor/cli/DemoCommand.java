package ai.arbor.cli;

import ai.arbor.kernels.Backend;
import ai.arbor.kernels.Kernels;
import ai.arbor.kernels.TokenStats;
import java.util.Locale;
import picocli.CommandLine.Command;

/** Runs the kernels on a built-in example and prints what they computed. */
@Command(name = "demo", mixinStandardHelpOptions = true,
        description = "Run the token-statistics kernels on a built-in example and print the results.")
public final class DemoCommand implements Runnable {

    @Override
    public void run() {
        System.out.printf(Locale.ROOT, "backends: CPU (%s, %d threads)%s%n", Backend.cpuIsa(), Kernels.threads(),
                Backend.CUDA.isAvailable() ? ", CUDA (" + Backend.CUDA.deviceCount() + " devices)"
                        : "; CUDA unavailable: " + Backend.CUDA.unavailableReason());
        // Three token positions over a 5-token vocabulary; the middle row is certain, the last uniform.
        String[] vocab = {"the", "cat", "sat", "on", "mat"};
        float[] logits = {
            2.0f, 1.0f, 0.1f, -1.0f, 0.5f,
            -30f, 12f, -30f, -30f, -30f,
            0f, 0f, 0f, 0f, 0f,
        };
        int[] labels = {0, 1, 4};
        int rows = 3, v = vocab.length;
        float[] logprob = new float[rows], entropy = new float[rows];
        TokenStats.forward(logits, rows, v, labels, 1.0f, logprob, entropy);
        System.out.println("token statistics (temperature 1):");
        for (int r = 0; r < rows; r++)
            System.out.printf(Locale.ROOT, "  row %d  label %-4s  logprob %9.5f  (p = %.4f)  entropy %.5f nats%n",
                    r, vocab[labels[r]], logprob[r], Math.exp(logprob[r]), entropy[r]);
        System.out.printf(Locale.ROOT, "  (uniform over %d tokens: entropy ln %d = %.5f)%n", v, v, Math.log(v));
        // dL/dlogits of L = -sum logprob (cross entropy): p - onehot
        float[] gradLogprob = {-1f, -1f, -1f};
        float[] grad = new float[rows * v];
        TokenStats.backward(logits, rows, v, labels, 1.0f, gradLogprob, null, grad);
        System.out.println("dL/dlogits of the cross entropy L = -sum(logprob)  (= softmax - onehot):");
        for (int r = 0; r < rows; r++) {
            StringBuilder sb = new StringBuilder("  row " + r + " ");
            for (int j = 0; j < v; j++) sb.append(String.format(Locale.ROOT, " %8.5f", grad[r * v + j]));
            System.out.println(sb);
        }
    }
}
