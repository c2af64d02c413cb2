package ai.arbor.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The SandboxFusion-compatible server and client over loopback: the wire format, emulated sessions in
 * both modes, timeouts, retries only where they are safe, the concurrency limit, and a server stopped
 * in the middle of a call.
 */
class RemoteSandboxTest {

    static PythonSandbox sandbox;
    static SandboxServer server;
    static final HttpClient HTTP = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

    @BeforeAll
    static void start() {
        sandbox = SandboxTests.builder().workers(3).build();
        server = SandboxServer.start(sandbox, "127.0.0.1", 0, Duration.ofSeconds(20));
    }

    @AfterAll
    static void stop() {
        server.close();
        sandbox.close();
    }

    private static HttpResponse<String> post(URI base, String path, String json) throws Exception {
        return HTTP.send(HttpRequest.newBuilder(base.resolve(path)).header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(json)).build(), HttpResponse.BodyHandlers.ofString());
    }

    private static JsonNode json(HttpResponse<String> r) throws IOException {
        return SandboxFusion.JSON.readTree(r.body());
    }

    @Test
    void runCodeSpeaksSandboxFusion() throws Exception {
        URI base = server.uri();
        assertTrue(base.toString().startsWith("http://127.0.0.1:"), base.toString());
        JsonNode ok = json(post(base, "/run_code", "{\"code\": \"print('hello')\\n6*7\", \"language\": \"python\", \"run_timeout\": 5}"));
        assertEquals("Success", ok.get("status").asText());
        assertEquals("", ok.get("message").asText());
        assertTrue(ok.get("compile_result").isNull());
        assertEquals("Finished", ok.at("/run_result/status").asText());
        assertEquals(0, ok.at("/run_result/return_code").asInt());
        assertEquals("hello\n42\n", ok.at("/run_result/stdout").asText());
        assertTrue(ok.at("/run_result/execution_time").isNumber());
        assertEquals("OK", ok.at("/arbor/status").asText());

        JsonNode err = json(post(base, "/run_code", "{\"code\": \"raise ValueError('x')\", \"language\": \"python\"}"));
        assertEquals("Failed", err.get("status").asText());
        assertEquals(1, err.at("/run_result/return_code").asInt());
        assertTrue(err.at("/run_result/stderr").asText().endsWith("ValueError: x\n"));

        JsonNode tle = json(post(base, "/run_code", "{\"code\": \"while True: pass\", \"language\": \"python\", \"run_timeout\": 0.3}"));
        assertEquals("Failed", tle.get("status").asText());
        assertEquals("TimeLimitExceeded", tle.at("/run_result/status").asText());
        assertTrue(tle.at("/run_result/return_code").isNull());

        JsonNode stdin = json(post(base, "/run_code", "{\"code\": \"print(int(input()) * 2)\", \"language\": \"python\", \"stdin\": \"21\\n\"}"));
        assertEquals("42\n", stdin.at("/run_result/stdout").asText());

        JsonNode cpp = json(post(base, "/run_code", "{\"code\": \"int main(){}\", \"language\": \"cpp\"}"));
        assertEquals("SandboxError", cpp.get("status").asText());
        assertTrue(cpp.get("message").asText().contains("cpp"));

        HttpResponse<String> bad = post(base, "/run_code", "{not json");
        assertEquals(422, bad.statusCode());
        HttpResponse<String> get = HTTP.send(HttpRequest.newBuilder(base.resolve("/run_code")).GET().build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(405, get.statusCode());
        HttpResponse<String> ping = HTTP.send(HttpRequest.newBuilder(base.resolve("/v1/ping")).GET().build(), HttpResponse.BodyHandlers.ofString());
        assertEquals("\"pong\"", ping.body());
    }

    @Test
    void runJupyterSpeaksSandboxFusion() throws Exception {
        // The example cells of SandboxFusion's RunJupyterRequest.
        JsonNode r = json(post(server.uri(), "/run_jupyter", """
                {"cells": ["a = 123", "a", "print(a)", "import sys; sys.stderr.write(\\"stderr message\\")",
                           "raise RuntimeError(\\"error message\\")"], "cell_timeout": 5, "total_timeout": 20}"""));
        assertEquals("Success", r.get("status").asText());
        assertEquals("Finished", r.at("/driver/status").asText());
        JsonNode cells = r.get("cells");
        assertEquals(5, cells.size());
        assertEquals("", cells.get(0).get("stdout").asText());
        assertEquals("123\n", cells.get(1).get("stdout").asText());
        assertEquals("123\n", cells.get(2).get("stdout").asText());
        assertEquals("stderr message", cells.get(3).get("stderr").asText());
        assertEquals("14\n", cells.get(3).get("stdout").asText(), "write() returns 14, shown like a notebook");
        assertEquals(0, cells.get(3).get("error").size());
        JsonNode error = cells.get(4).get("error").get(0);
        assertEquals("RuntimeError", error.get("ename").asText());
        assertEquals("error message", error.get("evalue").asText());
        assertTrue(error.get("traceback").size() >= 3);

        JsonNode tle = json(post(server.uri(), "/run_jupyter", "{\"cells\": [\"x = 1\", \"while True: pass\", \"x\"], \"cell_timeout\": 0.3}"));
        assertEquals("Failed", tle.get("status").asText());
        assertEquals("TimeLimitExceeded", tle.at("/driver/status").asText());
        assertEquals(2, tle.get("cells").size(), "stops at the cell that timed out");
    }

    @ParameterizedTest
    @EnumSource(RemoteSandbox.Mode.class)
    void emulatedSessionKeepsState(RemoteSandbox.Mode mode) {
        // RUN_CODE sends one program whose limit covers the replay too: 0.7 s x cells
        RemoteSandbox client = RemoteSandbox.builder(server.uri()).mode(mode).timeout(Duration.ofMillis(700)).build();
        try (SandboxSession s = client.openSession()) {
            ExecResult a = s.execute("x = 6\nprint('set')");
            assertEquals(ExecStatus.OK, a.status(), a::toString);
            assertEquals("set\n", a.stdout());
            ExecResult b = s.execute("y = x * 7\ny");
            assertEquals(ExecStatus.OK, b.status(), b::toString);
            assertEquals("42\n", b.stdout(), "earlier cells are replayed silently");
            ExecResult e = s.execute("y = 0\n1/0");
            assertEquals(ExecStatus.ERROR, e.status(), e::toString);
            assertTrue(e.stderr().contains("ZeroDivisionError: division by zero"), e::toString);
            assertFalse(e.stderr().contains("SystemExit"), e::toString);
            assertEquals("42\n", s.execute("y").stdout(), "a failed cell is not replayed");
            ExecResult t = s.execute("while True:\n    pass");
            assertEquals(ExecStatus.TIMEOUT, t.status(), t::toString);
            assertFalse(t.stateLost(), "the emulated state is the replayed cells, still intact");
            ExecResult m = s.execute("b = bytearray(10**11)");
            assertEquals(ExecStatus.MEMORY, m.status(), m::toString);
            s.reset();
            ExecResult gone = s.execute("y");
            assertEquals(ExecStatus.ERROR, gone.status());
            assertTrue(gone.stderr().contains("NameError"), gone::toString);
        }
    }

    @Test
    void divergentReplayResetsTheSession() throws Exception {
        List<Integer> cellsSeen = new ArrayList<>();
        HttpServer f = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 16);
        f.createContext("/run_jupyter", ex -> {
            JsonNode req = SandboxFusion.JSON.readTree(ex.getRequestBody().readAllBytes());
            int n = req.get("cells").size();
            cellsSeen.add(n);
            // the first cell fails whenever it is replayed (e.g. it depended on randomness)
            String failed = "{\"stdout\":\"\",\"stderr\":\"\",\"display\":[],\"error\":[{\"ename\":\"AssertionError\",\"evalue\":\"\",\"traceback\":[]}]}";
            String ok = "{\"stdout\":\"ok\\n\",\"stderr\":\"\",\"display\":[],\"error\":[]}";
            List<String> cells = new ArrayList<>();
            for (int i = 0; i < n; i++) cells.add(i == 0 && n > 1 ? failed : ok);
            byte[] body = ("{\"status\":\"Success\",\"message\":\"\",\"driver\":{\"status\":\"Finished\"},\"cells\":["
                    + String.join(",", cells) + "]}").getBytes(StandardCharsets.UTF_8);
            ex.sendResponseHeaders(200, body.length);
            try (OutputStream o = ex.getResponseBody()) {
                o.write(body);
            }
        });
        f.start();
        try {
            RemoteSandbox client = RemoteSandbox.builder(URI.create("http://127.0.0.1:" + f.getAddress().getPort())).build();
            SandboxSession s = client.openSession();
            assertEquals(ExecStatus.OK, s.execute("import random\nassert random.random() < 0.5").status());
            ExecResult r = s.execute("print('next')");
            assertEquals(ExecStatus.ERROR, r.status(), r::toString);
            assertTrue(r.stateLost());
            assertTrue(r.stderr().contains("cell 1 failed when replayed"), r::toString);
            assertEquals(ExecStatus.OK, s.execute("print('again')").status());
            assertEquals(List.of(1, 2, 1), cellsSeen, "after the divergence the session starts empty");
        } finally {
            f.stop(0);
        }
    }

    @Test
    void serverStoppedMidRunGivesSandboxError() throws Exception {
        PythonSandbox sb = SandboxTests.builder().workers(1).timeout(Duration.ofSeconds(30)).build();
        SandboxServer srv = SandboxServer.start(sb, "127.0.0.1", 0, Duration.ofSeconds(30));
        RemoteSandbox client = RemoteSandbox.builder(srv.uri()).timeout(Duration.ofSeconds(20)).maxAttempts(3)
                .backoff(Duration.ofMillis(50), Duration.ofMillis(200)).build();
        ExecutorService t = Executors.newSingleThreadExecutor();
        try (SandboxSession s = client.openSession()) {
            assertEquals(ExecStatus.OK, s.execute("print(1)").status());
            Future<ExecResult> f = t.submit(() -> s.execute("import time\ntime.sleep(15)"));
            Thread.sleep(500);
            long t0 = System.nanoTime();
            srv.close();
            ExecResult r = f.get();
            long waited = (System.nanoTime() - t0) / 1_000_000;
            assertEquals(ExecStatus.SANDBOX_ERROR, r.status(), r::toString);
            assertTrue(waited < 5000, "no hang: " + waited + " ms");
            assertTrue(r.stderr().contains("gave up after retries"), r::toString);
            assertEquals(2, client.retries(), "the call was retried against the stopped server, then given up");
        } finally {
            t.shutdownNow();
            sb.close();
        }
    }

    @Test
    void unreachableServerGivesSandboxErrorQuickly() throws Exception {
        int port;
        try (ServerSocket free = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = free.getLocalPort();
        }
        RemoteSandbox client = RemoteSandbox.builder(URI.create("http://127.0.0.1:" + port)).maxAttempts(3)
                .backoff(Duration.ofMillis(20), Duration.ofMillis(50)).build();
        try (SandboxSession s = client.openSession()) {
            ExecResult r = s.execute("print(1)");
            assertEquals(ExecStatus.SANDBOX_ERROR, r.status());
            assertTrue(r.stderr().contains("cannot connect"), r::toString);
            assertEquals(3, client.requestsSent());
        }
    }

    /** A fake SandboxFusion endpoint that answers with the given HTTP codes in turn, then delegates. */
    private static HttpServer fake(List<Integer> codes, AtomicInteger hits, AtomicInteger maxInFlight, long holdMillis) throws IOException {
        HttpServer f = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 16);
        AtomicInteger inFlight = new AtomicInteger();
        f.setExecutor(Executors.newCachedThreadPool());
        f.createContext("/", ex -> {
            int n = hits.getAndIncrement();
            int now = inFlight.incrementAndGet();
            maxInFlight.accumulateAndGet(now, Math::max);
            try {
                Thread.sleep(holdMillis);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            ex.getRequestBody().readAllBytes();
            int code = n < codes.size() ? codes.get(n) : 200;
            byte[] body = (code == 200
                    ? "{\"status\":\"Success\",\"message\":\"\",\"driver\":{\"status\":\"Finished\"},\"cells\":[{\"stdout\":\"fake\\n\",\"stderr\":\"\",\"display\":[{\"text/plain\":\"7\"}],\"error\":[]}]}"
                    : "{\"detail\":\"nope\"}").getBytes(StandardCharsets.UTF_8);
            inFlight.decrementAndGet();
            ex.sendResponseHeaders(code, body.length);
            try (OutputStream o = ex.getResponseBody()) {
                o.write(body);
            }
        });
        f.start();
        return f;
    }

    @Test
    void retriesOnlyGatewayErrors() throws Exception {
        AtomicInteger hits = new AtomicInteger(), max = new AtomicInteger();
        HttpServer f = fake(List.of(504, 502, 503), hits, max, 0);
        try {
            URI uri = URI.create("http://127.0.0.1:" + f.getAddress().getPort());
            RemoteSandbox client = RemoteSandbox.builder(uri).maxAttempts(4).backoff(Duration.ofMillis(10), Duration.ofMillis(40)).build();
            ExecResult r = client.openSession().execute("anything");
            assertEquals(ExecStatus.OK, r.status(), r::toString);
            assertEquals("fake\n7\n", r.stdout(), "display data (text/plain) is appended to stdout");
            assertEquals(4, hits.get());
            assertEquals(3, client.retries());
        } finally {
            f.stop(0);
        }
        AtomicInteger hits500 = new AtomicInteger();
        HttpServer g = fake(List.of(500), hits500, max, 0);
        try {
            URI uri = URI.create("http://127.0.0.1:" + g.getAddress().getPort());
            RemoteSandbox client = RemoteSandbox.builder(uri).maxAttempts(4).backoff(Duration.ofMillis(10), Duration.ofMillis(40)).build();
            ExecResult r = client.openSession().execute("anything");
            assertEquals(ExecStatus.SANDBOX_ERROR, r.status());
            assertTrue(r.stderr().contains("HTTP 500"), r::toString);
            assertEquals(1, hits500.get(), "a server error is not retried");
        } finally {
            g.stop(0);
        }
    }

    @Test
    void concurrencyIsLimited() throws Exception {
        AtomicInteger hits = new AtomicInteger(), max = new AtomicInteger();
        HttpServer f = fake(List.of(), hits, max, 100);
        ExecutorService pool = Executors.newFixedThreadPool(6);
        try {
            URI uri = URI.create("http://127.0.0.1:" + f.getAddress().getPort());
            RemoteSandbox client = RemoteSandbox.builder(uri).maxConcurrentRequests(2).build();
            List<Future<ExecResult>> fs = new ArrayList<>();
            for (int i = 0; i < 6; i++) fs.add(pool.submit(() -> client.openSession().execute("x")));
            for (Future<ExecResult> fu : fs) assertEquals(ExecStatus.OK, fu.get().status());
            assertEquals(6, hits.get());
            assertEquals(2, max.get(), "at most maxConcurrentRequests in flight");
        } finally {
            pool.shutdownNow();
            f.stop(0);
        }
    }

    @Test
    void clientTimeoutWithoutAnswerIsASandboxError() throws Exception {
        AtomicInteger hits = new AtomicInteger(), max = new AtomicInteger();
        HttpServer f = fake(List.of(), hits, max, 3000);
        try {
            URI uri = URI.create("http://127.0.0.1:" + f.getAddress().getPort());
            RemoteSandbox client = RemoteSandbox.builder(uri).timeout(Duration.ofMillis(200)).requestSlack(Duration.ofMillis(300)).build();
            long t0 = System.nanoTime();
            ExecResult r = client.openSession().execute("x");
            assertEquals(ExecStatus.SANDBOX_ERROR, r.status());
            assertTrue(r.stderr().contains("no response"), r::toString);
            assertTrue((System.nanoTime() - t0) / 1_000_000 < 2500, "bounded by the deadline");
            assertEquals(1, hits.get(), "a request the server took is not retried");
        } finally {
            f.stop(0);
        }
    }

    @Test
    void badArguments() {
        assertThrows(IllegalArgumentException.class, () -> RemoteSandbox.builder(URI.create("ftp://x")));
        assertThrows(IllegalArgumentException.class, () -> RemoteSandbox.builder(URI.create("http://x")).maxAttempts(0));
        assertThrows(IllegalArgumentException.class, () -> SandboxServer.start(sandbox, "127.0.0.1", 70000, Duration.ofSeconds(1)));
        RemoteSandbox c = RemoteSandbox.builder(server.uri()).build();
        c.close();
        assertThrows(IllegalStateException.class, c::openSession);
    }

    @Test
    void driverReplaysCells() {
        String program = RemoteSandbox.driver(List.of("a = 1", "a + 1"));
        try (PythonSession s = sandbox.openSession()) {
            ExecResult r = s.execute(program);
            assertEquals(ExecStatus.OK, r.status(), r::toString);
            assertEquals("2\n", r.stdout());
        }
    }
}
