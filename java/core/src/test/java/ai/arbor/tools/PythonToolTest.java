package ai.arbor.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.sandbox.ExecResult;
import ai.arbor.sandbox.ExecStatus;
import ai.arbor.sandbox.Isolation;
import ai.arbor.sandbox.PythonSandbox;
import ai.arbor.sandbox.SandboxSession;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The Python tool over a real local session and over a scripted session (for the status mapping). */
class PythonToolTest {

    @Test
    void runsCodeStatefullyInTheSandbox() {
        try (PythonSandbox sb = PythonSandbox.builder().workers(1).timeout(Duration.ofSeconds(2))
                .isolation(Isolation.valueOf(System.getProperty("arbor.sandbox.isolation", "auto").equalsIgnoreCase("rlimits") ? "RLIMITS_ONLY" : "AUTO"))
                .build();
             SandboxSession s = sb.openSession()) {
            PythonTool tool = new PythonTool(s);
            Observation a = tool.call("x = 6 * 7\nprint('set')");
            assertTrue(a.success());
            assertEquals("set\n", a.text());
            Observation b = tool.call("{\"code\": \"x\"}");
            assertEquals("42\n", b.text(), "JSON tool-call form; state kept");
            Observation c = tool.call("```python\nprint(x + 1)\n```");
            assertEquals("43\n", c.text(), "a Markdown fence is removed");
            Observation d = tool.call("{1, 2} | {3}");
            assertEquals("{1, 2, 3}\n", d.text(), "a set literal is code, not JSON");
            Observation e = tool.call("print('partial')\n1/0");
            assertFalse(e.success());
            assertFalse(e.infrastructureFailure());
            assertTrue(e.text().startsWith("partial\nTraceback"), e.text());
            assertTrue(e.text().endsWith("ZeroDivisionError: division by zero\n"), e.text());
            assertEquals(ExecStatus.ERROR, ((ExecResult) e.raw()).status());
        }
    }

    /** A session that replays scripted results, to check the mapping of every status. */
    private static final class Scripted implements SandboxSession {
        final List<ExecResult> results;
        final List<String> seen = new ArrayList<>();

        Scripted(List<ExecResult> results) {
            this.results = new ArrayList<>(results);
        }

        @Override
        public ExecResult execute(String code) {
            seen.add(code);
            return results.remove(0);
        }

        @Override
        public void reset() {}

        @Override
        public void close() {}
    }

    @Test
    void mapsStatusesToObservations() {
        ExecResult sandboxError = new ExecResult(ExecStatus.SANDBOX_ERROR, "", "Sandbox error: down\n", 1, false, false);
        ExecResult timeout = new ExecResult(ExecStatus.TIMEOUT, "so far", "TimeoutError: ...\n", 1, true, false);
        ExecResult ok = new ExecResult(ExecStatus.OK, "", "", 1, false, false);
        Scripted s = new Scripted(List.of(sandboxError, timeout, ok));
        PythonTool tool = new PythonTool(s);
        Observation a = tool.call("x");
        assertTrue(a.infrastructureFailure());
        assertFalse(a.success());
        assertEquals("Sandbox error: down\n", a.text());
        Observation b = tool.call("y");
        assertFalse(b.success() || b.infrastructureFailure());
        assertEquals("so far\nTimeoutError: ...\n", b.text());
        Observation c = tool.call("z");
        assertTrue(c.success());
        assertEquals("", c.text());
        assertSame(ok, c.raw());
        assertEquals(List.of("x", "y", "z"), s.seen);
        assertEquals("python", tool.name());
        assertTrue(tool.parametersSchema().contains("\"required\":[\"code\"]"));
    }
}
