package ai.arbor.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.generate.LocalFleet;
import ai.arbor.train.TrainingRun;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Training against a generation fleet of real {@code arbor serve} processes (docs/fleet.md): the RL rollouts of
 * every step come from the weight version published after the previous step; a server killed (SIGKILL) in the
 * middle of a step's rollouts — at its first generation request of that step — does not stop the step (its
 * requests are retried on the other server, nothing is lost), leaves the rotation at that step's publication,
 * and, restarted on its port, rejoins at the current version at the next one.
 */
class TrainFleetTest {
    static final String[] BASE = {"--model", "16,1,2,1,32", "--sft-demos", "16", "--sft-batch", "4", "--prompts", "4", "--group-size", "2",
        "--eval-problems", "3", "--eval-samples", "1", "--train-size", "40"};

    /**
     * A pass-through in front of one server that, once armed, kills that server (SIGKILL) when the first
     * generation request arrives and then forwards it (to a dead server: the client's connection is cut).
     */
    static final class KillingProxy implements AutoCloseable {
        final HttpServer http;
        final HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
        final AtomicBoolean armed = new AtomicBoolean();
        final AtomicInteger killedAtStep = new AtomicInteger(-1), step = new AtomicInteger();

        KillingProxy(String target, LocalFleet fleet, int victim) throws IOException {
            http = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 64);
            http.setExecutor(Executors.newCachedThreadPool());
            http.createContext("/", ex -> {
                try (ex) {
                    if (ex.getRequestURI().getPath().startsWith("/v1/completions") && armed.compareAndSet(true, false)) {
                        fleet.kill(victim);
                        killedAtStep.set(step.get());
                    }
                    forward(ex, target);
                } catch (IOException | InterruptedException e) {
                    // the server is gone: the exchange closes without an answer, as a crashed server's would
                }
            });
            http.start();
        }

        void forward(HttpExchange ex, String target) throws IOException, InterruptedException {
            byte[] body = ex.getRequestBody().readAllBytes();
            HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(target + ex.getRequestURI())).timeout(Duration.ofMinutes(2))
                    .method(ex.getRequestMethod(), body.length == 0 ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofByteArray(body));
            String ct = ex.getRequestHeaders().getFirst("Content-Type");
            if (ct != null) b.header("Content-Type", ct);
            HttpResponse<byte[]> r = client.send(b.build(), HttpResponse.BodyHandlers.ofByteArray());
            r.headers().firstValue("Content-Type").ifPresent(v -> ex.getResponseHeaders().set("Content-Type", v));
            ex.sendResponseHeaders(r.statusCode(), r.body().length == 0 ? -1 : r.body().length);
            try (OutputStream o = ex.getResponseBody()) {
                o.write(r.body());
            }
        }

        String url() {
            return "http://127.0.0.1:" + http.getAddress().getPort();
        }

        @Override
        public void close() {
            http.stop(0);
        }
    }

    @Test
    void aTwoServerFleetTrainsThroughAServerCrashAndItsRestart(@TempDir Path dir) throws Exception {
        // the fleet is started here (the servers --local-fleet starts) so that the test can kill and restart one
        TrainingRun.Options init = TrainCommandTest.parsed(TrainCommandTest.concat(BASE, "--sft-steps", "3", "--steps", "0", "--out",
                dir.resolve("sft").toString()));
        TrainingRun.run(init, new TrainingRun.Listener() {});
        Path sft = dir.resolve("sft").resolve("sft.safetensors");
        assertTrue(Files.isRegularFile(sft));
        int steps = 5;
        try (LocalFleet fleet = LocalFleet.start(2, sft, Duration.ofMinutes(3));
             KillingProxy proxy = new KillingProxy(fleet.urls().get(1), fleet, 1)) {
            TrainingRun.Options o = TrainCommandTest.parsed(TrainCommandTest.concat(BASE, "--steps", String.valueOf(steps),
                    "--init", sft.toString(), "--generators", fleet.urls().get(0) + "," + proxy.url(), "--weight-update-timeout", "60",
                    "--out", dir.resolve("rl").toString()));
            List<Map<String, Object>> rows = new ArrayList<>();
            proxy.step.set(1);
            TrainingRun.run(o, new TrainingRun.Listener() {
                @Override
                public void step(String phase, int step, int total, Map<String, Object> m) {
                    if (!phase.equals("rl")) return;
                    rows.add(m);
                    proxy.step.set(step + 1);
                    if (step == 1) proxy.armed.set(true);   // from step 2 on: the victim dies at its next generation request
                    try {
                        if (proxy.killedAtStep.get() == step) fleet.restart(1);   // back before the next step's publication
                    } catch (IOException e) {
                        throw new RuntimeException(e);
                    }
                }
            });
            int k = proxy.killedAtStep.get();
            assertTrue(k >= 2 && k < steps, "server 1 was killed during a rollout (step " + k + ")");
            System.out.println("TrainFleetTest: server 1 killed during step " + k + "'s rollouts");
            assertEquals(steps, rows.size(), "every step completed");
            for (int s = 0; s < steps; s++) {
                Map<String, Object> m = rows.get(s);
                assertEquals(String.valueOf(s), m.get("rollout_weight_versions"), "step " + (s + 1) + " rolled out on the version published after step " + s);
                assertEquals(String.valueOf(s + 1), m.get("weight_version"), "published after step " + (s + 1));
                assertEquals(0, ((Number) m.get("infra_masked")).intValue(), "retried on the other server: nothing masked, step " + (s + 1));
                assertEquals(s + 1 == k ? 1 : 2, ((Number) m.get("fleet_loaded")).intValue(), "servers that loaded version " + (s + 1) + ": " + m);
            }
            assertTrue(fleet.alive(0) && fleet.alive(1));
        }
    }

    @Test
    void localFleetWithAsynchronousStepsBoundsTheStaleness(@TempDir Path dir) throws Exception {
        Path out = dir.resolve("run");
        int steps = 4;
        TrainingRun.Options o = TrainCommandTest.parsed(TrainCommandTest.concat(BASE, "--sft-steps", "2", "--steps", String.valueOf(steps),
                "--local-fleet", "1", "--async-steps", "1", "--out", out.toString()));
        List<Map<String, Object>> rows = new ArrayList<>();
        TrainingRun.run(o, new TrainingRun.Listener() {
            @Override
            public void step(String phase, int step, int total, Map<String, Object> m) {
                if (phase.equals("rl")) rows.add(m);
            }
        });
        assertTrue(Files.isRegularFile(out.resolve("weights").resolve("boot").resolve("config.json")), "the server's boot checkpoint");
        assertEquals(steps, rows.size());
        int stale = 0;
        for (int s = 0; s < steps; s++) {
            Map<String, Object> m = rows.get(s);
            int staleness = ((Number) m.get("rollout_staleness")).intValue();
            assertTrue(staleness >= 0 && staleness <= 1, "k = 1 bounds the staleness: step " + (s + 1) + " " + m);
            if (s == 0) assertEquals(0, staleness, "the first step's rollouts come from the start policy");
            stale += staleness;
            for (String v : ((String) m.get("rollout_weight_versions")).split(","))
                assertTrue(Integer.parseInt(v) >= s - 1 && Integer.parseInt(v) <= s, "step " + (s + 1) + " rolled out on version " + v);
            assertTrue(m.containsKey("old_logprob_abs_diff"), "asynchronous rollouts: the old log-probs are recomputed");
            assertEquals(String.valueOf(s + 1), m.get("weight_version"));
        }
        assertTrue(stale >= 1, "the next step's rollouts started before this step's weights were published");
        // the server is stopped with the run
        long left = ProcessHandle.current().descendants().filter(ProcessHandle::isAlive)
                .filter(p -> p.info().commandLine().orElse("").contains("ai.arbor.cli.Arbor serve")).count();
        assertEquals(0, left, "no arbor serve process outlives the run");
        IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> TrainCommandTest.parsed(TrainCommandTest.concat(BASE, "--async-steps", "1")));
        assertTrue(e.getMessage().contains("fleet"), e.getMessage());
    }
}
