package ai.arbor.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.Locale;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.Assumptions;

/**
 * Shared set-up of the sandbox tests. {@code -Darbor.sandbox.isolation=auto|jail|rlimits} chooses the
 * isolation the tests request (default auto); tests that need the jail skip, with the reason, under the
 * fallback.
 */
final class SandboxTests {
    private SandboxTests() {}

    /** -Darbor.seed or the clock (ai.arbor.testing.Seeds). */
    static long seed() {
        return ai.arbor.testing.Seeds.seed();
    }

    static Isolation requested() {
        String v = System.getProperty("arbor.sandbox.isolation", "auto").trim().toLowerCase(Locale.ROOT);
        return switch (v) {
            case "", "auto" -> Isolation.AUTO;
            case "jail" -> Isolation.JAIL;
            case "rlimits", "rlimits_only" -> Isolation.RLIMITS_ONLY;
            default -> throw new IllegalArgumentException("arbor.sandbox.isolation must be auto, jail or rlimits, got " + v);
        };
    }

    /** Short limits so that the timeout and flood cases stay fast. */
    static PythonSandbox.Builder builder() {
        return PythonSandbox.builder().isolation(requested()).workers(2).timeout(Duration.ofSeconds(1))
                .hardTimeoutGrace(Duration.ofSeconds(1)).memoryLimitMb(1024);
    }

    /**
     * The jail-only cases need the jail. Under the default isolation (auto) a missing jail fails them: on a
     * machine set up by scripts/setup.sh bubblewrap works, and a silently weaker sandbox must not pass
     * for a tested one. Only a run that asks for the fallback ({@code -Darbor.sandbox.isolation=rlimits})
     * skips them, with the reason.
     */
    static void assumeJail(PythonSandbox sandbox) {
        if (sandbox.isolation() == Isolation.JAIL) return;
        String why = "needs the bubblewrap jail; this run uses " + sandbox.isolationReport();
        Assumptions.assumeFalse(requested() == Isolation.RLIMITS_ONLY, why);
        Assertions.fail(why + " (-Darbor.sandbox.isolation=rlimits to test the fallback on purpose)");
    }

    /**
     * Waits until no worker is being started (the pool's background spawns after build() or a retirement have
     * finished), so that a following {@code stats().spawned()} snapshot counts only what the test itself causes.
     */
    static void awaitNoSpawnInFlight(PythonSandbox sandbox) {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (sandbox.stats().starting() > 0) {
            if (System.nanoTime() - deadline > 0) Assertions.fail("a worker was still starting after 60 s: " + sandbox.stats());
            try {
                Thread.sleep(10);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted", e);
            }
        }
    }

    /** The pool still serves a normal request: a fresh session computes 6*7. */
    static void assertServes(PythonSandbox sandbox) {
        try (PythonSession s = sandbox.openSession(Duration.ofSeconds(30))) {
            ExecResult r = s.execute("x = 6*7\nx");
            assertEquals(ExecStatus.OK, r.status(), () -> "pool no longer serves: " + r);
            assertEquals("42\n", r.stdout());
        }
    }

    /** The same session still works (state may or may not have survived, per the case). */
    static void assertSessionServes(PythonSession s) {
        ExecResult r = s.execute("print(6*7)");
        assertEquals(ExecStatus.OK, r.status(), () -> "session no longer serves: " + r);
        assertEquals("42\n", r.stdout());
    }

    /**
     * A cell that leaves behind everything it can: a variable, files in the scratch directory, in {@code tmp} (the
     * jail's /tmp, also /dev/shm, when {@code tmp} is {@code /tmp}) and in a directory it makes unreadable, a symlink
     * out of scratch, a thread, an inheritable descriptor, a child in its own session and a setsid + double-fork
     * daemon. The "nothing survives" tests of the fork server and of the HTTP server run it, then probe.
     */
    static String leaveEverythingBehind(String tmp) {
        return """
                import os, threading, time, subprocess
                secret = 'left-behind'
                open('scratch.txt', 'w').write('x')
                TMP = '%s'
                os.makedirs(TMP + '/locked/deep', exist_ok=True); open(TMP + '/locked/deep/f', 'w').write('x')
                os.chmod(TMP + '/locked', 0)
                if TMP == '/tmp':
                    open('/tmp/t.txt', 'w').write('x')
                    open('/dev/shm/s.bin', 'wb').write(b'x')
                os.symlink('/usr', 'link-out')
                threading.Thread(target=time.sleep, args=(1000,), daemon=True).start()
                kept_fd = os.open('scratch.txt', os.O_RDONLY)
                os.set_inheritable(kept_fd, True)
                subprocess.Popen(['sleep', '1000'], start_new_session=True)
                if os.fork() == 0:          # a daemon: setsid + double fork
                    os.setsid()
                    if os.fork() == 0:
                        time.sleep(1000)
                    os._exit(0)
                """.formatted(tmp);
    }
}
