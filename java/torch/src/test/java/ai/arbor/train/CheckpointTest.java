package ai.arbor.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.rl.Sequence;
import ai.arbor.torch.model.ReferencePolicy;
import ai.arbor.train.report.MetricsLog;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@link Checkpoint}: what it restores is bit for bit what was saved, and a crash mid-write is never read. */
class CheckpointTest {
    static final OptimConfig OPTIM = OptimConfig.adamW(1e-2).withWarmup(2).withSchedule(OptimConfig.Schedule.COSINE);
    static final int STEPS = 8;

    static {
        TrainerTest.threads();
    }

    static Map<String, float[]> weights(ReferencePolicy p) {
        Map<String, float[]> m = new LinkedHashMap<>();
        for (Map.Entry<String, Tensor> e : p.namedParameters().entrySet()) m.put(e.getKey(), TrainerTest.values(e.getValue()));
        return m;
    }

    static void assertSameWeights(Map<String, float[]> a, Map<String, float[]> b) {
        assertEquals(a.keySet(), b.keySet());
        for (String k : a.keySet()) assertArrayEquals(a.get(k), b.get(k), k + " bit for bit");   // assertArrayEquals(float[]) compares exactly
    }

    static Checkpoint.State state(int seq, long optimizerSteps) {
        return new Checkpoint.State(Checkpoint.VERSION, "options", Checkpoint.Phase.SFT, 4, optimizerSteps, seq, 1.5, 0, List.of());
    }

    /** The optimizer's moments and step count come back: training on from a checkpoint is training on without one. */
    @Test
    void weightsAndOptimizerStateResumeBitForBit(@TempDir Path dir) throws Exception {
        List<Sequence> batch = TrainerTest.batch();
        Map<String, float[]> straight, resumed, freshOptimizer;
        Checkpoint ck;
        try (ReferencePolicy policy = ReferencePolicy.create(TrainerTest.CFG); Trainer t = new Trainer(policy, OPTIM, STEPS, 4096, TrainerTest.TOK.vocabSize())) {
            for (int i = 0; i < 4; i++) t.sftStep(batch);
            ck = Checkpoint.write(dir, null, state(1, t.steps()), policy, t, batch, null, List.of());
            for (int i = 0; i < 4; i++) t.sftStep(batch);
            straight = weights(policy);
        }
        try (ReferencePolicy policy = ReferencePolicy.load(ck.file(Checkpoint.POLICY), "cpu", ScalarType.Float);
             Trainer t = new Trainer(policy, OPTIM, STEPS, 4096, TrainerTest.TOK.vocabSize())) {
            t.loadOptimizer(ck.file(Checkpoint.OPTIMIZER), ck.state().optimizerSteps());
            assertEquals(OPTIM.lrAt(4, STEPS), t.lr(), "the schedule goes on from step 4");
            for (int i = 0; i < 4; i++) t.sftStep(ck.demos());
            resumed = weights(policy);
        }
        assertSameWeights(straight, resumed);
        // the control: the same weights with a fresh AdamW (no moments) train to other weights
        try (ReferencePolicy policy = ReferencePolicy.load(ck.file(Checkpoint.POLICY), "cpu", ScalarType.Float);
             Trainer t = new Trainer(policy, OPTIM, STEPS, 4096, TrainerTest.TOK.vocabSize())) {
            for (int i = 0; i < 4; i++) t.sftStep(batch);
            freshOptimizer = weights(policy);
        }
        String k = straight.keySet().iterator().next();
        assertFalse(Arrays.equals(straight.get(k), freshOptimizer.get(k)), "without the optimizer state the run would differ");
    }

    @Test
    void demonstrationsRoundTrip(@TempDir Path dir) throws Exception {
        List<Sequence> demos = TrainerTest.batch();
        Checkpoint.writeDemos(dir.resolve("d.bin"), demos);
        assertEquals(demos, Checkpoint.readDemos(dir.resolve("d.bin")));
        byte[] bytes = Files.readAllBytes(dir.resolve("d.bin"));
        Files.write(dir.resolve("cut.bin"), Arrays.copyOf(bytes, bytes.length - 3));
        assertThrows(java.io.EOFException.class, () -> Checkpoint.readDemos(dir.resolve("cut.bin")));
    }

    /** The newest complete checkpoint wins; a temporary directory (a crash mid-write) is never read, and the next write removes it. */
    @Test
    void latestIsTheNewestCompleteOneAndOthersAreDeleted(@TempDir Path dir) throws Exception {
        assertNull(Checkpoint.latest(dir, "options"));
        try (ReferencePolicy policy = ReferencePolicy.create(TrainerTest.CFG)) {
            Checkpoint first = Checkpoint.write(dir, null, state(1, 0), policy, null, TrainerTest.batch(), null, List.of("{\"step\":1}"));
            Checkpoint second = Checkpoint.write(dir, first, state(2, 0), policy, null, TrainerTest.batch(), null, List.of("{\"step\":1}", "{\"step\":2}"));
            assertFalse(Files.exists(first.dir()), "the older checkpoint is deleted once the newer is complete");
            assertEquals(Files.readAllBytes(dir.resolve("checkpoint-000002").resolve(Checkpoint.DEMOS)).length,
                    Files.size(second.file(Checkpoint.DEMOS)));
            // a crash while checkpoint 3 was written: its temporary directory holds a part
            Path partial = Files.createDirectories(dir.resolve(".checkpoint-000003.tmp"));
            Files.writeString(partial.resolve(Checkpoint.STATE), "{\"vers");
            Checkpoint latest = Checkpoint.latest(dir, "options");
            assertEquals(second.dir(), latest.dir());
            assertEquals(List.of("{\"step\":1}", "{\"step\":2}"), latest.metricsLines());
            assertEquals(TrainerTest.batch(), latest.demos());
            try (ReferencePolicy back = ReferencePolicy.load(latest.file(Checkpoint.POLICY), "cpu", ScalarType.Float)) {
                assertSameWeights(weights(policy), weights(back));
            }
            Checkpoint.write(dir, latest, state(3, 0), policy, null, null, null, List.of());
            try (var s = Files.list(dir)) {
                assertEquals(List.of("checkpoint-000003"), s.map(p -> p.getFileName().toString()).toList());
            }

            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Checkpoint.latest(dir, "other options"));
            assertTrue(e.getMessage().contains("other options") && e.getMessage().contains("checkpoint-000003"), e.getMessage());
            Checkpoint.clear(dir);
            assertNull(Checkpoint.latest(dir, "options"));
        }
    }

    /** A resumed log is exactly the checkpoint's lines, then the new ones: a step logged after the checkpoint is dropped, not repeated. */
    @Test
    void metricsLogResumesFromTheCheckpointsLines(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("metrics.jsonl");
        List<String> kept;
        try (MetricsLog log = new MetricsLog(file)) {
            log.log(row(1, 0.5));
            log.log(row(2, 0.25));
            kept = log.lines();
            log.log(row(3, 0.125));   // after the checkpoint: lost with the crash, redone by the resumed run
        }
        Files.writeString(file, Files.readString(file) + "{\"step\":4,\"lo", java.nio.file.StandardOpenOption.TRUNCATE_EXISTING);
        try (MetricsLog log = MetricsLog.resume(file, kept)) {
            assertEquals(2, log.rows().size());
            assertArrayEquals(new double[] {1, 2}, log.series("step"));
            log.log(row(3, 0.2));
        }
        List<String> lines = Files.readAllLines(file);
        assertEquals(List.of(kept.get(0), kept.get(1), "{\"step\":3,\"loss\":0.2}"), new ArrayList<>(lines));
        assertFalse(Files.exists(dir.resolve("metrics.jsonl.tmp")));
    }

    static Map<String, Object> row(int step, double loss) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("step", step);
        m.put("loss", loss);
        return m;
    }

    @Test
    void badIntervalIsAnError() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new Checkpoint.Policy(-1, false));
        assertTrue(e.getMessage().contains("-1"), e.getMessage());
        assertTrue(new Checkpoint.Policy(4, false).due(8, 10) && new Checkpoint.Policy(4, false).due(10, 10));
        assertFalse(new Checkpoint.Policy(4, false).due(9, 10) || Checkpoint.Policy.none().due(10, 10));
    }
}
