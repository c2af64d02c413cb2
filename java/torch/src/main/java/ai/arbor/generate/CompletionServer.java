package ai.arbor.generate;

import ai.arbor.kernels.SamplingParams;
import ai.arbor.rollout.FinishReason;
import ai.arbor.rollout.Generation;
import ai.arbor.rollout.GenerationException;
import ai.arbor.rollout.GenerationLimits;
import ai.arbor.rollout.GenerationRequest;
import ai.arbor.rollout.TokenContext;
import ai.arbor.rollout.Tokenizer;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * An OpenAI-compatible completions server over a {@link LocalGenerator} ({@code arbor serve}): the
 * subset of vLLM's {@code POST /v1/completions} that RL rollouts use, so the HTTP generator
 * ({@code OpenAiCompatibleGenerator}) and other clients can drive a local checkpoint — the same code path
 * as a fleet of vLLM servers. Concurrent requests are decoded in one batch by the generator.
 *
 * <p>Request fields: {@code prompt} (a string, or a list of token ids), {@code max_tokens} (default 16),
 * {@code temperature} (default 1), {@code top_p}, {@code top_k} (−1 or 0 = off), {@code min_p} (0 = off), {@code seed},
 * {@code stop} (string or list), {@code stop_token_ids}, {@code logprobs} (top-k alternatives per
 * token, 0–20; the sampled token's logprob is always returned), {@code return_tokens_as_token_ids}
 * (tokens as {@code "token_id:N"}), {@code include_stop_str_in_output} (default false, as vLLM),
 * {@code model} (echoed). {@code n} must be 1, {@code echo} false and {@code stream} false — anything
 * else is a 400 with the reason. Response: vLLM's shape — {@code choices[0].text},
 * {@code logprobs.tokens / token_logprobs / top_logprobs / text_offset}, {@code finish_reason}
 * ("stop" | "length"), {@code stop_reason} (the stop string, or the stop token id), {@code usage}.
 * Logprobs are of the tempered, untruncated distribution (see {@link LocalGenerator}). Also
 * {@code GET /v1/models} and {@code GET /health}.
 */
public final class CompletionServer implements AutoCloseable {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final long MAX_BODY = 16 << 20;

    private final LocalGenerator generator;
    private final Tokenizer tokenizer;
    private final String model;
    private final HttpServer http;
    private final ExecutorService executor;
    private final Duration requestTimeout;
    private final AtomicLong ids = new AtomicLong();

    private CompletionServer(LocalGenerator generator, Tokenizer tokenizer, String model, InetSocketAddress address,
                             int threads, Duration requestTimeout) throws IOException {
        this.generator = generator;
        this.tokenizer = tokenizer;
        this.model = model;
        this.requestTimeout = requestTimeout;
        this.http = HttpServer.create(address, 256);
        AtomicInteger n = new AtomicInteger();
        this.executor = Executors.newFixedThreadPool(threads, r -> {
            Thread t = new Thread(r, "arbor-completions-http-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
        http.setExecutor(executor);
        http.createContext("/v1/completions", this::completions);
        http.createContext("/v1/models", ex -> {
            ObjectNode o = JSON.createObjectNode().put("object", "list");
            o.putArray("data").addObject().put("id", model).put("object", "model").put("owned_by", "arbor")
                    .put("max_model_len", 0);
            send(ex, 200, o);
        });
        http.createContext("/health", ex -> send(ex, 200, JSON.createObjectNode().put("status", "ok")));
        http.start();
    }

    /**
     * Serves {@code generator} on {@code host:port} (port 0 picks a free one). {@code threads} bounds the
     * requests in flight (each waits on its generation while the generator batches them).
     */
    public static CompletionServer start(LocalGenerator generator, Tokenizer tokenizer, String model, String host, int port,
                                         int threads, Duration requestTimeout) throws IOException {
        if (threads < 1) throw new IllegalArgumentException("threads must be >= 1, got " + threads);
        if (port < 0 || port > 65535) throw new IllegalArgumentException("port must be in [0, 65535], got " + port);
        return new CompletionServer(generator, tokenizer, model, new InetSocketAddress(host, port), threads, requestTimeout);
    }

    /** The bound port. */
    public int port() {
        return http.getAddress().getPort();
    }

    /** Base URL for clients, e.g. {@code http://127.0.0.1:8000}. */
    public String baseUrl() {
        return "http://" + http.getAddress().getHostString() + ":" + port();
    }

    @Override
    public void close() {
        http.stop(0);
        executor.shutdownNow();
    }

    // ---------------------------------------------------------------------------------------------

    /** A client error: answered with 400 and the message. */
    private static final class BadRequest extends Exception {
        private static final long serialVersionUID = 1L;

        BadRequest(String m) {
            super(m);
        }
    }

    private void completions(HttpExchange ex) throws IOException {
        try (ex) {
            if (!"POST".equals(ex.getRequestMethod())) {
                send(ex, 405, error("use POST", "invalid_request_error"));
                return;
            }
            JsonNode body;
            try (InputStream in = ex.getRequestBody()) {
                byte[] raw = in.readNBytes((int) MAX_BODY + 1);
                if (raw.length > MAX_BODY) throw new BadRequest("request body larger than " + MAX_BODY + " bytes");
                body = JSON.readTree(raw);
                if (body == null || !body.isObject()) throw new BadRequest("the body must be a JSON object");
                send(ex, 200, complete(body));
            } catch (BadRequest e) {
                send(ex, 400, error(e.getMessage(), "invalid_request_error"));
            } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
                send(ex, 400, error("malformed JSON: " + e.getOriginalMessage(), "invalid_request_error"));
            } catch (TimeoutException e) {
                send(ex, 504, error("generation did not finish within " + requestTimeout.toSeconds() + " s", "timeout"));
            } catch (ExecutionException e) {
                Throwable c = e.getCause();
                boolean bad = c instanceof GenerationException && c.getCause() instanceof IllegalArgumentException;
                send(ex, bad ? 400 : 500, error(String.valueOf(c.getMessage()), bad ? "invalid_request_error" : "server_error"));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                send(ex, 503, error("server shutting down", "server_error"));
            } catch (RuntimeException e) {
                send(ex, 500, error(e.toString(), "server_error"));
            }
        }
    }

    private ObjectNode complete(JsonNode b) throws BadRequest, InterruptedException, ExecutionException, TimeoutException {
        int[] prompt = prompt(b.get("prompt"));
        if (b.path("n").asInt(1) != 1) throw new BadRequest("only n = 1 is supported, got " + b.get("n"));
        if (b.path("echo").asBoolean(false)) throw new BadRequest("echo is not supported");
        if (b.path("stream").asBoolean(false)) throw new BadRequest("stream is not supported");
        int maxTokens = intField(b, "max_tokens", 16);
        double temperature = b.path("temperature").asDouble(1.0);
        double topP = b.path("top_p").asDouble(1.0);
        double minP = b.path("min_p").asDouble(0.0);
        int topK = intField(b, "top_k", -1);
        int logprobs = b.hasNonNull("logprobs") ? intField(b, "logprobs", 0) : 0;
        boolean ids = b.path("return_tokens_as_token_ids").asBoolean(false);
        boolean includeStop = b.path("include_stop_str_in_output").asBoolean(false);
        long seed = b.hasNonNull("seed") ? b.get("seed").asLong() : ids();
        List<String> stops = new ArrayList<>();
        JsonNode st = b.get("stop");
        if (st != null && !st.isNull()) {
            if (st.isTextual()) stops.add(st.asText());
            else if (st.isArray()) st.forEach(x -> stops.add(x.asText()));
            else throw new BadRequest("stop must be a string or a list of strings");
        }
        List<Integer> stopIds = new ArrayList<>();
        JsonNode sti = b.get("stop_token_ids");
        if (sti != null && sti.isArray()) for (JsonNode x : sti) stopIds.add(x.asInt());
        SamplingParams p;
        GenerationLimits l;
        try {
            p = new SamplingParams((float) temperature, topK < 0 ? 0 : topK, (float) topP, (float) minP);
            l = new GenerationLimits(maxTokens, stops, stopIds, logprobs);
        } catch (IllegalArgumentException e) {
            throw new BadRequest(e.getMessage());
        }
        LocalGenerator.Detailed d = generator.generateDetailed(new GenerationRequest(TokenContext.of(prompt), p, l, seed))
                .get(requestTimeout.toMillis(), TimeUnit.MILLISECONDS);
        return response(prompt.length, d, ids, includeStop);
    }

    private long ids() {
        return ids.incrementAndGet();
    }

    private int[] prompt(JsonNode p) throws BadRequest {
        if (p == null || p.isNull()) throw new BadRequest("prompt is required");
        if (p.isTextual()) return tokenizer.encode(p.asText());
        if (p.isArray() && p.size() == 1 && p.get(0).isArray()) p = p.get(0);  // [[ids]] with one prompt
        if (p.isArray() && p.size() == 1 && p.get(0).isTextual()) return tokenizer.encode(p.get(0).asText());
        if (p.isArray()) {
            int[] out = new int[p.size()];
            for (int i = 0; i < out.length; i++) {
                JsonNode t = p.get(i);
                if (!t.canConvertToInt()) throw new BadRequest("prompt[" + i + "] is not a token id: " + t);
                out[i] = t.asInt();
                if (out[i] < 0 || out[i] >= tokenizer.vocabSize())
                    throw new BadRequest("prompt[" + i + "] = " + out[i] + " is outside [0, " + tokenizer.vocabSize() + ")");
            }
            return out;
        }
        throw new BadRequest("prompt must be a string or a list of token ids (one prompt per request)");
    }

    private static int intField(JsonNode b, String name, int dflt) throws BadRequest {
        JsonNode v = b.get(name);
        if (v == null || v.isNull()) return dflt;
        if (!v.canConvertToInt()) throw new BadRequest(name + " must be an integer, got " + v);
        return v.asInt();
    }

    private ObjectNode response(int promptTokens, LocalGenerator.Detailed d, boolean asIds, boolean includeStop) {
        Generation g = d.generation();
        int n = g.length();
        // vLLM drops the stop string from the output unless include_stop_str_in_output: drop the tokens
        // that complete it (exact for character-level tokenizers; a token straddling the boundary is kept)
        if (g.finishReason() == FinishReason.STOP_STRING && !includeStop) {
            String full = tokenizer.decode(g.tokens(), 0, n);
            int cut = full.lastIndexOf(g.stopString());
            while (n > 0 && tokenizer.decode(g.tokens(), 0, n - 1).length() >= cut) n--;
        }
        ObjectNode root = JSON.createObjectNode();
        root.put("id", "cmpl-arbor-" + ids()).put("object", "text_completion")
                .put("created", System.currentTimeMillis() / 1000).put("model", model);
        ObjectNode c = root.putArray("choices").addObject();
        c.put("index", 0);
        c.put("text", tokenizer.decode(g.tokens(), 0, n));
        ObjectNode lp = c.putObject("logprobs");
        ArrayNode toks = lp.putArray("tokens"), tlp = lp.putArray("token_logprobs"), off = lp.putArray("text_offset");
        ArrayNode top = d.topIds() == null ? null : lp.putArray("top_logprobs");
        if (top == null) lp.putNull("top_logprobs");
        int offset = 0;
        for (int i = 0; i < n; i++) {
            String piece = tokenizer.decode(g.tokens(), i, i + 1);
            toks.add(asIds ? "token_id:" + g.tokens()[i] : piece);
            tlp.add(g.logprobs()[i]);
            off.add(offset);
            offset += piece.length();
            if (top != null) {
                ObjectNode alts = top.addObject();
                for (int j = 0; j < d.topIds()[i].length; j++) {
                    int id = d.topIds()[i][j];
                    alts.put(asIds ? "token_id:" + id : tokenizer.decode(new int[] {id}), d.topLogprobs()[i][j]);
                }
            }
        }
        switch (g.finishReason()) {
            case LENGTH -> c.put("finish_reason", "length").putNull("stop_reason");
            case STOP_STRING -> c.put("finish_reason", "stop").put("stop_reason", g.stopString());
            case STOP_TOKEN -> {
                c.put("finish_reason", "stop");
                if (g.stopTokenId() == tokenizer.eosId()) c.putNull("stop_reason");
                else c.put("stop_reason", g.stopTokenId());
            }
        }
        root.putObject("usage").put("prompt_tokens", promptTokens).put("completion_tokens", n)
                .put("total_tokens", promptTokens + n);
        return root;
    }

    private static ObjectNode error(String message, String type) {
        ObjectNode o = JSON.createObjectNode();
        o.putObject("error").put("message", message).put("type", type);
        return o;
    }

    private static void send(HttpExchange ex, int status, JsonNode body) throws IOException {
        byte[] b = JSON.writeValueAsBytes(body);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(status, b.length);
        try (OutputStream o = ex.getResponseBody()) {
            o.write(b);
        }
    }
}
