package ai.arbor.sandbox;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Serves a {@link PythonSandbox} over the SandboxFusion HTTP API, so a fleet of machines can execute
 * code for trainers elsewhere ({@code arbor sandbox serve --port N}). Endpoints:
 * <ul>
 *   <li>{@code POST /run_code}: one program in a fresh interpreter ({@code language} must be
 *       {@code python}); {@code run_timeout} is capped by the server's maximum; {@code stdin} feeds
 *       {@code sys.stdin}.</li>
 *   <li>{@code POST /run_jupyter}: {@code cells} run in order in one fresh interpreter with notebook
 *       semantics; a cell's error does not stop the rest, a time limit or crash does.</li>
 *   <li>{@code GET /v1/ping}: liveness ({@code "pong"}); {@code GET /health}: workers busy, idle and
 *       starting, requests in flight and waiting.</li>
 * </ul>
 * Under load: a request waits at most {@code admissionTimeout} for a free worker, then gets HTTP 504 with
 * {@code Retry-After} (the code SandboxFusion's clients retry); a request whose client disconnects is
 * cancelled, waiting or running. Invalid requests get FastAPI's error shape ({@code {"detail": …}}, 422
 * for a body that does not validate, 413 for an oversized one), never a 500. {@code files}/{@code
 * fetch_files} are not supported (SandboxError); {@code memory_limit_MB} is fixed by the server's
 * sandbox. Responses carry SandboxFusion's fields plus an {@code arbor} object with the exact
 * {@link ExecStatus}. Closing stops accepting, drops open connections and ends the calls in flight; the
 * sandbox itself stays the caller's to close. See docs/sandbox.md, "Server and client".
 */
public final class SandboxServer implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(SandboxServer.class.getName());

    /** SandboxFusion's {@code Language} literal: any other value is a validation error (422). */
    static final List<String> SANDBOX_FUSION_LANGUAGES = List.of("python", "cpp", "nodejs", "go", "go_test", "java", "php",
            "csharp", "bash", "typescript", "sql", "rust", "cuda", "lua", "R", "perl", "D_ut", "ruby", "scala", "julia", "pytest",
            "junit", "kotlin_script", "jest", "verilog", "python_gpu", "lean", "swift", "racket");

    private final PythonSandbox sandbox;
    private final SandboxHttp http;
    private final Duration maxTimeout;
    private final Duration admissionTimeout;
    private final long maxBodyBytes;
    private final Set<PythonSession> inFlight = ConcurrentHashMap.newKeySet();
    private final AtomicInteger waiting = new AtomicInteger();
    private final AtomicInteger running = new AtomicInteger();
    private final AtomicLong served = new AtomicLong();
    private final AtomicLong rejected = new AtomicLong();
    private final AtomicLong cancelled = new AtomicLong();
    private final java.util.concurrent.ExecutorService closer;
    private volatile boolean closed;

    private SandboxServer(PythonSandbox sandbox, InetSocketAddress address, Duration maxTimeout, Duration admissionTimeout,
                          int maxConnections) throws IOException {
        this.sandbox = sandbox;
        this.maxTimeout = maxTimeout;
        this.admissionTimeout = admissionTimeout;
        this.maxBodyBytes = 2L * sandbox.config().maxCodeBytes + (1 << 20);
        this.closer = new java.util.concurrent.ThreadPoolExecutor(1, Math.max(2, sandbox.config().workers), 30, java.util.concurrent.TimeUnit.SECONDS,
                new java.util.concurrent.LinkedBlockingQueue<>(4 * sandbox.config().workers), r -> {
                    Thread t = new Thread(r, "arbor-sandbox-http-close");
                    t.setDaemon(true);
                    return t;
                });
        this.http = new SandboxHttp(address, maxConnections, maxBodyBytes, new SandboxHttp.Handler() {
            @Override
            public SandboxHttp.Response handle(SandboxHttp.Request r) throws InterruptedException {
                return route(r);
            }

            @Override
            public boolean slow(SandboxHttp.Request r) {
                return "POST".equals(r.method()) && (r.path().equals("/run_code") || r.path().equals("/run_jupyter"));
            }

            @Override
            public SandboxHttp.Response error(int code, String message) {
                return json(code, Map.of("detail", message));
            }
        });
    }

    /**
     * Starts serving {@code sandbox} on {@code host:port} (port 0 picks a free one); a request waits up to
     * 10 s for a free worker.
     *
     * @param maxTimeout cap on a request's {@code run_timeout} / {@code total_timeout}
     */
    public static SandboxServer start(PythonSandbox sandbox, String host, int port, Duration maxTimeout) {
        return start(sandbox, host, port, maxTimeout, Duration.ofSeconds(10), 512);
    }

    /**
     * Starts serving {@code sandbox} on {@code host:port}.
     *
     * @param maxTimeout       cap on a request's {@code run_timeout} / {@code total_timeout}
     * @param admissionTimeout how long a request may wait for a free worker before it gets HTTP 504
     * @param maxConnections   open connections beyond this are answered 503 at once and closed
     */
    public static SandboxServer start(PythonSandbox sandbox, String host, int port, Duration maxTimeout, Duration admissionTimeout,
                                      int maxConnections) {
        if (sandbox == null) throw new IllegalArgumentException("sandbox must not be null");
        if (port < 0 || port > 65535) throw new IllegalArgumentException("port must be in [0, 65535], got " + port);
        PythonSandbox.requirePositive("maxTimeout", maxTimeout);
        PythonSandbox.requirePositive("admissionTimeout", admissionTimeout);
        if (maxConnections < 1 || maxConnections > 100_000) {
            throw new IllegalArgumentException("maxConnections must be in [1, 100000], got " + maxConnections);
        }
        try {
            return new SandboxServer(sandbox, new InetSocketAddress(host, port), maxTimeout, admissionTimeout, maxConnections);
        } catch (IOException e) {
            throw new SandboxException("cannot listen on " + host + ":" + port + ": " + e.getMessage(), e);
        }
    }

    /** The bound port (useful with port 0). */
    public int port() {
        return http.port();
    }

    /** Base URI of the API, e.g. {@code http://127.0.0.1:8080}. */
    public URI uri() {
        java.net.InetAddress a = http.address();
        String host = a.isAnyLocalAddress() ? "127.0.0.1" : a.getHostAddress();
        if (host.contains(":")) host = "[" + host + "]";
        return URI.create("http://" + host + ":" + http.port());
    }

    /** Requests answered, turned away (no worker within the admission timeout) and cancelled (client gone). */
    public record Counters(long served, long rejected, long cancelled, int waiting, int running) {}

    public Counters counters() {
        return new Counters(served.get(), rejected.get(), cancelled.get(), waiting.get(), running.get());
    }

    @Override
    public void close() {
        if (closed) return;
        closed = true;
        http.close(); // closes the listener and every open connection now
        for (PythonSession s : List.copyOf(inFlight)) s.close(); // their calls end with SANDBOX_ERROR
        closer.shutdown();
    }

    // ---------------------------------------------------------------- routing and errors

    /** Refusal with an HTTP status and FastAPI's {@code {"detail": …}} body. */
    private static final class HttpError extends RuntimeException {
        private static final long serialVersionUID = 1L;
        final int code;
        final transient Object detail;
        final boolean retry;

        HttpError(int code, Object detail, boolean retry) {
            super(String.valueOf(detail));
            this.code = code;
            this.detail = detail;
            this.retry = retry;
        }
    }

    private static SandboxHttp.Response json(int code, Object body) {
        try {
            return new SandboxHttp.Response(code, Map.of(), SandboxFusion.JSON.writeValueAsBytes(body));
        } catch (JsonProcessingException e) {
            return new SandboxHttp.Response(500, Map.of(), "{\"detail\":\"unserializable response\"}".getBytes(StandardCharsets.UTF_8));
        }
    }

    private SandboxHttp.Response route(SandboxHttp.Request r) throws InterruptedException {
        try {
            return switch (r.path()) {
                case "/run_code" -> json(200, runCode(post(r)));
                case "/run_jupyter" -> json(200, runJupyter(post(r)));
                case "/v1/ping" -> json(200, "pong");
                case "/health" -> json(200, health());
                default -> throw new HttpError(404, "Not Found", false);
            };
        } catch (HttpError e) {
            SandboxHttp.Response resp = json(e.code, Map.of("detail", e.detail));
            if (e.retry) return new SandboxHttp.Response(e.code, Map.of("Retry-After", "1"), resp.body());
            return resp;
        } catch (RuntimeException e) { // a bug of ours: the client still gets SandboxFusion's shape
            LOG.log(System.Logger.Level.WARNING, "sandbox server: " + e, e);
            return json(200, new SandboxFusion.RunCodeResponse(SandboxFusion.SANDBOX_ERROR, String.valueOf(e.getMessage()),
                    null, null, null, Map.of(), null));
        }
    }

    private static JsonNode post(SandboxHttp.Request r) {
        if (!"POST".equals(r.method())) throw new HttpError(405, "Method Not Allowed", false);
        try {
            return SandboxFusion.JSON.readTree(r.body());
        } catch (IOException e) {
            String why = e instanceof JsonProcessingException j ? j.getOriginalMessage() : e.getMessage();
            throw new HttpError(422, List.of(issue("json_invalid", List.of("body"), "JSON decode error", Map.of(), why)), false);
        }
    }

    private Map<String, Object> health() {
        PythonSandbox.Stats st = sandbox.stats();
        Map<String, Object> workers = new LinkedHashMap<>();
        workers.put("total", st.workers());
        workers.put("busy", st.openSessions());
        workers.put("idle", st.idle());
        workers.put("starting", st.starting());
        Map<String, Object> requests = new LinkedHashMap<>();
        requests.put("running", running.get());
        requests.put("waiting", waiting.get());
        requests.put("served", served.get());
        requests.put("rejected", rejected.get());
        requests.put("cancelled", cancelled.get());
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("status", closed ? "stopping" : "ok");
        m.put("workers", workers);
        m.put("requests", requests);
        m.put("fork_server", sandbox.forkServer());
        m.put("isolation", sandbox.isolation().name());
        return m;
    }

    // ---------------------------------------------------------------- validation (pydantic's rules and error shape)

    private static Map<String, Object> issue(String type, List<Object> loc, String msg, Object input, String ctxError) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("type", type);
        m.put("loc", loc);
        m.put("msg", msg);
        m.put("input", input);
        if (ctxError != null) m.put("ctx", Map.of("error", ctxError));
        return m;
    }

    /** Reads the fields of one request body, collecting every validation error as FastAPI would. */
    private static final class Fields {
        final JsonNode body;
        final List<Object> errors = new ArrayList<>();

        Fields(JsonNode body) {
            this.body = body;
            if (body == null || !body.isObject()) {
                errors.add(issue("model_attributes_type", List.of("body"), "Input should be a valid dictionary or object to extract fields from",
                        body == null ? null : body, null));
            }
        }

        private JsonNode get(String name) {
            return body != null && body.isObject() ? body.get(name) : null;
        }

        private void bad(String type, String name, String msg, JsonNode v) {
            errors.add(issue(type, List.of("body", name), msg, v, null));
        }

        String string(String name, boolean required, boolean nullable) {
            JsonNode v = get(name);
            if (v == null) {
                if (required && body != null && body.isObject()) bad("missing", name, "Field required", null);
                return null;
            }
            if (v.isNull() && nullable) return null;
            if (!v.isTextual()) {
                bad("string_type", name, "Input should be a valid string", v);
                return null;
            }
            return v.asText();
        }

        Double number(String name, double dflt) {
            JsonNode v = get(name);
            if (v == null) return dflt;
            if (v.isNumber()) return v.asDouble();
            if (v.isTextual()) {
                try {
                    return Double.parseDouble(v.asText().trim());
                } catch (NumberFormatException e) {
                    bad("float_parsing", name, "Input should be a valid number, unable to parse string as a number", v);
                    return null;
                }
            }
            bad("float_type", name, "Input should be a valid number", v);
            return null;
        }

        Integer integer(String name, int dflt) {
            JsonNode v = get(name);
            if (v == null) return dflt;
            if (v.isIntegralNumber() && v.canConvertToInt()) return v.asInt();
            if (v.isDouble() && v.asDouble() == Math.rint(v.asDouble()) && Math.abs(v.asDouble()) < Integer.MAX_VALUE) return (int) v.asDouble();
            if (v.isTextual()) {
                try {
                    return Integer.parseInt(v.asText().trim());
                } catch (NumberFormatException e) {
                    bad("int_parsing", name, "Input should be a valid integer, unable to parse string as an integer", v);
                    return null;
                }
            }
            bad("int_type", name, "Input should be a valid integer", v);
            return null;
        }

        List<String> strings(String name, boolean required) {
            JsonNode v = get(name);
            if (v == null) {
                if (required && body != null && body.isObject()) bad("missing", name, "Field required", null);
                return required ? null : List.of();
            }
            if (!v.isArray()) {
                bad("list_type", name, "Input should be a valid list", v);
                return null;
            }
            List<String> out = new ArrayList<>();
            for (int i = 0; i < v.size(); i++) {
                if (!v.get(i).isTextual()) {
                    errors.add(issue("string_type", List.of("body", name, i), "Input should be a valid string", v.get(i), null));
                } else {
                    out.add(v.get(i).asText());
                }
            }
            return out;
        }

        int mapSize(String name) {
            JsonNode v = get(name);
            if (v == null) return 0;
            if (!v.isObject()) {
                bad("dict_type", name, "Input should be a valid dictionary", v);
                return 0;
            }
            int n = 0;
            for (var it = v.fields(); it.hasNext(); n++) {
                var e = it.next();
                if (!e.getValue().isTextual() && !e.getValue().isNull()) {
                    errors.add(issue("string_type", List.of("body", name, e.getKey()), "Input should be a valid string", e.getValue(), null));
                }
            }
            return n;
        }

        String literal(String name, List<String> allowed, String dflt) {
            JsonNode v = get(name);
            if (v == null) {
                if (dflt == null && body != null && body.isObject()) bad("missing", name, "Field required", null);
                return dflt;
            }
            if (!v.isTextual() || !allowed.contains(v.asText())) {
                errors.add(issue("literal_error", List.of("body", name), "Input should be "
                        + String.join(", ", allowed.stream().map(a -> "'" + a + "'").toList()), v, null));
                return null;
            }
            return v.asText();
        }

        void check() {
            if (!errors.isEmpty()) throw new HttpError(422, errors, false);
        }
    }

    // ---------------------------------------------------------------- endpoints

    private Object runCode(JsonNode body) throws InterruptedException {
        Fields f = new Fields(body);
        String code = f.string("code", true, false);
        String language = f.literal("language", SANDBOX_FUSION_LANGUAGES, null);
        f.number("compile_timeout", 10);
        Double runTimeout = f.number("run_timeout", 10);
        f.integer("memory_limit_MB", -1);
        String stdin = f.string("stdin", false, true);
        int files = f.mapSize("files");
        List<String> fetch = f.strings("fetch_files", false);
        f.strings("args", false);
        f.check();
        String unsupported = unsupported(language, files, fetch);
        if (unsupported != null) {
            return new SandboxFusion.RunCodeResponse(SandboxFusion.SANDBOX_ERROR, unsupported, null, null, null, Map.of(), null);
        }
        Duration timeout = cap(runTimeout);
        ExecResult r = withSession(s -> s.execute(code, timeout, stdin == null ? "" : stdin));
        SandboxFusion.CommandRunResult run = SandboxFusion.commandResult(r);
        String status = SandboxFusion.runStatus(run);
        return new SandboxFusion.RunCodeResponse(status, status.equals(SandboxFusion.SANDBOX_ERROR) ? r.stderr().strip() : "",
                null, run, null, Map.of(), SandboxFusion.extra(r));
    }

    private Object runJupyter(JsonNode body) throws InterruptedException {
        Fields f = new Fields(body);
        List<String> cellList = f.strings("cells", true);
        Double cellTimeout = f.number("cell_timeout", 0);
        Double totalTimeout = f.number("total_timeout", 45);
        f.integer("memory_limit_MB", -1);
        f.literal("kernel", List.of("python3"), "python3");
        int files = f.mapSize("files");
        List<String> fetch = f.strings("fetch_files", false);
        f.check();
        String unsupported = unsupported("python", files, fetch);
        if (unsupported != null) {
            return new SandboxFusion.RunJupyterResponse(SandboxFusion.SANDBOX_ERROR, unsupported, null, List.of(), null, Map.of());
        }
        double total = totalTimeout;
        double perCell = cellTimeout;
        long t0 = System.nanoTime();
        List<SandboxFusion.CellRunResult> cells = new ArrayList<>();
        String[] driver = {SandboxFusion.FINISHED};
        String[] message = {""};
        withSession(s -> {
            for (String cell : cellList) {
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

    private static String unsupported(String language, int files, List<String> fetch) {
        if (!"python".equals(language)) {
            return "language " + language + " is not supported by the Arbor sandbox server (python only)";
        }
        if (files > 0) return "'files' is not supported by the Arbor sandbox server";
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

    /**
     * Runs {@code work} in a fresh session. No worker within the admission timeout → HTTP 504 with
     * Retry-After; a closed server → 503; the calling thread interrupted (the client disconnected) →
     * InterruptedException, and the session's work is abandoned (its worker killed).
     */
    private ExecResult withSession(SessionWork work) throws InterruptedException {
        if (closed) throw new HttpError(503, "the server is stopping", true);
        PythonSession s;
        waiting.incrementAndGet();
        try {
            s = sandbox.openSession(admissionTimeout);
        } catch (SandboxException e) {
            if (Thread.currentThread().isInterrupted()) {
                cancelled.incrementAndGet();
                throw new InterruptedException("client disconnected while waiting for a worker");
            }
            rejected.incrementAndGet();
            if (sandbox.isClosed() || closed) throw new HttpError(503, "the sandbox is closed", true);
            throw new HttpError(504, "no free sandbox worker within " + admissionTimeout.toMillis() + " ms (all "
                    + sandbox.config().workers + " busy); retry later", true);
        } finally {
            waiting.decrementAndGet();
        }
        inFlight.add(s);
        running.incrementAndGet();
        try {
            if (closed) return new ExecResult(ExecStatus.SANDBOX_ERROR, "", "Sandbox error: the server is stopping\n", 0, false, false);
            ExecResult r = work.run(s);
            if (Thread.currentThread().isInterrupted()) {
                cancelled.incrementAndGet();
                throw new InterruptedException("client disconnected during the run");
            }
            served.incrementAndGet();
            return r;
        } catch (IllegalStateException e) { // the session was closed under us by close()
            return new ExecResult(ExecStatus.SANDBOX_ERROR, "", "Sandbox error: the server is stopping\n", 0, false, false);
        } finally {
            running.decrementAndGet();
            inFlight.remove(s);
            // Ending the session (a fork server's clean-up, or killing a worker) is not the client's
            // business: the response goes out first. Closed inline when the closer is saturated.
            try {
                closer.execute(s::close);
            } catch (RuntimeException e) {
                s.close();
            }
        }
    }
}
