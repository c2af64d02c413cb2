package example;

import ai.arbor.kernels.Backend;
import ai.arbor.kernels.TokenStats;
import ai.arbor.sandbox.ExecResult;
import ai.arbor.sandbox.PythonSandbox;
import ai.arbor.sandbox.SandboxSession;
import java.time.Duration;
import java.util.Arrays;

public final class EmbedExample {
    public static void main(String[] args) {
        float[] logits = {2f, 1f, 0.1f,    0f, 0f, 0f};   // 2 rows, vocab 3
        int[] labels = {0, 2};
        float[] logprob = new float[2], entropy = new float[2];
        TokenStats.forward(logits, 2, 3, labels, 1.0f, logprob, entropy);
        System.out.println("logprob " + Arrays.toString(logprob));   // [-0.41703, -1.0986123] (row 2: -ln 3)
        System.out.println("entropy " + Arrays.toString(entropy));   // [0.84673816, 1.0986123] (row 2: ln 3)
        System.out.println("cuda " + (Backend.CUDA.isAvailable() ? "available" : Backend.CUDA.unavailableReason()));

        try (PythonSandbox sandbox = PythonSandbox.builder().workers(1).timeout(Duration.ofSeconds(5)).build();
             SandboxSession session = sandbox.openSession()) {
            ExecResult r = session.execute("print(6*7)");
            System.out.println("sandbox " + r.status() + " " + r.stdout().strip());   // sandbox OK 42
            System.out.println("isolation " + sandbox.isolation());                   // JAIL (bubblewrap)
        }
    }
}
