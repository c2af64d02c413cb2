package ai.arbor.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.testing.Seeds;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * {@code arbor train} killed with SIGKILL ({@link Process#destroyForcibly()}) at random moments in a child JVM, then
 * {@code arbor train --resume DIR}: the resumed run finishes, its {@code metrics.jsonl} has every step once, in order,
 * and it is bit for bit the run that was never interrupted — the SFT cold start, the RL weights, every metric but the
 * wall times.
 *
 * <p>The run is sized so that an uninterrupted run is reproducible bit for bit: one RL prompt with one trajectory
 * and one held-out problem with one sample, so the local generator always decodes a batch of one. With several
 * concurrent requests the decode batches' composition depends on thread timing and the logits differ in their last
 * bits between two uninterrupted runs as well (docs/training.md, "Crash-safe training").
 */
class TrainResumeTest {
    static final int SFT_STEPS = 24, RL_STEPS = 5, EVERY = 4;
    static final String[] ARGS = {"--model", "16,1,2,1,32", "--sft-steps", "" + SFT_STEPS, "--sft-demos", "16", "--sft-batch", "4",
        "--steps", "" + RL_STEPS, "--prompts", "1", "--group-size", "1", "--eval-problems", "1", "--eval-samples", "1", "--train-size", "40",
        "--checkpoint-every", "" + EVERY};
    static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void killedTwiceThenResumedEqualsTheUninterruptedRun(@TempDir Path dir) throws Exception {
        long seed = Seeds.seed("TrainResumeTest.killedTwiceThenResumedEqualsTheUninterruptedRun");
        Random rnd = new Random(seed);
        Path whole = dir.resolve("whole"), killed = dir.resolve("killed");
        int rows = SFT_STEPS + 2 + RL_STEPS + 2;   // sft, eval before (sampled, greedy), rl, eval after

        // the run that is never interrupted, and how long it ran on after each of its rows
        Process w = child(whole, TrainCommandTest.concat(ARGS, "--out", whole.toString()));
        long[] after = timeLeftAfterRows(w, whole.resolve("metrics.jsonl"), rows);
        assertEquals(0, w.exitValue(), "the uninterrupted run");

        // started, killed at a random row of its log (plus a random delay: mid-step, mid-checkpoint), resumed, killed again, resumed
        int kills = 0;
        Process p = child(killed, TrainCommandTest.concat(ARGS, "--out", killed.toString()));
        for (int k = 0; k < 2; k++) {
            // the first kill in SFT, the second in the first evaluation or RL (at most at RL step RL_STEPS - 2), each after
            // a random delay of up to 400 ms but less than half the time the uninterrupted run took after that row: on a
            // fast machine the last RL steps and the final evaluation take less than 400 ms, and the run finished before
            // the second kill (seed 11259163425193 on a Zen 4: row 29 + 331 ms)
            int row = k == 0 ? 1 + rnd.nextInt(SFT_STEPS) : SFT_STEPS + 1 + rnd.nextInt(2 + RL_STEPS - 2);
            long delayMs = rnd.nextInt((int) Math.max(1, Math.min(400, after[row - 1] / 2)));
            System.out.println("kill " + (k + 1) + ": at metrics row " + row + " + " + delayMs + " ms");
            waitForRows(p, killed.resolve("metrics.jsonl"), row);
            Thread.sleep(delayMs);
            if (p.isAlive()) {
                p.destroyForcibly();
                kills++;
            }
            assertTrue(p.waitFor(60, TimeUnit.SECONDS));
            System.out.println("  exit " + p.exitValue() + "; checkpoints " + checkpoints(killed));
            p = child(killed, "--resume", killed.toString());
        }
        int exit = p.waitFor();
        System.out.println(Files.readString(dir.resolve("killed.log")));
        assertEquals(0, exit, "the resumed run finishes");
        assertEquals(2, kills, "both kills hit a running process");

        List<Map<String, Object>> a = rowsWithoutTimes(whole), b = rowsWithoutTimes(killed);
        assertEquals(rows, b.size(), "every row once");
        List<Integer> sft = steps(b, "sft"), rl = steps(b, "rl");
        assertEquals(range(SFT_STEPS), sft, "SFT steps 1..N once each, in order");
        assertEquals(range(RL_STEPS), rl, "RL steps 1..N once each, in order");
        assertEquals(4, b.stream().filter(r -> "eval".equals(r.get("phase"))).count());
        for (int i = 0; i < rows; i++) assertEquals(a.get(i), b.get(i), "metrics row " + (i + 1) + ", all but its wall times");
        for (String f : List.of("sft.safetensors", "policy.safetensors"))
            assertArrayEquals(Files.readAllBytes(whole.resolve(f)), Files.readAllBytes(killed.resolve(f)), f + " bit for bit");
        List<String> left = checkpoints(killed);
        assertTrue(left.size() == 1 && left.get(0).matches("checkpoint-\\d{6}"), "one complete checkpoint is kept, no temporary one: " + left);
    }

    @Test
    void resumeTakesTheRunsOwnOptions(@TempDir Path dir) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> call("--resume", dir.toString(), "--steps", "3"));
        assertTrue(e.getMessage().contains("--steps cannot be given with it"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> call("--resume", dir.toString(), "--checkpoint-every", "2"));
        assertTrue(e.getMessage().contains("no train-args.json") && e.getMessage().contains(dir.toString()), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> call("--checkpoint-every", "-1", "--out", dir.toString()));
        assertTrue(e.getMessage().contains("-1"), e.getMessage());
    }

    static void call(String... args) throws Exception {
        TrainCommand cmd = new TrainCommand();
        new CommandLine(cmd).parseArgs(args);
        cmd.call();
    }

    /** {@code arbor train args} in a new JVM, output to {@code out}'s sibling log file. */
    static Process child(Path out, String... args) throws IOException {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Dorg.bytedeco.javacpp.maxPhysicalBytes=0", "-Xss4m", "-cp", System.getProperty("java.class.path"), Arbor.class.getName(), "train"));
        cmd.addAll(List.of(args));
        Path log = out.resolveSibling(out.getFileName() + ".log");
        return new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile())).start();
    }

    /**
     * Waits for {@code p} to end, watching {@code metrics}: element i of the result is how many milliseconds it ran on
     * after its row i + 1 appeared ({@code rows} rows).
     */
    static long[] timeLeftAfterRows(Process p, Path metrics, int rows) throws Exception {
        long[] seen = new long[rows];
        int n = 0;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(300);
        while (p.isAlive() && System.nanoTime() < deadline) {
            if (Files.exists(metrics)) {
                long now = System.nanoTime(), lines = lines(metrics);
                for (; n < Math.min(lines, rows); n++) seen[n] = now;
            }
            Thread.sleep(5);
        }
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the uninterrupted run ended");
        long end = System.nanoTime();
        assertEquals(rows, lines(metrics), "the uninterrupted run's rows");
        for (; n < rows; n++) seen[n] = end;  // rows written as it ended
        long[] after = new long[rows];
        for (int i = 0; i < rows; i++) after[i] = (end - seen[i]) / 1_000_000;
        return after;
    }

    /** How many complete lines (metrics rows) {@code metrics} holds. */
    static long lines(Path metrics) throws IOException {
        return Files.readString(metrics).chars().filter(c -> c == '\n').count();
    }

    /** Waits until {@code metrics} has {@code rows} complete lines (or the process has ended). */
    static void waitForRows(Process p, Path metrics, int rows) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (p.isAlive() && System.nanoTime() < deadline) {
            if (Files.exists(metrics) && lines(metrics) >= rows) return;
            Thread.sleep(5);
        }
        assertTrue(p.isAlive(), "the run ended before metrics row " + rows + " (exit " + p.exitValue() + ")");
        throw new AssertionError("no metrics row " + rows + " within 120 s");
    }

    static List<String> checkpoints(Path out) throws IOException {
        try (var s = Files.list(out)) {
            return s.map(q -> q.getFileName().toString()).filter(n -> n.contains("checkpoint-")).sorted().toList();
        }
    }

    /** The log's rows without the wall-time fields (the only ones a resumed run may differ in). */
    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> rowsWithoutTimes(Path out) throws IOException {
        List<Map<String, Object>> rows = new ArrayList<>();
        for (String line : Files.readAllLines(out.resolve("metrics.jsonl"))) {
            Map<String, Object> r = new LinkedHashMap<>(JSON.readValue(line, Map.class));
            r.keySet().removeIf(k -> k.endsWith("seconds"));
            rows.add(r);
        }
        return rows;
    }

    static List<Integer> steps(List<Map<String, Object>> rows, String phase) {
        return rows.stream().filter(r -> phase.equals(r.get("phase"))).map(r -> ((Number) r.get("step")).intValue()).toList();
    }

    static List<Integer> range(int n) {
        List<Integer> l = new ArrayList<>();
        for (int i = 1; i <= n; i++) l.add(i);
        return l;
    }
}
