package ai.arbor.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.torch.model.ReferencePolicy;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * {@code arbor train --nproc 2} end to end: two child JVMs over Gloo on loopback. Their weights are bitwise equal;
 * the SFT phase (each rank half of every step's demonstrations) equals one process's within 1e-5 — weights and
 * logged losses; a failing rank fails the launcher with its exit code.
 */
class TrainDistributedTest {
    static final String[] ARGS = {"train", "--model", "16,1,2,1,32", "--sft-steps", "3", "--sft-demos", "16", "--sft-batch", "4", "--steps", "1",
        "--prompts", "2", "--group-size", "2", "--eval-problems", "0", "--train-size", "40", "--checkpoint-every", "0"};

    @TempDir
    Path tmp;

    @Test
    void twoProcessesTrainAsOne() throws Exception {
        Path two = tmp.resolve("two"), one = tmp.resolve("one");
        TrainCommandTest.run(TrainCommandTest.concat(ARGS, "--out", two.toString(), "--nproc", "2", "--dist-timeout", "60"));
        TrainCommandTest.run(TrainCommandTest.concat(ARGS, "--out", one.toString()));
        assertArrayEquals(Files.readAllBytes(two.resolve("policy.safetensors")), Files.readAllBytes(two.resolve("rank-1/policy.safetensors")),
                "the ranks' final weights are bitwise equal");
        float[] a = weights(two.resolve("sft.safetensors")), b = weights(one.resolve("sft.safetensors")), init = weights(null);
        double diff = 0, moved = 0;
        for (int i = 0; i < a.length; i++) {
            diff = Math.max(diff, Math.abs(a[i] - b[i]));
            moved = Math.max(moved, Math.abs(b[i] - init[i]));
        }
        System.out.printf("SFT, 2 processes vs 1: max |Δw| = %.3g (the steps moved weights up to %.3g)%n", diff, moved);
        assertTrue(moved > 1e-3, "SFT changed the weights: " + moved);
        assertTrue(diff <= 1e-5, "2 processes vs 1: max |Δw| = " + diff);
        List<Map<String, Object>> rows2 = TrainCommandTest.jsonl(two.resolve("metrics.jsonl")), rows1 = TrainCommandTest.jsonl(one.resolve("metrics.jsonl"));
        for (int s = 0; s < 3; s++) {
            Map<String, Object> r2 = rows2.get(s), r1 = rows1.get(s);
            assertEquals("sft", r1.get("phase"));
            assertEquals(TrainCommandTest.num(r1, "tokens"), TrainCommandTest.num(r2, "tokens"), "the global token count of step " + (s + 1));
            assertEquals(TrainCommandTest.num(r1, "loss"), TrainCommandTest.num(r2, "loss"), 1e-5, "the global loss of step " + (s + 1));
            assertEquals(TrainCommandTest.num(r1, "grad_norm"), TrainCommandTest.num(r2, "grad_norm"), 1e-5, "the global gradient norm of step " + (s + 1));
        }
        Map<String, Object> rl = rows2.stream().filter(r -> "rl".equals(r.get("phase"))).findFirst().orElseThrow();
        assertEquals(4.0, TrainCommandTest.num(rl, "trajectories"), "rank 0 logs the step's trajectories: 2 prompts x 2, one prompt per rank");
    }

    @Test
    void aRankThatFailsFailsTheLauncher() {
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        PrintStream old = System.err;
        int code;
        try (PrintStream ps = new PrintStream(err, true, StandardCharsets.UTF_8)) {
            System.setErr(ps);
            // one prompt per RL step cannot be shared by two ranks: every rank fails at the start
            String[] args = TrainCommandTest.concat(ARGS, "--out", tmp.resolve("bad").toString(), "--nproc", "2", "--dist-timeout", "20");
            args[List.of(args).indexOf("--prompts") + 1] = "1";
            code = new CommandLine(new Arbor()).execute(args);
        } finally {
            System.setErr(old);
        }
        String text = err.toString(StandardCharsets.UTF_8);
        System.out.println(text);
        assertEquals(1, code, "the launcher's exit code is the failed rank's");
        assertTrue(text.contains("arbor: rank ") && text.contains("exited with code 1"), text);
    }

    private static ai.arbor.torch.model.PolicyConfig parsedModel() {
        TrainCommand c = new TrainCommand();
        new CommandLine(c).parseArgs(java.util.Arrays.copyOfRange(ARGS, 1, ARGS.length));
        return c.run.options(ai.arbor.rl.Recipe.GRPO, 1, null, null).setup().model();
    }

    /** The float32 parameters of a checkpoint, flattened (null: the policy the run starts from, seed 1). */
    private static float[] weights(Path file) throws Exception {
        try (ReferencePolicy p = file != null ? ReferencePolicy.load(file, "cpu", ScalarType.Float)
                : ReferencePolicy.create(parsedModel().withSeed(ai.arbor.rollout.Seeds.derive(1, 7)), "cpu", ScalarType.Float)) {
            int n = 0;
            for (Tensor t : p.namedParameters().values()) n += (int) t.numel();
            float[] out = new float[n];
            int at = 0;
            for (Tensor t : p.namedParameters().values()) {
                Tensor c = t.detach().contiguous();
                new FloatPointer(c.data_ptr()).capacity(c.numel()).get(out, at, (int) c.numel());
                at += (int) c.numel();
            }
            return out;
        }
    }
}
