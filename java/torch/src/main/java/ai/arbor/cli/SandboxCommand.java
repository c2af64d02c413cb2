package ai.arbor.cli;

import ai.arbor.sandbox.Isolation;
import ai.arbor.sandbox.PythonSandbox;
import ai.arbor.sandbox.SandboxServer;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code arbor sandbox …}: the Python code sandbox as a service. */
@Command(name = "sandbox", mixinStandardHelpOptions = true,
        description = "The jailed Python code sandbox (see docs/sandbox.md).",
        subcommands = {SandboxCommand.Serve.class})
public final class SandboxCommand implements Runnable {

    @Override
    public void run() {
        new CommandLine(this).usage(System.out);
    }

    /** Serves the local sandbox over the SandboxFusion HTTP API until interrupted. */
    @Command(name = "serve", mixinStandardHelpOptions = true,
            description = "Serve the local Python sandbox over the SandboxFusion HTTP API (POST /run_code, POST /run_jupyter).")
    public static final class Serve implements Runnable {
        @Option(names = "--port", required = true, description = "TCP port (0: any free port).")
        int port;

        @Option(names = "--host", defaultValue = "127.0.0.1",
                description = "Address to bind (default ${DEFAULT-VALUE}; 0.0.0.0 exposes code execution to the network).")
        String host;

        @Option(names = "--workers", defaultValue = "0", description = "Python workers = concurrent requests (default: CPU count).")
        int workers;

        @Option(names = "--timeout", defaultValue = "10", description = "Default time limit per cell, seconds (default ${DEFAULT-VALUE}).")
        double timeoutSeconds;

        @Option(names = "--max-timeout", defaultValue = "60", description = "Cap on a request's run_timeout / total_timeout, seconds (default ${DEFAULT-VALUE}).")
        double maxTimeoutSeconds;

        @Option(names = "--memory-mb", defaultValue = "1024", description = "Address-space limit per worker, MiB (default ${DEFAULT-VALUE}).")
        int memoryMb;

        @Option(names = "--isolation", defaultValue = "AUTO", description = "AUTO, JAIL (refuse to run without the jail) or RLIMITS_ONLY (default ${DEFAULT-VALUE}).")
        Isolation isolation;

        @Option(names = "--preimport", split = ",", description = "Modules imported when a worker starts, e.g. numpy,sympy.")
        String[] preImports = new String[0];

        @Option(names = "--fork-server", negatable = true, defaultValue = "true", fallbackValue = "true",
                description = "Fork every request's interpreter from a warm template (default ${DEFAULT-VALUE}; "
                        + "--no-fork-server starts a fresh jailed process per request instead).")
        boolean forkServer;

        @Option(names = "--admission-timeout", defaultValue = "10",
                description = "Seconds a request may wait for a free worker before it gets HTTP 504 with Retry-After (default ${DEFAULT-VALUE}).")
        double admissionSeconds;

        @Option(names = "--max-connections", defaultValue = "512",
                description = "Open connections beyond this are answered 503 at once (default ${DEFAULT-VALUE}).")
        int maxConnections;

        @Override
        public void run() {
            PythonSandbox.Builder b = PythonSandbox.builder().isolation(isolation)
                    .timeout(Duration.ofMillis((long) (timeoutSeconds * 1000))).memoryLimitMb(memoryMb).preImport(preImports)
                    .forkServer(forkServer);
            if (workers > 0) b.workers(workers);
            PythonSandbox sandbox = b.build();
            if (!(admissionSeconds > 0)) throw new CommandLine.ParameterException(new CommandLine(this), "--admission-timeout must be positive, got " + admissionSeconds);
            SandboxServer server = SandboxServer.start(sandbox, host, port, Duration.ofMillis((long) (maxTimeoutSeconds * 1000)),
                    Duration.ofMillis((long) (admissionSeconds * 1000)), maxConnections);
            CountDownLatch stopped = new CountDownLatch(1);
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                server.close();
                sandbox.close();
                stopped.countDown();
            }, "arbor-sandbox-shutdown"));
            System.out.println("arbor sandbox: serving " + server.uri() + " (POST /run_code, POST /run_jupyter, GET /health)"
                    + (forkServer ? "; fork server on" : ""));
            System.out.println("isolation: " + sandbox.isolationReport());
            System.out.flush();
            try {
                stopped.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
