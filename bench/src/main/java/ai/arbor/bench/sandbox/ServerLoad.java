package ai.arbor.bench.sandbox;

import ai.arbor.sandbox.PythonSandbox;
import ai.arbor.sandbox.SandboxServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * The SandboxFusion-compatible server under load, as `arbor sandbox serve` runs with its defaults (jail,
 * CPU-count workers, 10 s admission timeout; fork server on unless {@code --no-fork-server}), loopback
 * clients only (127.0.0.1), bounded in count and time:
 * <ol>
 *   <li>N sequential stateless {@code POST /run_code} of {@code print(1)} over one keep-alive connection:
 *       requests/s, p50, p99;</li>
 *   <li>a flood: C concurrent clients each sending a 10-second CPU loop ({@code run_timeout} 20 s) and
 *       giving up (closing the connection) after 12 s; then the time from the last client giving up until a
 *       plain {@code print(1)} is served.</li>
 * </ol>
 * Each line also gives the CPU time per request of this process and all its descendants (client included),
 * less sensitive to the machine's load than the latency. With a third argument K &gt; 1, step 1 is repeated
 * with K concurrent clients (one connection each).
 * <pre>bench/run.sh --main ai.arbor.bench.sandbox.ServerLoad [N=200] [C=64] [K] [--no-fork-server]</pre>
 */
public final class ServerLoad {

    public static void main(String[] args) throws Exception {
        int n = args.length > 0 ? Integer.parseInt(args[0]) : 200;
        int clients = args.length > 1 ? Integer.parseInt(args[1]) : 64;
        boolean fork = !Arrays.asList(args).contains("--no-fork-server");
        int concurrency = args.length > 2 && args[2].matches("\\d+") ? Integer.parseInt(args[2]) : 0;
        if (n < 1 || n > 100_000 || clients < 0 || clients > 512) throw new IllegalArgumentException("N in [1, 100000], C in [0, 512]");
        System.out.println("load before: " + Files.readString(Path.of("/proc/loadavg")).strip());
        try (PythonSandbox sandbox = PythonSandbox.builder().timeout(Duration.ofSeconds(10)).forkServer(fork).build();
             SandboxServer server = SandboxServer.start(sandbox, "127.0.0.1", 0, Duration.ofSeconds(60), Duration.ofSeconds(10), 512)) {
            System.out.println("isolation: " + sandbox.isolationReport() + "; fork server: " + fork);
            for (int i = 0; i < 20; i++) direct(sandbox);
            long[] d = new long[n];
            long cpuDirect = treeCpuMillis();
            for (int i = 0; i < n; i++) {
                long a = System.nanoTime();
                direct(sandbox);
                d[i] = System.nanoTime() - a;
            }
            double cpuPerSession = (treeCpuMillis() - cpuDirect) / (double) n;
            Arrays.sort(d);
            System.out.printf(Locale.ROOT, "| %d sequential openSession + print(1) + close, in process | p50 %.2f ms | p99 %.2f ms "
                    + "| %.1f CPU-ms/session |%n", n, pct(d, 0.50), pct(d, 0.99), cpuPerSession);
            URI uri = server.uri().resolve("/run_code");
            HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
            String body = "{\"code\": \"print(1)\", \"language\": \"python\"}";
            for (int i = 0; i < 20; i++) post(http, uri, body); // warm-up: JIT, pool
            long[] nanos = new long[n];
            long cpu0 = treeCpuMillis();
            long t0 = System.nanoTime();
            for (int i = 0; i < n; i++) {
                long a = System.nanoTime();
                String r = post(http, uri, body);
                nanos[i] = System.nanoTime() - a;
                if (!r.contains("\"status\":\"Success\"") || !r.contains("\"stdout\":\"1\\n\"")) throw new IllegalStateException("unexpected: " + r);
            }
            double seconds = (System.nanoTime() - t0) / 1e9;
            double cpuPerRequest = (treeCpuMillis() - cpu0) / (double) n;
            Arrays.sort(nanos);
            System.out.printf(Locale.ROOT, "| %d sequential print(1), fork server %s | %.1f requests/s | p50 %.1f ms | p99 %.1f ms | max %.1f ms "
                    + "| %.1f CPU-ms/request |%n", n, fork ? "on" : "off", n / seconds, pct(nanos, 0.50), pct(nanos, 0.99), nanos[n - 1] / 1e6,
                    cpuPerRequest);
            if (concurrency > 1) concurrent(http, uri, body, n, concurrency);
            System.out.println("load after sequential: " + Files.readString(Path.of("/proc/loadavg")).strip());
            if (clients == 0) return;

            String loop = "{\"code\": \"import time\\nt = time.time()\\nwhile time.time() - t < 10:\\n    pass\", "
                    + "\"language\": \"python\", \"run_timeout\": 20}";
            ExecutorService pool = Executors.newFixedThreadPool(clients);
            CountDownLatch done = new CountDownLatch(clients);
            long[] gaveUp = new long[clients];
            int[] answered = new int[1];
            for (int c = 0; c < clients; c++) {
                int id = c;
                pool.execute(() -> {
                    try (Socket s = new Socket("127.0.0.1", server.port())) {
                        s.setSoTimeout(12_000);
                        byte[] b = loop.getBytes(StandardCharsets.UTF_8);
                        OutputStream o = s.getOutputStream();
                        o.write(("POST /run_code HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: "
                                + b.length + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
                        o.write(b);
                        o.flush();
                        InputStream in = s.getInputStream();
                        try {
                            if (in.read() >= 0) synchronized (answered) { answered[0]++; }
                        } catch (SocketTimeoutException e) {
                            // the client gives up after 12 s, as a standard client's timeout would
                        }
                    } catch (IOException e) {
                        // refused or reset: counts as given up
                    } finally {
                        gaveUp[id] = System.nanoTime();
                        done.countDown();
                    }
                });
            }
            done.await();
            long last = Arrays.stream(gaveUp).max().orElseThrow();
            String r = post(http, uri, body);
            double recovery = (System.nanoTime() - last) / 1e6;
            pool.shutdown();
            System.out.printf(Locale.ROOT, "| flood: %d clients x 10 s CPU loop, give up at 12 s | %d answered before giving up | "
                    + "print(1) served %.0f ms after the last client gave up (%s) | counters %s |%n", clients, answered[0], recovery,
                    r.contains("\"status\":\"Success\"") ? "Success" : r, server.counters());
            System.out.println("load after flood: " + Files.readString(Path.of("/proc/loadavg")).strip());
        }
    }

    /** C client threads, each with its own connection, N requests in all: requests/s, latency, CPU per request. */
    private static void concurrent(HttpClient http, URI uri, String body, int n, int c) throws Exception {
        long[] nanos = new long[n];
        java.util.concurrent.atomic.AtomicInteger next = new java.util.concurrent.atomic.AtomicInteger();
        ExecutorService pool = Executors.newFixedThreadPool(c);
        long cpu0 = treeCpuMillis();
        long t0 = System.nanoTime();
        java.util.List<java.util.concurrent.Future<?>> fs = new java.util.ArrayList<>();
        for (int t = 0; t < c; t++) {
            fs.add(pool.submit(() -> {
                HttpClient own = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
                for (int i; (i = next.getAndIncrement()) < n; ) {
                    long a = System.nanoTime();
                    String r = post(own, uri, body);
                    nanos[i] = System.nanoTime() - a;
                    if (!r.contains("\"status\":\"Success\"")) throw new IllegalStateException("unexpected: " + r);
                }
                return null;
            }));
        }
        for (var f : fs) f.get();
        double seconds = (System.nanoTime() - t0) / 1e9;
        double cpuPerRequest = (treeCpuMillis() - cpu0) / (double) n;
        pool.shutdown();
        Arrays.sort(nanos);
        System.out.printf(Locale.ROOT, "| %d print(1) from %d concurrent clients | %.1f requests/s | p50 %.1f ms | p99 %.1f ms | max %.1f ms "
                + "| %.1f CPU-ms/request |%n", n, c, n / seconds, pct(nanos, 0.50), pct(nanos, 0.99), nanos[n - 1] / 1e6, cpuPerRequest);
    }

    /**
     * CPU time (user + system) of this JVM and every process below it, including their reaped children
     * (the fork server's finished interpreters), in milliseconds: the cost of the requests, less sensitive to
     * the machine's load than their latency. Includes the client threads of this process.
     */
    static long treeCpuMillis() {
        long ticks = 0;
        java.util.List<ProcessHandle> all = new java.util.ArrayList<>();
        all.add(ProcessHandle.current());
        ProcessHandle.current().descendants().forEach(all::add);
        for (ProcessHandle p : all) {
            try {
                String st = Files.readString(Path.of("/proc/" + p.pid() + "/stat"));
                String[] f = st.substring(st.lastIndexOf(')') + 2).split(" ");
                // fields 14-17 of proc(5) (utime, stime, cutime, cstime) are at 11-14 after the command
                for (int i = 11; i <= 14; i++) ticks += Long.parseLong(f[i]);
            } catch (IOException | RuntimeException e) {
                // exited meanwhile
            }
        }
        return ticks * 10; // USER_HZ = 100 on Linux
    }

    private static String post(HttpClient http, URI uri, String body) throws IOException, InterruptedException {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(60)).header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
        return r.statusCode() + " " + r.body();
    }

    private static void direct(PythonSandbox sandbox) {
        try (ai.arbor.sandbox.PythonSession s = sandbox.openSession()) {
            if (!s.execute("print(1)").stdout().equals("1\n")) throw new IllegalStateException("unexpected output");
        }
    }

    private static double pct(long[] sorted, double p) {
        return sorted[Math.min(sorted.length - 1, (int) Math.ceil(p * sorted.length) - 1)] / 1e6;
    }
}
