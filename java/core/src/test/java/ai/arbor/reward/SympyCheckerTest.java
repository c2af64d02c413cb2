package ai.arbor.reward;

import static org.junit.jupiter.api.Assertions.assertNull;
import ai.arbor.reward.Verdict.Outcome;
import ai.arbor.reward.Verdict.Rule;
import ai.arbor.sandbox.ExecResult;
import ai.arbor.sandbox.ExecStatus;
import ai.arbor.sandbox.SandboxSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The symbolic fallback for real: sympy in Debian's python3, one process per check
 * ({@link SubprocessPythonSession}); plus the Java-side timeout, busy state and safety checks with fake
 * sessions.
 */
class SympyCheckerTest {
    static SubprocessPythonSession python;
    static SympyChecker checker;
    static MathGrader grader;

    @BeforeAll
    static void start() {
        String why = SubprocessPythonSession.unavailableReason();
        // scripts/setup.sh installs Debian's python3-sympy: its absence is a broken set-up, not a skip
        assertNull(why, () -> "the symbolic checker needs /usr/bin/python3 with sympy (scripts/setup.sh): " + why);
        python = new SubprocessPythonSession(60_000);
        checker = new SympyChecker(python, Duration.ofSeconds(20));
        grader = MathGrader.builder().sampleVariables(false).symbolic(checker).build();
    }

    @AfterAll
    static void stop() {
        if (checker != null) checker.close();
    }

    @Test
    void sympyDecidesWhatSamplingWouldHaveDecided() {
        Verdict eq = grader.grade("x^2-1", "(x-1)(x+1)");
        assertEquals(Outcome.EQUAL, eq.outcome(), eq.toString());
        assertEquals(Rule.SYMBOLIC, eq.rule());
        Verdict ne = grader.grade("x+1", "x+2");
        assertEquals(Outcome.NOT_EQUAL, ne.outcome(), ne.toString());
        assertEquals(Rule.SYMBOLIC, ne.rule());
        Verdict trig = grader.grade("\\sin^2 x + \\cos^2 x", "1");
        assertEquals(Outcome.EQUAL, trig.outcome(), trig.toString());
        // inside a structure: the tuple's second item needs sympy
        Verdict tuple = grader.grade("(1, \\frac{x^2-4}{x-2})", "(1, x+2)");
        assertEquals(Outcome.EQUAL, tuple.outcome(), tuple.toString());
        assertEquals(Rule.STRUCTURAL, tuple.rule());
    }

    @Test
    void publicCheckParsesLatex() {
        Verdict v = checker.check("\\frac{a^2-b^2}{a-b}", "a+b");
        assertEquals(Outcome.EQUAL, v.outcome(), v.toString());
        assertEquals(Outcome.UNPARSEABLE, checker.check("\\lim x", "0").outcome());
    }

    @Test
    void hugeIntegerPowersAreNeverSent() {
        int before = python.calls.get();
        Verdict v = MathGrader.builder().symbolic(checker).build().grade("2^{2^{100}}", "2^{2^{100}}+1");
        assertEquals(Outcome.UNPARSEABLE, v.outcome(), v.toString());
        assertTrue(v.detail().contains("too large"), v.detail());
        assertEquals(before, python.calls.get(), "no sandbox call for 2^(2^100)");
    }

    @Test
    void modelTextNeverBecomesCode() throws Exception {
        Path marker = Files.createTempDirectory("arbor-sympy").resolve("pwned");
        String attack = "__import__('os').system('touch " + marker + "')";
        int before = python.calls.get();
        Verdict v = grader.grade(attack, "1");
        assertEquals(Outcome.UNPARSEABLE, v.outcome());
        assertEquals(before, python.calls.get(), "unparseable text is not sent");
        // even a hostile tree only travels as base64 data and is rebuilt with constructors
        String hostileJson = "[\"var\",\"x\"]\"); __import__('os').system('touch " + marker + "'); (\"";
        String code = SympyChecker.script(hostileJson, "[\"fn\",\"__import__\",[\"var\",\"os\"]]", 5);
        assertFalse(code.contains("import__('os')"), "payload is not spliced as text");
        ExecResult r = python.execute(code);
        assertTrue(r.stdout().contains("ARBOR_SYMBOLIC ERROR"), r.stdout() + r.stderr());
        assertFalse(Files.exists(marker), "no code of the payload ran");
    }

    @Test
    void pythonSideAlarmStopsASlowSimplify() {
        // ((x+y+z+1)^12 expanded) / (x+y+z+1)^11 - (x+y+z+1): sympy needs seconds; the alarm fires at 0.3 s
        StringBuilder poly = new StringBuilder("[\"add\"");
        int n = 12;
        for (int a = 0; a <= n; a++) {
            for (int b = 0; a + b <= n; b++) {
                for (int c = 0; a + b + c <= n; c++) {
                    int d = n - a - b - c;
                    java.math.BigInteger coef = fact(n).divide(fact(a).multiply(fact(b)).multiply(fact(c)).multiply(fact(d)));
                    poly.append(",[\"mul\",[\"num\",\"").append(coef.toString(16)).append("\",\"1\"]")
                            .append(",[\"pow\",[\"var\",\"x\"],[\"num\",\"").append(Integer.toHexString(a)).append("\",\"1\"]]")
                            .append(",[\"pow\",[\"var\",\"y\"],[\"num\",\"").append(Integer.toHexString(b)).append("\",\"1\"]]")
                            .append(",[\"pow\",[\"var\",\"z\"],[\"num\",\"").append(Integer.toHexString(c)).append("\",\"1\"]]]");
                }
            }
        }
        poly.append(']');
        String s = "[\"add\",[\"var\",\"x\"],[\"var\",\"y\"],[\"var\",\"z\"],[\"num\",\"1\",\"1\"]]";
        String a = "[\"div\"," + poly + ",[\"pow\"," + s + ",[\"num\",\"b\",\"1\"]]]";
        long t0 = System.nanoTime();
        ExecResult r = python.execute(SympyChecker.script(a, s, 0.3));
        double secs = (System.nanoTime() - t0) / 1e9;
        System.out.printf("[rewards] slow simplify stopped by the alarm after %.2f s (process included)%n", secs);
        assertEquals(Outcome.UNPARSEABLE, SympyChecker.interpret(r).outcome(), r.stdout() + r.stderr());
        assertTrue(r.stdout().contains("ARBOR_SYMBOLIC TIMEOUT"), r.stdout() + r.stderr());
    }

    private static java.math.BigInteger fact(int k) {
        java.math.BigInteger f = java.math.BigInteger.ONE;
        for (int i = 2; i <= k; i++) f = f.multiply(java.math.BigInteger.valueOf(i));
        return f;
    }

    /** A session stuck for {@code millis} that ignores interrupts (as a blocked pipe read would). */
    static final class StuckSession implements SandboxSession {
        final java.util.concurrent.atomic.AtomicInteger calls = new java.util.concurrent.atomic.AtomicInteger();
        final long millis;

        StuckSession(long millis) {
            this.millis = millis;
        }

        @Override
        public ExecResult execute(String code) {
            calls.incrementAndGet();
            long end = System.nanoTime() + millis * 1_000_000;
            while (System.nanoTime() < end) {
                try {
                    Thread.sleep(10);
                } catch (InterruptedException ignored) {
                    // deliberately not honoured
                }
            }
            return new ExecResult(ExecStatus.OK, "ARBOR_SYMBOLIC EQUAL\n", "", millis, false, false);
        }

        @Override
        public void reset() {
        }

        @Override
        public void close() {
        }
    }

    @Test
    void javaSideTimeoutThenBusyInsteadOfQueueing() throws InterruptedException {
        StuckSession stuck = new StuckSession(1500);
        try (SympyChecker c = new SympyChecker(stuck, Duration.ofMillis(100), Duration.ofMillis(100))) {
            long t0 = System.nanoTime();
            Verdict v = c.check("x", "y");
            double secs = (System.nanoTime() - t0) / 1e9;
            assertEquals(Outcome.UNPARSEABLE, v.outcome());
            assertTrue(v.detail().contains("timed out after 300 ms"), v.detail());
            assertTrue(secs < 1.2, "returned after " + secs + " s, before the stuck call ended");
            Verdict busy = c.check("x", "y");
            assertEquals(Outcome.UNPARSEABLE, busy.outcome());
            assertTrue(busy.detail().contains("busy"), busy.detail());
            assertEquals(1, stuck.calls.get(), "the busy check did not queue a second call");
            Thread.sleep(2000); // the stuck call has returned: the checker works again
            Verdict again = c.check("x", "y");
            assertEquals(2, stuck.calls.get());
            assertTrue(again.detail().contains("timed out"), again.detail());
        }
    }

    @Test
    void sandboxFailuresAreVerdictsNotExceptions() {
        assertEquals(Outcome.UNPARSEABLE, SympyChecker.interpret(new ExecResult(ExecStatus.SANDBOX_ERROR, "", "worker died", 1, true, false)).outcome());
        assertEquals(Outcome.UNPARSEABLE, SympyChecker.interpret(new ExecResult(ExecStatus.OK, "ARBOR_SYMBOLIC ERROR ValueError\n", "", 1, false, false)).outcome());
        assertEquals(Outcome.EQUAL, SympyChecker.interpret(new ExecResult(ExecStatus.OK, "noise\nARBOR_SYMBOLIC EQUAL\n", "", 1, false, false)).outcome());
        assertThrows(IllegalArgumentException.class, () -> new SympyChecker(python, Duration.ofMillis(1)));
        assertThrows(IllegalArgumentException.class, () -> new SympyChecker(null, Duration.ofSeconds(1)));
    }
}
