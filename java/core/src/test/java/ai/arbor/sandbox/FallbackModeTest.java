package ai.arbor.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * The rlimits-only fallback, forced: it must still give notebook semantics, an empty environment,
 * time and memory limits, and no processes left behind. (What it cannot give is listed in
 * {@link Isolation#RLIMITS_ONLY}; the jail-only adversarial cases skip under it.)
 */
class FallbackModeTest {

    @Test
    void fallbackStillContainsWhatRlimitsCan() throws Exception {
        String marker = "fallback-marker-" + System.nanoTime();
        try (PythonSandbox sb = PythonSandbox.builder().isolation(Isolation.RLIMITS_ONLY).workers(1)
                .timeout(Duration.ofSeconds(1)).hardTimeoutGrace(Duration.ofMillis(500)).memoryLimitMb(512)
                .launcherEnvironment(Map.of("ARBOR_FALLBACK_MARKER", marker)).build();
             PythonSession s = sb.openSession()) {
            assertEquals(Isolation.RLIMITS_ONLY, sb.isolation());
            assertTrue(sb.isolationReport().startsWith("rlimits only (requested)"), sb.isolationReport());

            assertEquals(ExecStatus.OK, s.execute("x = 6*7").status());
            assertEquals("42\n", s.execute("x").stdout());

            ExecResult env = s.execute("import os\nprint(sorted(os.environ))");
            assertFalse(env.stdout().contains("ARBOR_FALLBACK_MARKER"), env.stdout());
            assertTrue(env.stdout().contains("'OPENBLAS_NUM_THREADS'"), env.stdout());

            ExecResult cwd = s.execute("import os\nprint(os.getcwd() == os.environ['HOME'], os.listdir('.'))");
            assertEquals("True []\n", cwd.stdout(), "a private, empty scratch directory");

            ExecResult mem = s.execute("b = bytearray(10**10)");
            assertEquals(ExecStatus.MEMORY, mem.status(), mem::toString);
            assertTrue(mem.stateLost());

            ExecResult soft = s.execute("y = 1\nwhile True:\n    pass");
            assertEquals(ExecStatus.TIMEOUT, soft.status());
            assertFalse(soft.stateLost());

            // children (even double-forked daemons) re-parent to the worker, which is their subreaper,
            // and die with it at the hard timeout
            ExecResult spawn = s.execute("""
                    import os, subprocess
                    subprocess.Popen(['sleep', '1000'], start_new_session=True)
                    if os.fork() == 0:
                        os.setsid()
                        if os.fork() == 0:
                            import time; time.sleep(1000)
                        os._exit(0)
                    import time; time.sleep(0.3)""");
            assertEquals(ExecStatus.OK, spawn.status(), spawn::toString);
            List<ProcessHandle> tree = s.workerProcess().descendants().collect(Collectors.toList());
            tree.add(s.workerProcess());
            assertTrue(tree.size() >= 3, "worker, sleep and the daemon: " + tree);
            ExecResult hard = s.execute("import ctypes, signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])\nctypes.CDLL(None).sleep(100)");
            assertEquals(ExecStatus.TIMEOUT, hard.status());
            assertTrue(hard.stateLost());
            long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
            while (tree.stream().anyMatch(ProcessHandle::isAlive) && System.nanoTime() < deadline) Thread.sleep(20);
            assertTrue(tree.stream().noneMatch(ProcessHandle::isAlive), "left behind: " + tree.stream().filter(ProcessHandle::isAlive).toList());
            assertEquals("42\n", s.execute("6*7").stdout());
        }
    }
}
