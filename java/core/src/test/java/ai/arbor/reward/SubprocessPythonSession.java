package ai.arbor.reward;

import ai.arbor.sandbox.ExecResult;
import ai.arbor.sandbox.ExecStatus;
import ai.arbor.sandbox.SandboxSession;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Test-only {@link SandboxSession}: one Debian {@code /usr/bin/python3} process per call, code on stdin,
 * killed after a time limit. Not a jail and not stateful (each call is a fresh interpreter) — enough to
 * run the symbolic checker's self-contained script for real.
 */
final class SubprocessPythonSession implements SandboxSession {
    static final Path PYTHON = Paths.get("/usr/bin/python3");

    private final long limitMillis;
    final AtomicInteger calls = new AtomicInteger();

    SubprocessPythonSession(long limitMillis) {
        this.limitMillis = limitMillis;
    }

    /** Null when Debian's python3 with sympy is usable, else the reason. */
    static String unavailableReason() {
        if (!Files.isExecutable(PYTHON)) return PYTHON + " not found (scripts/setup.sh installs it)";
        try {
            Process p = new ProcessBuilder(PYTHON.toString(), "-c", "import sympy").redirectErrorStream(true).start();
            if (!p.waitFor(60, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return "importing sympy took over 60 s";
            }
            return p.exitValue() == 0 ? null : "sympy is not importable by " + PYTHON + " (scripts/setup.sh installs python3-sympy)";
        } catch (IOException e) {
            return "cannot run " + PYTHON + ": " + e;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "interrupted";
        }
    }

    @Override
    public ExecResult execute(String code) {
        calls.incrementAndGet();
        long t0 = System.nanoTime();
        Path out = null;
        Path err = null;
        Process p = null;
        try {
            out = Files.createTempFile("arbor-py", ".out");
            err = Files.createTempFile("arbor-py", ".err");
            p = new ProcessBuilder(PYTHON.toString(), "-").redirectOutput(out.toFile()).redirectError(err.toFile()).start();
            p.getOutputStream().write(code.getBytes(StandardCharsets.UTF_8));
            p.getOutputStream().close();
            boolean done = p.waitFor(limitMillis, TimeUnit.MILLISECONDS);
            if (!done) {
                p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
            long ms = (System.nanoTime() - t0) / 1_000_000;
            String so = Files.readString(out);
            String se = Files.readString(err);
            ExecStatus st = !done ? ExecStatus.TIMEOUT : p.exitValue() == 0 ? ExecStatus.OK : ExecStatus.ERROR;
            return new ExecResult(st, so, se, ms, false, false);
        } catch (IOException e) {
            return new ExecResult(ExecStatus.SANDBOX_ERROR, "", e.toString(), 0, false, false);
        } catch (InterruptedException e) {
            if (p != null) p.destroyForcibly();
            Thread.currentThread().interrupt();
            return new ExecResult(ExecStatus.SANDBOX_ERROR, "", "interrupted", 0, false, false);
        } finally {
            try {
                if (out != null) Files.deleteIfExists(out);
                if (err != null) Files.deleteIfExists(err);
            } catch (IOException ignored) {
                // temp files; nothing to do
            }
        }
    }

    @Override
    public void reset() {
    }

    @Override
    public void close() {
    }
}
