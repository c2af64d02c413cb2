package ai.arbor.rollout;

import ai.arbor.kernels.SamplingParams;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A loopback HTTP server that speaks vLLM's documented completions response shape
 * ({@code POST /v1/completions} with {@code return_tokens_as_token_ids}) or SGLang's {@code /generate}.
 * A handler maps the parsed request to a response (status + JSON); helpers build the vLLM / SGLang
 * bodies from a {@link Generation}.
 */
final class CompletionsServer implements AutoCloseable {
    static final ObjectMapper JSON = new ObjectMapper();

    static {
        // The JDK server otherwise waits for delayed ACKs (~40 ms per small response).
        System.setProperty("sun.net.httpserver.nodelay", "true");
    }

    /** A response: HTTP status and body. */
    record Reply(int status, String body) {}

    interface Handler {
        Reply handle(JsonNode request, int index) throws Exception;
    }

    private final HttpServer server;
    private final ExecutorService pool = Executors.newCachedThreadPool();
    final List<JsonNode> requests = Collections.synchronizedList(new ArrayList<>());
    final AtomicInteger inFlight = new AtomicInteger(), maxInFlight = new AtomicInteger();

    CompletionsServer(String path, Handler handler) throws IOException {
        server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 64);
        server.setExecutor(pool);
        server.createContext(path, ex -> serve(ex, handler));
        server.start();
    }

    static CompletionsServer vllm(Handler h) throws IOException {
        return new CompletionsServer("/v1/completions", h);
    }

    static CompletionsServer sglang(Handler h) throws IOException {
        return new CompletionsServer("/generate", h);
    }

    String baseUrl() {
        return "http://127.0.0.1:" + server.getAddress().getPort();
    }

    private void serve(HttpExchange ex, Handler handler) throws IOException {
        int now = inFlight.incrementAndGet();
        maxInFlight.accumulateAndGet(now, Math::max);
        try {
            JsonNode req = JSON.readTree(ex.getRequestBody().readAllBytes());
            int index;
            synchronized (requests) {
                index = requests.size();
                requests.add(req);
            }
            Reply r;
            try {
                r = handler.handle(req, index);
            } catch (Exception e) {
                r = new Reply(500, "{\"error\":\"" + e + "\"}");
            }
            byte[] b = r.body().getBytes(StandardCharsets.UTF_8);
            ex.getResponseHeaders().add("Content-Type", "application/json");
            ex.sendResponseHeaders(r.status(), b.length);
            try (OutputStream os = ex.getResponseBody()) {
                os.write(b);
            }
        } catch (IOException e) {
            // the client went away (timeout test): nothing to do
        } finally {
            inFlight.decrementAndGet();
            ex.close();
        }
    }

    /** vLLM's completions body for {@code g} (top logprobs: the sampled token plus {@code extra}). */
    static String vllmBody(Generation g, int topK) {
        ObjectNode root = JSON.createObjectNode();
        root.put("id", "cmpl-test");
        root.put("object", "text_completion");
        root.put("created", 0);
        root.put("model", "test");
        ObjectNode c = root.putArray("choices").addObject();
        c.put("index", 0);
        c.put("text", "(text is not used)");
        ObjectNode lp = c.putObject("logprobs");
        ArrayNode tokens = lp.putArray("tokens"), tlp = lp.putArray("token_logprobs"), top = lp.putArray("top_logprobs"),
                off = lp.putArray("text_offset");
        for (int i = 0; i < g.length(); i++) {
            tokens.add("token_id:" + g.tokens()[i]);
            tlp.add(g.logprobs()[i]);
            off.add(i);
            ObjectNode d = top.addObject();
            d.put("token_id:" + g.tokens()[i], g.logprobs()[i]);
            for (int j = 1; j < topK; j++) d.put("token_id:" + (1000 + j), -5.0 - j);
        }
        switch (g.finishReason()) {
            case LENGTH -> {
                c.put("finish_reason", "length");
                c.putNull("stop_reason");
            }
            case STOP_STRING -> {
                c.put("finish_reason", "stop");
                c.put("stop_reason", g.stopString());
            }
            case STOP_TOKEN -> {
                c.put("finish_reason", "stop");
                c.putNull("stop_reason");   // EOS: vLLM reports no stop_reason
            }
        }
        root.putObject("usage").put("completion_tokens", g.length());
        return root.toString();
    }

    /** The {@link GenerationRequest} a vLLM body describes (to drive a {@link ScriptedGenerator} behind HTTP). */
    static GenerationRequest request(JsonNode body) {
        int[] ids = new int[body.get("prompt").size()];
        for (int i = 0; i < ids.length; i++) ids[i] = body.get("prompt").get(i).asInt();
        List<String> stops = new ArrayList<>();
        if (body.has("stop")) body.get("stop").forEach(s -> stops.add(s.asText()));
        GenerationLimits l = GenerationLimits.defaults().withMaxNewTokens(body.get("max_tokens").asInt()).withStopStrings(stops);
        return new GenerationRequest(TokenContext.of(ids), SamplingParams.temperature(body.get("temperature").floatValue()), l,
                body.get("seed").asLong());
    }

    @Override
    public void close() {
        server.stop(0);
        pool.shutdownNow();
    }
}
