package ai.arbor.torch;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Commands started at the same moment on an empty JavaCPP cache: before {@link NativeCache#fill()} took a lock
 * around the first load, two {@code arbor init-model} started together died of SIGBUS in the dynamic loader
 * (one of the two, three runs out of three), each extracting libtorch over the other's mapped copy.
 */
class NativeCacheTest {

    @TempDir
    Path tmp;

    @Test
    void commandsStartedTogetherOnAnEmptyCacheAllSucceed() throws Exception {
        Path cache = tmp.resolve("cache");
        int n = 3;
        List<Process> ps = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            List<String> cmd = List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                    "-Dorg.bytedeco.javacpp.maxPhysicalBytes=0", "-Dorg.bytedeco.javacpp.cachedir=" + cache,
                    "-cp", System.getProperty("java.class.path"), "ai.arbor.cli.Arbor",
                    "init-model", "--family", "qwen3", "--out", tmp.resolve("model-" + i).toString(), "--layers", "1",
                    "--hidden", "32", "--heads", "2", "--kv-heads", "1", "--ffn", "32", "--vocab", "64");
            ps.add(new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(tmp.resolve("out-" + i + ".log").toFile()).start());
        }
        for (int i = 0; i < n; i++) {
            Process p = ps.get(i);
            boolean done = p.waitFor(240, TimeUnit.SECONDS);
            if (!done) p.destroyForcibly();
            String out = Files.readString(tmp.resolve("out-" + i + ".log"), StandardCharsets.UTF_8);
            assertTrue(done, "command " + i + " ended within 240 s:\n" + out);
            assertEquals(0, p.exitValue(), "command " + i + "'s exit code:\n" + out);
            assertTrue(Files.isRegularFile(tmp.resolve("model-" + i).resolve("config.json")), "command " + i + " wrote its model:\n" + out);
        }
        assertTrue(Files.exists(cache.resolve(NativeCache.LOCK_FILE)), "the extraction went through the lock");
    }
}
