package ai.arbor.bench.sandbox;

import ai.arbor.sandbox.ExecResult;
import ai.arbor.sandbox.ExecStatus;
import ai.arbor.sandbox.PythonSandbox;
import ai.arbor.sandbox.PythonSession;
import ai.arbor.sandbox.RemoteSandbox;
import ai.arbor.sandbox.SandboxServer;
import ai.arbor.sandbox.SandboxSession;
import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

/**
 * Latency of the local Python sandbox (jail on where the host allows it; the isolation in use is
 * printed at setup), sampled so that JMH reports the median and p99: a trivial call and a small numpy
 * call in a warm session, a cold session from the pre-started pool, a session whose worker must first
 * be started, a call through the SandboxFusion HTTP server, and, in the same run, a fresh
 * {@code python3} process per call (plain and jailed). Throughput of one session = 1 / mean; the
 * concurrent figure comes from {@link SandboxLoad}. See bench/RESULTS.md.
 */
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@State(Scope.Benchmark)
public class SandboxBench {

    PythonSandbox sandbox;
    PythonSession warm;
    PythonSandbox single;
    SandboxServer server;
    RemoteSandbox client;
    List<String> freshPlain;
    List<String> freshJailed;

    @Setup(Level.Trial)
    public void setup() {
        sandbox = PythonSandbox.builder().workers(2).timeout(Duration.ofSeconds(10)).build();
        System.out.println("\nisolation: " + sandbox.isolationReport());
        warm = sandbox.openSession();
        check(warm.execute("import numpy as np\na = np.random.rand(8, 8) + 8 * np.eye(8)"));
        single = PythonSandbox.builder().workers(1).timeout(Duration.ofSeconds(10)).build();
        server = SandboxServer.start(sandbox, "127.0.0.1", 0, Duration.ofSeconds(30));
        client = RemoteSandbox.builder(server.uri()).mode(RemoteSandbox.Mode.RUN_CODE).timeout(Duration.ofSeconds(10)).build();
        freshPlain = List.of("/usr/bin/python3", "-I", "-c", "print(1)");
        freshJailed = sandbox.launchCommand("-I", "-c", "print(1)");
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        System.out.println("\npool stats: " + sandbox.stats() + "; single-worker pool: " + single.stats());
        server.close();
        warm.close();
        sandbox.close();
        single.close();
    }

    private static ExecResult check(ExecResult r) {
        if (r.status() != ExecStatus.OK) throw new IllegalStateException("benchmark call failed: " + r);
        return r;
    }

    /** A trivial call in a warm session. */
    @Benchmark
    public ExecResult warmPrint() {
        return check(warm.execute("print(1)"));
    }

    /** numpy (already imported by the session) inverting an 8x8 matrix. */
    @Benchmark
    public ExecResult warmNumpyInverse() {
        return check(warm.execute("import numpy as np\nb = np.linalg.inv(a)"));
    }

    /** Wait (unmeasured) until the pool has a pre-started worker again. */
    @State(Scope.Thread)
    public static class IdleWorker {
        @Setup(Level.Invocation)
        public void waitForIdle(SandboxBench b) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (b.sandbox.stats().idle() < 1 && System.nanoTime() < deadline) Thread.sleep(1);
        }
    }

    /** Open a session on the pre-started pool, run print(1), close (the worker is killed and replaced in the background). */
    @Benchmark
    public ExecResult coldSession(IdleWorker idle) {
        try (PythonSession s = sandbox.openSession()) {
            return check(s.execute("print(1)"));
        }
    }

    /** The same on a one-worker pool, back to back: every session waits for a freshly started jailed interpreter. */
    @Benchmark
    public ExecResult coldSessionWithWorkerStart() {
        try (PythonSession s = single.openSession()) {
            return check(s.execute("print(1)"));
        }
    }

    /** POST /run_code (RUN_CODE client, fresh session: no replay) through the local HTTP server. */
    @Benchmark
    public ExecResult httpRunCode() {
        try (SandboxSession s = client.openSession()) {
            return check(s.execute("print(1)"));
        }
    }

    /** Baseline: a fresh /usr/bin/python3 process per call, no jail. */
    @Benchmark
    public byte[] freshPythonProcess() throws IOException, InterruptedException {
        return run(freshPlain);
    }

    /** Baseline: a fresh jailed python3 per call (the same env -i / bubblewrap command the pool uses). */
    @Benchmark
    public byte[] freshJailedPythonProcess() throws IOException, InterruptedException {
        return run(freshJailed);
    }

    private static byte[] run(List<String> argv) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(argv).redirectErrorStream(true).start();
        p.getOutputStream().close();
        byte[] out;
        try (InputStream in = p.getInputStream()) {
            out = in.readAllBytes();
        }
        if (p.waitFor() != 0 || out.length != 2) throw new IllegalStateException("fresh process failed: " + new String(out));
        return out;
    }
}
