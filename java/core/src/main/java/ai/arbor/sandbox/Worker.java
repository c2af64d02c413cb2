package ai.arbor.sandbox;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Pattern;

/**
 * One CPython worker process (jailed or not) and the Java end of its protocol (see {@code worker.py}).
 * Two daemon threads drain the worker's stdout and stderr continuously into bounded
 * {@link OutputCapture}s and look for the per-cell end frame {@code \x1eARBOR:<nonce>:<word>\n}; the
 * nonce is fresh for every cell, so model output cannot end a cell early by accident. Everything the
 * worker sends is untrusted: an end frame with an unknown word, an overlong frame line, more output
 * than the hard cap, EOF or a missed deadline all end with the process tree killed.
 */
final class Worker {

    /** How a cell ended, from Java's point of view. */
    enum Kind {
        /** Both end frames arrived; {@link Outcome#word} holds the worker's status word. */
        DONE,
        /** The hard deadline passed; the worker was killed. */
        HARD_TIMEOUT,
        /** The worker died (EOF on its streams); {@link Outcome#exitCode} says how. */
        DIED,
        /** More output than the hard cap; the worker was killed. */
        OUTPUT_FLOOD,
        /** Garbage where an end frame was expected; the worker was killed. */
        PROTOCOL,
        /** The request could not be written (the worker was already dead) or the caller was interrupted. */
        IO_FAILURE
    }

    record Outcome(Kind kind, String word, String ename, OutputCapture.Text stdout, OutputCapture.Text stderr,
                   long millis, int exitCode, String detail) {}

    /** Words of an end frame; {@code died} and {@code killed} come only from a fork server's template (its session child ended). */
    static final List<String> STATUS_WORDS = List.of("ok", "error", "timeout", "memory", "output_limit", "died", "killed");
    private static final Pattern ENAME = Pattern.compile("[A-Za-z_][A-Za-z0-9_.]{0,99}");
    private static final byte[] FRAME_PREFIX = "\u001eARBOR:".getBytes(StandardCharsets.US_ASCII);
    private static final int MAX_FRAME_LINE = 128;
    private static final long STRAY_MARGIN_MILLIS = 20;
    private static final long STRAY_PERIOD_MILLIS = 5;
    private static final SecureRandom RANDOM = new SecureRandom();
    private static final AtomicLong IDS = new AtomicLong();
    private static final java.util.concurrent.ScheduledExecutorService WATCHDOG =
            java.util.concurrent.Executors.newScheduledThreadPool(4, r -> {
                Thread t = new Thread(r, "arbor-sandbox-watchdog");
                t.setDaemon(true);
                return t;
            });

    private final long id = IDS.incrementAndGet();
    private final Process process;
    private final OutputStream toWorker;
    private final Drainer out;
    private final Drainer err;
    private final Object lock = new Object();
    private final WorkerSpec spec;
    private volatile boolean killed;
    /** The launcher, the jail's init and the interpreter (host pids), found at the ready frame; null when unknown. */
    private volatile java.util.Set<Long> interpreterChain;
    /** Fork server: host pid of the template (the interpreter at the end of the chain), or -1. */
    private volatile long templatePid = -1;
    private long deepest = -1;
    private final java.util.concurrent.atomic.AtomicBoolean retired = new java.util.concurrent.atomic.AtomicBoolean();
    final long startMillis;

    private Worker(Process process, WorkerSpec spec) {
        this.process = process;
        this.spec = spec;
        this.toWorker = process.getOutputStream();
        this.out = new Drainer(process.getInputStream(), "out");
        this.err = new Drainer(process.getErrorStream(), "err");
        this.startMillis = System.currentTimeMillis();
    }

    /**
     * Starts a worker and waits for its ready frame.
     *
     * @throws SandboxException when the process cannot start or does not become ready (message includes
     *                          what it wrote to stderr, e.g. bubblewrap's complaint)
     */
    static Worker start(WorkerSpec spec) {
        ProcessBuilder pb = new ProcessBuilder(spec.command());
        Map<String, String> env = pb.environment();
        env.putAll(spec.launcherEnvironment()); // cleared again by `env -i`; tests use this to prove it
        if (spec.directory() != null) pb.directory(spec.directory().toFile());
        Process p;
        try {
            p = pb.start();
        } catch (IOException e) {
            throw new SandboxException("cannot start the Python worker (" + spec.command().get(0) + "): " + e.getMessage(), e);
        }
        Worker w = new Worker(p, spec);
        String nonce = newNonce();
        byte[] marker = frameMarker(nonce);
        synchronized (w.lock) {
            w.out.expect(marker);
            w.err.expect(marker);
        }
        w.out.start();
        w.err.start();
        try {
            w.toWorker.write(spec.configJson(nonce).getBytes(StandardCharsets.UTF_8));
            w.toWorker.write('\n');
            w.toWorker.flush();
        } catch (IOException e) {
            // fall through: the wait below reports what the process said before dying
        }
        long deadline = System.nanoTime() + spec.spawnTimeout().toNanos();
        String failure = null;
        synchronized (w.lock) {
            while (true) {
                if (w.out.done && w.err.done) {
                    if (!"ready".equals(w.out.word)) failure = "unexpected ready frame '" + w.out.word + "'";
                    break;
                }
                if (w.out.eof || w.err.eof || w.out.violation != null || w.err.violation != null) {
                    failure = w.out.violation != null ? w.out.violation : w.err.violation != null ? w.err.violation : "it exited";
                    break;
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    failure = "not ready within " + spec.spawnTimeout().toMillis() + " ms";
                    break;
                }
                try {
                    TimeUnit.NANOSECONDS.timedWait(w.lock, left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    failure = "interrupted";
                    break;
                }
            }
        }
        if (failure != null) {
            w.kill();
            int code = w.exitCode(1000);
            String said;
            synchronized (w.lock) {
                said = w.err.take().text(2000, 2000).text().strip();
                if (said.isEmpty()) said = w.out.take().text(2000, 2000).text().strip();
            }
            throw new SandboxException("the Python worker failed to start: " + failure
                    + (code >= 0 ? " (exit code " + code + ")" : "") + (said.isEmpty() ? "" : ": " + said));
        }
        synchronized (w.lock) { // startup chatter (warnings from pre-imports) is not a cell's output
            w.out.take();
            w.err.take();
        }
        if (spec.stopStrays()) {
            w.interpreterChain = w.findInterpreterChain();
            w.templatePid = w.deepest;
        }
        return w;
    }

    /**
     * At the ready frame the jail is one chain, launcher → init → interpreter, each with one child; its pids
     * are what the stray stopper spares. Null when the tree is not such a chain (nothing is then stopped
     * from outside, and strays are left to the worker's own clean-up).
     */
    private java.util.Set<Long> findInterpreterChain() {
        java.util.Set<Long> chain = new java.util.HashSet<>();
        ProcessHandle h = process.toHandle();
        if (spec.forkServer()) {
            // bwrap --as-pid-1: the launcher's only child is the template, whose children (the spares it
            // forks right after the ready frame, later the session's interpreter) are spared separately
            List<ProcessHandle> kids;
            try {
                kids = h.children().toList();
            } catch (RuntimeException e) {
                return null;
            }
            if (kids.size() != 1) return null;
            deepest = kids.get(0).pid();
            return java.util.Set.of(h.pid(), deepest);
        }
        for (int depth = 0; depth < 8; depth++) {
            chain.add(h.pid());
            deepest = h.pid();
            List<ProcessHandle> kids;
            try {
                kids = h.children().toList();
            } catch (RuntimeException e) {
                return null;
            }
            if (kids.isEmpty()) return chain.size() > 1 ? java.util.Set.copyOf(chain) : null;
            if (kids.size() > 1) return null;
            h = kids.get(0);
        }
        return null;
    }

    /**
     * One pass of the stray stopper: SIGKILL to every process of the jail except the interpreter chain.
     * Runs from the soft deadline of a cell until the cell ends; a fork bomb's survivors of one pass are
     * caught by the next (a killed process forks no more, and the jail's process limit bounds the swarm).
     */
    private void killStrays() {
        java.util.Set<Long> keep = interpreterChain;
        if (keep == null || killed) return;
        List<ProcessHandle> all = descendants();
        java.util.Set<Long> spare = keep;
        if (spec.forkServer()) {
            // the cell runs in the template's child (the session's interpreter): spared with the chain.
            // The template is not a subreaper in the jail, so its only child is that interpreter.
            spare = new java.util.HashSet<>(keep);
            for (ProcessHandle h : all) {
                if (h.parent().map(p -> p.pid() == templatePid).orElse(false)) spare.add(h.pid());
            }
        }
        for (ProcessHandle h : all) {
            if (!spare.contains(h.pid())) h.destroyForcibly();
        }
    }

    static String newNonce() {
        byte[] b = new byte[12];
        RANDOM.nextBytes(b);
        return HexFormat.of().formatHex(b);
    }

    private static byte[] frameMarker(String nonce) {
        byte[] n = (nonce + ":").getBytes(StandardCharsets.US_ASCII);
        byte[] m = new byte[FRAME_PREFIX.length + n.length];
        System.arraycopy(FRAME_PREFIX, 0, m, 0, FRAME_PREFIX.length);
        System.arraycopy(n, 0, m, FRAME_PREFIX.length, n.length);
        return m;
    }

    long id() {
        return id;
    }

    ProcessHandle handle() {
        return process.toHandle();
    }

    /** True exactly once: the pool's accounting of a retired worker must not run twice. */
    boolean claimRetire() {
        return retired.compareAndSet(false, true);
    }

    boolean alive() {
        return !killed && process.isAlive();
    }

    /**
     * Runs one cell. {@code softMillis} is enforced inside the worker (the cell fails, the interpreter
     * survives); {@code hardMillis} by this method (the process tree is killed).
     */
    Outcome run(byte[] code, byte[] stdin, long softMillis, long hardMillis) {
        return request("X", code, stdin, softMillis, hardMillis);
    }

    /**
     * Asks the worker to reset its interpreter in place for the next session (recycling). True when it
     * reports a clean reset; false when it must be replaced (it is then already killed if it misbehaved).
     */
    boolean resetForReuse(long hardMillis) {
        Outcome o = request("R", new byte[0], new byte[0], 0, hardMillis);
        return o.kind() == Kind.DONE && "ok".equals(o.word());
    }

    /**
     * Fork server: ends the session's interpreter (the template kills it and everything it started and
     * empties the scratch directories). True when the template reports a clean end; false when it must be
     * replaced.
     */
    boolean endSession(long hardMillis) {
        Outcome o = request("E", new byte[0], new byte[0], 0, hardMillis);
        return o.kind() == Kind.DONE && "ok".equals(o.word());
    }

    private Outcome request(String type, byte[] code, byte[] stdin, long softMillis, long hardMillis) {
        long t0 = System.nanoTime();
        String nonce = newNonce();
        synchronized (lock) {
            out.expect(frameMarker(nonce));
            err.expect(frameMarker(nonce));
        }
        // A request larger than the pipe buffer could block if the cell left the worker unable to read;
        // the watchdog bounds that by killing the process at the hard deadline.
        java.util.concurrent.ScheduledFuture<?> watchdog = code.length + stdin.length > 32768
                ? WATCHDOG.schedule(this::kill, hardMillis, TimeUnit.MILLISECONDS) : null;
        // From the soft deadline on (plus a margin: the interpreter's own timer starts a little after t0),
        // the jail's other processes are killed from outside, every few milliseconds, until the cell ends:
        // a swarm of children must not take the CPU the interrupted interpreter needs to stop the cell
        // within the grace. The worker kills the remaining strays itself at the end of the cell.
        java.util.concurrent.ScheduledFuture<?> strayStopper = interpreterChain != null && softMillis > 0
                ? WATCHDOG.scheduleWithFixedDelay(this::killStrays, Math.min(softMillis + STRAY_MARGIN_MILLIS, hardMillis),
                        STRAY_PERIOD_MILLIS, TimeUnit.MILLISECONDS)
                : null;
        try {
            return exchange(type, nonce, code, stdin, softMillis, hardMillis, t0, watchdog);
        } finally {
            if (strayStopper != null) strayStopper.cancel(false);
        }
    }

    /** Writes the request and waits for its end frames, the hard deadline, a violation or EOF. */
    private Outcome exchange(String type, String nonce, byte[] code, byte[] stdin, long softMillis, long hardMillis,
                             long t0, java.util.concurrent.ScheduledFuture<?> watchdog) {
        try {
            String header = type + " " + nonce + " " + softMillis + " " + code.length + " " + stdin.length + "\n";
            toWorker.write(header.getBytes(StandardCharsets.US_ASCII));
            toWorker.write(code);
            toWorker.write(stdin);
            toWorker.flush();
        } catch (IOException e) {
            kill();
            return finish(Kind.IO_FAILURE, t0, "the interpreter was not running (" + e.getMessage() + ")");
        } finally {
            if (watchdog != null) watchdog.cancel(false);
        }
        long deadline = t0 + TimeUnit.MILLISECONDS.toNanos(hardMillis);
        synchronized (lock) {
            while (true) {
                if (out.violation != null || err.violation != null) {
                    Drainer d = out.violation != null ? out : err;
                    boolean flood = d.violation.startsWith("output");
                    String why = d.violation;
                    killLocked();
                    return finishLocked(flood ? Kind.OUTPUT_FLOOD : Kind.PROTOCOL, t0, why);
                }
                if (out.done && err.done) return finishLocked(Kind.DONE, t0, null);
                if (out.eof || err.eof) break; // died: collect the exit code outside the lock
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    killLocked();
                    return finishLocked(Kind.HARD_TIMEOUT, t0, null);
                }
                try {
                    TimeUnit.NANOSECONDS.timedWait(lock, left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    killLocked();
                    return finishLocked(Kind.IO_FAILURE, t0, "the calling thread was interrupted");
                }
            }
        }
        int code1 = exitCode(2000);
        kill();
        // Let the drainers take what was in the pipes before EOF.
        out.awaitEof(500);
        err.awaitEof(500);
        synchronized (lock) {
            Outcome o = finishLocked(Kind.DIED, t0, null);
            return new Outcome(o.kind, null, null, o.stdout, o.stderr, o.millis, code1, null);
        }
    }

    private Outcome finish(Kind kind, long t0, String detail) {
        synchronized (lock) {
            return finishLocked(kind, t0, detail);
        }
    }

    private Outcome finishLocked(Kind kind, long t0, String detail) {
        long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        OutputCapture.Text so = out.take().text(spec.headChars(), spec.tailChars());
        OutputCapture.Text se = err.take().text(spec.headChars(), spec.tailChars());
        String word = kind == Kind.DONE ? out.word : null, ename = kind == Kind.DONE ? out.ename : null;
        return new Outcome(kind, word, ename, so, se, millis, -1, detail);
    }

    /**
     * Kills the whole process tree. Idempotent, never blocks. Order matters: the jail's init (the
     * launcher's child, pid 1 of the namespace) is killed first, which takes every process of the
     * namespace with it; the launcher is killed only once its child has been found or it has exited by
     * itself, because killing it while it is still creating the namespace could leave the new init
     * orphaned (its parent-death signal does not survive bubblewrap's uid switch).
     */
    void kill() {
        killed = true;
        try {
            toWorker.close(); // a worker still starting exits on EOF
        } catch (IOException ignored) {
            // already broken
        }
        List<ProcessHandle> tree = descendants();
        tree.forEach(ProcessHandle::destroyForcibly);
        if (!tree.isEmpty() || !process.isAlive()) {
            process.destroyForcibly();
            return;
        }
        WATCHDOG.execute(() -> { // setup in progress: wait for the child to appear (or the launcher to give up)
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (process.isAlive() && System.nanoTime() < deadline) {
                List<ProcessHandle> t = descendants();
                if (!t.isEmpty()) {
                    t.forEach(ProcessHandle::destroyForcibly);
                    break;
                }
                try {
                    Thread.sleep(2);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
            process.destroyForcibly();
        });
    }

    private List<ProcessHandle> descendants() {
        try {
            return process.toHandle().descendants().toList();
        } catch (RuntimeException e) { // the tree changed under us
            return List.of();
        }
    }

    private void killLocked() {
        kill();
    }

    /** Waits up to {@code millis} for the process to exit; its exit code, or -1. */
    int exitCode(long millis) {
        try {
            if (process.waitFor(millis, TimeUnit.MILLISECONDS)) return process.exitValue();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return -1;
    }

    /**
     * Drains one stream of the worker: appends bytes to the current capture, finds the end frame with
     * a KMP matcher (the frame may be split across reads), validates the frame line.
     */
    private final class Drainer implements Runnable {
        private final InputStream in;
        private final String name;
        private final Thread thread;
        // guarded by lock
        OutputCapture capture;
        OutputCapture completed; // the capture closed by the last end frame, until taken
        byte[] marker;
        int[] fail;
        int matched;
        boolean inLine;
        final byte[] line = new byte[MAX_FRAME_LINE];
        int lineLen;
        boolean done;
        String word;
        String ename;
        boolean eof;
        String violation;

        Drainer(InputStream in, String name) {
            this.in = in;
            this.name = name;
            this.capture = OutputCapture.forChars(spec.headChars(), spec.tailChars());
            this.thread = new Thread(this, "arbor-sandbox-worker-" + id + "-" + name);
            this.thread.setDaemon(true);
        }

        void start() {
            thread.start();
        }

        void awaitEof(long millis) {
            try {
                thread.join(millis);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }

        /** Arms the matcher for the next frame (called before the request is written). */
        void expect(byte[] m) {
            marker = m;
            fail = kmpTable(m);
            matched = 0;
            inLine = false;
            lineLen = 0;
            done = false;
            word = null;
            ename = null;
        }

        /** The cell's capture: the one closed by its end frame, or (no frame) everything so far. */
        OutputCapture take() {
            OutputCapture c = completed;
            if (c != null) {
                completed = null;
                return c;
            }
            c = capture;
            capture = OutputCapture.forChars(spec.headChars(), spec.tailChars());
            return c;
        }

        @Override
        public void run() {
            byte[] buf = new byte[65536];
            try {
                int n;
                while ((n = in.read(buf)) > 0) {
                    synchronized (lock) {
                        consume(buf, n);
                        lock.notifyAll();
                    }
                }
            } catch (IOException ignored) {
                // closed by kill(): same as EOF
            } finally {
                synchronized (lock) {
                    eof = true;
                    lock.notifyAll();
                }
            }
        }

        private void consume(byte[] b, int n) {
            int i = 0;
            while (i < n) {
                if (done || violation != null) { // after the frame: output for the next cell
                    capture.append(b, i, n - i);
                    break;
                }
                if (inLine) {
                    byte c = b[i++];
                    if (c == '\n') {
                        endLine();
                    } else if (lineLen == line.length) {
                        violation = "protocol: end frame line longer than " + MAX_FRAME_LINE + " bytes";
                    } else {
                        line[lineLen++] = c;
                    }
                    continue;
                }
                if (marker == null) {
                    capture.append(b, i, n - i);
                    break;
                }
                if (matched == 0) { // fast path: copy up to the next possible frame start
                    int j = i;
                    while (j < n && b[j] != marker[0]) j++;
                    if (j > i) capture.append(b, i, j - i);
                    i = j;
                    if (i == n) break;
                }
                byte c = b[i++];
                while (matched > 0 && c != marker[matched]) {
                    int back = fail[matched - 1];
                    capture.append(marker, 0, matched - back); // held bytes that cannot start a frame
                    matched = back;
                }
                if (c == marker[matched]) {
                    matched++;
                    if (matched == marker.length) {
                        matched = 0;
                        inLine = true;
                        lineLen = 0;
                    }
                } else {
                    capture.append(b, i - 1, 1);
                }
            }
            if (violation == null && capture.total() > spec.hardOutputBytes()) {
                violation = "output: more than " + spec.hardOutputBytes() + " bytes on " + (name.equals("out") ? "stdout" : "stderr");
            }
        }

        private void endLine() {
            inLine = false;
            String s = new String(line, 0, lineLen, StandardCharsets.ISO_8859_1);
            int sp = s.indexOf(' ');
            String w = sp < 0 ? s : s.substring(0, sp);
            String e = sp < 0 ? "" : s.substring(sp + 1);
            boolean ok;
            if (name.equals("err")) ok = w.equals("end") && e.isEmpty();
            else ok = (w.equals("ready") && e.isEmpty()) || (STATUS_WORDS.contains(w) && (e.isEmpty() || ENAME.matcher(e).matches()));
            if (!ok) {
                violation = "protocol: invalid end frame '" + s.replaceAll("[^\\x20-\\x7e]", "?") + "'";
                return;
            }
            word = w;
            ename = e.isEmpty() ? null : e;
            done = true;
            marker = null;
            completed = capture; // later bytes (background threads, children) belong to the next cell
            capture = OutputCapture.forChars(spec.headChars(), spec.tailChars());
        }
    }

    private static int[] kmpTable(byte[] m) {
        int[] f = new int[m.length];
        int k = 0;
        for (int i = 1; i < m.length; i++) {
            while (k > 0 && m[i] != m[k]) k = f[k - 1];
            if (m[i] == m[k]) k++;
            f[i] = k;
        }
        return f;
    }
}
