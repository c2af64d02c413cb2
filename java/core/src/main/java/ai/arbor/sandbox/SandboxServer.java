package ai.arbor.sandbox;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Serves a {@link PythonSandbox} over the SandboxFusion HTTP API, so a fleet of machines can execute
 * code for trainers elsewhere ({@code arbor sandbox serve --port N}). Endpoints:
 * <ul>
 *   <li>{@code POST /run_code}: one program in a fresh interpreter ({@code language} must be
 *       {@code python}); {@code run_timeout} is capped by the server's maximum; {@code stdin} feeds
 *       {@code sys.stdin}.</li>
 *   <li>{@code POST /run_jupyter}: {@code cells} run in order in one fresh interpreter with notebook
 *       semantics; a cell's error does not stop the rest, a time limit or crash does.</li>
 *   <li>{@code GET /v1/ping}: liveness ({@code "pong"}).</li>
 * </ul>
 * {@code files}/{@code fetch_files} are not supported (SandboxError); {@code memory_limit_MB} is fixed by
 * the server's sandbox. Responses carry SandboxFusion's fields plus an {@code arbor} object with the
 * exact {@link ExecStatus}. Binds to the address given (the CLI defaults to 127.0.0.1). Closing stops
 * accepting, drops open connections and ends the calls in flight; the sandbox itself stays the
 * caller's to close.
 */
public final class SandboxServer implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(SandboxServer.class.getName());

    private final PythonSandbox sandbox;
    private final HttpServer http;
    private final ExecutorService executor;
    private final Duration maxTimeout;
    private final long maxBodyBytes;
    private final Set<PythonSession> inFlight = ConcurrentHashMap.newKeySet();
    private volatile boolean closed;

    private SandboxServer(PythonSandbox sandbox, InetSocketAddress address, int threads, Duration maxTimeout) throws IOException {
        this.sandbox = sandbox;
        this.maxTimeout = maxTimeout;
        this.maxBodyBytes = 2L * sandbox.config().maxCodeBytes + (1 << 20);
        this.http = HttpServer.create(address, 128);
        AtomicInteger n = new AtomicInteger();
        this.executor = Executors.newFixedThreadPool(threads, r -> {
            Thread t = new Thread(r, "arbor-sandbox-http-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
        http.setExecutor(executor);
        http.createContext("/run_code", ex -> handle(ex, this::runCode));
        http.createContext("/run_jupyter", ex -> handle(ex, this::runJupyter));
        http.createContext("/v1/ping", ex -> {
            byte[] b = "\"pong\"".getBytes(java.nio.charset.StandardCharsets.UTF_8);
            ex.getResponseHeaders().set("Content-Type", "application/json");
            ex.sendResponseHeaders(200, b.length);
            try (OutputStream o = ex.getResponseBody()) {
                o.write(b);
            }
        });
        http.start();
    }

    /**
     * Starts serving {@code sandbox} on {@code host:port} (port 0 picks a free one) with as many request
     * threads as the sandbox has workers plus a few to answer quickly when all are busy.
     *
     * @param maxTimeout cap on a request's {@code run_timeout} / {@code total_timeout}
     */
    public static SandboxServer start(PythonSandbox sandbox, String host, int port, Duration maxTimeout) {
        if (sandbox == null) throw new IllegalArgumentException("sandbox must not be null");
        if (port < 0 || port > 65535) throw new IllegalArgumentException("port must be in [0, 65535], got " + port);
        PythonSandbox.requirePositive("maxTimeout", maxTimeout);
        try {
            return new SandboxServer(sandbox, new InetSocketAddress(host, port), sandbox.config().workers + 4, maxTimeout);
        } catch (IOException e) {
            throw new SandboxException("cannot listen on " + host + ":" + port + ": " + e.getMessage(), e);
        }
    }

    /** The bound port (useful with port 0). */
    public int port() {
        return http.getAddress().getPort();
    }

    /** Base URI of the API, e.g. {@code http://127.0.0.1:8080}. */
    public URI uri() {
        InetSocketAddress a = http.getAddress();
        String host = a.getAddress().isAnyLocalAddress() ? "127.0.0.1" : a.getAddress().getHostAddress();
        if (host.contains(":")) host = "[" + host + "]";
        return URI.create("http://" + host + ":" + a.getPort());
    }

    @Override
    public void close() {
        if (closed) return;
        closed = true;
        http.stop(0); // closes the listener and every open connection now
        for (PythonSession s : List.copyOf(inFlight)) s.close(); // their calls end with SANDBOX_ERROR
        executor.shutdownNow();
    }

    private interface Endpoint {
        Object call(byte[] body) throws IOException;
    }

    /** A client error the response should name (HTTP 4xx). */
    private static final class BadRequest extends RuntimeException {
        private static final long serialVersionUID = 1L;
        final int code;

        BadRequest(int code, String message) {
            super(message);
            this.code = code;
        }
    }

    private void handle(HttpExchange ex, Endpoint endpoint) throws IOException {
        try (ex) {
            int code = 200;
            Object response;
            try {
                if (!"POST".equals(ex.getRequestMethod())) throw new BadRequest(405, "method " + ex.getRequestMethod() + " not allowed; use POST");
                byte[] body = readBody(ex.getRequestBody());
                response = endpoint.call(body);
            } catch (BadRequest e) {
                code = e.code;
                response = Map.of("detail", e.getMessage());
            } catch (JsonProcessingException e) {
                code = 422;
                response = Map.of("detail", "invalid request body: " + e.getOriginalMessage());
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "sandbox server: " + e, e);
                response = new SandboxFusion.RunCodeResponse(SandboxFusion.SANDBOX_ERROR, String.valueOf(e.getMessage()),
                        null, null, null, Map.of(), null);
            }
            byte[] out = SandboxFusion.JSON.writeValueAsBytes(response);
            ex.getResponseHeaders().set("Content-Type", "application/json");
            ex.sendResponseHeaders(code, out.length);
            try (OutputStream o = ex.getResponseBody()) {
                o.write(out);
            }
        } catch (IOException e) {
            if (!closed) LOG.log(System.Logger.Level.DEBUG, "sandbox server: client went away: " + e.getMessage());
        }
    }

    private byte[] readBody(InputStream in) throws IOException {
        byte[] b = in.readNBytes((int) Math.min(Integer.MAX_VALUE - 16, maxBodyBytes + 1));
        if (b.length > maxBodyBytes) throw new BadRequest(413, "request body larger than " + maxBodyBytes + " bytes");
        return b;
    }

    private Object runCode(byte[] body) throws IOException {
        SandboxFusion.RunCodeRequest req = SandboxFusion.JSON.readValue(body, SandboxFusion.RunCodeRequest.class);
        if (req.code() == null) throw new BadRequest(422, "field 'code' is required");
        String unsupported = unsupported(req.language(), req.files(), req.fetchFiles());
        if (unsupported != null) {
            return new SandboxFusion.RunCodeResponse(SandboxFusion.SANDBOX_ERROR, unsupported, null, null, null, Map.of(), null);
        }
        Duration timeout = cap(req.runTimeout() == null ? 10.0 : req.runTimeout());
        ExecResult r = withSession(s -> s.execute(req.code(), timeout, req.stdin()));
        SandboxFusion.CommandRunResult run = SandboxFusion.commandResult(r);
        String status = SandboxFusion.runStatus(run);
        return new SandboxFusion.RunCodeResponse(status, status.equals(SandboxFusion.SANDBOX_ERROR) ? r.stderr().strip() : "",
                null, run, null, Map.of(), SandboxFusion.extra(r));
    }

    private Object runJupyter(byte[] body) throws IOException {
        SandboxFusion.RunJupyterRequest req = SandboxFusion.JSON.readValue(body, SandboxFusion.RunJupyterRequest.class);
        if (req.cells() == null) throw new BadRequest(422, "field 'cells' is required");
        String unsupported = unsupported("python", req.files(), req.fetchFiles());
        if (req.kernel() != null && !req.kernel().equals("python3")) unsupported = "kernel " + req.kernel() + " is not supported (python3 only)";
        if (unsupported != null) {
            return new SandboxFusion.RunJupyterResponse(SandboxFusion.SANDBOX_ERROR, unsupported, null, List.of(), null, Map.of());
        }
        double total = req.totalTimeout() == null ? 45.0 : req.totalTimeout();
        double perCell = req.cellTimeout() == null ? 0.0 : req.cellTimeout();
        long t0 = System.nanoTime();
        List<SandboxFusion.CellRunResult> cells = new ArrayList<>();
        String[] driver = {SandboxFusion.FINISHED};
        String[] message = {""};
        withSession(s -> {
            for (String cell : req.cells()) {
                double left = total - (System.nanoTime() - t0) / 1e9;
                if (left <= 0) {
                    driver[0] = SandboxFusion.TIME_LIMIT_EXCEEDED;
                    break;
                }
                Duration timeout = cap(perCell > 0 ? Math.min(perCell, left) : left);
                ExecResult r = s.execute(cell == null ? "" : cell, timeout, "");
                cells.add(new SandboxFusion.CellRunResult(r.stdout(), r.stderr(), List.of(), SandboxFusion.jupyterError(r),
                        SandboxFusion.extra(r)));
                if (r.status() == ExecStatus.TIMEOUT) {
                    driver[0] = SandboxFusion.TIME_LIMIT_EXCEEDED;
                    break;
                }
                if (r.status() == ExecStatus.SANDBOX_ERROR) {
                    driver[0] = SandboxFusion.ERROR;
                    message[0] = r.stderr().strip();
                    break;
                }
                if (r.stateLost()) break; // later cells would run against a wiped interpreter
            }
            return null;
        });
        double seconds = (System.nanoTime() - t0) / 1e9;
        String status = switch (driver[0]) {
            case SandboxFusion.FINISHED -> SandboxFusion.SUCCESS;
            case SandboxFusion.ERROR -> SandboxFusion.SANDBOX_ERROR;
            default -> SandboxFusion.FAILED;
        };
        return new SandboxFusion.RunJupyterResponse(status, message[0],
                new SandboxFusion.CommandRunResult(driver[0], seconds, driver[0].equals(SandboxFusion.FINISHED) ? 0 : null, "", ""),
                cells, null, Map.of());
    }

    private static String unsupported(String language, Map<String, String> files, List<String> fetch) {
        if (language == null || !(language.equals("python") || language.equals("python3"))) {
            return "language " + language + " is not supported by the Arbor sandbox server (python only)";
        }
        if (files != null && !files.isEmpty()) return "'files' is not supported by the Arbor sandbox server";
        if (fetch != null && !fetch.isEmpty()) return "'fetch_files' is not supported by the Arbor sandbox server";
        return null;
    }

    private Duration cap(double seconds) {
        if (!(seconds > 0)) seconds = maxTimeout.toMillis() / 1000.0;
        long millis = (long) Math.ceil(Math.min(seconds * 1000.0, maxTimeout.toMillis()));
        return Duration.ofMillis(Math.max(1, millis));
    }

    private interface SessionWork {
        ExecResult run(PythonSession s);
    }

    /** Runs {@code work} in a fresh session; a busy pool or a closed server becomes a SANDBOX_ERROR result. */
    private ExecResult withSession(SessionWork work) {
        PythonSession s;
        try {
            s = sandbox.openSession();
        } catch (SandboxException e) {
            return new ExecResult(ExecStatus.SANDBOX_ERROR, "", "Sandbox error: " + e.getMessage() + "\n", 0, false, false);
        }
        inFlight.add(s);
        try {
            if (closed) return new ExecResult(ExecStatus.SANDBOX_ERROR, "", "Sandbox error: the server is stopping\n", 0, false, false);
            return work.run(s);
        } catch (IllegalStateException e) { // the session was closed under us by close()
            return new ExecResult(ExecStatus.SANDBOX_ERROR, "", "Sandbox error: the server is stopping\n", 0, false, false);
        } finally {
            inFlight.remove(s);
            s.close();
        }
    }
}
