package ai.arbor.sandbox;

import static ai.arbor.sandbox.SandboxTests.assertServes;
import static ai.arbor.sandbox.SandboxTests.assumeJail;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigInteger;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Functional behaviour of the local Python sandbox: notebook semantics, limits, pool, lifecycle. */
class PythonSandboxTest {

    static PythonSandbox sandbox;

    @BeforeAll
    static void start() {
        sandbox = SandboxTests.builder().workers(3).build();
        System.out.println("isolation: " + sandbox.isolationReport());
    }

    @AfterAll
    static void stop() {
        sandbox.close();
    }

    @Test
    void documentedApiForm() {
        try (PythonSandbox sandbox = PythonSandbox.builder().isolation(SandboxTests.requested()).workers(4)
                .timeout(Duration.ofSeconds(5)).memoryLimitMb(1024).build();
             SandboxSession s = sandbox.openSession()) {
            ExecResult r = s.execute("x = 6*7\nx");
            assertEquals(ExecStatus.OK, r.status(), r::toString);
            assertTrue(r.stdout().contains("42"));
            assertEquals("42\n", r.stdout());
            assertEquals("", r.stderr());
            assertFalse(r.stateLost() || r.truncated());
        }
    }

    @Test
    void statePersistsAcrossCalls() {
        try (PythonSession s = sandbox.openSession()) {
            assertEquals(ExecStatus.OK, s.execute("def f(n):\n    return n * n\nacc = [f(i) for i in range(5)]").status());
            assertEquals(ExecStatus.OK, s.execute("import math\nacc.append(math.factorial(5))").status());
            ExecResult r = s.execute("print(sum(acc), acc)");
            assertEquals("150 [0, 1, 4, 9, 16, 120]\n", r.stdout()); // 0+1+4+9+16+120 = 150
        }
    }

    @Test
    void lastExpressionIsPrintedLikeANotebook() {
        try (PythonSession s = sandbox.openSession()) {
            assertEquals("2\n", s.execute("1 + 1").stdout());
            assertEquals("'abc'\n", s.execute("'abc'").stdout(), "repr, as Jupyter shows it");
            assertEquals("", s.execute("None").stdout());
            assertEquals("", s.execute("y = 5").stdout(), "an assignment shows nothing");
            assertEquals("3\n", s.execute("print(3)").stdout(), "print's None result is not shown");
            assertEquals("hello\n[1, 2]\n", s.execute("print('hello')\nz = [1]\nz + [2]").stdout());
            assertEquals("[1, 2]\n", s.execute("_").stdout(), "_ holds the last displayed value");
            assertEquals("", s.execute("for i in range(3):\n    i").stdout(), "only a final top-level expression is shown");
        }
    }

    @Test
    void stdoutAndStderrAreSeparate() {
        try (PythonSession s = sandbox.openSession()) {
            ExecResult r = s.execute("import sys\nprint('out 1')\nprint('err 1', file=sys.stderr)\nsys.stdout.write('out 2\\n')\n_ = sys.stderr.write('err 2\\n')");
            assertEquals(ExecStatus.OK, r.status());
            assertEquals("out 1\nout 2\n", r.stdout());
            assertEquals("err 1\nerr 2\n", r.stderr());
            ExecResult e = s.execute("print('partial')\nraise ValueError('bad value')");
            assertEquals(ExecStatus.ERROR, e.status());
            assertEquals("partial\n", e.stdout());
            assertTrue(e.stderr().startsWith("Traceback (most recent call last):\n  File \"<cell-"), e.stderr());
            assertTrue(e.stderr().endsWith("ValueError: bad value\n"), e.stderr());
            assertFalse(e.stderr().contains("worker"), "the worker's own frames are hidden: " + e.stderr());
            ExecResult syntax = s.execute("def broken(:\n    pass");
            assertEquals(ExecStatus.ERROR, syntax.status());
            assertTrue(syntax.stderr().contains("SyntaxError"), syntax.stderr());
        }
    }

    @Test
    void softTimeoutKeepsTheState() {
        try (PythonSession s = sandbox.openSession()) {
            s.execute("x = 41");
            ExecResult r = s.execute("x += 1\nwhile True:\n    pass");
            assertEquals(ExecStatus.TIMEOUT, r.status(), r::toString);
            assertFalse(r.stateLost());
            assertTrue(r.durationMillis() >= 950 && r.durationMillis() < 1950, "interrupted at the 1 s soft limit: " + r.durationMillis());
            assertTrue(r.stderr().contains("variables are kept"), r.stderr());
            assertEquals("42\n", s.execute("x").stdout());
        }
    }

    @Test
    void hardTimeoutLosesTheStateAndSaysSo() {
        try (PythonSession s = sandbox.openSession()) {
            s.execute("x = 42");
            ExecResult r = s.execute("while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass");
            assertEquals(ExecStatus.TIMEOUT, r.status(), r::toString);
            assertTrue(r.stateLost());
            assertTrue(r.durationMillis() >= 1950 && r.durationMillis() < 4000, "killed at 1 s + 1 s grace: " + r.durationMillis());
            assertTrue(r.stderr().contains("all variables were lost"), r.stderr());
            ExecResult after = s.execute("x");
            assertEquals(ExecStatus.ERROR, after.status());
            assertTrue(after.stderr().contains("NameError"));
        }
    }

    @Test
    void perCallTimeout() {
        try (PythonSession s = sandbox.openSession()) {
            ExecResult r = s.execute("import time\ntime.sleep(0.3)\nprint('slept')", Duration.ofMillis(100));
            assertEquals(ExecStatus.TIMEOUT, r.status(), r::toString);
            ExecResult ok = s.execute("import time\ntime.sleep(1.2)\nprint('slept')", Duration.ofSeconds(3));
            assertEquals(ExecStatus.OK, ok.status(), ok::toString);
        }
    }

    @Test
    void resetForgetsEverything() {
        try (PythonSession s = sandbox.openSession()) {
            s.execute("x = 1\nopen('/tmp/mark', 'w').write('m')");
            s.reset();
            ExecResult r = s.execute("import os\nprint(os.path.exists('/tmp/mark') if os.path.isdir('/scratch') else False)\nx");
            assertEquals(ExecStatus.ERROR, r.status());
            assertTrue(r.stderr().contains("NameError"), r.stderr());
            assertFalse(r.stateLost(), "an explicit reset is not a loss reported by a later call");
            if (sandbox.isolation() == Isolation.JAIL) assertEquals("False\n", r.stdout(), "a fresh jail has a fresh /tmp");
        }
    }

    @Test
    void sessionsNeverSeeEachOther() {
        assumeJail(sandbox); // outside the jail /tmp is the host's
        try (PythonSession a = sandbox.openSession(); PythonSession b = sandbox.openSession()) {
            a.execute("secret = 'a'\nopen('/tmp/secret', 'w').write('a')\nopen('/scratch/secret', 'w').write('a')");
            ExecResult r = b.execute("import os\nprint(os.path.exists('/tmp/secret'), os.path.exists('/scratch/secret'), 'secret' in globals())");
            assertEquals("False False False\n", r.stdout());
        }
        // A closed session's worker is killed, never handed to the next session.
        for (int i = 0; i < 4; i++) {
            try (PythonSession s = sandbox.openSession()) {
                ExecResult r = s.execute("import os\nprint(os.path.exists('/tmp/secret'), 'secret' in globals())\nsecret = 1");
                assertEquals("False False\n", r.stdout());
                writeFile("/tmp/secret", s);
            }
        }
    }

    private static void writeFile(String path, PythonSession s) {
        assertEquals(ExecStatus.OK, s.execute("open('" + path + "', 'w').write('x')").status());
    }

    @Test
    void numpyAndSympyWorkInsideTheJail() {
        assumeJail(sandbox);
        try (PythonSession s = sandbox.openSession()) {
            // inverse of [[2, 1], [1, 3]] = 1/5 * [[3, -1], [-1, 2]]
            ExecResult np = s.execute("import numpy as np\nprint(np.round(np.linalg.inv(np.array([[2., 1.], [1., 3.]])), 6).tolist())", Duration.ofSeconds(10));
            assertEquals(ExecStatus.OK, np.status(), np::toString);
            assertEquals("[[0.6, -0.2], [-0.2, 0.4]]\n", np.stdout());
            ExecResult sp = s.execute("import sympy\nx = sympy.Symbol('x')\nprint(sympy.solve(x**2 - 4, x), sympy.factor(x**2 - 1), sympy.Rational(1, 3) + sympy.Rational(1, 6))",
                    Duration.ofSeconds(15));
            assertEquals(ExecStatus.OK, sp.status(), sp::toString);
            assertEquals("[-2, 2] (x - 1)*(x + 1) 1/2\n", sp.stdout());
        }
    }

    @Test
    void preImportedModulesAreReady() {
        try (PythonSandbox sb = SandboxTests.builder().workers(1).preImport("numpy", "fractions").build();
             PythonSession s = sb.openSession()) {
            ExecResult r = s.execute("import sys\nprint('numpy' in sys.modules, 'fractions' in sys.modules)");
            assertEquals("True True\n", r.stdout());
        }
        SandboxException e = assertThrows(SandboxException.class,
                () -> SandboxTests.builder().workers(1).preImport("no_such_module_xyz").build());
        assertTrue(e.getMessage().contains("no_such_module_xyz"), e.getMessage());
    }

    @Test
    void bigIntegersPrintInFull() {
        try (PythonSandbox sb = SandboxTests.builder().workers(1).outputHeadChars(20_000).outputTailChars(20_000).build();
             PythonSession s = sb.openSession()) {
            ExecResult r = s.execute("2**20000");
            assertEquals(ExecStatus.OK, r.status(), r::toString);
            assertEquals(BigInteger.TWO.pow(20000).toString() + "\n", r.stdout()); // 6021 digits, over Python's default 4300
            ExecResult limit = s.execute("print(10**150000)");
            assertEquals(ExecStatus.ERROR, limit.status());
            assertTrue(limit.stderr().contains("Exceeds the limit (100000 digits)"), limit.stderr());
        }
    }

    @Test
    void outputIsCutToHeadAndTail() {
        try (PythonSession s = sandbox.openSession()) {
            ExecResult r = s.execute("print('a' * 1000 + 'b' * 1000 + 'c' * 1000)");
            assertEquals(ExecStatus.OK, r.status());
            assertTrue(r.truncated());
            String expected = "a".repeat(400) + OutputCapture.marker(3001 - 800) + "c".repeat(399) + "\n";
            assertEquals(expected, r.stdout());
            ExecResult small = s.execute("print('a' * 799)");
            assertFalse(small.truncated(), "800 characters fit exactly");
            assertEquals("a".repeat(799) + "\n", small.stdout());
        }
    }

    @Test
    void stdinFeedsInput() {
        try (PythonSession s = sandbox.openSession()) {
            ExecResult r = s.execute("a = int(input())\nb = int(input())\nprint(a + b)", Duration.ofSeconds(2), "20\n22\n");
            assertEquals("42\n", r.stdout(), r::toString);
        }
    }

    @Test
    void childProcessOutputIsCaptured() {
        try (PythonSession s = sandbox.openSession()) {
            ExecResult r = s.execute("import os, sys\nprint('py', flush=True)\nos.system('echo from-shell; echo to-err 1>&2')");
            assertEquals(ExecStatus.OK, r.status(), r::toString);
            assertEquals("py\nfrom-shell\n0\n", r.stdout());
            assertEquals("to-err\n", r.stderr());
        }
    }

    @Test
    void manySessionsInParallel() throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(6);
        try {
            List<Future<String>> results = new ArrayList<>();
            for (int t = 0; t < 12; t++) {
                int id = t;
                results.add(pool.submit(() -> {
                    try (PythonSession s = sandbox.openSession(Duration.ofSeconds(60))) {
                        s.execute("acc = " + id);
                        for (int i = 1; i <= 20; i++) s.execute("acc = acc * 3 + " + i + " % 7");
                        return s.execute("acc").stdout().strip();
                    }
                }));
            }
            for (int t = 0; t < 12; t++) {
                BigInteger acc = BigInteger.valueOf(t);
                for (int i = 1; i <= 20; i++) acc = acc.multiply(BigInteger.valueOf(3)).add(BigInteger.valueOf(i % 7));
                assertEquals(acc.toString(), results.get(t).get(), "session " + t);
            }
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void waitingForAFreeWorkerIsBounded() {
        try (PythonSandbox sb = SandboxTests.builder().workers(1).build()) {
            PythonSession first = sb.openSession();
            long t0 = System.nanoTime();
            SandboxException e = assertThrows(SandboxException.class, () -> sb.openSession(Duration.ofMillis(200)));
            long waited = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(waited >= 190 && waited < 2000, "waited " + waited + " ms");
            assertTrue(e.getMessage().contains("no free Python worker within 200 ms"), e.getMessage());
            first.close();
            assertServes(sb);
        }
    }

    @Test
    void closingTheSandboxEndsACallInProgress() throws Exception {
        PythonSandbox sb = SandboxTests.builder().workers(1).timeout(Duration.ofSeconds(30)).build();
        PythonSession s = sb.openSession();
        s.execute("print('warm')");
        ExecutorService t = Executors.newSingleThreadExecutor();
        try {
            Future<ExecResult> f = t.submit(() -> s.execute("import time\ntime.sleep(20)"));
            Thread.sleep(300);
            long t0 = System.nanoTime();
            sb.close();
            ExecResult r = f.get();
            assertEquals(ExecStatus.SANDBOX_ERROR, r.status(), r::toString);
            assertTrue((System.nanoTime() - t0) / 1_000_000 < 3000, "returned promptly");
            assertThrows(SandboxException.class, sb::openSession);
        } finally {
            t.shutdownNow();
        }
    }

    @Test
    void sessionLifecycleErrors() {
        PythonSession s = sandbox.openSession();
        s.close();
        s.close(); // idempotent
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> s.execute("1"));
        assertTrue(e.getMessage().contains("closed"));
        try (PythonSession t = sandbox.openSession()) {
            assertThrows(IllegalArgumentException.class, () -> t.execute(null));
            IllegalArgumentException bad = assertThrows(IllegalArgumentException.class, () -> t.execute("1", Duration.ofSeconds(-1)));
            assertTrue(bad.getMessage().contains("PT-1S"), bad.getMessage());
        }
    }

    @Test
    void builderRejectsBadValues() {
        assertTrue(assertThrows(IllegalArgumentException.class, () -> PythonSandbox.builder().workers(0))
                .getMessage().contains("got 0"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> PythonSandbox.builder().memoryLimitMb(10))
                .getMessage().contains("got 10"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> PythonSandbox.builder().timeout(Duration.ZERO))
                .getMessage().contains("PT0S"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> PythonSandbox.builder().preImport("os; import evil"))
                .getMessage().contains("os; import evil"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> PythonSandbox.builder().readOnlyBind(Path.of("rel")))
                .getMessage().contains("rel"));
    }

    @Test
    void jailRequiredButUnavailableIsAnError() {
        SandboxException e = assertThrows(SandboxException.class, () -> PythonSandbox.builder()
                .bwrap(Path.of("/nonexistent/bwrap")).isolation(Isolation.JAIL).workers(1).build());
        assertTrue(e.getMessage().contains("/nonexistent/bwrap"), e.getMessage());
        // AUTO falls back (with one warning) and still runs code
        try (PythonSandbox sb = PythonSandbox.builder().bwrap(Path.of("/nonexistent/bwrap")).workers(1).build();
             PythonSession s = sb.openSession()) {
            assertEquals(Isolation.RLIMITS_ONLY, sb.isolation());
            assertTrue(sb.isolationReport().contains("/nonexistent/bwrap not found"), sb.isolationReport());
            assertEquals("42\n", s.execute("6*7").stdout());
        }
    }

    @Test
    void isolationIsReported() {
        assertNotNull(sandbox.isolation());
        if (SandboxTests.requested() == Isolation.RLIMITS_ONLY) assertEquals(Isolation.RLIMITS_ONLY, sandbox.isolation());
        assertTrue(sandbox.isolationReport().startsWith(sandbox.isolation() == Isolation.JAIL ? "jail: bubblewrap" : "rlimits only"),
                sandbox.isolationReport());
        assertTrue(sandbox.isolationReport().contains("address space 1024 MiB"), sandbox.isolationReport());
    }

    @Test
    void noProcessesLeakAfterClose() throws Exception {
        List<ProcessHandle> tree = new ArrayList<>();
        try (PythonSandbox sb = SandboxTests.builder().workers(2).build()) {
            try (PythonSession a = sb.openSession(); PythonSession b = sb.openSession()) {
                a.execute("print(1)");
                b.execute("print(2)");
                for (PythonSession s : List.of(a, b)) {
                    tree.add(s.workerProcess());
                    s.workerProcess().descendants().forEach(tree::add);
                }
            }
            assertEquals(2, sb.stats().workers());
        }
        long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
        while (tree.stream().anyMatch(ProcessHandle::isAlive) && System.nanoTime() < deadline) Thread.sleep(20);
        assertTrue(tree.stream().noneMatch(ProcessHandle::isAlive), "processes left after close: " + tree);
    }
}
