package ai.arbor.dist;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.torch.model.CpuThreads;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Data parallelism over c10d (Gloo, loopback), each rank a JVM of its own ({@link DataParallelWorker}): two ranks end
 * bitwise equal to each other and within 1e-5 of one process over the same global batch; a rank killed mid-step makes
 * the other fail within its timeout; a port in use, an unreachable master and a world-size mismatch fail clearly.
 */
class DistributedTest {
    @TempDir
    Path tmp;

    @Test
    void twoRanksEqualEachOtherBitwiseAndOneProcessWithin1e5() throws Exception {
        int port = freePort();
        List<Process> ps = new ArrayList<>();
        for (int r = 0; r < 2; r++) ps.add(worker(r, 2, port, 30, "train", tmp.toString()));
        CpuThreads.set(1);
        // the one-process run, meanwhile: the whole batch, no sync
        DataParallelWorker.Result one = DataParallelWorker.train(null, 0, 1);
        for (int r = 0; r < 2; r++) assertExit(ps.get(r), r, 0, 90);
        DataParallelWorker.Result r0 = DataParallelWorker.read(tmp.resolve("rank-0.bin")), r1 = DataParallelWorker.read(tmp.resolve("rank-1.bin"));
        assertArrayEquals(r0.params(), r1.params(), "the ranks' weights are bitwise equal");   // assertArrayEquals(float[]) compares bits
        assertArrayEquals(r0.losses(), r1.losses(), "every rank reports the global loss");
        double maxDiff = 0, moved = 0;
        float[] init = initialParams();
        for (int i = 0; i < one.params().length; i++) {
            maxDiff = Math.max(maxDiff, Math.abs(one.params()[i] - r0.params()[i]));
            moved = Math.max(moved, Math.abs(one.params()[i] - init[i]));
        }
        System.out.printf("2 ranks vs 1 process after %d steps: max |Δw| = %.3g (weights moved up to %.3g)%n", DataParallelWorker.STEPS, maxDiff, moved);
        assertTrue(moved > 1e-3, "the steps changed the weights: " + moved);
        assertTrue(maxDiff <= 1e-5, "2 ranks vs 1 process: max |Δw| = " + maxDiff);
        for (int s = 0; s < one.losses().length; s++)
            assertEquals(one.losses()[s], r0.losses()[s], 1e-5 * Math.max(1, Math.abs(one.losses()[s])), "the global loss at step " + s);
    }

    /** The one-process run's starting weights (rank 0's seed), to show that the steps moved them. */
    private static float[] initialParams() {
        try (var p = ai.arbor.torch.model.ReferencePolicy.create(DataParallelWorker.CFG)) {
            return DataParallelWorker.flat(p.parameters());
        }
    }

    @Test
    void aRankKilledMidStepMakesTheOtherFailWithinItsTimeout() throws Exception {
        int port = freePort();
        Process r0 = worker(0, 2, port, 4, "loop"), r1 = worker(1, 2, port, 4, "loop");
        Path log1 = tmp.resolve("rank-1.log");
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (!(Files.exists(log1) && Files.readString(log1).contains("step 3")) && System.nanoTime() < deadline && r1.isAlive()) Thread.sleep(5);
        assertTrue(r1.isAlive() && Files.readString(log1).contains("step 3"), "rank 1 trained 3 steps: " + Files.readString(log1));
        long t0 = System.nanoTime();
        r1.destroyForcibly();   // SIGKILL: no shutdown hook, its sockets close under the other's collectives
        assertExit(r0, 0, 1, 30);
        double s = (System.nanoTime() - t0) / 1e9;
        String out = Files.readString(tmp.resolve("rank-0.log"));
        System.out.printf("rank 0 failed %.1f s after rank 1 was killed%n", s);
        assertTrue(out.contains("DistributedException") && out.contains("rank 0 of 2") && out.contains("failed (a peer died"), out);
        assertTrue(s < 4 + 10, "failed within the 4 s timeout (plus the JVM's exit): " + s);
    }

    @Test
    void aPortInUseIsNamed() throws Exception {
        try (ServerSocket taken = new ServerSocket(0)) {
            Distributed.Config c = new Distributed.Config(0, 2, 0, "127.0.0.1", taken.getLocalPort(), Duration.ofSeconds(3));
            DistributedException e = assertThrows(DistributedException.class, () -> Distributed.init(c, Distributed.Backend.GLOO));
            assertTrue(e.getMessage().contains("port " + taken.getLocalPort()) && e.getMessage().contains("already in use"), e.getMessage());
        }
    }

    @Test
    void anUnreachableMasterTimesOut() throws Exception {
        int port = freePort();
        Distributed.Config c = new Distributed.Config(1, 2, 1, "127.0.0.1", port, Duration.ofSeconds(2));
        long t0 = System.nanoTime();
        DistributedException e = assertThrows(DistributedException.class, () -> Distributed.init(c, Distributed.Backend.GLOO));
        double s = (System.nanoTime() - t0) / 1e9;
        assertTrue(e.getMessage().contains("cannot reach the rendezvous store of rank 0 at 127.0.0.1:" + port), e.getMessage());
        assertTrue(s < 15, "gave up after " + s + " s");
    }

    @Test
    void aWorldSizeMismatchIsNamedOnBothSides() throws Exception {
        int port = freePort();
        Process r1 = worker(1, 3, port, 10, "join");   // started with WORLD_SIZE=3, rank 0 with 2
        Distributed.Config c = new Distributed.Config(0, 2, 0, "127.0.0.1", port, Duration.ofSeconds(10));
        DistributedException e = assertThrows(DistributedException.class, () -> Distributed.init(c, Distributed.Backend.GLOO));
        assertEquals("world size mismatch: rank 0 was started with WORLD_SIZE=2, rank 1 with WORLD_SIZE=3", e.getMessage());
        assertExit(r1, 1, 1, 30);
        String out = Files.readString(tmp.resolve("rank-1.log"));
        assertTrue(out.contains("world size mismatch: rank 1 was started with WORLD_SIZE=3, rank 0 with WORLD_SIZE=2"), out);
    }

    @Test
    void bucketsHoldConsecutiveParametersUpToTheCap() throws Exception {
        try (Distributed d = Distributed.init(new Distributed.Config(0, 1, 0, "127.0.0.1", freePort(), Duration.ofSeconds(5)), Distributed.Backend.GLOO);
             var p = ai.arbor.torch.model.ReferencePolicy.create(DataParallelWorker.CFG); var params = p.parameters()) {
            List<Long> numels = new ArrayList<>();
            for (long i = 0; i < params.size(); i++) numels.add(params.get(i).numel());
            // the cap in floats: 3000 bytes = 750; a parameter larger than that (the 64 x 16 embedding) is a bucket alone
            List<Long> expected = new ArrayList<>();
            long cur = 0;
            for (long n : numels) {
                if (cur > 0 && (cur + n) * 4 > DataParallelWorker.BUCKET_BYTES) {
                    expected.add(cur);
                    cur = 0;
                }
                cur += n;
            }
            expected.add(cur);
            List<Long> got = new GradientSync(d, DataParallelWorker.BUCKET_BYTES).bucketSizes(params);
            System.out.println("parameters " + numels + " -> buckets " + got);
            assertEquals(expected, got);
            assertEquals(numels.stream().mapToLong(Long::longValue).sum(), got.stream().mapToLong(Long::longValue).sum());
            assertTrue(got.size() > 1 && got.size() < numels.size(), "several parameters share a bucket: " + got);
            assertEquals(List.of(numels.stream().mapToLong(Long::longValue).sum()), new GradientSync(d).bucketSizes(params), "25 MiB: one bucket");
        }
    }

    @Test
    void badEnvironmentValuesAreNamed() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Distributed.Config.fromEnv(Map.of("RANK", "0")));
        assertTrue(e.getMessage().contains("WORLD_SIZE is not set"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> Distributed.Config.fromEnv(Map.of("RANK", "2", "WORLD_SIZE", "2")));
        assertEquals("the rank must be in [0, 2), got 2", e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> Distributed.Config.fromEnv(Map.of("RANK", "0", "WORLD_SIZE", "2", "MASTER_PORT", "x")));
        assertEquals("environment variable MASTER_PORT must be an integer, got 'x'", e.getMessage());
        Distributed.Config c = Distributed.Config.fromEnv(Map.of("RANK", "1", "WORLD_SIZE", "4", "MASTER_ADDR", "10.0.0.7", "ARBOR_DIST_TIMEOUT", "2.5"));
        assertEquals(new Distributed.Config(1, 4, 1, "10.0.0.7", 29500, Duration.ofMillis(2500)), c);
        assertFalse(Distributed.Config.inEnv(Map.of("WORLD_SIZE", "1")));
    }

    // ---------------------------------------------------------------------------------------------

    /** A rank in a JVM of its own, output to {@code tmp/rank-R.log}. */
    private Process worker(int rank, int world, int port, int timeoutSeconds, String... args) throws IOException {
        ai.arbor.torch.NativeCache.fill();   // workers start together (and with this JVM's own libtorch work)
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Dorg.bytedeco.javacpp.maxPhysicalBytes=0", "-cp", System.getProperty("java.class.path"), DataParallelWorker.class.getName()));
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(tmp.resolve("rank-" + rank + ".log").toFile());
        Map<String, String> env = pb.environment();
        env.put("RANK", Integer.toString(rank));
        env.put("WORLD_SIZE", Integer.toString(world));
        env.put("MASTER_ADDR", "127.0.0.1");
        env.put("MASTER_PORT", Integer.toString(port));
        env.put("ARBOR_DIST_TIMEOUT", Integer.toString(timeoutSeconds));
        return pb.start();
    }

    private void assertExit(Process p, int rank, int code, int seconds) throws Exception {
        boolean done = p.waitFor(seconds, TimeUnit.SECONDS);
        if (!done) p.destroyForcibly();
        Path log = tmp.resolve("rank-" + rank + ".log");
        String out = Files.exists(log) ? Files.readString(log, StandardCharsets.UTF_8) : "";
        assertTrue(done, "rank " + rank + " ended within " + seconds + " s:\n" + out);
        assertEquals(code, p.exitValue(), "rank " + rank + "'s exit code:\n" + out);
    }

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }
}
