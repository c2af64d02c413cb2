package ai.arbor.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The server as a standard SandboxFusion client sees it: the statuses and return codes of every kind of
 * outcome, stdin, validation errors in FastAPI's shape (never a 500), bounded admission (504 with
 * Retry-After), cancellation of requests whose client went away, and /health.
 */
class SandboxServerTest {

    static PythonSandbox sandbox;
    static SandboxServer server;
    static final HttpClient HTTP = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

    @BeforeAll
    static void start() {
        // one worker, so that holding it makes the next request wait; short admission timeout
        sandbox = SandboxTests.builder().workers(1).forkServer(true).build();
        server = SandboxServer.start(sandbox, "127.0.0.1", 0, Duration.ofSeconds(30), Duration.ofMillis(400), 64);
    }

    @AfterAll
    static void stop() {
        server.close();
        sandbox.close();
    }

    static HttpResponse<String> post(String path, String json) throws Exception {
        return HTTP.send(HttpRequest.newBuilder(server.uri().resolve(path)).header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(json)).build(), HttpResponse.BodyHandlers.ofString());
    }

    static JsonNode run(String code, String extra) throws Exception {
        String body = "{\"code\": " + SandboxFusion.JSON.writeValueAsString(code) + ", \"language\": \"python\"" + extra + "}";
        HttpResponse<String> r = post("/run_code", body);
        assertEquals(200, r.statusCode(), r::body);
        return SandboxFusion.JSON.readTree(r.body());
    }

    /** What a request's program sees of its environment, one fact per line (jail: the jail's own /tmp, /dev/shm, /proc). */
    private static final String PROBE = """
            import os, sys, threading
            def listing(d):
                try:
                    return sorted(os.listdir(d))
                except OSError as e:
                    return type(e).__name__
            jail = os.getuid() == %d and not os.path.exists('/home')
            print('vars', sorted(k for k in globals() if k not in ('os', 'sys', 'threading', 'listing', 'jail')))
            print('scratch', listing(os.getcwd()))
            print('tmp', listing('/tmp') if jail else '-')
            print('shm', listing('/dev/shm') if jail else '-')
            print('threads', len(os.listdir('/proc/self/task')), threading.active_count())
            kinds = []
            for f in os.listdir('/proc/self/fd'):
                try:
                    kinds.append(os.readlink('/proc/self/fd/' + f).split('[')[0])
                except OSError:
                    pass
            print('fds', sorted(kinds))
            def state(p):
                try:
                    with open('/proc/%%s/stat' %% p) as f:
                        return f.read().rsplit(') ', 1)[1][0]
                except OSError:
                    return 'X'
            live = [p for p in os.listdir('/proc') if p.isdigit() and state(p) not in 'ZX']
            print('processes', len(live) if jail else '-')
            print('main', sorted(k for k in sys.modules['__main__'].__dict__ if k.startswith('_')))
            """.formatted(PythonSandbox.JAIL_UID);

    /**
     * Stateless /run_code: a request that leaves everything it can behind (variables, files in the
     * scratch directory, /tmp and /dev/shm, a directory it made unreadable, a symlink out, a thread, an
     * inheritable descriptor, a child in its own session, a setsid + double-fork daemon) is followed by a
     * request that sees exactly what a request on a fresh server saw.
     */
    @Test
    void nothingSurvivesFromOneRequestToTheNext() throws Exception {
        JsonNode before = run(PROBE, "");
        assertEquals("Success", before.get("status").asText(), before::toString);
        String fresh = before.at("/run_result/stdout").asText();
        boolean jail = sandbox.isolation() == Isolation.JAIL;
        String tmp = jail ? "/tmp" : "locked-tmp";
        JsonNode dirty = run(SandboxTests.leaveEverythingBehind(tmp) + "print('dirty')\n" + PROBE, "");
        assertEquals("Success", dirty.get("status").asText(), dirty::toString);
        String inside = dirty.at("/run_result/stdout").asText();
        assertTrue(inside.contains("'secret'") && inside.contains("scratch.txt") && inside.contains("threads 2 2"),
                "the dirty request sees its own leftovers: " + inside);
        JsonNode after = run(PROBE, "");
        assertEquals(fresh, after.at("/run_result/stdout").asText(), "the next request starts exactly like the first did");
        String[] lines = fresh.split("\n");
        assertEquals("scratch []", lines[1]);
        assertEquals("threads 1 1", lines[4]);
        assertEquals("main ['__builtins__', '__doc__', '__loader__', '__name__', '__package__', '__spec__']", lines[7],
                "a fresh __main__: nothing of a warm-up or an earlier request");
        if (jail) {
            assertEquals("tmp []", lines[2]);
            assertEquals("shm []", lines[3]);
            // the template (the jail's pid 1), this request's interpreter and the spare left for the next one
            assertEquals("processes " + (1 + PythonSandbox.FORK_SPARES), lines[6]);
        }
        // the first cell of a request is cell 1, as in a fresh interpreter
        JsonNode err = run("1 / 0", "");
        assertTrue(err.at("/run_result/stderr").asText().contains("File \"<cell-1>\", line 1"), err::toString);
    }

    @Test
    void statusesAndReturnCodesAreThoseOfAProcess() throws Exception {
        JsonNode ok = run("print(int(input()) * 2)", ", \"stdin\": \"21\\n\", \"compile_timeout\": 10, \"run_timeout\": 5, "
                + "\"memory_limit_MB\": -1, \"files\": {}, \"fetch_files\": [], \"args\": []");
        assertEquals("Success", ok.get("status").asText());
        assertTrue(ok.get("compile_result").isNull(), "python is not compiled");
        assertEquals("42\n", ok.at("/run_result/stdout").asText());
        assertEquals(0, ok.at("/run_result/return_code").asInt());

        // the sandbox_fusion client sends stdin: null when none is given: input() sees end of file
        JsonNode noStdin = run("input()", ", \"stdin\": null");
        assertEquals("Failed", noStdin.get("status").asText());
        assertEquals(1, noStdin.at("/run_result/return_code").asInt());
        assertTrue(noStdin.at("/run_result/stderr").asText().contains("EOFError"), noStdin::toString);

        JsonNode exit3 = run("import sys\nsys.exit(3)", "");
        assertEquals("Failed", exit3.get("status").asText());
        assertEquals("Finished", exit3.at("/run_result/status").asText());
        assertEquals(3, exit3.at("/run_result/return_code").asInt());
        assertEquals(0, run("import sys\nsys.exit(256)", "").at("/run_result/return_code").asInt(), "256 mod 256, as a process");

        JsonNode syntax = run("def f(:\n  pass", "");
        assertEquals("Failed", syntax.get("status").asText());
        assertEquals(1, syntax.at("/run_result/return_code").asInt());
        assertTrue(syntax.at("/run_result/stderr").asText().contains("SyntaxError"), syntax::toString);

        JsonNode runtime = run("1/0", "");
        assertEquals(1, runtime.at("/run_result/return_code").asInt());
        assertTrue(runtime.at("/run_result/stderr").asText().endsWith("ZeroDivisionError: division by zero\n"), runtime::toString);

        JsonNode exit4 = run("import os\nos._exit(4)", "");
        assertEquals(4, exit4.at("/run_result/return_code").asInt(), exit4::toString);
        JsonNode segv = run("import ctypes\nctypes.string_at(0)", "");
        assertEquals(-11, segv.at("/run_result/return_code").asInt(), segv::toString);

        JsonNode memory = run("x = bytearray(10**12)", "");
        assertEquals("Failed", memory.get("status").asText());
        assertEquals(1, memory.at("/run_result/return_code").asInt());
        assertTrue(memory.at("/run_result/stderr").asText().contains("MemoryError"), memory::toString);
        assertEquals("MEMORY", memory.at("/arbor/status").asText());

        JsonNode tle = run("while True: pass", ", \"run_timeout\": 0.3");
        assertEquals("Failed", tle.get("status").asText());
        assertEquals("TimeLimitExceeded", tle.at("/run_result/status").asText());
        assertTrue(tle.at("/run_result/return_code").isNull());

        JsonNode cpp = SandboxFusion.JSON.readTree(post("/run_code", "{\"code\": \"int main(){}\", \"language\": \"cpp\"}").body());
        assertEquals("SandboxError", cpp.get("status").asText(), "a SandboxFusion language this server does not run");
        assertTrue(cpp.get("message").asText().contains("cpp"), cpp::toString);
    }

    @Test
    void badInputGetsA4xxNamingTheField() throws Exception {
        assertIssue(post("/run_code", "{not json"), 422, "json_invalid", "[\"body\"]");
        assertIssue(post("/run_code", "[1, 2]"), 422, "model_attributes_type", "[\"body\"]");
        assertIssue(post("/run_code", "{\"language\": \"python\"}"), 422, "missing", "[\"body\",\"code\"]");
        assertIssue(post("/run_code", "{\"code\": 5, \"language\": \"python\"}"), 422, "string_type", "[\"body\",\"code\"]");
        assertIssue(post("/run_code", "{\"code\": \"1\", \"language\": \"klingon\"}"), 422, "literal_error", "[\"body\",\"language\"]");
        assertIssue(post("/run_code", "{\"code\": \"1\", \"language\": \"python\", \"run_timeout\": \"soon\"}"), 422, "float_parsing",
                "[\"body\",\"run_timeout\"]");
        assertIssue(post("/run_code", "{\"code\": \"1\", \"language\": \"python\", \"memory_limit_MB\": [1]}"), 422, "int_type",
                "[\"body\",\"memory_limit_MB\"]");
        assertIssue(post("/run_code", "{\"code\": \"1\", \"language\": \"python\", \"fetch_files\": \"a\"}"), 422, "list_type",
                "[\"body\",\"fetch_files\"]");
        assertIssue(post("/run_jupyter", "{\"cells\": [\"1\", 2]}"), 422, "string_type", "[\"body\",\"cells\",1]");
        assertIssue(post("/run_jupyter", "{\"cells\": [\"1\"], \"kernel\": \"R\"}"), 422, "literal_error", "[\"body\",\"kernel\"]");

        HttpResponse<String> missing = HTTP.send(HttpRequest.newBuilder(server.uri().resolve("/nowhere")).GET().build(),
                HttpResponse.BodyHandlers.ofString());
        assertEquals(404, missing.statusCode());
        assertEquals("Not Found", SandboxFusion.JSON.readTree(missing.body()).get("detail").asText());
        HttpResponse<String> get = HTTP.send(HttpRequest.newBuilder(server.uri().resolve("/run_code")).GET().build(),
                HttpResponse.BodyHandlers.ofString());
        assertEquals(405, get.statusCode());

        // a body over the limit is refused from its Content-Length, before it is read
        long limit = 2L * sandbox.config().maxCodeBytes + (1 << 20);
        String reply = raw("POST /run_code HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + (limit + 1)
                + "\r\n\r\n{\"code\":", true);
        assertTrue(reply.startsWith("HTTP/1.1 413 "), reply);
        assertTrue(reply.contains("\"detail\"") && reply.contains(String.valueOf(limit)), reply);
        String garbage = raw("GARBAGE\r\n\r\n", true);
        assertTrue(garbage.startsWith("HTTP/1.1 400 "), garbage);
        // chunked bodies are decoded
        String a = "{\"code\": \"6*7\", ", b = "\"language\": \"python\"}";
        String chunked = raw("POST /run_code HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                + Integer.toHexString(a.length()) + "\r\n" + a + "\r\n" + Integer.toHexString(b.length()) + "\r\n" + b + "\r\n0\r\n\r\n", true);
        assertTrue(chunked.startsWith("HTTP/1.1 200 ") && chunked.contains("\"stdout\":\"42\\n\""), chunked);
    }

    private static void assertIssue(HttpResponse<String> r, int code, String type, String loc) throws IOException {
        assertEquals(code, r.statusCode(), r::body);
        JsonNode first = SandboxFusion.JSON.readTree(r.body()).get("detail").get(0);
        assertEquals(type, first.get("type").asText(), r::body);
        assertEquals(loc, first.get("loc").toString(), r::body);
        assertTrue(first.get("msg").asText().length() > 5, r::body);
    }

    /** Sends raw bytes, returns what came back until the server closed (or 5 s passed). */
    private static String raw(String request, boolean readAll) throws IOException {
        try (Socket s = new Socket(server.uri().getHost(), server.port())) {
            s.setSoTimeout(5000);
            OutputStream o = s.getOutputStream();
            o.write(request.getBytes(StandardCharsets.UTF_8));
            o.flush();
            InputStream in = s.getInputStream();
            StringBuilder sb = new StringBuilder();
            byte[] b = new byte[8192];
            try {
                for (int n; (n = in.read(b)) > 0; ) sb.append(new String(b, 0, n, StandardCharsets.UTF_8));
            } catch (IOException e) {
                // timeout or reset: return what we have
            }
            return sb.toString();
        }
    }

    @Test
    void busyServerAnswers504WithRetryAfterThenServesAgain() throws Exception {
        try (PythonSession held = sandbox.openSession(Duration.ofSeconds(30))) { // the only worker
            HttpResponse<String> r = post("/run_code", "{\"code\": \"print(1)\", \"language\": \"python\"}");
            assertEquals(504, r.statusCode(), r::body);
            assertEquals("1", r.headers().firstValue("Retry-After").orElse(""));
            assertTrue(SandboxFusion.JSON.readTree(r.body()).get("detail").asText().contains("no free sandbox worker"), r::body);
            JsonNode health = SandboxFusion.JSON.readTree(HTTP.send(HttpRequest.newBuilder(server.uri().resolve("/health")).GET().build(),
                    HttpResponse.BodyHandlers.ofString()).body());
            assertEquals(1, health.at("/workers/total").asInt());
            assertEquals(1, health.at("/workers/busy").asInt());
            assertEquals(0, health.at("/workers/idle").asInt());
            assertEquals(0, health.at("/workers/starting").asInt());
            assertTrue(health.get("fork_server").asBoolean());
        }
        assertEquals("1\n", run("print(1)", "").at("/run_result/stdout").asText());
    }

    @Test
    void requestsOfClientsThatLeftAreCancelled() throws Exception {
        SandboxServer.Counters before = server.counters();
        // a 30-second loop whose client gives up: without cancellation it would hold the only worker
        Socket running = send("{\"code\": \"while True: pass\", \"language\": \"python\", \"run_timeout\": 30}");
        awaitTrue(() -> server.counters().running() == 1, "the loop is running");
        Socket queued = send("{\"code\": \"print('never')\", \"language\": \"python\"}");
        awaitTrue(() -> server.counters().waiting() == 1, "the second request waits for the worker");
        queued.close();
        running.close();
        awaitTrue(() -> server.counters().cancelled() == before.cancelled() + 2, "both were cancelled: " + server.counters());
        JsonNode next = run("print('served')", "");
        assertEquals("Success", next.get("status").asText(), next::toString);
        assertEquals("served\n", next.at("/run_result/stdout").asText());
        assertEquals(0, server.counters().waiting());
    }

    private static Socket send(String json) throws IOException {
        Socket s = new Socket(server.uri().getHost(), server.port());
        byte[] body = json.getBytes(StandardCharsets.UTF_8);
        OutputStream o = s.getOutputStream();
        o.write(("POST /run_code HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + body.length + "\r\n\r\n")
                .getBytes(StandardCharsets.US_ASCII));
        o.write(body);
        o.flush();
        return s;
    }

    private static void awaitTrue(BooleanSupplier c, String what) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        while (!c.getAsBoolean() && System.nanoTime() < deadline) Thread.sleep(10);
        assertTrue(c.getAsBoolean(), what);
    }

    @Test
    void pingAndHealth() throws Exception {
        URI base = server.uri();
        assertEquals("\"pong\"", HTTP.send(HttpRequest.newBuilder(base.resolve("/v1/ping")).GET().build(), HttpResponse.BodyHandlers.ofString()).body());
        awaitTrue(() -> sandbox.stats().idle() == 1, "the worker is idle");
        JsonNode h = SandboxFusion.JSON.readTree(HTTP.send(HttpRequest.newBuilder(base.resolve("/health")).GET().build(),
                HttpResponse.BodyHandlers.ofString()).body());
        assertEquals("ok", h.get("status").asText());
        assertEquals(0, h.at("/workers/busy").asInt());
        assertEquals(1, h.at("/workers/idle").asInt());
        assertEquals(0, h.at("/requests/running").asInt());
    }
}
