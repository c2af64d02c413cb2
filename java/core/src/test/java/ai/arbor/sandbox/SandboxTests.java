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
}
