package ai.arbor.generate;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * {@code arbor train --local-fleet N}: N {@code arbor serve} processes on loopback, each a JVM of its own
 * started with this JVM's Java and class path, serving a model directory on a free port (docs/fleet.md). The
 * trainer drives them as it would a fleet of vLLM / SGLang servers: over HTTP, with weight updates from disk.
 * A server can be killed and restarted on its port (what the fault tests do).
 */
public final class LocalFleet implements AutoCloseable {
    private static final Pattern LISTENING = Pattern.compile("arbor serve: (http://[^/\\s]+)/v1/completions");

    private final Path model;
    private final Duration startTimeout;
    private final List<Process> processes = new ArrayList<>();
    private final List<Process> launched = new ArrayList<>();
    private final List<String> urls = new ArrayList<>();

    private LocalFleet(Path model, Duration startTimeout) {
        this.model = model;
        this.startTimeout = startTimeout;
    }

    /**
     * Starts {@code n} servers of {@code model} (a Hugging Face directory or an arbor checkpoint) and waits until
     * each listens.
     *
     * @throws IOException naming the server that did not start (its output included)
     */
    public static LocalFleet start(int n, Path model, Duration startTimeout) throws IOException {
        if (n < 1) throw new IllegalArgumentException("a local fleet needs at least 1 server, got " + n);
        if (model == null) throw new IllegalArgumentException("model is required");
        if (startTimeout == null || startTimeout.isNegative() || startTimeout.isZero())
            throw new IllegalArgumentException("startTimeout must be positive, got " + startTimeout);
        LocalFleet f = new LocalFleet(model, startTimeout);
        try {
            List<CompletableFuture<Start>> starting = new ArrayList<>();
            for (int i = 0; i < n; i++) starting.add(f.launch(0));
            for (int i = 0; i < n; i++) {
                Start s = f.await(starting.get(i), i);
                f.processes.add(s.process);
                f.urls.add(s.url);
            }
        } catch (IOException | RuntimeException e) {
            f.processes.clear();
            f.processes.addAll(f.launched);   // every process started, listening or not
            f.close();
            throw e;
        }
        return f;
    }

    private record Start(Process process, String url) {}

    /** Launches one server on {@code port} (0: any); completes with its URL when it prints it. */
    private CompletableFuture<Start> launch(int port) throws IOException {
        ai.arbor.torch.NativeCache.fill();   // the servers start at once: extract the libraries before them
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<String> cmd = List.of(java, "-Dorg.bytedeco.javacpp.maxPhysicalBytes=0", "-Xss4m", "-cp", System.getProperty("java.class.path"),
                "ai.arbor.cli.Arbor", "serve", "--model", model.toString(), "--host", "127.0.0.1", "--port", String.valueOf(port),
                "--threads", "1", "--max-batch", "64");
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        launched.add(p);
        CompletableFuture<Start> ready = new CompletableFuture<>();
        StringBuilder out = new StringBuilder();
        Thread reader = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) {
                    if (!ready.isDone()) {
                        synchronized (out) {
                            if (out.length() < 8000) out.append(line).append('\n');
                        }
                        Matcher m = LISTENING.matcher(line);
                        if (m.find()) ready.complete(new Start(p, m.group(1)));
                    }
                }
            } catch (IOException ignored) {
                // the process ended
            }
            synchronized (out) {
                ready.completeExceptionally(new IOException("arbor serve exited before listening (exit "
                        + (p.isAlive() ? "?" : p.exitValue()) + "):\n" + out));
            }
        }, "arbor-local-fleet-output");
        reader.setDaemon(true);
        reader.start();
        return ready;
    }

    private Start await(CompletableFuture<Start> s, int i) throws IOException {
        try {
            return s.get(startTimeout.toMillis(), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            throw new IOException("local fleet server " + i + " did not listen within " + startTimeout.toSeconds() + " s");
        } catch (ExecutionException e) {
            throw new IOException("local fleet server " + i + ": " + e.getCause().getMessage(), e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while starting local fleet server " + i);
        }
    }

    /** The servers' base URLs ({@code http://127.0.0.1:PORT}). */
    public List<String> urls() {
        return List.copyOf(urls);
    }

    /** Kills server {@code i} at once (SIGKILL), as a crash would. */
    public void kill(int i) throws InterruptedException {
        Process p = processes.get(i);
        p.destroyForcibly();
        p.waitFor(30, TimeUnit.SECONDS);
    }

    /** Starts server {@code i} again on its port, serving the fleet's model (its first weight version). */
    public void restart(int i) throws IOException {
        if (processes.get(i).isAlive()) throw new IllegalStateException("local fleet server " + i + " is still running");
        int port = Integer.parseInt(urls.get(i).substring(urls.get(i).lastIndexOf(':') + 1));
        Start s = await(launch(port), i);
        processes.set(i, s.process);
    }

    /** Whether server {@code i}'s process runs. */
    public boolean alive(int i) {
        return processes.get(i).isAlive();
    }

    @Override
    public void close() {
        for (Process p : processes) p.destroy();
        for (Process p : processes) {
            try {
                if (!p.waitFor(10, TimeUnit.SECONDS)) p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                p.destroyForcibly();
            }
        }
    }
}
