package ai.arbor.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.bindings.ArborCpu;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.bytedeco.javacpp.Loader;
import org.junit.jupiter.api.Test;

/**
 * Allocation failures inside the CPU kernels (docs/kernels.md, "Argument validation"): real ones, made by an
 * address-space limit (RLIMIT_AS) in a process of its own — {@code native/test/alloc_failure.cpp}, compiled here with
 * g++ and run on the very library this JVM loaded. A limit cannot be set on the JVM itself (it would fail its own
 * allocations), and a workspace too large to exist cannot be asked for portably (with Linux's "always overcommit" it
 * would be granted and then touched). What must hold: an allocation failure is {@code ARBOR_ERR_ALLOC} (Java: an
 * {@link OutOfMemoryError}), never {@code std::terminate}, whether it happens in the entry point or in a worker
 * thread; and the fused policy loss without room for its kept exps still computes — by the two-exp path, the
 * composable path's bits.
 */
class NativeAllocationFailureTest {

    @Test
    void anAllocationFailureIsArborErrAllocInTheEntryPointAndInAWorkerThread() throws Exception {
        Map<String, long[]> out = runDriver();
        // the fused-linear statistics: its own 64 MiB tile refused (no product has run yet)
        assertEquals(ArborCpu.OK, out.get("stats")[0], "stats without a limit");
        assertEquals(ArborCpu.ERR_ALLOC, out.get("stats")[1], "stats whose tile cannot be allocated");
        // top-k sampling on 2 threads, the only unmasked row in the worker's block: its bad_alloc crosses the join
        assertEquals(ArborCpu.OK, out.get("sample")[0], "sample without a limit");
        assertEquals(ArborCpu.ERR_ALLOC, out.get("sample")[1], "sample whose worker cannot allocate its scratch");
    }

    @Test
    void theFusedLossWithoutRoomForItsKeptExpsTakesTheTwoExpPath() throws Exception {
        long[] loss = runDriver().get("loss");
        assertEquals(ArborCpu.OK, loss[0], "fused loss without a limit");
        assertEquals(ArborCpu.OK, loss[1], "fused loss under the limit");
        // the kept-exps gradient is within rounding of the composable one but not its bits (PolicyLossTest), so some
        // differ: this shows the limit changed the path taken
        assertTrue(loss[2] > 0, "the kept-exps gradient differs from the composable one in " + loss[2] + " elements");
        assertEquals(0, loss[3], "gradient elements of the two-exp fallback that differ from the composable path");
        assertEquals(0, loss[4], "loss sums that differ between the two paths");
        assertEquals(0, loss[5], "log-prob / entropy values that differ between the two paths");
    }

    @Test
    void errAllocIsAnOutOfMemoryErrorNamingTheCall() {
        OutOfMemoryError e = assertThrows(OutOfMemoryError.class, () -> Kernels.check(ArborCpu.ERR_ALLOC, "token stats"));
        assertTrue(e.getMessage().startsWith("token stats: ") && e.getMessage().contains("ARBOR_ERR_ALLOC"), e.getMessage());
    }

    /** Compiles the driver (once per JVM) and runs it on the loaded library; its lines as name → numbers. */
    private static synchronized Map<String, long[]> runDriver() throws IOException, InterruptedException {
        if (driverOutput != null) return driverOutput;
        String lib = Loader.load(ArborCpu.class);
        assertTrue(lib != null && Files.isRegularFile(Paths.get(lib)), "the loaded library's path: " + lib);
        Path root = repositoryRoot();
        Path dir = Files.createTempDirectory("arbor-alloc-failure"), exe = dir.resolve("alloc_failure");
        String text;
        try {
            run(List.of("g++", "-O1", "-std=c++17", "-I" + root.resolve("native/include"),
                    root.resolve("native/test/alloc_failure.cpp").toString(), "-o", exe.toString(), "-ldl"), "compiling the driver");
            text = run(List.of(exe.toString(), lib), "the driver");
        } finally {
            Files.deleteIfExists(exe);
            Files.deleteIfExists(dir);
        }
        System.out.print("alloc_failure:\n" + text);
        Map<String, long[]> m = new HashMap<>();
        for (String line : text.split("\n")) {
            String[] f = line.trim().split(" ");
            long[] v = new long[f.length - 1];
            for (int i = 1; i < f.length; i++) v[i - 1] = Long.parseLong(f[i]);
            m.put(f[0], v);
        }
        for (String k : List.of("stats", "sample", "loss")) assertTrue(m.containsKey(k), "driver line '" + k + "' in:\n" + text);
        driverOutput = m;
        return m;
    }

    private static Map<String, long[]> driverOutput;

    private static String run(List<String> command, String what) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        byte[] bytes = p.getInputStream().readAllBytes();
        assertTrue(p.waitFor(120, TimeUnit.SECONDS), what + " timed out");
        String text = new String(bytes, StandardCharsets.UTF_8);
        // a crash (std::terminate: SIGABRT) exits 134 here
        assertEquals(0, p.exitValue(), what + " exited " + p.exitValue() + ":\n" + text);
        return text;
    }

    private static Path repositoryRoot() {
        for (Path d = Paths.get("").toAbsolutePath(); d != null; d = d.getParent())
            if (Files.isRegularFile(d.resolve("native/test/alloc_failure.cpp"))) return d;
        throw new IllegalStateException("native/test/alloc_failure.cpp not found above " + Paths.get("").toAbsolutePath());
    }
}
