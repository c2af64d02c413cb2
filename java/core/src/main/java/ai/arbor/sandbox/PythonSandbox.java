package ai.arbor.sandbox;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;

/**
 * A pool of pre-started, jailed CPython workers; each {@link #openSession() session} leases one and
 * keeps its variables across calls like a notebook kernel. Thread-safe: many sessions in parallel from
 * many threads. A closed session's worker is killed (never reused by another session) and a fresh one
 * is started in the background, so opening a session normally costs no process start.
 *
 * <pre>{@code
 * try (PythonSandbox sandbox = PythonSandbox.builder().workers(4).timeout(Duration.ofSeconds(5)).memoryLimitMb(1024).build();
 *      SandboxSession s = sandbox.openSession()) {
 *     ExecResult r = s.execute("x = 6*7\nx");   // OK, stdout "42\n"
 * }
 * }</pre>
 *
 * Isolation ({@link Isolation}), limits, the worker protocol and what each defends against are
 * described in docs/sandbox.md. The isolation level in use is {@link #isolation()}, with the details in
 * {@link #isolationReport()}.
 */
public final class PythonSandbox implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(PythonSandbox.class.getName());
    private static final AtomicBoolean FALLBACK_WARNED = new AtomicBoolean();
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String WORKER_SOURCE = loadWorkerSource();

    /**
     * The complete environment of a worker (nothing is inherited from the JVM). Thread counts are 1 so
     * that numeric libraries do not oversubscribe the host or blow the address-space limit.
     */
    public static final Map<String, String> WORKER_ENVIRONMENT = workerEnvironment("/scratch");

    /**
     * Fork server: interpreters each template keeps forked ahead for the next sessions (they wait for their
     * first cell; a new process's first time slice is what makes a fork slow on a loaded machine).
     */
    static final int FORK_SPARES = 2;

    /** Uid of the worker inside the jail. */
    public static final int JAIL_UID = 1000;

    private final Builder cfg;
    private final Isolation isolation;
    private final String report;
    private final boolean dropUid;
    private final Map<String, Boolean> bwrapFeatures;
    private final Semaphore permits;
    private final LinkedBlockingQueue<Worker> idle = new LinkedBlockingQueue<>();
    private final ScheduledThreadPoolExecutor spawner;
    private final Set<PythonSession> sessions = ConcurrentHashMap.newKeySet();
    private final Map<Worker, Path> scratchDirs = new ConcurrentHashMap<>();
    private final Object poolLock = new Object();
    private int live;      // guarded by poolLock: idle + attached to sessions + being spawned
    private int spawning;  // guarded by poolLock
    private volatile boolean closed;
    private volatile String lastSpawnFailure;
    private volatile long lastSpawnFailureNanos;
    private final AtomicLong spawned = new AtomicLong();
    private final AtomicLong retired = new AtomicLong();
    private final AtomicLong spawnFailures = new AtomicLong();
    private final AtomicLong recycled = new AtomicLong();
    private final AtomicLong recycleFailures = new AtomicLong();
    private final AtomicLong forkedSessions = new AtomicLong();
    private final AtomicLong spawnNanos = new AtomicLong();

    /**
     * Counters for monitoring and leak checks: {@code idle} workers ready for a session, {@code openSessions}
     * (each holds a worker), {@code starting} workers being started; {@code forkedSessions} counts sessions a
     * fork server's template ended cleanly.
     */
    public record Stats(int workers, int idle, int openSessions, long spawned, long retired, long spawnFailures,
                        double meanSpawnMillis, long recycled, long recycleFailures, int starting, long forkedSessions) {}

    private PythonSandbox(Builder b) {
        this.cfg = b.copy();
        this.dropUid = hostUid() == 0 && Files.isExecutable(cfg.setpriv);
        this.bwrapFeatures = cfg.isolation == Isolation.RLIMITS_ONLY ? Map.of() : bwrapFeatures(cfg.bwrap);
        Isolation level = Isolation.RLIMITS_ONLY;
        String why = "requested";
        if (cfg.isolation != Isolation.RLIMITS_ONLY) {
            why = probeJail();
            if (why == null) {
                level = Isolation.JAIL;
            } else if (cfg.isolation == Isolation.JAIL) {
                throw new SandboxException("the bubblewrap jail was required but is unavailable: " + why);
            }
        }
        if (level == Isolation.JAIL && cfg.forkServer && !bwrapFeatures.getOrDefault("--as-pid-1", false)) {
            throw new SandboxException("forkServer(true) needs bubblewrap's --as-pid-1 (bubblewrap >= 0.3), which " + cfg.bwrap + " lacks");
        }
        this.isolation = level;
        this.report = describe(why);
        if (level == Isolation.RLIMITS_ONLY && cfg.isolation == Isolation.AUTO && FALLBACK_WARNED.compareAndSet(false, true)) {
            LOG.log(System.Logger.Level.WARNING, "Python sandbox: namespaces unavailable (" + why + "); falling back to "
                    + "resource limits only. Model-written code can then reach the network and read the host's "
                    + "files. Use isolation(Isolation.JAIL) to refuse instead. " + report);
        }
        this.permits = new Semaphore(cfg.workers, true);
        this.spawner = new ScheduledThreadPoolExecutor(Math.max(1, Math.min(cfg.workers, Runtime.getRuntime().availableProcessors())), r -> {
            Thread t = new Thread(r, "arbor-sandbox-spawner");
            t.setDaemon(true);
            return t;
        });
        this.spawner.setRemoveOnCancelPolicy(true);
        // The first worker starts synchronously so that a broken interpreter fails build(), not later.
        Worker first;
        try {
            first = startWorker();
        } catch (RuntimeException e) {
            spawner.shutdownNow();
            throw e;
        }
        synchronized (poolLock) {
            live = 1;
        }
        idle.add(first);
        replenish();
    }

    public static Builder builder() {
        return new Builder();
    }

    /** The isolation level in use: {@link Isolation#JAIL} or {@link Isolation#RLIMITS_ONLY}. */
    public Isolation isolation() {
        return isolation;
    }

    /** One line saying what isolates the workers and which limits apply (also logged on fallback). */
    public String isolationReport() {
        return report;
    }

    /** Default soft time limit of one call. */
    public Duration timeout() {
        return cfg.timeout;
    }

    public Stats stats() {
        long n = spawned.get();
        int starting;
        synchronized (poolLock) {
            starting = spawning;
        }
        return new Stats(cfg.workers, idle.size(), sessions.size(), n, retired.get(), spawnFailures.get(),
                n == 0 ? 0 : spawnNanos.get() / 1e6 / n, recycled.get(), recycleFailures.get(), starting, forkedSessions.get());
    }

    /** Opens a session, waiting up to the builder's lease timeout for a free worker. */
    public PythonSession openSession() {
        return openSession(cfg.leaseTimeout);
    }

    /**
     * Opens a session, waiting up to {@code wait} while all workers are leased.
     *
     * @throws SandboxException when no worker frees up in time or the sandbox is closed
     */
    public PythonSession openSession(Duration wait) {
        requirePositive("wait", wait);
        if (closed) throw new SandboxException("the Python sandbox is closed");
        try {
            if (!permits.tryAcquire(wait.toNanos(), TimeUnit.NANOSECONDS)) {
                throw new SandboxException("no free Python worker within " + wait.toMillis() + " ms: all " + cfg.workers
                        + " workers are leased by open sessions (close sessions or raise workers(...))");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new SandboxException("interrupted while waiting for a free Python worker", e);
        }
        if (closed) {
            permits.release();
            throw new SandboxException("the Python sandbox is closed");
        }
        PythonSession s = new PythonSession(this, idle.poll());
        sessions.add(s);
        return s;
    }

    @Override
    public void close() {
        if (closed) return;
        closed = true;
        spawner.shutdownNow();
        for (PythonSession s : List.copyOf(sessions)) s.killForSandboxClose();
        for (Worker w; (w = idle.poll()) != null; ) retire(w);
    }

    boolean isClosed() {
        return closed;
    }

    Builder config() {
        return cfg;
    }

    void sessionClosed(PythonSession s) {
        if (sessions.remove(s)) permits.release();
    }

    /** A worker for a session that has none: an idle one, or the next one the spawner finishes. */
    Worker takeWorker() {
        long start = System.nanoTime();
        long deadline = start + cfg.spawnTimeout.toNanos() + TimeUnit.SECONDS.toNanos(1);
        replenish();
        while (true) {
            if (closed) throw new SandboxException("the Python sandbox is closed");
            Worker w;
            try {
                w = idle.poll(50, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new SandboxException("interrupted while waiting for a Python worker", e);
            }
            if (w != null) {
                if (w.alive()) return w;
                retire(w);
                continue;
            }
            boolean nothingComing;
            synchronized (poolLock) {
                nothingComing = spawning == 0;
            }
            if (lastSpawnFailureNanos - start > 0 && nothingComing) {
                throw new SandboxException("cannot start a Python worker: " + lastSpawnFailure);
            }
            if (System.nanoTime() - deadline > 0) {
                throw new SandboxException("no Python worker started within " + cfg.spawnTimeout.toMillis() + " ms"
                        + (lastSpawnFailure != null ? "; last failure: " + lastSpawnFailure : ""));
            }
            if (nothingComing) replenish();
        }
    }

    /**
     * Returns a session's worker to the idle queue after it reset its interpreter cleanly (recycling);
     * retires it otherwise.
     */
    void recycle(Worker w) {
        if (closed || !w.alive() || !w.resetForReuse(cfg.hardTimeoutGrace.toMillis() + 2000)) {
            recycleFailures.incrementAndGet();
            retire(w);
            return;
        }
        recycled.incrementAndGet();
        idle.add(w);
    }

    /**
     * Fork server: ends the session's interpreter on a template and returns the template to the idle
     * queue; retires it when the template does not report a clean end in time.
     */
    void endForkedSession(Worker w, boolean toIdle) {
        if (closed || !w.alive() || !w.endSession(cfg.hardTimeoutGrace.toMillis() + 2000)) {
            retire(w);
            return;
        }
        forkedSessions.incrementAndGet();
        if (toIdle) idle.add(w);
    }

    boolean forkServer() {
        return cfg.forkServer;
    }

    /** Kills a worker for good and starts its replacement in the background. */
    void retire(Worker w) {
        w.kill();
        if (!w.claimRetire()) return;
        retired.incrementAndGet();
        Path dir = scratchDirs.remove(w);
        if (dir != null) deleteTree(dir);
        synchronized (poolLock) {
            live--;
        }
        replenish();
    }

    private void replenish() {
        synchronized (poolLock) {
            if (closed) return;
            while (live < cfg.workers) {
                live++;
                spawning++;
                spawner.execute(this::spawnOne);
            }
        }
    }

    private void spawnOne() {
        Worker w = null;
        try {
            if (!closed) w = startWorker();
        } catch (RuntimeException e) {
            if (!closed) { // a spawn interrupted by close() is not a failure
                spawnFailures.incrementAndGet();
                lastSpawnFailure = e.getMessage();
                lastSpawnFailureNanos = System.nanoTime();
                LOG.log(System.Logger.Level.WARNING, "Python sandbox: " + e.getMessage());
            }
        }
        synchronized (poolLock) {
            spawning--;
            if (w == null) live--;
        }
        if (w == null) {
            if (!closed) { // back off before trying again; sessions waiting see the failure meanwhile
                try {
                    spawner.schedule(this::replenish, 1, TimeUnit.SECONDS);
                } catch (RuntimeException ignored) {
                    // shut down concurrently
                }
            }
            return;
        }
        if (closed) {
            retire(w);
            return;
        }
        idle.add(w);
    }

    private Worker startWorker() {
        long t0 = System.nanoTime();
        Path dir = null;
        if (isolation == Isolation.RLIMITS_ONLY) dir = newScratchDir();
        try {
            Worker w = Worker.start(spec(isolation, dir));
            spawnNanos.addAndGet(System.nanoTime() - t0);
            spawned.incrementAndGet();
            if (dir != null) scratchDirs.put(w, dir);
            return w;
        } catch (RuntimeException e) {
            if (dir != null) deleteTree(dir);
            throw e;
        }
    }

    // ---------------------------------------------------------------- launch

    /**
     * The command line that starts Python the way this sandbox starts its workers (empty environment,
     * uid drop, jail), with {@code pythonArgs} instead of the worker: to reproduce the jail by hand or to
     * measure a fresh jailed process per call. In fallback mode the working directory is the JVM's.
     */
    public List<String> launchCommand(String... pythonArgs) {
        List<String> argv = launcher(isolation, isolation == Isolation.JAIL ? null : Path.of(System.getProperty("java.io.tmpdir")));
        argv.addAll(List.of(pythonArgs));
        return argv;
    }

    /** argv up to and including the interpreter: env -i VARS [setpriv …] [bwrap … --] python3. */
    private List<String> launcher(Isolation level, Path dir) {
        List<String> argv = new ArrayList<>();
        argv.add(cfg.env.toString());
        argv.add("-i");
        workerEnvironment(level == Isolation.JAIL ? "/scratch" : dir.toString())
                .forEach((k, v) -> argv.add(k + "=" + v));
        if (dropUid) {
            argv.add(cfg.setpriv.toString());
            argv.add("--reuid=" + cfg.sandboxUid);
            argv.add("--regid=" + cfg.sandboxUid);
            argv.add("--clear-groups");
        }
        if (level == Isolation.JAIL) argv.addAll(bwrapArgs());
        argv.add(cfg.python.toString());
        return argv;
    }

    private WorkerSpec spec(Isolation level, Path dir) {
        List<String> argv = launcher(level, dir);
        argv.add("-s");   // with PYTHONSAFEPATH: -I but for -E, so PYTHONHASHSEED is read (workerEnvironment)
        argv.add("-B");
        argv.add("-c");
        argv.add(WORKER_SOURCE);
        boolean jail = level == Isolation.JAIL;
        int nproc = jail ? cfg.maxProcesses : dropUid ? cfg.maxProcesses * cfg.workers : 0;
        Map<String, Object> conf = new LinkedHashMap<>();
        conf.put("rlimit_as", (long) cfg.memoryLimitMb << 20);
        conf.put("rlimit_nproc", nproc);
        conf.put("rlimit_nofile", cfg.maxOpenFiles);
        conf.put("rlimit_fsize", (long) cfg.maxFileSizeMb << 20);
        conf.put("rlimit_cpu", cfg.cpuLimit.toSeconds());
        conf.put("subreaper", !jail);
        conf.put("kill_strays", jail && cfg.killStrayProcesses);
        conf.put("int_max_str_digits", cfg.intMaxStrDigits);
        conf.put("preimport", cfg.preImports);
        conf.put("max_output_bytes", cfg.maxOutputBytes);
        conf.put("fork_server", cfg.forkServer);
        conf.put("fork_spares", FORK_SPARES);
        conf.put("grace_ms", cfg.hardTimeoutGrace.toMillis());
        long hardOutput = Math.addExact(Math.multiplyExact(cfg.maxOutputBytes, 2), 1L << 16);
        return new WorkerSpec(argv, cfg.launcherEnvironment, dir, nonce -> {
            Map<String, Object> m = new LinkedHashMap<>(conf);
            m.put("nonce", nonce);
            try {
                return JSON.writeValueAsString(m);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }, cfg.spawnTimeout, cfg.outputHeadChars, cfg.outputTailChars, hardOutput, jail && cfg.killStrayProcesses, cfg.forkServer);
    }

    private List<String> bwrapArgs() {
        List<String> a = new ArrayList<>(List.of(cfg.bwrap.toString(), "--unshare-all", "--unshare-user"));
        if (bwrapFeatures.getOrDefault("--disable-userns", false)) a.add("--disable-userns");
        // Fork server: the template itself is the jail's pid 1. The kernel then drops the signals a session
        // sends it (kill of the parent, kill(-1)), and no separate init is left that a session could ptrace
        // or write through /proc/1/mem and that would outlive the session (the template is not dumpable).
        if (cfg.forkServer) a.add("--as-pid-1");
        a.addAll(List.of("--die-with-parent", "--new-session", "--cap-drop", "ALL",
                "--uid", String.valueOf(JAIL_UID), "--gid", String.valueOf(JAIL_UID), "--hostname", "sandbox",
                "--ro-bind", "/usr", "/usr"));
        for (String top : List.of("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")) {
            Path p = Path.of(top);
            if (Files.isSymbolicLink(p)) {
                try {
                    a.addAll(List.of("--symlink", Files.readSymbolicLink(p).toString(), top));
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            } else if (Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)) {
                a.addAll(List.of("--ro-bind", top, top));
            }
        }
        // Debian resolves libblas/liblapack (numpy) through /etc/alternatives; nothing else of /etc.
        a.addAll(List.of("--ro-bind-try", "/etc/alternatives", "/etc/alternatives",
                "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"));
        for (Path p : cfg.readOnlyBinds) a.addAll(List.of("--ro-bind", p.toString(), p.toString()));
        a.addAll(List.of("--proc", "/proc", "--dev", "/dev"));
        boolean size = bwrapFeatures.getOrDefault("--size", false);
        for (String[] t : new String[][] {{"/dev/shm", "16"}, {"/tmp", String.valueOf(cfg.tmpSizeMb)}, {"/scratch", String.valueOf(cfg.tmpSizeMb)}}) {
            if (size) a.addAll(List.of("--size", String.valueOf(Long.parseLong(t[1]) << 20)));
            a.addAll(List.of("--tmpfs", t[0]));
        }
        a.addAll(List.of("--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/scratch", "--"));
        return a;
    }

    private static Map<String, String> workerEnvironment(String home) {
        Map<String, String> m = new LinkedHashMap<>();
        m.put("PATH", "/usr/local/bin:/usr/bin:/bin");
        m.put("HOME", home);
        m.put("TMPDIR", "/tmp");
        m.put("LANG", "C.UTF-8");
        m.put("LC_ALL", "C.UTF-8");
        m.put("OPENBLAS_NUM_THREADS", "1");
        m.put("OMP_NUM_THREADS", "1");
        m.put("MKL_NUM_THREADS", "1");
        m.put("NUMEXPR_NUM_THREADS", "1");
        m.put("MPLBACKEND", "Agg");
        // One str/bytes hash secret for every worker, so a set or dict of strings prints in the same order on
        // each: a path's replayed cells (leased sessions) land on other workers and are compared with what the
        // model saw. Read because the interpreter runs with -s and PYTHONSAFEPATH (-I's -s and -P) instead of
        // -I, whose -E ignores PYTHON* variables; env -i leaves no other variable to ignore.
        m.put("PYTHONHASHSEED", "0");
        m.put("PYTHONSAFEPATH", "1");
        return Collections.unmodifiableMap(m);
    }

    /** Null when a jailed Python starts here; otherwise why not. */
    private String probeJail() {
        if (!Files.isExecutable(cfg.bwrap)) return cfg.bwrap + " not found (install bubblewrap)";
        if (!Files.isExecutable(cfg.python)) return null; // let the worker start report the missing interpreter
        List<String> argv = launcher(Isolation.JAIL, null);
        argv.addAll(List.of("-I", "-c", "import os; print(os.getuid())"));
        try {
            Process p = new ProcessBuilder(argv).redirectErrorStream(true).start();
            p.getOutputStream().close();
            byte[] out;
            try (InputStream in = p.getInputStream()) {
                out = in.readNBytes(4096);
            }
            if (!p.waitFor(cfg.spawnTimeout.toMillis(), TimeUnit.MILLISECONDS)) {
                p.destroyForcibly();
                return "bubblewrap did not start Python within " + cfg.spawnTimeout.toMillis() + " ms";
            }
            String said = new String(out, StandardCharsets.UTF_8).strip();
            if (p.exitValue() != 0 || !said.equals(String.valueOf(JAIL_UID))) {
                return "bubblewrap failed (exit " + p.exitValue() + "): " + said;
            }
            return null;
        } catch (IOException e) {
            return "cannot run bubblewrap: " + e.getMessage();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "interrupted while probing bubblewrap";
        }
    }

    private static Map<String, Boolean> bwrapFeatures(Path bwrap) {
        Map<String, Boolean> f = new LinkedHashMap<>();
        String help = "";
        try {
            Process p = new ProcessBuilder(bwrap.toString(), "--help").redirectErrorStream(true).start();
            try (InputStream in = p.getInputStream()) {
                help = new String(in.readNBytes(1 << 16), StandardCharsets.UTF_8);
            }
            p.waitFor(5, TimeUnit.SECONDS);
        } catch (IOException e) {
            // not installed: the probe reports it
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        for (String opt : List.of("--disable-userns", "--size", "--as-pid-1")) f.put(opt, help.contains(opt + " ") || help.contains(opt + "\n"));
        return f;
    }

    private String describe(String fallbackReason) {
        StringBuilder sb = new StringBuilder();
        if (isolation == Isolation.JAIL) {
            sb.append("jail: bubblewrap (").append(cfg.bwrap).append("): user, pid, network, ipc, uts, mount, cgroup namespaces");
            sb.append(bwrapFeatures.getOrDefault("--disable-userns", false) ? "; nested user namespaces disabled" : "; nested user namespaces allowed (bwrap too old for --disable-userns)");
            sb.append("; uid ").append(JAIL_UID).append(" inside");
            sb.append(dropUid ? ", host uid " + cfg.sandboxUid : hostUid() == 0 ? ", host uid 0 (setpriv missing: process limit not enforced)" : ", host uid " + hostUid());
            sb.append("; capabilities dropped; read-only root and /usr; /etc limited to alternatives and ld.so.cache");
            sb.append(bwrapFeatures.getOrDefault("--size", false)
                    ? "; tmpfs /tmp and /scratch " + cfg.tmpSizeMb + " MiB each, /dev/shm 16 MiB"
                    : "; tmpfs /tmp, /scratch, /dev/shm unbounded (bwrap too old for --size)");
            sb.append("; stray processes killed after each call: ").append(cfg.killStrayProcesses ? "yes" : "no");
        } else {
            sb.append("rlimits only (").append(fallbackReason).append("): empty environment, scratch directory as working directory");
            sb.append(dropUid ? ", host uid " + cfg.sandboxUid : ", runs as the JVM's user");
            sb.append("; NO network, filesystem or process isolation");
        }
        sb.append(String.format(Locale.ROOT, "; limits: address space %d MiB, %s, %d open files, file size %d MiB, CPU %d s per worker",
                cfg.memoryLimitMb,
                isolation == Isolation.JAIL ? cfg.maxProcesses + " processes/threads" : dropUid ? cfg.maxProcesses * cfg.workers + " processes/threads for all workers together" : "processes not limited",
                cfg.maxOpenFiles, cfg.maxFileSizeMb, cfg.cpuLimit.toSeconds()));
        sb.append(String.format(Locale.ROOT, "; time %d ms soft + %d ms grace; output %d bytes per call, shown as %d + %d chars",
                cfg.timeout.toMillis(), cfg.hardTimeoutGrace.toMillis(), cfg.maxOutputBytes, cfg.outputHeadChars, cfg.outputTailChars));
        return sb.toString();
    }

    static int hostUid() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith("Uid:")) return Integer.parseInt(line.substring(4).trim().split("\\s+")[0]);
            }
        } catch (IOException | RuntimeException e) {
            // not Linux: treat as unprivileged
        }
        return -1;
    }

    private Path newScratchDir() {
        try {
            Path d = Files.createTempDirectory("arbor-sandbox-");
            if (dropUid) {
                Files.setAttribute(d, "unix:uid", cfg.sandboxUid);
                Files.setAttribute(d, "unix:gid", cfg.sandboxUid);
            }
            Files.setPosixFilePermissions(d, PosixFilePermissions.fromString("rwx------"));
            return d;
        } catch (IOException e) {
            throw new SandboxException("cannot create a scratch directory: " + e.getMessage(), e);
        }
    }

    private static void deleteTree(Path dir) {
        try (Stream<Path> s = Files.walk(dir)) {
            s.sorted(Comparator.reverseOrder()).forEach(p -> {
                try {
                    Files.deleteIfExists(p);
                } catch (IOException ignored) {
                    // best effort: a file the worker made unreadable stays in /tmp
                }
            });
        } catch (IOException | UncheckedIOException ignored) {
            // already gone
        }
    }

    private static String loadWorkerSource() {
        try (InputStream in = PythonSandbox.class.getResourceAsStream("worker.py")) {
            if (in == null) throw new IllegalStateException("resource ai/arbor/sandbox/worker.py missing from the classpath");
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static void requirePositive(String name, Duration d) {
        if (d == null || d.isNegative() || d.isZero()) throw new IllegalArgumentException(name + " must be a positive duration, got " + d);
    }

    // ---------------------------------------------------------------- builder

    /** Options of a {@link PythonSandbox}; every one has a default (see docs/sandbox.md, "Limits and defaults"). */
    public static final class Builder {
        Path python = Path.of("/usr/bin/python3");
        Path bwrap = Path.of("/usr/bin/bwrap");
        Path env = Path.of("/usr/bin/env");
        Path setpriv = Path.of("/usr/bin/setpriv");
        int workers = Math.max(1, Runtime.getRuntime().availableProcessors());
        Duration timeout = Duration.ofSeconds(10);
        Duration hardTimeoutGrace = Duration.ofSeconds(1);
        int memoryLimitMb = 1024;
        int maxProcesses = 64;
        int maxOpenFiles = 256;
        int maxFileSizeMb = 64;
        int tmpSizeMb = 64;
        Duration cpuLimit = Duration.ofMinutes(10);
        int outputHeadChars = 400;
        int outputTailChars = 400;
        long maxOutputBytes = 1 << 20;
        int maxCodeBytes = 1 << 20;
        int intMaxStrDigits = 100_000;
        List<String> preImports = List.of();
        Isolation isolation = Isolation.AUTO;
        boolean killStrayProcesses = true;
        boolean recycleWorkers = false;
        boolean forkServer = false;
        Duration leaseTimeout = Duration.ofSeconds(60);
        Duration spawnTimeout = Duration.ofSeconds(20);
        List<Path> readOnlyBinds = List.of();
        int sandboxUid = 65534;
        Map<String, String> launcherEnvironment = Map.of();

        Builder() {}

        Builder copy() {
            Builder b = new Builder();
            b.python = python; b.bwrap = bwrap; b.env = env; b.setpriv = setpriv; b.workers = workers;
            b.timeout = timeout; b.hardTimeoutGrace = hardTimeoutGrace; b.memoryLimitMb = memoryLimitMb;
            b.maxProcesses = maxProcesses; b.maxOpenFiles = maxOpenFiles; b.maxFileSizeMb = maxFileSizeMb;
            b.tmpSizeMb = tmpSizeMb; b.cpuLimit = cpuLimit; b.outputHeadChars = outputHeadChars;
            b.outputTailChars = outputTailChars; b.maxOutputBytes = maxOutputBytes; b.maxCodeBytes = maxCodeBytes;
            b.intMaxStrDigits = intMaxStrDigits; b.preImports = List.copyOf(preImports); b.isolation = isolation;
            b.killStrayProcesses = killStrayProcesses; b.recycleWorkers = recycleWorkers; b.forkServer = forkServer; b.leaseTimeout = leaseTimeout; b.spawnTimeout = spawnTimeout;
            b.readOnlyBinds = List.copyOf(readOnlyBinds); b.sandboxUid = sandboxUid;
            b.launcherEnvironment = Map.copyOf(launcherEnvironment);
            return b;
        }

        /** Python interpreter (default Debian's {@code /usr/bin/python3}; in the jail it must live under /usr or a {@link #readOnlyBind}). */
        public Builder python(Path python) {
            this.python = requireNonNull("python", python);
            return this;
        }

        /** bubblewrap executable (default {@code /usr/bin/bwrap}). */
        public Builder bwrap(Path bwrap) {
            this.bwrap = requireNonNull("bwrap", bwrap);
            return this;
        }

        /** Number of workers = maximum number of open sessions (default: available processors). */
        public Builder workers(int workers) {
            if (workers < 1 || workers > 4096) throw new IllegalArgumentException("workers must be in [1, 4096], got " + workers);
            this.workers = workers;
            return this;
        }

        /** Soft time limit of one call, enforced inside the worker: the call fails, variables are kept (default 10 s). */
        public Builder timeout(Duration timeout) {
            requirePositive("timeout", timeout);
            this.timeout = timeout;
            return this;
        }

        /** Extra time after the soft limit before Java kills the worker's process tree and reports stateLost (default 1 s). */
        public Builder hardTimeoutGrace(Duration grace) {
            requirePositive("hardTimeoutGrace", grace);
            this.hardTimeoutGrace = grace;
            return this;
        }

        /** Address-space limit of each worker process, MiB (default 1024). */
        public Builder memoryLimitMb(int mb) {
            if (mb < 64 || mb > (1 << 22)) throw new IllegalArgumentException("memoryLimitMb must be in [64, 4194304], got " + mb);
            this.memoryLimitMb = mb;
            return this;
        }

        /** Processes + threads one worker may have (RLIMIT_NPROC, counted per jail; default 64). */
        public Builder maxProcesses(int n) {
            if (n < 4 || n > 100_000) throw new IllegalArgumentException("maxProcesses must be in [4, 100000], got " + n);
            this.maxProcesses = n;
            return this;
        }

        /** Open files per process (default 256). */
        public Builder maxOpenFiles(int n) {
            if (n < 32 || n > 1 << 20) throw new IllegalArgumentException("maxOpenFiles must be in [32, 1048576], got " + n);
            this.maxOpenFiles = n;
            return this;
        }

        /** Largest file a worker may write, MiB (default 64). */
        public Builder maxFileSizeMb(int mb) {
            if (mb < 1 || mb > 1 << 20) throw new IllegalArgumentException("maxFileSizeMb must be in [1, 1048576], got " + mb);
            this.maxFileSizeMb = mb;
            return this;
        }

        /** Size of each of the tmpfs mounts /tmp and /scratch in the jail, MiB (default 64). */
        public Builder tmpSizeMb(int mb) {
            if (mb < 1 || mb > 1 << 20) throw new IllegalArgumentException("tmpSizeMb must be in [1, 1048576], got " + mb);
            this.tmpSizeMb = mb;
            return this;
        }

        /** CPU time one worker process may use over its whole life, a backstop against busy background threads (default 10 min). */
        public Builder cpuLimit(Duration cpu) {
            requirePositive("cpuLimit", cpu);
            if (cpu.toSeconds() < 1) throw new IllegalArgumentException("cpuLimit must be at least 1 s, got " + cpu);
            this.cpuLimit = cpu;
            return this;
        }

        /** Characters kept from the start of stdout/stderr when output is truncated (default 400, as CoRT). */
        public Builder outputHeadChars(int n) {
            if (n < 0 || n > 1 << 24) throw new IllegalArgumentException("outputHeadChars must be in [0, 16777216], got " + n);
            this.outputHeadChars = n;
            return this;
        }

        /** Characters kept from the end of stdout/stderr when output is truncated (default 400, as CoRT). */
        public Builder outputTailChars(int n) {
            if (n < 0 || n > 1 << 24) throw new IllegalArgumentException("outputTailChars must be in [0, 16777216], got " + n);
            this.outputTailChars = n;
            return this;
        }

        /**
         * Bytes one call may print through Python (default 1 MiB): beyond it the cell fails with
         * OUTPUT_LIMIT and keeps its variables. Raw writes to the file descriptors are cut off by Java at
         * twice this plus 64 KiB, killing the worker.
         */
        public Builder maxOutputBytes(long n) {
            if (n < 1024 || n > 1L << 32) throw new IllegalArgumentException("maxOutputBytes must be in [1024, 4294967296], got " + n);
            this.maxOutputBytes = n;
            return this;
        }

        /** Largest accepted code string, UTF-8 bytes; larger requests are rejected with ERROR (default 1 MiB). */
        public Builder maxCodeBytes(int n) {
            if (n < 1 || n > 1 << 28) throw new IllegalArgumentException("maxCodeBytes must be in [1, 268435456], got " + n);
            this.maxCodeBytes = n;
            return this;
        }

        /** Python's int-to-string digit limit ({@code sys.set_int_max_str_digits}; 0 = unlimited; default 100000). */
        public Builder intMaxStrDigits(int digits) {
            if (digits != 0 && (digits < 640 || digits > 100_000_000)) {
                throw new IllegalArgumentException("intMaxStrDigits must be 0 or in [640, 100000000], got " + digits);
            }
            this.intMaxStrDigits = digits;
            return this;
        }

        /** Modules imported when a worker starts (e.g. "numpy", "sympy"), so cells importing them pay nothing. */
        public Builder preImport(String... modules) {
            for (String m : modules) {
                if (m == null || !m.matches("[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z_][A-Za-z0-9_]*)*")) {
                    throw new IllegalArgumentException("not a module name: " + m);
                }
            }
            this.preImports = List.of(modules);
            return this;
        }

        /** Isolation to use (default {@link Isolation#AUTO}: the jail where possible, else rlimits with a warning). */
        public Builder isolation(Isolation isolation) {
            this.isolation = requireNonNull("isolation", isolation);
            return this;
        }

        /** Kill every process a cell leaves behind at the end of the call (jail only; default true). */
        public Builder killStrayProcesses(boolean kill) {
            this.killStrayProcesses = kill;
            return this;
        }

        /**
         * Reuse a closed session's worker for the next session after resetting its interpreter in place,
         * instead of killing it and starting a new one (default false). A reset costs about a millisecond
         * where a jailed respawn costs ~190 ms of CPU, so rollouts that open one session per trajectory
         * (RL training) run an order of magnitude faster. It is done only when it is clean: no thread left
         * running, builtins and every module loaded at start-up unchanged, resource limits unchanged; the
         * namespace, sys.path, environment, working directory, signal handlers and the scratch and /tmp
         * directories are restored, stray processes killed. Otherwise the worker is killed as usual.
         * Weaker isolation between sessions than a fresh process: modules first imported during a
         * session stay loaded (with any state they keep). Use for your own policy's code in training; keep
         * the default for multi-tenant or adversarial serving.
         */
        public Builder recycleWorkers(boolean recycle) {
            this.recycleWorkers = recycle;
            return this;
        }

        /**
         * Run every session in a fresh interpreter forked from a warm template process (default false).
         * Each worker is then a template that never runs model code: a session's first call forks a child
         * from it (a few milliseconds instead of a jailed process start, ~190 ms), the child keeps the
         * session's variables, and when the session closes or resets the child and every process it
         * started are killed and the scratch directories, /tmp and /dev/shm emptied; the template goes
         * back to the pool. What a fresh interpreter guarantees and what it shares with the template
         * (pre-imported modules as loaded at start-up, the hash seed) is in docs/sandbox.md, "Fork server".
         * Not combinable with {@link #recycleWorkers}.
         */
        public Builder forkServer(boolean fork) {
            this.forkServer = fork;
            return this;
        }

        /** How long {@link #openSession()} waits for a free worker (default 60 s). */
        public Builder leaseTimeout(Duration d) {
            requirePositive("leaseTimeout", d);
            this.leaseTimeout = d;
            return this;
        }

        /** How long a worker may take to start (default 20 s; pre-importing sympy takes about 1 s). */
        public Builder spawnTimeout(Duration d) {
            requirePositive("spawnTimeout", d);
            this.spawnTimeout = d;
            return this;
        }

        /** Extra host path made visible read-only at the same place in the jail (e.g. a virtualenv). */
        public Builder readOnlyBind(Path path) {
            requireNonNull("path", path);
            if (!path.isAbsolute()) throw new IllegalArgumentException("readOnlyBind needs an absolute path, got " + path);
            List<Path> l = new ArrayList<>(readOnlyBinds);
            l.add(path);
            this.readOnlyBinds = l;
            return this;
        }

        /** Host uid the workers run as when the JVM runs as root (default 65534, nobody). */
        public Builder sandboxUid(int uid) {
            if (uid <= 0) throw new IllegalArgumentException("sandboxUid must be a positive (non-root) uid, got " + uid);
            this.sandboxUid = uid;
            return this;
        }

        /** Test hook: variables put into the launcher's environment, which {@code env -i} must clear. */
        Builder launcherEnvironment(Map<String, String> env) {
            this.launcherEnvironment = Map.copyOf(env);
            return this;
        }

        /**
         * Probes the isolation, starts the first worker (failing here if Python cannot start) and the rest
         * in the background.
         *
         * @throws SandboxException when no worker can start, or {@link Isolation#JAIL} was requested and is unavailable
         */
        public PythonSandbox build() {
            if (outputHeadChars + outputTailChars == 0) throw new IllegalArgumentException("outputHeadChars + outputTailChars must be positive");
            if (forkServer && recycleWorkers) {
                throw new IllegalArgumentException("forkServer(true) and recycleWorkers(true) exclude each other: a fork server already gives each session a fresh interpreter cheaply");
            }
            return new PythonSandbox(this);
        }

        private static <T> T requireNonNull(String name, T v) {
            if (v == null) throw new IllegalArgumentException(name + " must not be null");
            return v;
        }
    }
}
