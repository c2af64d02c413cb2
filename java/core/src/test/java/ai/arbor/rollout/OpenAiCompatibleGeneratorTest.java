package ai.arbor.rollout;

import static org.junit.jupiter.api.Assertions.*;

import ai.arbor.kernels.SamplingParams;
import ai.arbor.tools.Observation;
import com.fasterxml.jackson.databind.JsonNode;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class OpenAiCompatibleGeneratorTest {
    static final Generation G = new Generation(new int[] {10, 11, 12}, new float[] {-0.5f, -1f, -0.25f}, null, FinishReason.STOP_STRING,
            "</python>", -1);

    static GenerationRequest request(int[] prompt, int maxNew, int topLogprobs) {
        GenerationLimits l = GenerationLimits.defaults().withMaxNewTokens(maxNew).withStopStrings(List.of("</python>"))
                .withStopTokenIds(List.of(2)).withTopLogprobs(topLogprobs);
        return new GenerationRequest(TokenContext.of(prompt), SamplingParams.temperature(0.7f).withTopP(0.9f).withTopK(5), l, 12345);
    }

    static OpenAiCompatibleGenerator.Builder client(String... urls) {
        OpenAiCompatibleGenerator.Builder b = OpenAiCompatibleGenerator.builder().model("m").vocabSize(2000).backoff(Duration.ofMillis(5),
                Duration.ofMillis(20)).unhealthyCooldown(Duration.ofMillis(500));
        for (String u : urls) b.baseUrl(u);
        return b;
    }

    static GenerationException failure(CompletableFuture<Generation> f) {
        CompletionException e = assertThrows(CompletionException.class, f::join);
        assertInstanceOf(GenerationException.class, e.getCause(), String.valueOf(e.getCause()));
        return (GenerationException) e.getCause();
    }

    @Test
    void requestShapeAndParsedIdsLogprobsAndEntropies() throws Exception {
        try (CompletionsServer s = CompletionsServer.vllm((req, i) -> new CompletionsServer.Reply(200, CompletionsServer.vllmBody(G, 2)))) {
            OpenAiCompatibleGenerator gen = client(s.baseUrl()).build();
            Generation g = gen.generate(request(new int[] {5, 6, 7}, 10, 2)).join();
            JsonNode r = s.requests.get(0);
            assertEquals("[5,6,7]", r.get("prompt").toString());
            assertEquals("m", r.get("model").asText());
            assertEquals(10, r.get("max_tokens").asInt());
            assertEquals(0.7, r.get("temperature").asDouble());
            assertEquals(0.9, r.get("top_p").asDouble());
            assertEquals(5, r.get("top_k").asInt());
            assertEquals(12345, r.get("seed").asInt());
            assertEquals("[\"</python>\"]", r.get("stop").toString());
            assertEquals("[2]", r.get("stop_token_ids").toString());
            assertEquals(2, r.get("logprobs").asInt());
            assertTrue(r.get("return_tokens_as_token_ids").asBoolean());
            assertTrue(r.get("include_stop_str_in_output").asBoolean());
            assertFalse(r.get("skip_special_tokens").asBoolean());
            assertEquals(1, r.get("n").asInt());
            assertFalse(r.has("min_p"), "min-p off: not sent");

            assertArrayEquals(new int[] {10, 11, 12}, g.tokens());
            assertArrayEquals(new float[] {-0.5f, -1f, -0.25f}, g.logprobs());
            assertEquals(FinishReason.STOP_STRING, g.finishReason());
            assertEquals("</python>", g.stopString());
            // top-2 entropy estimate −Σ p log p, by hand for position 0: {-0.5, -6}
            double h0 = -(Math.exp(-0.5) * -0.5 + Math.exp(-6) * -6);
            assertEquals(h0, g.entropies()[0], 1e-6);
            double h1 = -(Math.exp(-1) * -1 + Math.exp(-6) * -6);
            assertEquals(h1, g.entropies()[1], 1e-6);
            assertEquals(1, gen.attempts());

            // without top logprobs requested: no entropies, but logprobs still asked for (at least 1)
            Generation g2 = gen.generate(request(new int[] {1}, 10, 0)).join();
            assertNull(g2.entropies());
            assertEquals(1, s.requests.get(1).get("logprobs").asInt());

            // min-p on: sent as vLLM's min_p, the value as written
            GenerationRequest minP = request(new int[] {1}, 10, 0);
            gen.generate(new GenerationRequest(minP.context(), minP.sampling().withMinP(0.05f), minP.limits(), 1)).join();
            assertEquals(0.05, s.requests.get(2).get("min_p").asDouble());
        }
    }

    @Test
    void finishReasonsMapToTheirKinds() throws Exception {
        String[] bodies = {
            CompletionsServer.vllmBody(new Generation(new int[] {1, 2}, new float[] {-1, -1}, null, FinishReason.LENGTH, null, -1), 1),
            CompletionsServer.vllmBody(new Generation(new int[] {1, 2}, new float[] {-1, -1}, null, FinishReason.STOP_TOKEN, null, -1), 1),
            CompletionsServer.vllmBody(new Generation(new int[] {1, 2}, new float[] {-1, -1}, null, FinishReason.STOP_TOKEN, null, -1), 1)
                    .replace("\"stop_reason\":null", "\"stop_reason\":7")};
        try (CompletionsServer s = CompletionsServer.vllm((req, i) -> new CompletionsServer.Reply(200, bodies[i]))) {
            OpenAiCompatibleGenerator gen = client(s.baseUrl()).build();
            assertEquals(FinishReason.LENGTH, gen.generate(request(new int[] {1}, 2, 0)).join().finishReason());
            Generation eos = gen.generate(request(new int[] {1}, 2, 0)).join();
            assertEquals(FinishReason.STOP_TOKEN, eos.finishReason());
            assertEquals(2, eos.stopTokenId(), "EOS without stop_reason: the last token");
            assertEquals(7, gen.generate(request(new int[] {1}, 2, 0)).join().stopTokenId());
        }
    }

    @Test
    void invalidResponsesFailAtOnceWithoutRetrying() throws Exception {
        String ok = CompletionsServer.vllmBody(G, 1);
        String[] bad = {
            ok.replace("token_id:11", "hello"),                        // not token ids
            ok.replace("token_id:11", "token_id:99999"),               // outside the vocabulary
            ok.replace("\"token_logprobs\":[-0.5,", "\"token_logprobs\":[-0.5,-0.1,"),   // length mismatch
            ok.replace("-1.0,", "\"x\","),                             // non-numeric logprob
            ok.replace("\"finish_reason\":\"stop\"", "\"finish_reason\":\"weird\""),
            ok.replace("\"logprobs\":{", "\"nologprobs\":{"),
            "not json",
            "{\"choices\":[]}"};
        try (CompletionsServer s = CompletionsServer.vllm((req, i) -> new CompletionsServer.Reply(200, bad[i]))) {
            OpenAiCompatibleGenerator gen = client(s.baseUrl()).build();
            for (int i = 0; i < bad.length; i++) {
                GenerationException e = failure(gen.generate(request(new int[] {1}, 10, 0)));
                assertFalse(e.retryable(), "case " + i);
                assertTrue(e.getMessage().startsWith("invalid response from " + s.baseUrl()), e.getMessage());
            }
            assertEquals(bad.length, gen.attempts());
            // more tokens than asked for
            try (CompletionsServer s2 = CompletionsServer.vllm((req, i) -> new CompletionsServer.Reply(200, ok))) {
                GenerationException e = failure(client(s2.baseUrl()).build().generate(request(new int[] {1}, 2, 0)));
                assertTrue(e.getMessage().contains("3 tokens returned, more than max tokens = 2"), e.getMessage());
            }
        }
    }

    @Test
    void retriesOn5xxButNotOn4xx() throws Exception {
        try (CompletionsServer s = CompletionsServer.vllm((req, i) -> i < 2 ? new CompletionsServer.Reply(503, "{\"error\":\"busy\"}")
                : new CompletionsServer.Reply(200, CompletionsServer.vllmBody(G, 1)))) {
            OpenAiCompatibleGenerator gen = client(s.baseUrl()).build();
            assertArrayEquals(new int[] {10, 11, 12}, gen.generate(request(new int[] {1}, 10, 0)).join().tokens());
            assertEquals(3, gen.attempts());
            assertEquals(2, gen.retries());
        }
        try (CompletionsServer s = CompletionsServer.vllm((req, i) -> new CompletionsServer.Reply(400, "{\"error\":\"prompt too long\"}"))) {
            OpenAiCompatibleGenerator gen = client(s.baseUrl()).build();
            GenerationException e = failure(gen.generate(request(new int[] {1}, 10, 0)));
            assertFalse(e.retryable());
            assertTrue(e.getMessage().contains("HTTP 400") && e.getMessage().contains("prompt too long"), e.getMessage());
            assertEquals(1, gen.attempts());
        }
        try (CompletionsServer s = CompletionsServer.vllm((req, i) -> new CompletionsServer.Reply(500, "{}"))) {
            OpenAiCompatibleGenerator gen = client(s.baseUrl()).maxRetries(2).build();
            GenerationException e = failure(gen.generate(request(new int[] {1}, 10, 0)));
            assertTrue(e.retryable());
            assertTrue(e.getMessage().contains("after 3 attempts"), e.getMessage());
            assertEquals(3, s.requests.size());
        }
    }

    @Test
    void aSlowServerTimesOutAndIsRetriedThenReported() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        try (CompletionsServer s = CompletionsServer.vllm((req, i) -> {
            release.await(5, TimeUnit.SECONDS);
            return new CompletionsServer.Reply(200, CompletionsServer.vllmBody(G, 1));
        })) {
            OpenAiCompatibleGenerator gen = client(s.baseUrl()).requestTimeout(Duration.ofMillis(300)).maxRetries(1).build();
            long t0 = System.nanoTime();
            GenerationException e = failure(gen.generate(request(new int[] {1}, 10, 0)));
            double secs = (System.nanoTime() - t0) / 1e9;
            assertTrue(e.retryable());
            assertTrue(e.getMessage().contains("timeout"), e.getMessage());
            assertEquals(2, gen.attempts());
            System.out.println("slow-server client secs=" + secs);
            assertTrue(secs < 4, "two 300 ms attempts must not wait for the server: " + secs + " s");
            release.countDown();
        } finally {
            release.countDown();
        }
    }

    /** A server that accepts, reads the request, then closes the connection: without answering, or mid-body. */
    static final class DyingServer implements AutoCloseable {
        final ServerSocket socket;
        final AtomicInteger connections = new AtomicInteger();
        final Thread thread;

        DyingServer(boolean midBody) throws Exception {
            socket = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
            thread = new Thread(() -> {
                while (!socket.isClosed()) {
                    try (Socket c = socket.accept()) {
                        connections.incrementAndGet();
                        InputStream in = c.getInputStream();
                        byte[] buf = new byte[8192];
                        in.read(buf);   // part of the request
                        if (midBody) {
                            OutputStream out = c.getOutputStream();
                            out.write("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n{\"choices\":[{\"ind"
                                    .getBytes(StandardCharsets.US_ASCII));
                            out.flush();
                        }
                    } catch (Exception e) {
                        // closed
                    }
                }
            });
            thread.setDaemon(true);
            thread.start();
        }

        String baseUrl() {
            return "http://127.0.0.1:" + socket.getLocalPort();
        }

        @Override
        public void close() throws java.io.IOException {
            socket.close();
        }
    }

    @Test
    void aServerThatDiesMidRequestFailsOverToAHealthyOne() throws Exception {
        for (boolean midBody : new boolean[] {false, true}) {
            try (DyingServer dying = new DyingServer(midBody);
                 CompletionsServer good = CompletionsServer.vllm((req, i) -> new CompletionsServer.Reply(200, CompletionsServer.vllmBody(G, 1)))) {
                OpenAiCompatibleGenerator gen = client(dying.baseUrl(), good.baseUrl()).prefixAffinity(false).build();
                List<CompletableFuture<Generation>> fs = new ArrayList<>();
                for (int i = 0; i < 20; i++) fs.add(gen.generate(request(new int[] {i + 1}, 10, 0)));
                for (CompletableFuture<Generation> f : fs) assertArrayEquals(new int[] {10, 11, 12}, f.join().tokens());
                assertTrue(dying.connections.get() >= 1, "some request must have hit the dying server");
                assertEquals(dying.connections.get(), gen.retries(), "each failure retried once, on the healthy server");
                assertEquals(20, good.requests.size());
            }
            // alone, it fails with a clear exception after the retries, without hanging
            try (DyingServer dying = new DyingServer(midBody)) {
                OpenAiCompatibleGenerator gen = client(dying.baseUrl()).maxRetries(2).build();
                GenerationException e = failure(gen.generate(request(new int[] {1}, 10, 0)));
                assertTrue(e.retryable());
                assertTrue(e.getMessage().contains(dying.baseUrl()) && e.getMessage().contains("after 3 attempts"), e.getMessage());
                assertEquals(3, dying.connections.get());
            }
        }
        // nobody listening: connection refused is retried and reported
        int port;
        try (ServerSocket ss = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = ss.getLocalPort();
        }
        GenerationException e = failure(client("http://127.0.0.1:" + port).maxRetries(1).build().generate(request(new int[] {1}, 10, 0)));
        assertTrue(e.getMessage().contains("after 2 attempts"), e.getMessage());
    }

    @Test
    void concurrencyIsLimitedWithoutBlockingThreads() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        try (CompletionsServer s = CompletionsServer.vllm((req, i) -> {
            release.await(10, TimeUnit.SECONDS);
            return new CompletionsServer.Reply(200, CompletionsServer.vllmBody(G, 1));
        })) {
            OpenAiCompatibleGenerator gen = client(s.baseUrl()).maxConcurrentRequests(2).build();
            List<CompletableFuture<Generation>> fs = new ArrayList<>();
            for (int i = 0; i < 6; i++) fs.add(gen.generate(request(new int[] {1}, 10, 0)));
            long deadline = System.nanoTime() + 5_000_000_000L;
            while (s.inFlight.get() < 2 && System.nanoTime() < deadline) Thread.sleep(10);
            Thread.sleep(200);
            assertEquals(2, s.inFlight.get());
            assertEquals(4, gen.queued());
            release.countDown();
            for (CompletableFuture<Generation> f : fs) f.join();
            assertEquals(2, s.maxInFlight.get());
            assertEquals(6, s.requests.size());
        }
    }

    @Test
    void loadBalancingByPrefixAffinityOrLeastLoaded() throws Exception {
        try (CompletionsServer a = CompletionsServer.vllm((req, i) -> new CompletionsServer.Reply(200, CompletionsServer.vllmBody(G, 1)));
             CompletionsServer b = CompletionsServer.vllm((req, i) -> new CompletionsServer.Reply(200, CompletionsServer.vllmBody(G, 1)))) {
            OpenAiCompatibleGenerator gen = client(a.baseUrl(), b.baseUrl()).build();
            TokenContext root = TokenContext.of(new int[] {1, 2, 3});
            for (int i = 0; i < 10; i++) {
                TokenContext branch = root.extend(new int[] {i});
                gen.generate(new GenerationRequest(branch, SamplingParams.temperature(0.7f), request(new int[] {1}, 10, 0).limits(), i)).join();
            }
            assertTrue(a.requests.size() == 10 || b.requests.size() == 10, "one prompt's paths stay on one server: " + a.requests.size());
            for (int i = 0; i < 40; i++) gen.generate(request(new int[] {i}, 10, 0)).join();
            assertTrue(a.requests.size() > 10 && b.requests.size() > 10 || a.requests.size() >= 10 && b.requests.size() >= 10,
                    "different prompts spread over servers: " + a.requests.size() + " / " + b.requests.size());

            OpenAiCompatibleGenerator rr = client(a.baseUrl(), b.baseUrl()).prefixAffinity(false).build();
            int a0 = a.requests.size(), b0 = b.requests.size();
            for (int i = 0; i < 10; i++) rr.generate(new GenerationRequest(root, SamplingParams.temperature(0.7f), request(new int[] {1}, 10, 0).limits(), i)).join();
            assertEquals(5, a.requests.size() - a0);
            assertEquals(5, b.requests.size() - b0);
        }
    }

    @Test
    void sglangDialect() throws Exception {
        String body = "{\"text\":\"x\",\"output_ids\":[10,11],\"meta_info\":{\"finish_reason\":{\"type\":\"stop\",\"matched\":\"</search>\"},"
                + "\"output_token_logprobs\":[[-0.5,10,null],[-1.0,11,null]],"
                + "\"output_top_logprobs\":[[[-0.5,10,null],[-2.0,3,null]],[[-1.0,11,null],[-1.5,4,null]]]}}";
        try (CompletionsServer s = CompletionsServer.sglang((req, i) -> new CompletionsServer.Reply(200, body))) {
            OpenAiCompatibleGenerator gen = client(s.baseUrl()).dialect(OpenAiCompatibleGenerator.Dialect.SGLANG_GENERATE).build();
            Generation g = gen.generate(request(new int[] {5, 6}, 10, 2)).join();
            JsonNode r = s.requests.get(0);
            assertEquals("[5,6]", r.get("input_ids").toString());
            assertEquals(10, r.get("sampling_params").get("max_new_tokens").asInt());
            assertTrue(r.get("sampling_params").get("no_stop_trim").asBoolean());
            assertEquals(12345, r.get("sampling_params").get("sampling_seed").asInt());
            assertTrue(r.get("return_logprob").asBoolean());
            assertEquals(2, r.get("top_logprobs_num").asInt());
            assertArrayEquals(new int[] {10, 11}, g.tokens());
            assertArrayEquals(new float[] {-0.5f, -1f}, g.logprobs());
            assertEquals(FinishReason.STOP_STRING, g.finishReason());
            assertEquals("</search>", g.stopString());
            assertEquals(-(Math.exp(-0.5) * -0.5 + Math.exp(-2) * -2), g.entropies()[0], 1e-6);
        }
    }

    @Test
    void badConfigurationIsRefused() {
        assertThrows(IllegalArgumentException.class, () -> OpenAiCompatibleGenerator.builder().build());
        assertThrows(IllegalArgumentException.class, () -> OpenAiCompatibleGenerator.builder().baseUrl("ftp://x").build());
        assertThrows(IllegalArgumentException.class, () -> OpenAiCompatibleGenerator.builder().maxConcurrentRequests(0));
        assertThrows(IllegalArgumentException.class, () -> OpenAiCompatibleGenerator.builder().requestTimeout(Duration.ZERO));
    }

    @Test
    void rolloutsRunOverHttp() throws Exception {
        CharTokenizer tok = CharTokenizer.ascii();
        ScriptedGenerator script = new ScriptedGenerator(tok, AgentLoopTest.calls("print(1)"));
        try (CompletionsServer s = CompletionsServer.vllm((req, i) ->
                new CompletionsServer.Reply(200, CompletionsServer.vllmBody(script.generateNow(CompletionsServer.request(req)), 1)));
             RolloutEngine engine = RolloutEngine.builder().generator(client(s.baseUrl()).vocabSize(tok.vocabSize()).build()).tokenizer(tok)
                     .format(TagToolCallFormat.arpo()).tools(ToolProvider.shared(TestTools.echo("python")))
                     .config(AgentConfig.builder().maxNewTokens(100).build()).toolThreads(2).build()) {
            List<Prompt> prompts = List.of(new Prompt("a", tok.encode("Q1\n"), null, Map.of()), new Prompt("b", tok.encode("Q2\n"), null, Map.of()));
            RolloutBatch<?> batch = engine.run(prompts, (p, ctx) -> ctx.loop().run(p, ctx.promptContext(), ctx.seed(), ctx.meter()).thenApply(t -> new GroupRollout() {
                public Prompt prompt() {
                    return p;
                }

                public List<Trajectory> trajectories() {
                    return List.of(t);
                }

                public RolloutCost cost() {
                    return ctx.meter().cost();
                }
            }), 3);
            Set<String> texts = new HashSet<>();
            for (Trajectory t : batch.trajectories()) {
                assertEquals(Termination.ANSWER, t.termination());
                texts.add(t.responseText(tok));
            }
            assertEquals(Set.of("t0 <python>print(1)</python> <result>\nout:print(1)\n</result>so \\boxed{42}"), texts);
            assertEquals(4, s.requests.size());
            assertEquals(batch.cost().generatedTokens(), script.tokensGenerated());
        }
    }
}
