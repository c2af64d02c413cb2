package ai.arbor.generate;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.kernels.SamplingParams;
import ai.arbor.rollout.CharTokenizer;
import ai.arbor.rollout.Generation;
import ai.arbor.rollout.GenerationLimits;
import ai.arbor.rollout.GenerationRequest;
import ai.arbor.rollout.TokenContext;
import ai.arbor.testing.Seeds;
import ai.arbor.torch.model.CpuThreads;
import ai.arbor.torch.model.HfCheckpoint;
import ai.arbor.torch.model.PolicyConfig;
import ai.arbor.torch.model.ReferencePolicy;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code arbor serve}'s RL side, over HTTP: the n samples of one prompt share its prefill and equal
 * independent runs; {@code /update_weights_from_disk} switches to the new checkpoint's log-probs (checked
 * against the training forward of that checkpoint, an independent path from the KV-cache decode),
 * reports the new weight version in every response, lets a request in flight finish on the old weights,
 * and refuses a checkpoint of another model naming the field.
 */
class ServeWeightsTest {
    static final CharTokenizer TOK = CharTokenizer.ascii();
    static final ObjectMapper JSON = new ObjectMapper();
    static final HttpClient HTTP = HttpClient.newHttpClient();

    @TempDir
    static Path dir;

    @BeforeAll
    static void threads() {
        CpuThreads.set(1);
    }

    static PolicyConfig config(int vocab, int layers, long seed) {
        return HfCheckpoint.Family.QWEN3.config(vocab, 32, layers, 4, 2, 8, 64, 256, 1e6, 1e-6, false, false, seed);
    }

    static Path save(String name, PolicyConfig c) throws Exception {
        Path d = dir.resolve(name);
        try (ReferencePolicy p = ReferencePolicy.create(c)) {
            HfCheckpoint.save(p, d, HfCheckpoint.SaveOptions.defaults().withStoreAs(ScalarType.Float));
        }
        return d;
    }

    static JsonNode post(String url, String body, int status) throws Exception {
        HttpResponse<String> r = HTTP.send(HttpRequest.newBuilder(URI.create(url)).POST(HttpRequest.BodyPublishers.ofString(body))
                .header("Content-Type", "application/json").build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(status, r.statusCode(), body + " -> " + r.body());
        return JSON.readTree(r.body());
    }

    /** log softmax of the training forward's last-position logits at {@code token}: an independent path from the decode batch. */
    static double[] forwardLogprobs(ReferencePolicy p, int[] context) {
        try (PointerScope scope = new PointerScope()) {
            Tensor logits = p.forward(new int[][] {context});
            Tensor last = logits.select(0, 0).select(0, context.length - 1).narrow(0, 0, TOK.vocabSize()).to(ScalarType.Double);
            Tensor lp = torch.log_softmax(last, 0).contiguous();
            double[] out = new double[TOK.vocabSize()];
            new org.bytedeco.javacpp.DoublePointer(lp.data_ptr()).capacity(out.length).get(out);
            return out;
        }
    }

    @Test
    void nSamplesShareThePrefillAndEqualIndependentRuns() throws Exception {
        long seed = Seeds.seed("ServeWeightsTest.nSamples");
        Path a = save("n-a", config(TOK.vocabSize(), 2, seed));
        try (ReferencePolicy policy = ReferencePolicy.load(a, "cpu", ScalarType.Float);
             LocalGenerator local = new LocalGenerator(policy, TOK, LocalGenerator.Options.defaults());
             CompletionServer server = CompletionServer.start(local, TOK, CompletionServer.Options.basic("m", 256, 8, Duration.ofMinutes(1)),
                     "127.0.0.1", 0)) {
            String prompt = "n-sharing prompt #" + seed % 1000 + ": ";
            int[] ids = TOK.encode(prompt);
            LocalGenerator.Stats before = local.stats();
            JsonNode r = post(server.baseUrl() + "/v1/completions", "{\"prompt\":" + JSON.writeValueAsString(prompt)
                    + ",\"n\":4,\"seed\":" + (seed & 0xffffff) + ",\"max_tokens\":12,\"logprobs\":0,\"return_token_ids\":true}", 200);
            LocalGenerator.Stats after = local.stats();
            assertEquals(4, after.requests() - before.requests());
            assertEquals(ids.length, after.prefilledTokens() - before.prefilledTokens(), "the prompt is computed once for the 4 samples");
            assertEquals(0, after.reusedTokens() - before.reusedTokens());
            assertEquals(4, r.path("choices").size());
            int distinct = 0, total = 0;
            String first = null;
            for (int i = 0; i < 4; i++) {
                JsonNode c = r.path("choices").get(i);
                assertEquals(i, c.path("index").asInt());
                // sample i is the n = 1 request with seed + i, run alone (a fresh context: no cache shared with the group)
                Generation alone = local.generate(new GenerationRequest(TokenContext.of(ids), SamplingParams.temperature(1f),
                        GenerationLimits.defaults().withMaxNewTokens(12), (seed & 0xffffff) + i)).get();
                int[] got = JSON.convertValue(c.path("token_ids"), int[].class);
                assertArrayEquals(alone.tokens(), got, "sample " + i);
                total += got.length;
                for (int t = 0; t < got.length; t++)
                    assertEquals(alone.logprobs()[t], c.path("logprobs").path("token_logprobs").get(t).floatValue(), 1e-5f,
                            "sample " + i + " token " + t + " (a batch of 4 rounds differently from a batch of 1)");
                assertArrayEquals(ids, JSON.convertValue(c.path("prompt_token_ids"), int[].class));
                if (first == null) first = c.path("text").asText();
                else if (!first.equals(c.path("text").asText())) distinct++;
            }
            assertTrue(distinct > 0, "the samples differ");
            assertEquals(total, r.path("usage").path("completion_tokens").asInt());
        }
    }

    @Test
    void updateWeightsFromDiskSwitchesLogprobsAndVersionAndRefusesAnotherModel() throws Exception {
        long seed = Seeds.seed("ServeWeightsTest.updateWeights");
        Path a = save("a", config(TOK.vocabSize(), 2, seed));
        Path b = save("b", config(TOK.vocabSize(), 2, seed + 1));
        Path otherVocab = save("vocab", config(TOK.vocabSize() + 8, 2, seed));
        Path otherLayers = save("layers", config(TOK.vocabSize(), 3, seed));
        int[] prompt = TOK.encode("Q: 12+30=");
        String body = "{\"model\":\"m\",\"prompt\":" + JSON.writeValueAsString(prompt) + ",\"max_tokens\":6,\"temperature\":0,\"logprobs\":1,\"return_token_ids\":true}";
        try (ReferencePolicy served = ReferencePolicy.load(a, "cpu", ScalarType.Float);
             ReferencePolicy refA = ReferencePolicy.load(a, "cpu", ScalarType.Float);
             ReferencePolicy refB = ReferencePolicy.load(b, "cpu", ScalarType.Float);
             LocalGenerator local = new LocalGenerator(served, TOK, LocalGenerator.Options.defaults());
             CompletionServer server = CompletionServer.start(local, TOK, CompletionServer.Options.basic("m", 256, 8, Duration.ofMinutes(1))
                     .withWeights(CompletionServer.weightLoader(served, TOK, "cpu")), "127.0.0.1", 0)) {
            local.setWeightVersion("v0");
            JsonNode r0 = post(server.baseUrl() + "/v1/completions", body, 200);
            assertEquals("v0", r0.path("metadata").path("weight_version").asText());
            checkAgainst(refA, prompt, r0);

            // a long request in flight when the update arrives finishes on the old weights and says so
            String longBody = "{\"model\":\"m\",\"prompt\":" + JSON.writeValueAsString(prompt) + ",\"max_tokens\":150,\"temperature\":0,\"logprobs\":1,\"return_token_ids\":true}";
            long admitted = local.stats().requests();
            CompletableFuture<JsonNode> inFlight = CompletableFuture.supplyAsync(() -> {
                try {
                    return post(server.baseUrl() + "/v1/completions", longBody, 200);
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            while (local.stats().requests() == admitted) Thread.sleep(1);
            JsonNode up = post(server.baseUrl() + "/update_weights_from_disk", "{\"model_path\":" + JSON.writeValueAsString(b.toString())
                    + ",\"weight_version\":\"v1\"}", 200);
            assertTrue(up.path("success").asBoolean(), up.toString());
            assertEquals("v1", up.path("weight_version").asText());
            JsonNode old = inFlight.get();
            assertEquals("v0", old.path("metadata").path("weight_version").asText());
            checkAgainst(refA, prompt, old);

            JsonNode r1 = post(server.baseUrl() + "/v1/completions", body, 200);
            assertEquals("v1", r1.path("metadata").path("weight_version").asText());
            checkAgainst(refB, prompt, r1);
            assertNotEquals(r0.path("choices").get(0).path("logprobs").path("token_logprobs").get(0).asDouble(),
                    r1.path("choices").get(0).path("logprobs").path("token_logprobs").get(0).asDouble(), "the two models differ");
            HttpResponse<String> v = HTTP.send(HttpRequest.newBuilder(URI.create(server.baseUrl() + "/get_weight_version")).build(),
                    HttpResponse.BodyHandlers.ofString());
            assertEquals("v1", JSON.readTree(v.body()).path("weight_version").asText());

            // another model: refused, naming the field; the weights and the version stay
            JsonNode e1 = post(server.baseUrl() + "/update_weights_from_disk", "{\"model_path\":" + JSON.writeValueAsString(otherVocab.toString()) + "}", 400);
            assertTrue(e1.path("error").path("message").asText().contains("vocab_size is " + (TOK.vocabSize() + 8)), e1.toString());
            assertEquals("model_path", e1.path("error").path("param").asText());
            assertEquals(false, e1.path("success").asBoolean(true));
            JsonNode e2 = post(server.baseUrl() + "/update_weights_from_disk", "{\"model_path\":" + JSON.writeValueAsString(otherLayers.toString()) + "}", 400);
            assertTrue(e2.path("error").path("message").asText().contains("num_hidden_layers is 3, the served model's 2"), e2.toString());
            JsonNode e3 = post(server.baseUrl() + "/update_weights_from_disk", "{\"model_path\":" + JSON.writeValueAsString(dir.resolve("nowhere").toString()) + "}", 400);
            assertTrue(e3.path("error").path("message").asText().contains("does not exist"), e3.toString());
            post(server.baseUrl() + "/update_weights_from_disk", "{}", 400);
            JsonNode r2 = post(server.baseUrl() + "/v1/completions", body, 200);
            assertEquals("v1", r2.path("metadata").path("weight_version").asText());
            checkAgainst(refB, prompt, r2);

            // without weight_version the version counts the updates
            JsonNode up2 = post(server.baseUrl() + "/update_weights_from_disk", "{\"model_path\":" + JSON.writeValueAsString(a.toString()) + "}", 200);
            assertEquals("2", up2.path("weight_version").asText());
            JsonNode r3 = post(server.baseUrl() + "/v1/completions", body, 200);
            assertEquals("2", r3.path("metadata").path("weight_version").asText());
            checkAgainst(refA, prompt, r3);
        }
    }

    /**
     * A weight update while a generation runs and more requests keep arriving: the update happens once the
     * running generation is done (not only when no request is waiting), every request runs on one version's
     * weights and is labelled with it, the ones sent after the update returned run on the new weights, and
     * nothing hangs. Requests keep arriving until the update has returned, so the test does not depend on how
     * long the running generation takes next to the load of the new weights.
     */
    @Test
    void anUpdateWithRequestsArrivingMeanwhileCompletes() throws Exception {
        long seed = Seeds.seed("ServeWeightsTest.updateUnderLoad");
        Path a = save("load-a", config(TOK.vocabSize(), 2, seed));
        Path b = save("load-b", config(TOK.vocabSize(), 2, seed + 1));
        int[] prompt = TOK.encode("load: ");
        GenerationRequest shortReq = new GenerationRequest(TokenContext.of(prompt), SamplingParams.temperature(0f),
                GenerationLimits.defaults().withMaxNewTokens(4), 1);
        try (ReferencePolicy served = ReferencePolicy.load(a, "cpu", ScalarType.Float);
             ReferencePolicy refA = ReferencePolicy.load(a, "cpu", ScalarType.Float);
             ReferencePolicy refB = ReferencePolicy.load(b, "cpu", ScalarType.Float);
             LocalGenerator local = new LocalGenerator(served, TOK, LocalGenerator.Options.defaults())) {
            local.setWeightVersion("a");
            Runnable copy = CompletionServer.weightLoader(served, TOK, "cpu").load(b);
            CompletableFuture<LocalGenerator.Detailed> running = local.generateDetailed(new GenerationRequest(TokenContext.of(prompt),
                    SamplingParams.temperature(0f), GenerationLimits.defaults().withMaxNewTokens(200), 1));
            while (local.stats().requests() == 0) Thread.sleep(1);
            CompletableFuture<Void> update = CompletableFuture.runAsync(() -> local.updateWeights(copy, "b"));
            // requests keep arriving while the update waits for the running generation, and until it has returned
            List<CompletableFuture<LocalGenerator.Detailed>> meanwhile = new java.util.ArrayList<>();
            long deadline = System.nanoTime() + 60_000_000_000L;
            while (!update.isDone() && System.nanoTime() < deadline) {
                meanwhile.add(local.generateDetailed(shortReq));
                Thread.sleep(5);
            }
            update.get(1, java.util.concurrent.TimeUnit.SECONDS);
            assertTrue(running.isDone(), "the update returned only after the running generation finished");
            assertEquals("a", running.get().weightVersion(), "the running generation finished on the old weights");
            assertEquals("b", local.weightVersion());
            CompletableFuture<LocalGenerator.Detailed> after = local.generateDetailed(shortReq);
            meanwhile.add(after);
            for (CompletableFuture<LocalGenerator.Detailed> f : meanwhile) {
                LocalGenerator.Detailed d = f.get(60, java.util.concurrent.TimeUnit.SECONDS);
                ReferencePolicy ref = d.weightVersion().equals("a") ? refA : refB;
                double[] lp = forwardLogprobs(ref, prompt);
                assertEquals(lp[d.generation().tokens()[0]], d.generation().logprobs()[0], 2e-5, "version " + d.weightVersion() + "'s logprob");
            }
            assertEquals("b", after.join().weightVersion(), "a request sent after the update returned runs on the new weights");
            System.out.println("anUpdateWithRequestsArrivingMeanwhileCompletes: " + (meanwhile.size() - 1) + " requests sent during the update, "
                    + meanwhile.stream().filter(f -> f.join().weightVersion().equals("a")).count() + " of them on the old weights");
        }
    }

    /** Every returned token's logprob equals the reference model's training-forward log-softmax, and greedy picks its argmax. */
    static void checkAgainst(ReferencePolicy ref, int[] prompt, JsonNode response) {
        JsonNode c = response.path("choices").get(0);
        int[] got = JSON.convertValue(c.path("token_ids"), int[].class);
        assertTrue(got.length > 0);
        int[] ctx = prompt.clone();
        for (int t = 0; t < Math.min(got.length, 6); t++) {
            double[] lp = forwardLogprobs(ref, ctx);
            double want = lp[got[t]];
            assertEquals(want, c.path("logprobs").path("token_logprobs").get(t).asDouble(), 2e-5, "token " + t);
            for (int alt = 0; alt < TOK.vocabSize(); alt++)
                assertTrue(lp[alt] <= want + 1e-5, "greedy token " + t + " is the reference's argmax");
            ctx = java.util.Arrays.copyOf(ctx, ctx.length + 1);
            ctx[ctx.length - 1] = got[t];
        }
    }
}
