package ai.arbor.sandbox;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Client of a SandboxFusion-compatible code-execution server (SandboxFusion itself, or
 * {@link SandboxServer} / {@code arbor sandbox serve}) behind the {@link SandboxSession} interface.
 * The HTTP API is stateless, so a session is emulated by replaying its earlier successful cells before
 * each new one: in {@link Mode#JUPYTER} mode as the leading cells of a {@code /run_jupyter} request, in
 * {@link Mode#RUN_CODE} mode through a small driver program sent to {@code /run_code}. Replay costs
 * grow with the session (every call re-runs the earlier cells), and cells with side effects or
 * randomness are re-executed; when a replayed cell fails the session is reset and the call reports
 * {@code stateLost}.
 *
 * <p>Requests are limited to {@link Builder#maxConcurrentRequests} at a time across all sessions of
 * this client; each has a deadline (the run's time limit plus {@link Builder#requestSlack}); only
 * connection failures and gateway errors (HTTP 502/503/504) are retried, with exponential backoff and
 * jitter. Whatever fails on the infrastructure side becomes {@link ExecStatus#SANDBOX_ERROR}; nothing
 * here blocks without a bound.
 */
public final class RemoteSandbox implements AutoCloseable {

    /** How sessions are emulated. */
    public enum Mode {
        /** {@code POST /run_jupyter} with the earlier cells followed by the new one. */
        JUPYTER,
        /** {@code POST /run_code} with a driver program that replays the earlier cells silently. */
        RUN_CODE
    }

    private static final String DRIVER = loadDriver();

    private final URI base;
    private final Builder cfg;
    private final HttpClient http;
    private final Semaphore slots;
    private final AtomicLong requests = new AtomicLong();
    private final AtomicLong retries = new AtomicLong();
    private volatile boolean closed;

    private RemoteSandbox(Builder b) {
        this.cfg = b.copy();
        String s = b.endpoint.toString();
        this.base = URI.create(s.endsWith("/") ? s.substring(0, s.length() - 1) : s);
        this.http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(cfg.connectTimeout).build();
        this.slots = new Semaphore(cfg.maxConcurrentRequests, true);
    }

    /** A client of the server at {@code endpoint} (e.g. {@code http://127.0.0.1:8080}). */
    public static Builder builder(URI endpoint) {
        if (endpoint == null || endpoint.getScheme() == null || !(endpoint.getScheme().equals("http") || endpoint.getScheme().equals("https"))) {
            throw new IllegalArgumentException("endpoint must be an http(s) URI, got " + endpoint);
        }
        return new Builder(endpoint);
    }

    /** Opens an emulated session (no request is sent until the first call). */
    public SandboxSession openSession() {
        if (closed) throw new IllegalStateException("the remote sandbox client is closed");
        return new Session();
    }

    /** HTTP requests sent (each attempt counts) and how many of them were retries. */
    public long requestsSent() {
        return requests.get();
    }

    public long retries() {
        return retries.get();
    }

    @Override
    public void close() {
        closed = true;
    }

    /** An emulated session: the cells that ran OK, replayed before each new one. */
    private final class Session implements SandboxSession {
        private final List<String> cells = new ArrayList<>();
        private boolean sessionClosed;

        @Override
        public synchronized ExecResult execute(String code) {
            if (code == null) throw new IllegalArgumentException("code must not be null");
            if (sessionClosed || closed) throw new IllegalStateException("the session is closed");
            List<String> all = new ArrayList<>(cells);
            all.add(code);
            Outcome o = run(all);
            if (o.diverged) cells.clear();
            else if (o.result.status() == ExecStatus.OK) cells.add(code);
            return o.result;
        }

        /** Nothing is held between calls: the state is {@link #cells}, replayed with every call. */
        @Override
        public boolean holdsWorker() {
            return false;
        }

        @Override
        public synchronized void reset() {
            if (sessionClosed) throw new IllegalStateException("the session is closed");
            cells.clear();
        }

        @Override
        public synchronized void close() {
            sessionClosed = true;
            cells.clear();
        }
    }

    private record Outcome(ExecResult result, boolean diverged) {}

    private Outcome run(List<String> cells) {
        long t0 = System.nanoTime();
        double cellSeconds = cfg.timeout.toMillis() / 1000.0;
        double totalSeconds = cellSeconds * cells.size();
        Duration deadline = Duration.ofMillis((long) (totalSeconds * 1000)).plus(cfg.requestSlack);
        byte[] body;
        String path;
        try {
            if (cfg.mode == Mode.JUPYTER) {
                path = "/run_jupyter";
                body = SandboxFusion.JSON.writeValueAsBytes(new SandboxFusion.RunJupyterRequest(cells, cellSeconds, totalSeconds,
                        cfg.memoryLimitMb, "python3", Map.of(), List.of()));
            } else {
                path = "/run_code";
                body = SandboxFusion.JSON.writeValueAsBytes(new SandboxFusion.RunCodeRequest(driver(cells), "python", 10.0, totalSeconds,
                        cfg.memoryLimitMb, "", Map.of(), List.of()));
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        byte[] response;
        try {
            response = post(path, body, deadline);
        } catch (Failure f) {
            return new Outcome(sandboxError(f.getMessage(), t0), false);
        }
        try {
            return cfg.mode == Mode.JUPYTER ? fromJupyter(response, cells.size(), t0) : fromRunCode(response, t0);
        } catch (IOException | RuntimeException e) {
            return new Outcome(sandboxError("unreadable response from " + base + path + ": " + e.getMessage(), t0), false);
        }
    }

    private Outcome fromJupyter(byte[] body, int n, long t0) throws IOException {
        SandboxFusion.RunJupyterResponse r = SandboxFusion.JSON.readValue(body, SandboxFusion.RunJupyterResponse.class);
        if (SandboxFusion.SANDBOX_ERROR.equals(r.status())) return new Outcome(sandboxError("the server reported: " + r.message(), t0), false);
        List<SandboxFusion.CellRunResult> cells = r.cells() == null ? List.of() : r.cells();
        boolean timedOut = r.driver() != null && SandboxFusion.TIME_LIMIT_EXCEEDED.equals(r.driver().status());
        for (int i = 0; i < Math.min(cells.size(), n - 1); i++) {
            SandboxFusion.CellRunResult c = cells.get(i);
            if (cellStatus(c) != ExecStatus.OK) return diverged(i + 1, c.stderr(), t0);
        }
        if (cells.size() < n) {
            if (timedOut) { // SandboxFusion drops the cells of a failed run: attribute the time limit to the new cell
                return new Outcome(new ExecResult(ExecStatus.TIMEOUT, "", "TimeoutError: the cell exceeded the time limit of "
                        + cfg.timeout.toMillis() / 1000.0 + " s\n", millis(t0), false, false), false);
            }
            return new Outcome(sandboxError("the server returned " + cells.size() + " of " + n + " cells (status "
                    + r.status() + (r.message() == null || r.message().isEmpty() ? "" : ": " + r.message()) + ")", t0), false);
        }
        SandboxFusion.CellRunResult last = cells.get(n - 1);
        ExecStatus status = cellStatus(last);
        StringBuilder out = new StringBuilder(last.stdout() == null ? "" : last.stdout());
        if (last.display() != null) {
            for (Map<String, Object> d : last.display()) {
                Object text = d.get("text/plain");
                if (text != null) out.append(text).append('\n');
            }
        }
        String err = last.stderr() == null ? "" : last.stderr();
        if (status != ExecStatus.OK && last.error() != null) {
            for (Map<String, Object> e : last.error()) {
                String evalue = String.valueOf(e.getOrDefault("evalue", ""));
                if (!err.contains(evalue) || err.isEmpty()) {
                    Object tb = e.get("traceback");
                    String text = tb instanceof List<?> l ? String.join("\n", l.stream().map(String::valueOf).toList())
                            : e.getOrDefault("ename", "Error") + ": " + evalue;
                    err = err + (err.isEmpty() || err.endsWith("\n") ? "" : "\n") + stripAnsi(text) + "\n";
                }
            }
        }
        SandboxFusion.Extra x = last.arbor();
        return new Outcome(new ExecResult(status, out.toString(), err, x != null ? x.durationMillis() : millis(t0), false,
                x != null && x.truncated()), false);
    }

    private static ExecStatus cellStatus(SandboxFusion.CellRunResult c) {
        if (c.arbor() != null && c.arbor().status() != null) {
            try {
                return ExecStatus.valueOf(c.arbor().status());
            } catch (IllegalArgumentException ignored) {
                // unknown: use the portable fields
            }
        }
        if (c.error() == null || c.error().isEmpty()) return ExecStatus.OK;
        return "MemoryError".equals(String.valueOf(c.error().get(0).get("ename"))) ? ExecStatus.MEMORY : ExecStatus.ERROR;
    }

    private Outcome fromRunCode(byte[] body, long t0) throws IOException {
        SandboxFusion.RunCodeResponse r = SandboxFusion.JSON.readValue(body, SandboxFusion.RunCodeResponse.class);
        SandboxFusion.CommandRunResult run = r.runResult();
        if (SandboxFusion.SANDBOX_ERROR.equals(r.status()) || run == null) {
            return new Outcome(sandboxError("the server reported: " + r.message(), t0), false);
        }
        String err = run.stderr() == null ? "" : run.stderr();
        SandboxFusion.Extra x = r.arbor();
        if (x != null && err.endsWith("SystemExit: 1\n")) err = err.substring(0, err.length() - "SystemExit: 1\n".length());
        if (x != null && err.endsWith("SystemExit: 3\n")) err = err.substring(0, err.length() - "SystemExit: 3\n".length());
        if (run.returnCode() != null && run.returnCode() != 0 && err.contains("ArborReplayError")) return diverged(-1, err, t0);
        // The driver turns the cell's exceptions into exit code 1 (an Arbor server adds "SystemExit: 1",
        // dropped above), so the portable fields describe the cell; Arbor's exact status only adds what
        // the driver cannot see (kills, limits, infrastructure).
        ExecStatus status = SandboxFusion.status(r.status(), run, null);
        if (x != null && x.status() != null && List.of("MEMORY", "CRASHED", "OUTPUT_LIMIT", "TIMEOUT", "SANDBOX_ERROR").contains(x.status())) {
            status = ExecStatus.valueOf(x.status());
        }
        if (status == ExecStatus.TIMEOUT && !err.contains("TimeoutError")) {
            err = err + (err.isEmpty() || err.endsWith("\n") ? "" : "\n") + "TimeoutError: the cell exceeded the time limit\n";
        }
        return new Outcome(new ExecResult(status, run.stdout() == null ? "" : run.stdout(), err,
                x != null ? x.durationMillis() : millis(t0), false, x != null && x.truncated()), false);
    }

    private Outcome diverged(int cell, String stderr, long t0) {
        String where = cell > 0 ? "cell " + cell : "an earlier cell";
        return new Outcome(new ExecResult(ExecStatus.ERROR, "", "Error: the session could not be restored on the remote sandbox: "
                + where + " failed when replayed" + (stderr == null || stderr.isBlank() ? "" : " (" + lastLine(stderr) + ")")
                + "; all variables were lost and this code was not run.\n", millis(t0), true, false), true);
    }

    private static String lastLine(String s) {
        List<String> lines = s.strip().lines().toList();
        return lines.isEmpty() ? "" : lines.get(lines.size() - 1);
    }

    private static long millis(long t0) {
        return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    }

    private ExecResult sandboxError(String why, long t0) {
        return new ExecResult(ExecStatus.SANDBOX_ERROR, "", "Sandbox error: " + why + "\n", millis(t0), false, false);
    }

    private static String stripAnsi(String s) {
        return s.replaceAll("\u001b\\[[0-9;]*[A-Za-z]", "");
    }

    /** The RUN_CODE program for {@code cells}: the driver with the cells as base64 strings. */
    static String driver(List<String> cells) {
        StringBuilder list = new StringBuilder("[");
        for (String c : cells) {
            if (list.length() > 1) list.append(", ");
            list.append('\'').append(Base64.getEncoder().encodeToString(c.getBytes(StandardCharsets.UTF_8))).append('\'');
        }
        return DRIVER.replace("_arbor_replay(CELLS)", "_arbor_replay(" + list.append(']') + ")");
    }

    /** An infrastructure failure to report as SANDBOX_ERROR. */
    private static final class Failure extends Exception {
        private static final long serialVersionUID = 1L;

        Failure(String message) {
            super(message);
        }
    }

    private byte[] post(String path, byte[] body, Duration deadline) throws Failure {
        URI uri = base.resolve(path);
        long waitStart = System.nanoTime();
        try {
            if (!slots.tryAcquire(deadline.toNanos(), TimeUnit.NANOSECONDS)) {
                throw new Failure("no request slot within " + deadline.toMillis() + " ms (maxConcurrentRequests = " + cfg.maxConcurrentRequests + ")");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Failure("interrupted while waiting for a request slot");
        }
        try {
            String last = null;
            Duration backoff = cfg.initialBackoff;
            for (int attempt = 1; attempt <= cfg.maxAttempts; attempt++) {
                if (closed) throw new Failure("the remote sandbox client was closed");
                if (attempt > 1) retries.incrementAndGet();
                requests.incrementAndGet();
                HttpRequest req = HttpRequest.newBuilder(uri).timeout(deadline)
                        .header("Content-Type", "application/json")
                        .POST(HttpRequest.BodyPublishers.ofByteArray(body)).build();
                try {
                    HttpResponse<InputStream> resp = http.send(req, HttpResponse.BodyHandlers.ofInputStream());
                    int code = resp.statusCode();
                    byte[] bytes;
                    try (InputStream in = resp.body()) {
                        bytes = in.readNBytes(cfg.maxResponseBytes + 1);
                    }
                    if (code == 502 || code == 503 || code == 504) {
                        last = "HTTP " + code + " from " + uri;
                    } else if (code != 200) {
                        String text = new String(bytes, 0, Math.min(bytes.length, 500), StandardCharsets.UTF_8);
                        throw new Failure("HTTP " + code + " from " + uri + ": " + text);
                    } else if (bytes.length > cfg.maxResponseBytes) {
                        throw new Failure("response from " + uri + " larger than " + cfg.maxResponseBytes + " bytes");
                    } else {
                        return bytes;
                    }
                } catch (HttpConnectTimeoutException | ConnectException e) {
                    last = "cannot connect to " + uri + " (" + e.getClass().getSimpleName() + (e.getMessage() == null ? "" : ": " + e.getMessage()) + ")";
                } catch (HttpTimeoutException e) {
                    // The server took the call but did not answer in time: not retried (it may still be running it).
                    throw new Failure("no response from " + uri + " within " + deadline.toMillis() + " ms");
                } catch (IOException e) {
                    last = "connection to " + uri + " failed (" + e.getClass().getSimpleName() + (e.getMessage() == null ? "" : ": " + e.getMessage()) + ")";
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new Failure("interrupted during the request to " + uri);
                }
                if (attempt < cfg.maxAttempts) {
                    long jittered = (long) (backoff.toMillis() * (0.8 + 0.4 * ThreadLocalRandom.current().nextDouble()));
                    if (System.nanoTime() - waitStart + TimeUnit.MILLISECONDS.toNanos(jittered) > deadline.toNanos()) break;
                    try {
                        Thread.sleep(jittered);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        throw new Failure("interrupted while backing off before retrying " + uri);
                    }
                    backoff = backoff.multipliedBy(2).compareTo(cfg.maxBackoff) > 0 ? cfg.maxBackoff : backoff.multipliedBy(2);
                }
            }
            throw new Failure(last + " (gave up after retries)");
        } finally {
            slots.release();
        }
    }

    private static String loadDriver() {
        try (InputStream in = RemoteSandbox.class.getResourceAsStream("replay_driver.py")) {
            if (in == null) throw new IllegalStateException("resource ai/arbor/sandbox/replay_driver.py missing from the classpath");
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Options of a {@link RemoteSandbox}. */
    public static final class Builder {
        final URI endpoint;
        Mode mode = Mode.JUPYTER;
        Duration timeout = Duration.ofSeconds(10);
        Integer memoryLimitMb = -1;
        int maxConcurrentRequests = 16;
        Duration requestSlack = Duration.ofSeconds(10);
        Duration connectTimeout = Duration.ofSeconds(5);
        int maxAttempts = 4;
        Duration initialBackoff = Duration.ofMillis(250);
        Duration maxBackoff = Duration.ofSeconds(5);
        int maxResponseBytes = 64 << 20;

        Builder(URI endpoint) {
            this.endpoint = endpoint;
        }

        Builder copy() {
            Builder b = new Builder(endpoint);
            b.mode = mode; b.timeout = timeout; b.memoryLimitMb = memoryLimitMb; b.maxConcurrentRequests = maxConcurrentRequests;
            b.requestSlack = requestSlack; b.connectTimeout = connectTimeout; b.maxAttempts = maxAttempts;
            b.initialBackoff = initialBackoff; b.maxBackoff = maxBackoff; b.maxResponseBytes = maxResponseBytes;
            return b;
        }

        /** How sessions are emulated (default {@link Mode#JUPYTER}). */
        public Builder mode(Mode mode) {
            if (mode == null) throw new IllegalArgumentException("mode must not be null");
            this.mode = mode;
            return this;
        }

        /** Time limit of one cell, sent as {@code cell_timeout} / per-cell share of {@code run_timeout} (default 10 s). */
        public Builder timeout(Duration timeout) {
            PythonSandbox.requirePositive("timeout", timeout);
            this.timeout = timeout;
            return this;
        }

        /** {@code memory_limit_MB} sent with each request (default -1: the server's default). */
        public Builder memoryLimitMb(int mb) {
            if (mb != -1 && mb < 1) throw new IllegalArgumentException("memoryLimitMb must be -1 or positive, got " + mb);
            this.memoryLimitMb = mb;
            return this;
        }

        /** Requests in flight at once across all sessions of this client (default 16). */
        public Builder maxConcurrentRequests(int n) {
            if (n < 1) throw new IllegalArgumentException("maxConcurrentRequests must be positive, got " + n);
            this.maxConcurrentRequests = n;
            return this;
        }

        /** Added to the run's time limit to get the request deadline (default 10 s). */
        public Builder requestSlack(Duration d) {
            PythonSandbox.requirePositive("requestSlack", d);
            this.requestSlack = d;
            return this;
        }

        /** TCP connect timeout (default 5 s). */
        public Builder connectTimeout(Duration d) {
            PythonSandbox.requirePositive("connectTimeout", d);
            this.connectTimeout = d;
            return this;
        }

        /** Attempts per call, counting the first; retries happen only on connection failures and HTTP 502/503/504 (default 4). */
        public Builder maxAttempts(int n) {
            if (n < 1 || n > 100) throw new IllegalArgumentException("maxAttempts must be in [1, 100], got " + n);
            this.maxAttempts = n;
            return this;
        }

        /** First retry delay, doubled per retry up to {@code max}, each with ±20% jitter (defaults 250 ms, 5 s). */
        public Builder backoff(Duration initial, Duration max) {
            PythonSandbox.requirePositive("initial backoff", initial);
            PythonSandbox.requirePositive("max backoff", max);
            if (max.compareTo(initial) < 0) throw new IllegalArgumentException("max backoff " + max + " is below the initial " + initial);
            this.initialBackoff = initial;
            this.maxBackoff = max;
            return this;
        }

        public RemoteSandbox build() {
            return new RemoteSandbox(this);
        }
    }
}
