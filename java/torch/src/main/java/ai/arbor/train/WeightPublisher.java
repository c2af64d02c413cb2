package ai.arbor.train;

import ai.arbor.rollout.OpenAiCompatibleGenerator;
import ai.arbor.torch.model.HfCheckpoint;
import ai.arbor.torch.model.ReferencePolicy;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.stream.Stream;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * Weight sync for a generation fleet (docs/fleet.md; ARCHITECTURE "Scale-out"): after an optimizer step the
 * trainer writes its policy in the Hugging Face layout to a versioned directory — assembled beside it and
 * moved into place, so a server never reads a half-written checkpoint — and tells every server to load it with
 * SGLang's {@code POST /update_weights_from_disk} ({@code {"model_path": …, "weight_version": …}}, what
 * {@code arbor serve} and SGLang accept), in parallel, waiting for each up to a timeout.
 *
 * <p>A server that fails (connection refused, timeout, HTTP error, {@code success: false}, or another
 * version reported back) is taken out of the generator's rotation: no generation request goes to it. Every
 * later publication asks it again, so a restarted server rejoins at the current version. A publication that
 * no server loads is an {@link IOException} naming each server's failure: rolling out on stale weights
 * would silently turn on-policy training off-policy.
 *
 * <p>Weights are written in fp32 so that a server running the same kernels on the same device reproduces
 * the trainer's log-probs bit for bit (tested: {@code WeightPublisherTest}). The last {@code keep}
 * versions stay on disk; older ones are deleted after a publication.
 */
public final class WeightPublisher {
    private static final ObjectMapper JSON = new ObjectMapper();

    /**
     * One publication.
     *
     * @param version       the weight version the servers were told
     * @param dir           where the weights are
     * @param writeSeconds  writing the checkpoint
     * @param reloadSeconds from the first request to the last server's answer
     * @param loaded        the servers that report {@code version} (in rotation)
     * @param failed        the others, with why (out of rotation)
     */
    public record Report(String version, Path dir, double writeSeconds, double reloadSeconds, List<String> loaded,
                         Map<String, String> failed) {}

    private final Path root;
    private final OpenAiCompatibleGenerator generator;
    private final Duration timeout;
    private final int keep;
    private final HfCheckpoint.SaveOptions save;
    private final HttpClient http;
    private String current;

    /**
     * @param root         directory of the versions ({@code root/step-000001}, …)
     * @param generator    the fleet's generator (its servers are asked; the failing ones leave its rotation)
     * @param timeout      how long one server may take to load a version
     * @param keep         versions kept on disk (≥ 1)
     * @param tokenizerDir the tokenizer files copied beside the weights (a Hugging Face model directory), or null
     */
    public WeightPublisher(Path root, OpenAiCompatibleGenerator generator, Duration timeout, int keep, Path tokenizerDir) {
        if (root == null || generator == null) throw new IllegalArgumentException("root and generator are required");
        if (timeout == null || timeout.isNegative() || timeout.isZero()) throw new IllegalArgumentException("timeout must be positive, got " + timeout);
        if (keep < 1) throw new IllegalArgumentException("keep must be >= 1, got " + keep);
        this.root = root;
        this.generator = generator;
        this.timeout = timeout;
        this.keep = keep;
        HfCheckpoint.SaveOptions s = HfCheckpoint.SaveOptions.defaults().withStoreAs(ScalarType.Float);
        this.save = tokenizerDir != null ? s.withTokenizer(tokenizerDir) : s;
        this.http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).version(HttpClient.Version.HTTP_1_1).build();
    }

    /** The directory of version {@code step}. */
    public Path dir(long step) {
        return root.resolve(String.format("step-%06d", step));
    }

    /** The version of the last publication that a server loaded, or null before the first. */
    public synchronized String currentVersion() {
        return current;
    }

    /**
     * Writes {@code policy} as version {@code step} and has every server load it (see the class comment).
     *
     * @throws IOException when the checkpoint cannot be written or no server loads it
     */
    public synchronized Report publish(ReferencePolicy policy, long step) throws IOException {
        if (step < 0) throw new IllegalArgumentException("step must be >= 0, got " + step);
        String version = String.valueOf(step);
        Path dir = dir(step);
        Files.createDirectories(root);
        long t0 = System.nanoTime();
        HfCheckpoint.save(policy, dir, save);
        long t1 = System.nanoTime();
        List<String> urls = generator.baseUrls();
        List<CompletableFuture<String>> answers = new ArrayList<>();
        for (String url : urls) answers.add(update(url, dir, version));
        List<String> loaded = new ArrayList<>();
        Map<String, String> failed = new LinkedHashMap<>();
        for (int i = 0; i < urls.size(); i++) {
            String why = answers.get(i).join();
            boolean ok = why == null;
            generator.setInRotation(urls.get(i), ok);
            if (ok) loaded.add(urls.get(i));
            else failed.put(urls.get(i), why);
        }
        long t2 = System.nanoTime();
        if (loaded.isEmpty())
            throw new IOException("no generation server loaded weight version " + version + " (" + dir + "): " + failed);
        current = version;
        prune(step);
        return new Report(version, dir, (t1 - t0) / 1e9, (t2 - t1) / 1e9, List.copyOf(loaded), Map.copyOf(failed));
    }

    /** Asks one server to load {@code dir} as {@code version}; completes with null on success, else why not. */
    private CompletableFuture<String> update(String base, Path dir, String version) {
        String body;
        try {
            body = JSON.writeValueAsString(Map.of("model_path", dir.toAbsolutePath().toString(), "weight_version", version));
        } catch (IOException e) {
            return CompletableFuture.completedFuture("cannot encode the request: " + e.getMessage());
        }
        HttpRequest req;
        try {
            req = HttpRequest.newBuilder(URI.create(base + "/update_weights_from_disk")).timeout(timeout)
                    .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build();
        } catch (IllegalArgumentException e) {
            return CompletableFuture.completedFuture("bad URL " + base + ": " + e.getMessage());
        }
        return http.sendAsync(req, HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8)).handle((resp, err) -> {
            if (err != null) {
                Throwable c = err.getCause() != null ? err.getCause() : err;
                if (c instanceof HttpTimeoutException) return "no answer within " + timeout.toMillis() + " ms";
                if (c instanceof ConnectException) return "connection refused";
                return c.getClass().getSimpleName() + ": " + c.getMessage();
            }
            String text = resp.body();
            String excerpt = text.length() > 300 ? text.substring(0, 300) + "…" : text;
            if (resp.statusCode() != 200) return "HTTP " + resp.statusCode() + ": " + excerpt;
            try {
                JsonNode j = JSON.readTree(text);
                if (j == null || !j.path("success").asBoolean(false)) return "success is not true: " + excerpt;
                JsonNode v = j.get("weight_version");
                if (v != null && !v.isNull() && !v.asText().equals(version))
                    return "reports weight version " + v.asText() + " after loading " + version;
                return null;
            } catch (IOException e) {
                return "not JSON: " + excerpt;
            }
        });
    }

    /** Deletes the versions before the last {@code keep} (never {@code step}'s). */
    private void prune(long step) {
        List<Path> versions = new ArrayList<>();
        try (Stream<Path> s = Files.list(root)) {
            s.filter(p -> p.getFileName().toString().matches("step-\\d{6,}") && Files.isDirectory(p)).forEach(versions::add);
        } catch (IOException e) {
            return;  // pruning is housekeeping: the publication stands
        }
        versions.sort(Comparator.comparing(p -> p.getFileName().toString()));
        for (int i = 0; i < versions.size() - keep; i++) {
            if (versions.get(i).equals(dir(step))) continue;
            try {
                Checkpoint.deleteTree(versions.get(i));
            } catch (IOException ignored) {
                // left for the next publication
            }
        }
    }

}
