package ai.arbor.bench.sandbox;

import ai.arbor.sandbox.ExecResult;
import ai.arbor.sandbox.ExecStatus;
import ai.arbor.sandbox.PythonSandbox;
import ai.arbor.sandbox.PythonSession;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.Stream;

/**
 * Load test: N executions spread over S concurrent sessions (default 10,000 over 8) of a jailed pool,
 * with the host's process count, the sandbox uid's process count and the JVM's open file descriptors
 * before and after (a leak shows as a difference), then, in the same run, a fresh python3 process per
 * call (plain and jailed) for comparison. Prints a Markdown table for bench/RESULTS.md.
 *
 * <pre>bench/run.sh --main ai.arbor.bench.sandbox.SandboxLoad [executions] [sessions] [freshCalls]</pre>
 */
public final class SandboxLoad {

    public static void main(String[] args) throws Exception {
        int executions = args.length > 0 ? Integer.parseInt(args[0]) : 10_000;
        int sessions = args.length > 1 ? Integer.parseInt(args[1]) : 8;
        int freshCalls = args.length > 2 ? Integer.parseInt(args[2]) : 200;
        int perSession = executions / sessions;

        // Warm-up pool first, so that class loading, JIT threads and jar handles are not mistaken for leaks.
        try (PythonSandbox warm = PythonSandbox.builder().workers(sessions).build()) {
            waitForIdle(warm, sessions);
            for (int i = 0; i < sessions; i++) {
                try (PythonSession s = warm.openSession()) {
                    for (int j = 0; j < 50; j++) s.execute("print(" + j + ")");
                }
            }
        }
        Thread.sleep(2000);
        Counts before = Counts.now();
        long[] latencies = new long[perSession * sessions];
        long wall;
        String report;
        PythonSandbox.Stats stats;
        try (PythonSandbox sandbox = PythonSandbox.builder().workers(sessions).timeout(Duration.ofSeconds(10)).build()) {
            report = sandbox.isolationReport();
            waitForIdle(sandbox, sessions);
            Counts during = Counts.now();
            ExecutorService pool = Executors.newFixedThreadPool(sessions);
            long t0 = System.nanoTime();
            Future<?>[] fs = new Future<?>[sessions];
            for (int s = 0; s < sessions; s++) {
                int id = s;
                fs[s] = pool.submit(() -> {
                    try (PythonSession session = sandbox.openSession()) {
                        session.execute("acc = 0");
                        for (int i = 0; i < perSession; i++) {
                            long a = System.nanoTime();
                            ExecResult r = session.execute("acc += " + i + "\nprint(acc)");
                            latencies[id * perSession + i] = System.nanoTime() - a;
                            if (r.status() != ExecStatus.OK) throw new IllegalStateException("call failed: " + r);
                        }
                        ExecResult last = session.execute("acc");
                        long expected = (long) perSession * (perSession - 1) / 2;
                        if (!last.stdout().strip().equals(String.valueOf(expected))) throw new IllegalStateException("wrong state: " + last);
                    }
                    return null;
                });
            }
            for (Future<?> f : fs) f.get();
            wall = System.nanoTime() - t0;
            pool.shutdown();
            stats = sandbox.stats();
            System.out.println("while running (pool started): " + during);
        }
        Thread.sleep(2000); // let the killed process trees be reaped
        Counts after = Counts.now();

        Arrays.sort(latencies);
        double secs = wall / 1e9;
        System.out.println("isolation: " + report);
        System.out.println("pool: " + stats);
        System.out.printf(Locale.ROOT, "| %d executions, %d concurrent sessions | %.0f exec/s | median %.3f ms | p99 %.3f ms | max %.1f ms |%n",
                latencies.length, sessions, latencies.length / secs, pct(latencies, 0.50), pct(latencies, 0.99), latencies[latencies.length - 1] / 1e6);
        System.out.println("| before | " + before + " |");
        System.out.println("| after  | " + after + " |");

        fresh("fresh python3 per call", List.of("/usr/bin/python3", "-I", "-c", "print(1)"), freshCalls);
        try (PythonSandbox sb = PythonSandbox.builder().workers(1).build()) {
            fresh("fresh jailed python3 per call", sb.launchCommand("-I", "-c", "print(1)"), freshCalls);
        }
    }

    private static void fresh(String what, List<String> argv, int calls) throws IOException, InterruptedException {
        long[] lat = new long[calls];
        long t0 = System.nanoTime();
        for (int i = 0; i < calls; i++) {
            long a = System.nanoTime();
            Process p = new ProcessBuilder(argv).redirectErrorStream(true).start();
            p.getOutputStream().close();
            byte[] out;
            try (InputStream in = p.getInputStream()) {
                out = in.readAllBytes();
            }
            if (p.waitFor() != 0 || out.length != 2) throw new IllegalStateException(what + " failed: " + new String(out));
            lat[i] = System.nanoTime() - a;
        }
        double secs = (System.nanoTime() - t0) / 1e9;
        Arrays.sort(lat);
        System.out.printf(Locale.ROOT, "| %s, %d sequential calls | %.1f exec/s | median %.3f ms | p99 %.3f ms |%n",
                what, calls, calls / secs, pct(lat, 0.50), pct(lat, 0.99));
    }

    private static double pct(long[] sorted, double q) {
        return sorted[Math.min(sorted.length - 1, (int) Math.floor(q * (sorted.length - 1)))] / 1e6;
    }

    private static void waitForIdle(PythonSandbox sandbox, int n) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (sandbox.stats().idle() < n && System.nanoTime() < deadline) Thread.sleep(10);
    }

    /** Host processes, processes owned by the sandbox uid 65534, and this JVM's open file descriptors. */
    record Counts(long hostProcesses, long sandboxUidProcesses, long jvmFds, long jvmChildren, long jvmThreads) {
        static Counts now() throws IOException {
            long host = 0, uid = 0;
            try (Stream<Path> s = Files.list(Path.of("/proc"))) {
                for (Path p : (Iterable<Path>) s::iterator) {
                    if (!p.getFileName().toString().chars().allMatch(Character::isDigit)) continue;
                    host++;
                    try {
                        for (String line : Files.readAllLines(p.resolve("status"))) {
                            if (line.startsWith("Uid:")) {
                                if (line.substring(4).trim().split("\\s+")[0].equals("65534")) uid++;
                                break;
                            }
                        }
                    } catch (IOException e) {
                        // exited meanwhile
                    }
                }
            }
            long fds;
            try (Stream<Path> s = Files.list(Path.of("/proc/self/fd"))) {
                fds = s.count();
            }
            return new Counts(host, uid, fds, ProcessHandle.current().descendants().count(), Thread.activeCount());
        }

        @Override
        public String toString() {
            return "host processes " + hostProcesses + ", uid-65534 processes " + sandboxUidProcesses
                    + ", JVM open fds " + jvmFds + ", JVM descendant processes " + jvmChildren + ", JVM threads " + jvmThreads;
        }
    }
}
