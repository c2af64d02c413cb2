package ai.arbor.sandbox;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A session of a {@link PythonSandbox}: one leased worker whose variables persist across calls. Calls
 * on one session are serialized; different sessions run in parallel. After MEMORY, CRASHED, a hard
 * TIMEOUT or a hard OUTPUT_LIMIT the worker is replaced (the result says {@code stateLost}); the fresh
 * interpreter is taken at the next call. With a fork server the session's interpreter is a child of the
 * worker's template, and losing it costs only a new fork at the next call.
 */
public final class PythonSession implements SandboxSession {

    private static final Map<Integer, String> SIGNALS = Map.ofEntries(
            Map.entry(1, "SIGHUP"), Map.entry(2, "SIGINT"), Map.entry(3, "SIGQUIT"), Map.entry(4, "SIGILL"),
            Map.entry(5, "SIGTRAP"), Map.entry(6, "SIGABRT"), Map.entry(7, "SIGBUS"), Map.entry(8, "SIGFPE"),
            Map.entry(9, "SIGKILL"), Map.entry(11, "SIGSEGV"), Map.entry(13, "SIGPIPE"), Map.entry(14, "SIGALRM"),
            Map.entry(15, "SIGTERM"), Map.entry(24, "SIGXCPU"), Map.entry(25, "SIGXFSZ"), Map.entry(31, "SIGSYS"));

    private final PythonSandbox pool;
    private final AtomicBoolean closed = new AtomicBoolean();
    private volatile Worker worker; // written under `this`; read by close() from any thread
    private volatile boolean inCall; // a call is running on the worker (close() must not recycle it)

    PythonSession(PythonSandbox pool, Worker worker) {
        this.pool = pool;
        this.worker = worker;
    }

    /** Runs {@code code} with the sandbox's default time limit. */
    @Override
    public ExecResult execute(String code) {
        return execute(code, pool.timeout(), "");
    }

    /** Runs {@code code} with a soft time limit of {@code timeout} (the hard limit adds the sandbox's grace). */
    public ExecResult execute(String code, Duration timeout) {
        return execute(code, timeout, "");
    }

    /**
     * Runs {@code code}, with {@code stdin} readable through {@code sys.stdin}/{@code input()} (the file
     * descriptor 0 stays /dev/null). Never throws for anything the code does.
     *
     * @throws IllegalArgumentException for a null code or a non-positive timeout
     * @throws IllegalStateException    when the session is closed
     */
    public synchronized ExecResult execute(String code, Duration timeout, String stdin) {
        if (code == null) throw new IllegalArgumentException("code must not be null");
        PythonSandbox.requirePositive("timeout", timeout);
        if (closed.get()) throw new IllegalStateException("the session is closed");
        PythonSandbox.Builder cfg = pool.config();
        byte[] codeBytes = code.getBytes(StandardCharsets.UTF_8); // lone surrogates become '?'
        byte[] stdinBytes = (stdin == null ? "" : stdin).getBytes(StandardCharsets.UTF_8);
        if (codeBytes.length + (long) stdinBytes.length > cfg.maxCodeBytes) {
            return new ExecResult(ExecStatus.ERROR, "", "Rejected: the code is " + codeBytes.length + " bytes"
                    + (stdinBytes.length > 0 ? " (+ " + stdinBytes.length + " bytes of stdin)" : "")
                    + ", more than the limit of " + cfg.maxCodeBytes + " bytes; nothing was run.\n", 0, false, false);
        }
        Worker w = worker;
        if (w == null || !w.alive()) {
            boolean lost = w != null; // died between calls (e.g. a background thread called os._exit)
            if (w != null) {
                worker = null;
                pool.retire(w);
            }
            try {
                w = pool.takeWorker();
            } catch (SandboxException e) {
                return sandboxError(e.getMessage(), lost);
            }
            worker = w;
            if (closed.get()) { // closed while we waited
                detach(w);
                throw new IllegalStateException("the session is closed");
            }
            if (lost) {
                detach(w);
                return new ExecResult(ExecStatus.CRASHED, "", "Error: the Python interpreter of this session had died "
                        + "since the last call; it was restarted, all variables were lost, and this code was not run.\n",
                        0, true, false);
            }
        }
        long softMillis = Math.max(1, timeout.toMillis());
        long hardMillis = softMillis + cfg.hardTimeoutGrace.toMillis();
        inCall = true;
        try {
            Worker.Outcome o = w.run(codeBytes, stdinBytes, softMillis, hardMillis);
            return toResult(o, w, timeout);
        } finally {
            inCall = false;
        }
    }

    private ExecResult toResult(Worker.Outcome o, Worker w, Duration timeout) {
        String so = o.stdout().text(), se = o.stderr().text();
        boolean truncated = o.stdout().truncated() || o.stderr().truncated();
        if (o.kind() != Worker.Kind.DONE) detach(w);
        if (closed.get() || pool.isClosed()) {
            if (o.kind() != Worker.Kind.DONE) {
                return new ExecResult(ExecStatus.SANDBOX_ERROR, so, note(se, "Sandbox error: the "
                        + (pool.isClosed() ? "sandbox" : "session") + " was closed during the call."), o.millis(), true, truncated);
            }
        }
        PythonSandbox.Builder cfg = pool.config();
        return switch (o.kind()) {
            case DONE -> switch (o.word()) {
                case "ok" -> new ExecResult(ExecStatus.OK, so, se, o.millis(), false, truncated);
                case "error" -> new ExecResult(ExecStatus.ERROR, so, se, o.millis(), false, truncated);
                case "timeout" -> new ExecResult(ExecStatus.TIMEOUT, so, se, o.millis(), false, truncated);
                case "output_limit" -> new ExecResult(ExecStatus.OUTPUT_LIMIT, so, se, o.millis(), false, true);
                case "died" -> { // fork server: the session's interpreter died; the template carries on
                    if (!pool.forkServer()) {
                        detach(w);
                        yield new ExecResult(ExecStatus.CRASHED, so, note(se, "Error: the interpreter broke the sandbox protocol "
                                + "(a fork-server frame from a plain worker); it was killed and all variables were lost."), o.millis(), true, truncated);
                    }
                    yield died(new Worker.Outcome(o.kind(), null, null, o.stdout(), o.stderr(), o.millis(), forkedExitCode(o.ename()), null),
                            so, se, truncated);
                }
                case "killed" -> { // fork server: the cell ignored the soft limit and the template killed its interpreter
                    if (!pool.forkServer()) detach(w);
                    yield new ExecResult(ExecStatus.TIMEOUT, so, note(se, "TimeoutError: the cell exceeded the time limit of "
                            + seconds(timeout.toMillis()) + " s and did not stop; the interpreter was killed and all variables were lost."),
                            o.millis(), true, truncated);
                }
                case "memory" -> {
                    // an interpreter that ran out of memory may be left inconsistent: it is replaced (a fork
                    // server's template has already killed the session's child; the template itself is fine)
                    if (!pool.forkServer()) detach(w);
                    yield new ExecResult(ExecStatus.MEMORY, so, note(se, "Error: the cell ran out of memory (limit "
                            + cfg.memoryLimitMb + " MiB); the interpreter was restarted and all variables were lost."),
                            o.millis(), true, truncated);
                }
                default -> { // unreachable: the worker validates the word
                    detach(w);
                    yield new ExecResult(ExecStatus.CRASHED, so, se, o.millis(), true, truncated);
                }
            };
            case HARD_TIMEOUT -> new ExecResult(ExecStatus.TIMEOUT, so, note(se, "TimeoutError: the cell exceeded the time limit of "
                    + seconds(timeout.toMillis()) + " s and did not stop; the interpreter was killed after "
                    + seconds(timeout.toMillis() + cfg.hardTimeoutGrace.toMillis()) + " s and all variables were lost."),
                    o.millis(), true, truncated);
            case OUTPUT_FLOOD -> new ExecResult(ExecStatus.OUTPUT_LIMIT, so, note(se, "Error: the cell wrote more than "
                    + (cfg.maxOutputBytes * 2 + 65536) + " bytes of output; the interpreter was killed and all variables were lost."),
                    o.millis(), true, true);
            case PROTOCOL -> new ExecResult(ExecStatus.CRASHED, so, note(se, "Error: the interpreter broke the sandbox protocol ("
                    + o.detail() + "); it was killed and all variables were lost."), o.millis(), true, truncated);
            case IO_FAILURE -> o.detail() != null && o.detail().contains("interrupted")
                    ? new ExecResult(ExecStatus.SANDBOX_ERROR, so, note(se, "Sandbox error: " + o.detail() + "."), o.millis(), true, truncated)
                    : new ExecResult(ExecStatus.CRASHED, so, note(se, "Error: the Python interpreter of this session had died ("
                            + o.detail() + "); it was restarted, all variables were lost, and this code was not run."), o.millis(), true, truncated);
            case DIED -> died(o, so, se, truncated);
        };
    }

    private ExecResult died(Worker.Outcome o, String so, String se, boolean truncated) {
        int code = o.exitCode();
        if (code > 128 && code - 128 == 24) { // SIGXCPU: the worker's lifetime CPU budget is spent
            return new ExecResult(ExecStatus.TIMEOUT, so, note(se, "TimeoutError: the interpreter used up its CPU time limit of "
                    + pool.config().cpuLimit.toSeconds() + " s; it was restarted and all variables were lost."), o.millis(), true, truncated);
        }
        String how;
        if (code > 128) {
            int sig = code - 128;
            how = "was killed by signal " + sig + (SIGNALS.containsKey(sig) ? " (" + SIGNALS.get(sig) + ")" : "");
        } else if (code == 70) {
            how = "lost its I/O channels (the cell closed or replaced the interpreter's own file descriptors)";
        } else if (code >= 0) {
            how = "exited with code " + code;
        } else {
            how = "stopped responding";
        }
        return new ExecResult(ExecStatus.CRASHED, so, note(se, "Error: the Python process " + how
                + "; the interpreter was restarted and all variables were lost."), o.millis(), true, truncated);
    }

    /** Exit code of a fork server's child from its frame ({@code signal_N} → 128 + N, {@code code_N} → N). */
    static int forkedExitCode(String how) {
        try {
            if (how != null && how.startsWith("signal_")) return 128 + Integer.parseInt(how.substring(7));
            if (how != null && how.startsWith("code_")) return Integer.parseInt(how.substring(5));
        } catch (NumberFormatException ignored) {
            // fall through
        }
        return -1;
    }

    private static String seconds(long millis) {
        return millis % 1000 == 0 ? String.valueOf(millis / 1000) : String.valueOf(millis / 1000.0);
    }

    private static String note(String stderr, String line) {
        if (stderr.isEmpty()) return line + "\n";
        return stderr + (stderr.endsWith("\n") ? "" : "\n") + line + "\n";
    }

    private ExecResult sandboxError(String why, boolean stateLost) {
        return new ExecResult(ExecStatus.SANDBOX_ERROR, "", "Sandbox error: " + why + "\n", 0, stateLost, false);
    }

    /** Drops the session's worker (killed, replaced in the background); the next call takes a fresh one. */
    private void detach(Worker w) {
        if (worker == w) worker = null;
        pool.retire(w);
    }

    /** Forgets all state: the worker is killed and the next call runs in a fresh interpreter. */
    @Override
    public synchronized void reset() {
        if (closed.get()) throw new IllegalStateException("the session is closed");
        Worker w = worker;
        if (w == null) return;
        // fork server: the template ends the session's interpreter and keeps serving this session
        if (pool.forkServer() && w.alive() && w.endSession(pool.config().hardTimeoutGrace.toMillis() + 2000)) return;
        detach(w);
    }

    /** Host process of the current worker (the launcher), for leak checks in tests; null when none is attached. */
    ProcessHandle workerProcess() {
        Worker w = worker;
        return w == null ? null : w.handle();
    }

    /**
     * Kills the worker (a call in progress on another thread returns SANDBOX_ERROR) and returns the
     * lease — or, in a sandbox built with {@code recycleWorkers(true)} and with no call in progress, has
     * the worker reset its interpreter in place and returns it to the pool (killed instead when the reset
     * is not clean). Idempotent.
     */
    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) return;
        Worker w = worker;
        if (w != null) {
            worker = null;
            if (pool.config().recycleWorkers && !inCall) pool.recycle(w);
            else if (pool.forkServer() && !inCall) pool.endForkedSession(w, true);
            else pool.retire(w);
        }
        pool.sessionClosed(this);
    }

    void killForSandboxClose() {
        Worker w = worker;
        if (w != null) w.kill(); // the call in progress (if any) sees the death and reports SANDBOX_ERROR
    }
}
