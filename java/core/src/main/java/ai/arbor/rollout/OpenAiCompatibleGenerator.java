package ai.arbor.rollout;

import ai.arbor.kernels.SamplingParams;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.channels.ClosedChannelException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A {@link Generator} over inference servers' HTTP APIs: vLLM's OpenAI-compatible completions endpoint
 * ({@code POST /v1/completions}) or SGLang's native {@code POST /generate}. The prompt is sent as token
 * ids and the generated ids come back as ids (vLLM {@code return_tokens_as_token_ids}; SGLang
 * {@code output_token_logprobs}), so nothing is re-tokenized. Per token: the sampled token's logprob
 * and, when {@code topLogprobs > 0}, the top-k entropy estimate −Σ_{top-k} p log p (ARPO's).
 *
 * <p>Several base URLs are load-balanced: with prefix affinity (default) the paths of one prompt go to
 * one server (rendezvous hashing on {@link TokenContext#rootId()}), where its prefix cache already holds
 * the prompt and the tree's shared steps; otherwise, to the server with the fewest requests in flight.
 * A connection failure, a reset or dropped connection (a server dying mid-request), a request timeout,
 * a 5xx or 429 marks the server unhealthy for a cool-down and the request is retried — on another
 * server when there is one — with exponential backoff, up to {@code maxRetries} times. A 4xx or an
 * invalid response fails at once (retrying cannot fix it). Responses are validated: token ids parse and
 * lie in the vocabulary, one finite logprob per token, no more tokens than asked for, a known finish
 * reason.
 *
 * <p>Seeds are sent as non-negative 31-bit integers (every server accepts those).
 */
public final class OpenAiCompatibleGenerator implements Generator {
    /** Wire protocol. */
    public enum Dialect {
        /** vLLM {@code POST {base}/v1/completions} (OpenAI completions + vLLM extensions). */
        VLLM_COMPLETIONS,
        /** SGLang {@code POST {base}/generate} (native API). */
        SGLANG_GENERATE
    }

    private static final ObjectMapper JSON = new ObjectMapper();

    private static final class Server {
        final URI endpoint;
        final String base;
        final AtomicInteger inFlight = new AtomicInteger();
        final AtomicLong unhealthyUntilNanos = new AtomicLong(Long.MIN_VALUE);
        volatile boolean inRotation = true;

        Server(URI endpoint, String base) {
            this.endpoint = endpoint;
            this.base = base;
        }

        boolean healthy(long now) {
            return now - unhealthyUntilNanos.get() >= 0;
        }
    }

    private final List<Server> servers;
    private final Dialect dialect;
    private final String model;
    private final String apiKey;
    private final HttpClient http;
    private final Duration requestTimeout;
    private final int maxRetries;
    private final Duration initialBackoff, maxBackoff, cooldown;
    private final int vocabSize;
    private final boolean prefixAffinity;
    private final Map<String, Object> extraBody;
    private final AsyncLimiter limiter;
    private final AtomicInteger roundRobin = new AtomicInteger();
    private final AtomicLong requests = new AtomicLong(), attempts = new AtomicLong(), retries = new AtomicLong();

    private OpenAiCompatibleGenerator(Builder b) {
        if (b.baseUrls.isEmpty()) throw new IllegalArgumentException("at least one base URL is required");
        this.dialect = b.dialect;
        List<Server> s = new ArrayList<>();
        for (String u : b.baseUrls) {
            String base = u.endsWith("/") ? u.substring(0, u.length() - 1) : u;
            URI uri;
            try {
                uri = URI.create(base + (dialect == Dialect.VLLM_COMPLETIONS ? "/v1/completions" : "/generate"));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("invalid base URL '" + u + "': " + e.getMessage(), e);
            }
            if (uri.getScheme() == null || !(uri.getScheme().equals("http") || uri.getScheme().equals("https")) || uri.getHost() == null)
                throw new IllegalArgumentException("base URL must be http(s)://host[:port][/path], got '" + u + "'");
            s.add(new Server(uri, base));
        }
        this.servers = List.copyOf(s);
        this.model = b.model;
        this.apiKey = b.apiKey;
        this.requestTimeout = b.requestTimeout;
        this.maxRetries = b.maxRetries;
        this.initialBackoff = b.initialBackoff;
        this.maxBackoff = b.maxBackoff;
        this.cooldown = b.cooldown;
        this.vocabSize = b.vocabSize;
        this.prefixAffinity = b.prefixAffinity;
        this.extraBody = Map.copyOf(b.extraBody);
        this.limiter = new AsyncLimiter(b.maxConcurrentRequests);
        this.http = HttpClient.newBuilder().connectTimeout(b.connectTimeout).version(HttpClient.Version.HTTP_1_1).build();
    }

    public static Builder builder() {
        return new Builder();
    }

    @Override
    public CompletableFuture<Generation> generate(GenerationRequest request) {
        if (request == null) throw new IllegalArgumentException("request must not be null");
        requests.incrementAndGet();
        byte[] body;
        try {
            body = JSON.writeValueAsBytes(requestBody(request));
        } catch (IOException e) {
            return CompletableFuture.failedFuture(new GenerationException("could not serialize the request", false, e));
        }
        return limiter.run(() -> attempt(request, body, 0, null));
    }

    private CompletableFuture<Generation> attempt(GenerationRequest request, byte[] body, int attempt, Server avoid) {
        Server server = choose(request, avoid);
        if (server == null)
            return CompletableFuture.failedFuture(new GenerationException("no generation server is in rotation (every one of "
                    + baseUrls() + " was taken out, e.g. after a failed weight update)", false, null));
        attempts.incrementAndGet();
        HttpRequest.Builder hb = HttpRequest.newBuilder(server.endpoint).timeout(requestTimeout).header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofByteArray(body));
        if (apiKey != null) hb.header("Authorization", "Bearer " + apiKey);
        server.inFlight.incrementAndGet();
        CompletableFuture<HttpResponse<byte[]>> sent;
        try {
            sent = http.sendAsync(hb.build(), HttpResponse.BodyHandlers.ofByteArray());
        } catch (RuntimeException e) {
            sent = CompletableFuture.failedFuture(e);
        }
        return sent.handle((resp, err) -> {
            server.inFlight.decrementAndGet();
            GenerationException failure;
            if (err != null) {
                Throwable c = AgentLoop.unwrap(err);
                failure = new GenerationException(describe(c) + " from " + server.base, transport(c), c);
            } else {
                int code = resp.statusCode();
                if (code == 200) {
                    try {
                        return CompletableFuture.completedFuture(parse(resp.body(), request));
                    } catch (GenerationException e) {
                        failure = new GenerationException("invalid response from " + server.base + ": " + e.getMessage(), false, e);
                    } catch (IOException | RuntimeException e) {
                        failure = new GenerationException("invalid response from " + server.base + ": " + PathTools.message(e), false, e);
                    }
                } else {
                    boolean retry = code == 429 || code >= 500;
                    failure = new GenerationException("HTTP " + code + " from " + server.base + ": " + excerpt(resp.body()), retry, null);
                }
            }
            if (failure.retryable()) server.unhealthyUntilNanos.set(System.nanoTime() + cooldown.toNanos());
            if (!failure.retryable() || attempt >= maxRetries) {
                String msg = attempt > 0 ? failure.getMessage() + " (after " + (attempt + 1) + " attempts)" : failure.getMessage();
                return CompletableFuture.<Generation>failedFuture(new GenerationException(msg, failure.retryable(), failure.getCause()));
            }
            retries.incrementAndGet();
            long delay = Math.min(maxBackoff.toMillis(), initialBackoff.toMillis() << Math.min(attempt, 20));
            return CompletableFuture.supplyAsync(() -> null, CompletableFuture.delayedExecutor(delay, TimeUnit.MILLISECONDS))
                    .thenCompose(v -> attempt(request, body, attempt + 1, servers.size() > 1 ? server : null));
        }).thenCompose(f -> f);
    }

    /** Connection-level failures a retry may cure. */
    private static boolean transport(Throwable c) {
        return c instanceof IOException || c instanceof ClosedChannelException;
    }

    private static String describe(Throwable c) {
        if (c instanceof HttpTimeoutException) return "timeout (" + c.getMessage() + ")";
        if (c instanceof ConnectException) return "connection refused";
        return PathTools.message(c);
    }

    private Server choose(GenerationRequest request, Server avoid) {
        long now = System.nanoTime();
        List<Server> candidates = new ArrayList<>(servers.size());
        for (Server s : servers) if (s.inRotation && s != avoid && s.healthy(now)) candidates.add(s);
        if (candidates.isEmpty()) for (Server s : servers) if (s.inRotation && s != avoid) candidates.add(s);
        if (candidates.isEmpty()) for (Server s : servers) if (s.inRotation) candidates.add(s);
        if (candidates.isEmpty()) return null;
        if (candidates.size() == 1) return candidates.get(0);
        if (prefixAffinity) {
            // Rendezvous hashing: the same root goes to the same server while it is healthy.
            Server best = null;
            long bestScore = Long.MIN_VALUE;
            long key = request.context().rootId();
            for (int i = 0; i < servers.size(); i++) {
                Server s = servers.get(i);
                if (!candidates.contains(s)) continue;
                long score = Seeds.derive(key, i);
                if (best == null || score > bestScore) {
                    best = s;
                    bestScore = score;
                }
            }
            return best;
        }
        int start = Math.floorMod(roundRobin.getAndIncrement(), candidates.size());
        Server best = null;
        for (int i = 0; i < candidates.size(); i++) {
            Server s = candidates.get((start + i) % candidates.size());
            if (best == null || s.inFlight.get() < best.inFlight.get()) best = s;
        }
        return best;
    }

    private ObjectNode requestBody(GenerationRequest r) {
        SamplingParams d = r.sampling();
        GenerationLimits p = r.limits();
        ObjectNode b = JSON.createObjectNode();
        ArrayNode ids = JSON.createArrayNode();
        for (int t : r.context().toArray()) ids.add(t);
        ArrayNode stops = JSON.createArrayNode();
        p.stopStrings().forEach(stops::add);
        ArrayNode stopIds = JSON.createArrayNode();
        p.stopTokenIds().forEach(stopIds::add);
        int seed = (int) Math.floorMod(r.seed(), (long) Integer.MAX_VALUE);
        if (dialect == Dialect.VLLM_COMPLETIONS) {
            if (model != null) b.put("model", model);
            b.set("prompt", ids);
            b.put("max_tokens", p.maxNewTokens());
            // floats on the wire as written (0.7, not 0.699999988): the server parses the value the caller set
            b.put("temperature", d.temperature());
            b.put("top_p", d.topP());
            b.put("top_k", d.topK() == 0 ? -1 : d.topK());
            if (d.minP() > 0) b.put("min_p", d.minP());
            b.put("seed", seed);
            b.put("n", 1);
            b.put("stream", false);
            b.put("echo", false);
            if (!p.stopStrings().isEmpty()) b.set("stop", stops);
            if (!p.stopTokenIds().isEmpty()) b.set("stop_token_ids", stopIds);
            // At least 1: some servers treat 0 as "no logprobs", and the sampled token's logprob is required.
            b.put("logprobs", Math.max(1, p.topLogprobs()));
            b.put("return_tokens_as_token_ids", true);
            b.put("include_stop_str_in_output", true);
            b.put("skip_special_tokens", false);
        } else {
            b.set("input_ids", ids);
            ObjectNode sp = b.putObject("sampling_params");
            sp.put("max_new_tokens", p.maxNewTokens());
            sp.put("temperature", d.temperature());
            sp.put("top_p", d.topP());
            sp.put("top_k", d.topK() == 0 ? -1 : d.topK());
            if (d.minP() > 0) sp.put("min_p", d.minP());
            if (!p.stopStrings().isEmpty()) sp.set("stop", stops);
            if (!p.stopTokenIds().isEmpty()) sp.set("stop_token_ids", stopIds);
            sp.put("skip_special_tokens", false);
            sp.put("no_stop_trim", true);
            sp.put("sampling_seed", seed);
            b.put("return_logprob", true);
            b.put("top_logprobs_num", p.topLogprobs());
            b.put("logprob_start_len", -1);
            b.put("stream", false);
        }
        for (Map.Entry<String, Object> e : extraBody.entrySet()) b.set(e.getKey(), JSON.valueToTree(e.getValue()));
        return b;
    }

    private Generation parse(byte[] body, GenerationRequest request) throws IOException {
        JsonNode root = JSON.readTree(body);
        if (root == null || !root.isObject()) throw new GenerationException("the body is not a JSON object");
        return dialect == Dialect.VLLM_COMPLETIONS ? parseVllm(root, request) : parseSglang(root, request);
    }

    private Generation parseVllm(JsonNode root, GenerationRequest request) {
        JsonNode choices = root.path("choices");
        if (!choices.isArray() || choices.size() != 1) throw new GenerationException("expected exactly one choice, got " + choices);
        JsonNode c = choices.get(0);
        JsonNode lp = c.path("logprobs");
        if (!lp.isObject()) throw new GenerationException("choice has no logprobs object (does the server support logprobs?)");
        JsonNode toks = lp.path("tokens"), tlp = lp.path("token_logprobs"), top = lp.path("top_logprobs");
        if (!toks.isArray() || !tlp.isArray() || toks.size() != tlp.size())
            throw new GenerationException("logprobs.tokens and logprobs.token_logprobs must be arrays of one length");
        int n = toks.size();
        int[] ids = new int[n];
        float[] logprobs = new float[n];
        for (int i = 0; i < n; i++) {
            ids[i] = tokenId(toks.get(i), i);
            logprobs[i] = logprob(tlp.get(i), i);
        }
        float[] entropies = null;
        if (request.limits().topLogprobs() > 0 && top.isArray() && top.size() == n) {
            entropies = new float[n];
            for (int i = 0; i < n; i++) {
                JsonNode d = top.get(i);
                if (d == null || !d.isObject()) {
                    entropies = null;
                    break;
                }
                entropies[i] = topKEntropy(d.elements());
            }
        }
        String finish = c.path("finish_reason").asText(null);
        JsonNode stop = c.path("stop_reason");
        return finish(ids, logprobs, entropies, finish, stop, request).withWeightVersion(version(root.path("metadata")));
    }

    private Generation parseSglang(JsonNode root, GenerationRequest request) {
        JsonNode meta = root.path("meta_info");
        if (!meta.isObject()) throw new GenerationException("response has no meta_info object");
        JsonNode otl = meta.path("output_token_logprobs");
        if (!otl.isArray()) throw new GenerationException("meta_info.output_token_logprobs is missing (return_logprob not honoured?)");
        int n = otl.size();
        int[] ids = new int[n];
        float[] logprobs = new float[n];
        for (int i = 0; i < n; i++) {
            JsonNode e = otl.get(i);
            if (!e.isArray() || e.size() < 2) throw new GenerationException("output_token_logprobs[" + i + "] is not [logprob, id, …]");
            logprobs[i] = logprob(e.get(0), i);
            JsonNode id = e.get(1);
            if (!id.canConvertToInt()) throw new GenerationException("output_token_logprobs[" + i + "] has id " + id);
            ids[i] = checkId(id.asInt(), i);
        }
        JsonNode outIds = root.path("output_ids");
        if (outIds.isArray() && outIds.size() == n)
            for (int i = 0; i < n; i++)
                if (outIds.get(i).asInt() != ids[i]) throw new GenerationException("output_ids[" + i + "] disagrees with output_token_logprobs");
        float[] entropies = null;
        JsonNode top = meta.path("output_top_logprobs");
        if (request.limits().topLogprobs() > 0 && top.isArray() && top.size() == n) {
            entropies = new float[n];
            for (int i = 0; i < n; i++) {
                JsonNode pos = top.get(i);
                if (pos == null || !pos.isArray()) {
                    entropies = null;
                    break;
                }
                List<JsonNode> values = new ArrayList<>();
                for (JsonNode e : pos) if (e.isArray() && e.size() >= 1) values.add(e.get(0));
                entropies[i] = topKEntropy(values.iterator());
            }
        }
        JsonNode fr = meta.path("finish_reason");
        String finish = fr.isObject() ? fr.path("type").asText(null) : fr.asText(null);
        JsonNode matched = fr.isObject() ? fr.path("matched") : null;
        return finish(ids, logprobs, entropies, finish, matched, request).withWeightVersion(version(meta));
    }

    /** SGLang's {@code weight_version} ({@code metadata} of OpenAI-style responses, {@code meta_info} of /generate), or null. */
    private static String version(JsonNode holder) {
        JsonNode v = holder == null ? null : holder.get("weight_version");
        return v != null && v.isValueNode() && !v.isNull() && !v.asText().isEmpty() ? v.asText() : null;
    }

    private Generation finish(int[] ids, float[] logprobs, float[] entropies, String finish, JsonNode stop, GenerationRequest request) {
        if (ids.length > request.limits().maxNewTokens())
            throw new GenerationException(ids.length + " tokens returned, more than max tokens = " + request.limits().maxNewTokens());
        if (finish == null) throw new GenerationException("finish_reason is missing");
        switch (finish) {
            case "length":
                return new Generation(ids, logprobs, entropies, FinishReason.LENGTH, null, -1);
            case "stop":
                if (stop != null && stop.isTextual() && !stop.asText().isEmpty())
                    return new Generation(ids, logprobs, entropies, FinishReason.STOP_STRING, stop.asText(), -1);
                if (stop != null && stop.canConvertToInt())
                    return new Generation(ids, logprobs, entropies, FinishReason.STOP_TOKEN, null, stop.asInt());
                return new Generation(ids, logprobs, entropies, FinishReason.STOP_TOKEN, null, ids.length > 0 ? ids[ids.length - 1] : -1);
            default:
                throw new GenerationException("unexpected finish_reason '" + finish + "'");
        }
    }

    private int tokenId(JsonNode t, int i) {
        if (t == null || !t.isTextual()) throw new GenerationException("logprobs.tokens[" + i + "] is not a string");
        String s = t.asText();
        if (!s.startsWith("token_id:"))
            throw new GenerationException("logprobs.tokens[" + i + "] = '" + excerpt(s) + "' is not 'token_id:N' (is return_tokens_as_token_ids supported?)");
        try {
            return checkId(Integer.parseInt(s.substring(9)), i);
        } catch (NumberFormatException e) {
            throw new GenerationException("logprobs.tokens[" + i + "] = '" + excerpt(s) + "' has no integer id");
        }
    }

    private int checkId(int id, int i) {
        if (id < 0 || (vocabSize > 0 && id >= vocabSize)) throw new GenerationException("token " + i + " has id " + id + ", outside [0, " + vocabSize + ")");
        return id;
    }

    private static float logprob(JsonNode v, int i) {
        if (v == null || !v.isNumber()) throw new GenerationException("the logprob of token " + i + " is " + v);
        double d = v.asDouble();
        if (!Double.isFinite(d) || d > 1e-4) throw new GenerationException("the logprob of token " + i + " is " + d);
        return (float) Math.min(0, d);
    }

    /** −Σ p log p over the returned top-k logprobs (non-finite entries contribute nothing). */
    static float topKEntropy(Iterator<JsonNode> logprobs) {
        double h = 0;
        while (logprobs.hasNext()) {
            JsonNode v = logprobs.next();
            if (v == null || !v.isNumber()) continue;
            double l = v.asDouble();
            if (!Double.isFinite(l) || l > 0) continue;
            h -= Math.exp(l) * l;
        }
        return (float) h;
    }

    private static String excerpt(byte[] b) {
        return excerpt(new String(b, 0, Math.min(b.length, 400), java.nio.charset.StandardCharsets.UTF_8));
    }

    private static String excerpt(String s) {
        return s.length() > 200 ? s.substring(0, 200) + "…" : s;
    }

    /** The servers' base URLs, in the order given. */
    public List<String> baseUrls() {
        List<String> out = new ArrayList<>(servers.size());
        for (Server s : servers) out.add(s.base);
        return out;
    }

    /**
     * Takes a server out of rotation (no request is sent to it) or puts it back — what a weight publisher does
     * with a server that failed to load the current weights, until it has them.
     *
     * @throws IllegalArgumentException for a URL that is not one of {@link #baseUrls()}
     */
    public void setInRotation(String baseUrl, boolean on) {
        server(baseUrl).inRotation = on;
    }

    /** Whether {@code baseUrl}'s server receives requests. */
    public boolean inRotation(String baseUrl) {
        return server(baseUrl).inRotation;
    }

    private Server server(String baseUrl) {
        String b = baseUrl != null && baseUrl.endsWith("/") ? baseUrl.substring(0, baseUrl.length() - 1) : baseUrl;
        for (Server s : servers) if (s.base.equals(b)) return s;
        throw new IllegalArgumentException("'" + baseUrl + "' is not one of this generator's servers " + baseUrls());
    }

    /** Generation requests received. */
    public long requests() {
        return requests.get();
    }

    /** HTTP attempts made (requests + retries). */
    public long attempts() {
        return attempts.get();
    }

    /** Retries made. */
    public long retries() {
        return retries.get();
    }

    /** Requests waiting for a concurrency permit now. */
    public int queued() {
        return limiter.waiting();
    }

    /** Builder. At least one base URL is required. */
    public static final class Builder {
        private final List<String> baseUrls = new ArrayList<>();
        private Dialect dialect = Dialect.VLLM_COMPLETIONS;
        private String model, apiKey;
        private int maxConcurrentRequests = 256, maxRetries = 3, vocabSize;
        private Duration connectTimeout = Duration.ofSeconds(5), requestTimeout = Duration.ofMinutes(10), initialBackoff = Duration.ofMillis(200),
                maxBackoff = Duration.ofSeconds(5), cooldown = Duration.ofSeconds(5);
        private boolean prefixAffinity = true;
        private final Map<String, Object> extraBody = new LinkedHashMap<>();

        /** A server's base URL, e.g. {@code http://10.0.0.5:8000} (the endpoint path is added). */
        public Builder baseUrl(String url) {
            if (url == null || url.isBlank()) throw new IllegalArgumentException("base URL must not be empty");
            baseUrls.add(url.strip());
            return this;
        }

        public Builder baseUrls(List<String> urls) {
            urls.forEach(this::baseUrl);
            return this;
        }

        public Builder dialect(Dialect d) {
            if (d == null) throw new IllegalArgumentException("dialect must not be null");
            this.dialect = d;
            return this;
        }

        /** The served model name (vLLM's {@code model} field); null to omit. */
        public Builder model(String m) {
            this.model = m;
            return this;
        }

        /** Sent as {@code Authorization: Bearer …}; null for none. */
        public Builder apiKey(String k) {
            this.apiKey = k;
            return this;
        }

        /** Most requests in flight across all servers (default 256); more wait in a queue, not on threads. */
        public Builder maxConcurrentRequests(int n) {
            if (n < 1) throw new IllegalArgumentException("maxConcurrentRequests must be >= 1, got " + n);
            this.maxConcurrentRequests = n;
            return this;
        }

        /** Retries after the first attempt on transient failures (default 3). */
        public Builder maxRetries(int n) {
            if (n < 0) throw new IllegalArgumentException("maxRetries must be >= 0, got " + n);
            this.maxRetries = n;
            return this;
        }

        public Builder connectTimeout(Duration d) {
            this.connectTimeout = positive("connectTimeout", d);
            return this;
        }

        /** Time for one attempt, from sending to the whole response (default 10 min: long generations). */
        public Builder requestTimeout(Duration d) {
            this.requestTimeout = positive("requestTimeout", d);
            return this;
        }

        /** First retry delay (doubles per retry, up to {@code maxBackoff}). */
        public Builder backoff(Duration initial, Duration max) {
            this.initialBackoff = positive("initial backoff", initial);
            this.maxBackoff = positive("max backoff", max);
            return this;
        }

        /** How long a failed server is avoided (default 5 s). */
        public Builder unhealthyCooldown(Duration d) {
            this.cooldown = positive("cooldown", d);
            return this;
        }

        /** Vocabulary size for validating returned ids (0 = only non-negative). */
        public Builder vocabSize(int v) {
            if (v < 0) throw new IllegalArgumentException("vocabSize must be >= 0, got " + v);
            this.vocabSize = v;
            return this;
        }

        /** Route every path of a prompt to one server (default true) instead of the least loaded. */
        public Builder prefixAffinity(boolean on) {
            this.prefixAffinity = on;
            return this;
        }

        /** An extra top-level body field (e.g. {@code repetition_penalty}, {@code min_p}). */
        public Builder extraBody(String key, Object value) {
            extraBody.put(key, value);
            return this;
        }

        public OpenAiCompatibleGenerator build() {
            return new OpenAiCompatibleGenerator(this);
        }

        private static Duration positive(String name, Duration d) {
            if (d == null || d.isNegative() || d.isZero()) throw new IllegalArgumentException(name + " must be positive, got " + d);
            return d;
        }
    }
}
