package ai.arbor.generate;

import ai.arbor.chat.ChatFormat;
import ai.arbor.chat.ChatTemplate;
import ai.arbor.kernels.SamplingParams;
import ai.arbor.rollout.FinishReason;
import ai.arbor.rollout.Generation;
import ai.arbor.rollout.GenerationException;
import ai.arbor.rollout.GenerationLimits;
import ai.arbor.rollout.GenerationRequest;
import ai.arbor.rollout.TokenContext;
import ai.arbor.rollout.Tokenizer;
import ai.arbor.torch.model.PolicyConfig;
import ai.arbor.torch.model.ReferencePolicy;
import com.fasterxml.jackson.core.type.TypeReference;
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
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * An OpenAI-compatible server over a {@link LocalGenerator} ({@code arbor serve}): what RL clients use of
 * vLLM's OpenAI-compatible server and of SGLang's native API, so the HTTP generator
 * ({@code OpenAiCompatibleGenerator}), the official OpenAI clients and a trainer's weight sync can drive a
 * local checkpoint — the same code path as a fleet of vLLM / SGLang servers. Concurrent requests are
 * decoded in one batch by the generator. docs/serving.md lists every endpoint and field.
 *
 * <ul>
 *   <li>{@code POST /v1/completions}: {@code prompt} (text, or token ids), {@code n} (the samples share the
 *       prompt's prefill: {@link LocalGenerator#generateGroup}), {@code stream} (server-sent events),
 *       {@code logprobs}, {@code return_tokens_as_token_ids}, {@code return_token_ids}, sampling fields;</li>
 *   <li>{@code POST /v1/chat/completions}: the checkpoint's chat template, {@code tools} and Qwen3 / Hermes
 *       {@code <tool_call>} parsing into {@code message.tool_calls}, logprobs, n, stream;</li>
 *   <li>{@code GET /health}, {@code GET /v1/models} (with {@code max_model_len});</li>
 *   <li>SGLang's {@code POST /update_weights_from_disk}, {@code GET /get_weight_version},
 *       {@code GET /get_model_info}; every generation response carries {@code metadata.weight_version}
 *       (SGLang's field).</li>
 * </ul>
 * Errors are vLLM's: status 4xx / 5xx with {@code {"error": {"message", "type", "param", "code"}}}.
 * Logprobs are of the tempered, untruncated distribution (see {@link LocalGenerator}).
 */
public final class CompletionServer implements AutoCloseable {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final long MAX_BODY = 16 << 20;
    private static final String TOOL_OPEN = "<tool_call>", TOOL_CLOSE = "</tool_call>";
    private static final Pattern TOOL_CALL = Pattern.compile(Pattern.quote(TOOL_OPEN) + "(.*?)(?:" + Pattern.quote(TOOL_CLOSE) + "|$)", Pattern.DOTALL);

    /**
     * Reads a new checkpoint for {@code POST /update_weights_from_disk}: checks that it is the served model's
     * architecture and vocabulary and loads it (on the calling HTTP thread); the returned action copies it
     * into the served policy on the decode thread and frees it.
     *
     * @throws IllegalArgumentException naming the mismatched field or the unreadable file
     */
    public interface WeightLoader {
        Runnable load(Path modelPath) throws IOException;
    }

    /**
     * What the server serves besides the generator.
     *
     * @param model          the served model name ({@code --served-model-name}); requests naming another are a 404
     * @param modelPath      reported by {@code /get_model_info} and {@code /v1/models} ({@code root})
     * @param maxModelLen    the context length ({@code max_model_len}: the model's positions)
     * @param chatTemplate   the checkpoint's chat template, or null (then {@code /v1/chat/completions} is a 400)
     * @param chatKwargs     template variables of every chat render (e.g. {@code enable_thinking}); requests'
     *                       {@code chat_template_kwargs} override them
     * @param weights        loads checkpoints for {@code /update_weights_from_disk}, or null (then it is a 400)
     * @param threads        requests in flight (each waits on its generation while the generator batches them)
     * @param maxN           the largest {@code n}
     * @param requestTimeout how long one request may take
     */
    public record Options(String model, String modelPath, int maxModelLen, ChatTemplate chatTemplate, Map<String, Object> chatKwargs,
                          WeightLoader weights, int threads, int maxN, Duration requestTimeout) {
        public Options {
            if (model == null || model.isBlank()) throw new IllegalArgumentException("model name must not be blank");
            if (maxModelLen < 1) throw new IllegalArgumentException("maxModelLen must be >= 1, got " + maxModelLen);
            if (threads < 1) throw new IllegalArgumentException("threads must be >= 1, got " + threads);
            if (maxN < 1) throw new IllegalArgumentException("maxN must be >= 1, got " + maxN);
            if (requestTimeout == null || requestTimeout.isNegative() || requestTimeout.isZero())
                throw new IllegalArgumentException("requestTimeout must be positive, got " + requestTimeout);
            chatKwargs = chatKwargs == null ? Map.of() : Map.copyOf(chatKwargs);
        }

        /** No chat template, no weight updates, n up to 64. */
        public static Options basic(String model, int maxModelLen, int threads, Duration requestTimeout) {
            return new Options(model, model, maxModelLen, null, null, null, threads, 64, requestTimeout);
        }

        public Options withChat(ChatTemplate template, Map<String, Object> kwargs) {
            return new Options(model, modelPath, maxModelLen, template, kwargs, weights, threads, maxN, requestTimeout);
        }

        public Options withWeights(WeightLoader loader) {
            return new Options(model, modelPath, maxModelLen, chatTemplate, chatKwargs, loader, threads, maxN, requestTimeout);
        }

        public Options withModelPath(String path) {
            return new Options(model, path, maxModelLen, chatTemplate, chatKwargs, weights, threads, maxN, requestTimeout);
        }
    }

    private final LocalGenerator generator;
    private final Tokenizer tokenizer;
    private final Options options;
    private final HttpServer http;
    private final ExecutorService executor;
    private final AtomicLong ids = new AtomicLong();
    private final Object updateLock = new Object();
    private int updates;

    private CompletionServer(LocalGenerator generator, Tokenizer tokenizer, Options options, InetSocketAddress address) throws IOException {
        this.generator = generator;
        this.tokenizer = tokenizer;
        this.options = options;
        this.http = HttpServer.create(address, 256);
        AtomicInteger n = new AtomicInteger();
        this.executor = Executors.newFixedThreadPool(options.threads(), r -> {
            Thread t = new Thread(r, "arbor-completions-http-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
        http.setExecutor(executor);
        http.createContext("/", ex -> handle(ex, null, b -> {
            throw new HttpError(404, "NotFoundError", "no route " + ex.getRequestMethod() + " " + ex.getRequestURI().getPath(), null);
        }));
        http.createContext("/v1/completions", ex -> handle(ex, "POST", b -> completions(ex, b, false)));
        http.createContext("/v1/chat/completions", ex -> handle(ex, "POST", b -> completions(ex, b, true)));
        http.createContext("/update_weights_from_disk", ex -> handle(ex, "POST", b -> updateWeights(ex, b)));
        http.createContext("/v1/models", ex -> handle(ex, "GET", b -> {
            ObjectNode o = JSON.createObjectNode().put("object", "list");
            o.putArray("data").addObject().put("id", options.model()).put("object", "model")
                    .put("created", System.currentTimeMillis() / 1000).put("owned_by", "arbor").put("root", options.modelPath())
                    .put("max_model_len", options.maxModelLen());
            send(ex, 200, o);
        }));
        http.createContext("/health", ex -> handle(ex, "GET", b -> send(ex, 200, JSON.createObjectNode().put("status", "ok"))));
        http.createContext("/get_weight_version", ex -> handle(ex, "GET",
                b -> send(ex, 200, JSON.createObjectNode().put("weight_version", generator.weightVersion()))));
        http.createContext("/get_model_info", ex -> handle(ex, "GET", b -> send(ex, 200, JSON.createObjectNode()
                .put("model_path", options.modelPath()).put("is_generation", true).put("weight_version", generator.weightVersion())
                .put("max_model_len", options.maxModelLen()))));
        http.start();
    }

    /** As {@link #start(LocalGenerator, Tokenizer, Options, String, int)} with {@link Options#basic}. */
    public static CompletionServer start(LocalGenerator generator, Tokenizer tokenizer, String model, String host, int port,
                                         int threads, Duration requestTimeout) throws IOException {
        return start(generator, tokenizer, Options.basic(model, generator.maxSeq(), threads, requestTimeout), host, port);
    }

    /** Serves {@code generator} on {@code host:port} (port 0 picks a free one). */
    public static CompletionServer start(LocalGenerator generator, Tokenizer tokenizer, Options options, String host, int port) throws IOException {
        if (generator == null || tokenizer == null || options == null) throw new IllegalArgumentException("generator, tokenizer and options are required");
        if (port < 0 || port > 65535) throw new IllegalArgumentException("port must be in [0, 65535], got " + port);
        return new CompletionServer(generator, tokenizer, options, new InetSocketAddress(host, port));
    }

    /**
     * The {@link WeightLoader} of a served {@link ReferencePolicy}: a Hugging Face model directory (or an
     * arbor {@code .safetensors} checkpoint) of the same configuration — every field of config.json that
     * shapes the model (vocab_size, hidden_size, …; the seed aside) and the tokenizer's vocabulary when the
     * directory has a tokenizer.json — loaded on {@code device} in the policy's dtype.
     */
    public static WeightLoader weightLoader(ReferencePolicy policy, Tokenizer tokenizer, String device) {
        return path -> {
            if (!Files.exists(path)) throw new IllegalArgumentException("model_path " + path + " does not exist");
            if (Files.isDirectory(path) && !Files.isRegularFile(path.resolve("config.json")))
                throw new IllegalArgumentException("model_path " + path + " has no config.json: not a Hugging Face model directory");
            Path tokJson = path.resolve("tokenizer.json");
            if (Files.isDirectory(path) && Files.isRegularFile(tokJson)) {
                int v = ai.arbor.torch.model.HfCheckpoint.tokenizerVocab(tokJson);
                if (v != tokenizer.vocabSize())
                    throw new IllegalArgumentException("model_path " + path + ": tokenizer.json has " + v
                            + " token ids, the served tokenizer " + tokenizer.vocabSize() + " (another vocabulary)");
            }
            ReferencePolicy next = ReferencePolicy.load(path, device, policy.dtype());
            try {
                String diff = configDifference(policy.config(), next.config());
                if (diff != null) throw new IllegalArgumentException("model_path " + path + ": " + diff + " (another model: restart arbor serve to serve it)");
            } catch (RuntimeException e) {
                next.close();
                throw e;
            }
            return () -> {
                try {
                    policy.loadParameters(next.namedParameters());
                } finally {
                    next.close();
                }
            };
        };
    }

    /** The first field (by its config.json name) in which {@code got} differs from {@code served}, or null. */
    static String configDifference(PolicyConfig served, PolicyConfig got) {
        Object[][] fields = {
                {"vocab_size", served.vocab(), got.vocab()},
                {"hidden_size", served.dModel(), got.dModel()},
                {"num_hidden_layers", served.layers(), got.layers()},
                {"num_attention_heads", served.heads(), got.heads()},
                {"num_key_value_heads", served.kvHeads(), got.kvHeads()},
                {"head_dim", served.headDim(), got.headDim()},
                {"intermediate_size", served.ffnDim(), got.ffnDim()},
                {"max_position_embeddings", served.maxSeq(), got.maxSeq()},
                {"rope_theta", served.ropeTheta(), got.ropeTheta()},
                {"rms_norm_eps", served.normEps(), got.normEps()},
                {"tie_word_embeddings", served.tiedEmbeddings(), got.tiedEmbeddings()},
                {"attention_bias (q/k/v)", served.qkvBias(), got.qkvBias()},
                {"attention_bias (output)", served.outputBias(), got.outputBias()},
                {"model_type (q/k norms of Qwen3)", served.qkNorm(), got.qkNorm()},
                {"rope_scaling", served.ropeScaling(), got.ropeScaling()},
        };
        for (Object[] f : fields)
            if (!Objects.equals(f[1], f[2])) return f[0] + " is " + f[2] + ", the served model's " + f[1];
        return null;
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

    /** An error answered with {@code status} and the OpenAI error shape. */
    private static final class HttpError extends Exception {
        private static final long serialVersionUID = 1L;
        final int status;
        final String type;
        final String param;

        HttpError(int status, String type, String message, String param) {
            super(message);
            this.status = status;
            this.type = type;
            this.param = param;
        }
    }

    private static HttpError bad(String message, String param) {
        return new HttpError(400, "BadRequestError", message, param);
    }

    private interface Body {
        void handle(JsonNode body) throws Exception;
    }

    private void handle(HttpExchange ex, String method, Body body) {
        try (ex) {
            try {
                if (method != null && !method.equals(ex.getRequestMethod()))
                    throw new HttpError(405, "MethodNotAllowedError", "use " + method + " for " + ex.getRequestURI().getPath(), null);
                JsonNode b = null;
                if ("POST".equals(method)) {
                    try (InputStream in = ex.getRequestBody()) {
                        byte[] raw = in.readNBytes((int) MAX_BODY + 1);
                        if (raw.length > MAX_BODY) throw bad("request body larger than " + MAX_BODY + " bytes", null);
                        try {
                            b = JSON.readTree(raw);
                        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
                            throw bad("malformed JSON: " + e.getOriginalMessage(), null);
                        }
                        if (b == null || !b.isObject()) throw bad("the body must be a JSON object", null);
                    }
                }
                body.handle(b);
            } catch (HttpError e) {
                send(ex, e.status, error(e.getMessage(), e.type, e.param, e.status));
            } catch (TimeoutException e) {
                send(ex, 504, error("generation did not finish within " + options.requestTimeout().toSeconds() + " s", "TimeoutError", null, 504));
            } catch (ExecutionException e) {
                Throwable c = e.getCause();
                boolean badInput = c instanceof GenerationException && c.getCause() instanceof IllegalArgumentException;
                send(ex, badInput ? 400 : 500, error(String.valueOf(c.getMessage()), badInput ? "BadRequestError" : "InternalServerError",
                        null, badInput ? 400 : 500));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                send(ex, 503, error("server shutting down", "ServiceUnavailableError", null, 503));
            } catch (IOException e) {
                // the client went away (a stream's connection closed): nothing to answer
            } catch (Exception e) {
                send(ex, 500, error(e.toString(), "InternalServerError", null, 500));
            }
        } catch (IOException ignored) {
            // the response could not be written: the client went away
        }
    }

    // ---------------------------------------------------------------------------------------------
    // completions and chat completions

    /** One request's parsed fields. */
    private record Parsed(int[] prompt, int n, boolean stream, boolean includeUsage, SamplingParams sampling, GenerationLimits limits,
                          long seed, boolean logprobs, int topLogprobs, boolean asIds, boolean returnTokenIds, boolean includeStop,
                          List<String> stops, boolean parseTools) {}

    private void completions(HttpExchange ex, JsonNode b, boolean chat) throws Exception {
        JsonNode m = b.get("model");
        if (m != null && !m.isNull() && !m.asText().equals(options.model()))
            throw new HttpError(404, "NotFoundError", "The model `" + m.asText() + "` does not exist (this server serves `" + options.model() + "`).", "model");
        Parsed p = chat ? parseChat(b) : parseCompletion(b);
        List<GenerationRequest> requests = new ArrayList<>();
        TokenContext context = TokenContext.of(p.prompt());  // one context: the n samples share its prefill
        for (int i = 0; i < p.n(); i++) requests.add(new GenerationRequest(context, p.sampling(), p.limits(), p.seed() + i));
        String id = (chat ? "chatcmpl-arbor-" : "cmpl-arbor-") + ids.incrementAndGet();
        long created = System.currentTimeMillis() / 1000;
        if (p.stream()) {
            stream(ex, p, requests, chat, id, created);
            return;
        }
        List<CompletableFuture<LocalGenerator.Detailed>> futures = generator.generateGroup(requests, null);
        long deadline = System.nanoTime() + options.requestTimeout().toNanos();
        List<LocalGenerator.Detailed> results = new ArrayList<>();
        for (CompletableFuture<LocalGenerator.Detailed> f : futures)
            results.add(f.get(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS));
        ObjectNode root = JSON.createObjectNode();
        root.put("id", id).put("object", chat ? "chat.completion" : "text_completion").put("created", created).put("model", options.model());
        ArrayNode choices = root.putArray("choices");
        int completion = 0;
        for (int i = 0; i < results.size(); i++) {
            LocalGenerator.Detailed d = results.get(i);
            Output o = output(d.generation(), p, chat);
            completion += d.generation().length();
            ObjectNode c = choices.addObject().put("index", i);
            if (chat) {
                ObjectNode msg = c.putObject("message").put("role", "assistant");
                ToolCalls calls = p.parseTools() ? toolCalls(o.text()) : null;
                if (calls != null) {
                    if (calls.content() == null) msg.putNull("content");
                    else msg.put("content", calls.content());
                    msg.set("tool_calls", calls.json());
                } else {
                    msg.put("content", o.text());
                    msg.putArray("tool_calls");
                }
                if (p.logprobs()) c.set("logprobs", chatLogprobs(d, 0, o.tokens(), p)); else c.putNull("logprobs");
                finish(c, d.generation(), calls != null);
            } else {
                c.put("text", o.text());
                if (p.logprobs()) c.set("logprobs", completionLogprobs(d, 0, o.tokens(), 0, p)); else c.putNull("logprobs");
                finish(c, d.generation(), false);
                if (p.returnTokenIds()) c.set("prompt_token_ids", ints(p.prompt(), p.prompt().length));
            }
            if (p.returnTokenIds()) c.set("token_ids", ints(d.generation().tokens(), d.generation().length()));
        }
        if (chat && p.returnTokenIds()) root.set("prompt_token_ids", ints(p.prompt(), p.prompt().length));
        root.set("usage", usage(p.prompt().length, completion));
        root.putObject("metadata").put("weight_version", results.get(0).weightVersion());
        send(ex, 200, root);
    }

    private Parsed parseCompletion(JsonNode b) throws HttpError {
        int[] prompt = prompt(b.get("prompt"));
        if (b.path("echo").asBoolean(false)) throw bad("echo is not supported", "echo");
        if (b.hasNonNull("suffix")) throw bad("suffix is not supported", "suffix");
        int logprobs = -1;
        if (b.hasNonNull("logprobs")) {
            logprobs = intField(b, "logprobs", 0);
            if (logprobs < 0 || logprobs > 20) throw bad("logprobs must be in [0, 20], got " + logprobs, "logprobs");
        }
        return common(b, prompt, intField(b, "max_tokens", 16), logprobs >= 0, Math.max(0, logprobs), false);
    }

    private Parsed parseChat(JsonNode b) throws HttpError {
        if (options.chatTemplate() == null)
            throw bad("this model has no chat template (tokenizer_config.json's chat_template): use /v1/completions", "messages");
        JsonNode msgs = b.get("messages");
        if (msgs == null || !msgs.isArray() || msgs.isEmpty()) throw bad("messages must be a non-empty list", "messages");
        List<Map<String, Object>> messages = new ArrayList<>();
        for (int i = 0; i < msgs.size(); i++) {
            JsonNode msg = msgs.get(i);
            if (!msg.isObject() || !msg.path("role").isTextual()) throw bad("messages[" + i + "] must be an object with a role", "messages");
            Map<String, Object> mm = JSON.convertValue(msg, new TypeReference<LinkedHashMap<String, Object>>() {});
            JsonNode content = msg.get("content");
            if (content != null && content.isArray()) {   // content parts: the text ones, concatenated
                StringBuilder s = new StringBuilder();
                for (JsonNode part : content) {
                    if (!"text".equals(part.path("type").asText()))
                        throw bad("messages[" + i + "]: content part of type '" + part.path("type").asText() + "' is not supported (text only)", "messages");
                    s.append(part.path("text").asText());
                }
                mm.put("content", s.toString());
            }
            messages.add(mm);
        }
        List<Map<String, Object>> tools = null;
        JsonNode t = b.get("tools");
        if (t != null && !t.isNull()) {
            if (!t.isArray()) throw bad("tools must be a list", "tools");
            for (int i = 0; i < t.size(); i++)
                if (!"function".equals(t.get(i).path("type").asText()) || !t.get(i).path("function").path("name").isTextual())
                    throw bad("tools[" + i + "] must be {\"type\": \"function\", \"function\": {\"name\": …}}", "tools");
            tools = JSON.convertValue(t, new TypeReference<List<Map<String, Object>>>() {});
        }
        JsonNode choice = b.get("tool_choice");
        boolean parseTools = tools != null && !tools.isEmpty();
        if (choice != null && !choice.isNull()) {
            if (choice.isTextual() && choice.asText().equals("none")) parseTools = false;
            else if (!(choice.isTextual() && choice.asText().equals("auto")))
                throw bad("tool_choice " + choice + " is not supported (\"auto\" or \"none\": forcing a call needs guided decoding)", "tool_choice");
        }
        if (b.path("continue_final_message").asBoolean(false)) throw bad("continue_final_message is not supported", "continue_final_message");
        boolean addGenerationPrompt = b.path("add_generation_prompt").asBoolean(true);
        Map<String, Object> kwargs = new LinkedHashMap<>(options.chatKwargs());
        JsonNode k = b.get("chat_template_kwargs");
        if (k != null && !k.isNull()) {
            if (!k.isObject()) throw bad("chat_template_kwargs must be an object", "chat_template_kwargs");
            kwargs.putAll(JSON.convertValue(k, new TypeReference<LinkedHashMap<String, Object>>() {}));
        }
        String text;
        try {
            text = options.chatTemplate().render(messages, tools, addGenerationPrompt, kwargs);
        } catch (IllegalArgumentException e) {
            throw bad("the chat template failed: " + e.getMessage(), "messages");
        }
        int[] prompt = tokenizer.encode(text);
        boolean logprobs = b.path("logprobs").asBoolean(false);
        int top = b.hasNonNull("top_logprobs") ? intField(b, "top_logprobs", 0) : 0;
        if (top < 0 || top > 20) throw bad("top_logprobs must be in [0, 20], got " + top, "top_logprobs");
        if (top > 0 && !logprobs) throw bad("top_logprobs needs logprobs: true", "top_logprobs");
        int maxTokens = b.hasNonNull("max_completion_tokens") ? intField(b, "max_completion_tokens", 0)
                : intField(b, "max_tokens", Math.max(1, options.maxModelLen() - prompt.length));
        return common(b, prompt, maxTokens, logprobs, top, parseTools);
    }

    private Parsed common(JsonNode b, int[] prompt, int maxTokens, boolean logprobs, int topLogprobs, boolean parseTools) throws HttpError {
        if (b.hasNonNull("prompt_logprobs")) throw bad("prompt_logprobs is not supported", "prompt_logprobs");
        int n = intField(b, "n", 1);
        if (n < 1 || n > options.maxN()) throw bad("n must be in [1, " + options.maxN() + "], got " + n, "n");
        if (b.hasNonNull("best_of") && intField(b, "best_of", n) != n) throw bad("best_of other than n is not supported", "best_of");
        if (maxTokens < 1) throw bad("max_tokens must be >= 1, got " + maxTokens, "max_tokens");
        if ((long) prompt.length + maxTokens > options.maxModelLen())
            throw bad("This model's maximum context length is " + options.maxModelLen() + " tokens. However, you requested "
                    + ((long) prompt.length + maxTokens) + " tokens (" + prompt.length + " in the messages, " + maxTokens
                    + " in the completion). Please reduce the length of the messages or completion.", "max_tokens");
        double temperature = number(b, "temperature", 1.0);
        double topP = number(b, "top_p", 1.0);
        double minP = number(b, "min_p", 0.0);
        int topK = intField(b, "top_k", -1);
        if (topK < -1) throw bad("top_k must be -1 (off), 0 (off) or positive, got " + topK, "top_k");
        boolean stream = b.path("stream").asBoolean(false);
        JsonNode so = b.get("stream_options");
        if (so != null && !so.isNull() && !stream) throw bad("stream_options needs stream: true", "stream_options");
        boolean includeUsage = so != null && so.path("include_usage").asBoolean(false);
        long seed;
        if (b.hasNonNull("seed")) {
            if (!b.get("seed").canConvertToLong()) throw bad("seed must be an integer, got " + b.get("seed"), "seed");
            seed = b.get("seed").asLong();
        } else {
            seed = ThreadLocalRandom.current().nextLong(1L << 48);
        }
        List<String> stops = new ArrayList<>();
        JsonNode st = b.get("stop");
        if (st != null && !st.isNull()) {
            if (st.isTextual()) stops.add(st.asText());
            else if (st.isArray()) for (JsonNode x : st) {
                if (!x.isTextual()) throw bad("stop must be a string or a list of strings, got " + st, "stop");
                stops.add(x.asText());
            }
            else throw bad("stop must be a string or a list of strings, got " + st, "stop");
            for (String s : stops) if (s.isEmpty()) throw bad("stop strings must not be empty", "stop");
        }
        List<Integer> stopIds = new ArrayList<>();
        JsonNode sti = b.get("stop_token_ids");
        if (sti != null && !sti.isNull()) {
            if (!sti.isArray()) throw bad("stop_token_ids must be a list of token ids", "stop_token_ids");
            for (JsonNode x : sti) {
                if (!x.canConvertToInt() || x.asInt() < 0) throw bad("stop_token_ids: " + x + " is not a token id", "stop_token_ids");
                stopIds.add(x.asInt());
            }
        }
        SamplingParams sp;
        GenerationLimits l;
        try {
            sp = new SamplingParams((float) temperature, topK < 0 ? 0 : topK, (float) topP, (float) minP);
            l = new GenerationLimits(maxTokens, stops, stopIds, logprobs ? topLogprobs : 0);
        } catch (IllegalArgumentException e) {
            String msg = e.getMessage();
            String param = msg.contains("temperature") ? "temperature" : msg.contains("topP") || msg.contains("top_p") ? "top_p"
                    : msg.contains("topK") || msg.contains("top_k") ? "top_k" : msg.contains("minP") || msg.contains("min_p") ? "min_p" : null;
            throw bad(msg, param);
        }
        return new Parsed(prompt, n, stream, includeUsage, sp, l, seed, logprobs, topLogprobs,
                b.path("return_tokens_as_token_ids").asBoolean(false), b.path("return_token_ids").asBoolean(false),
                b.path("include_stop_str_in_output").asBoolean(false), stops, parseTools);
    }

    private int[] prompt(JsonNode p) throws HttpError {
        if (p == null || p.isNull()) throw bad("prompt is required", "prompt");
        if (p.isArray() && p.size() == 1 && (p.get(0).isArray() || p.get(0).isTextual())) p = p.get(0);  // one prompt in a list
        if (p.isTextual()) {
            if (p.asText().isEmpty()) throw bad("prompt must not be empty", "prompt");
            return tokenizer.encode(p.asText());
        }
        if (p.isArray()) {
            if (p.isEmpty()) throw bad("prompt must not be empty", "prompt");
            int[] out = new int[p.size()];
            for (int i = 0; i < out.length; i++) {
                JsonNode t = p.get(i);
                if (t.isArray() || t.isTextual()) throw bad("one prompt per request (send the prompts as separate requests)", "prompt");
                if (!t.canConvertToInt()) throw bad("prompt[" + i + "] is not a token id: " + t, "prompt");
                out[i] = t.asInt();
                if (out[i] < 0 || out[i] >= tokenizer.vocabSize())
                    throw bad("prompt[" + i + "] = " + out[i] + " is outside [0, " + tokenizer.vocabSize() + ")", "prompt");
            }
            return out;
        }
        throw bad("prompt must be a string or a list of token ids", "prompt");
    }

    private static int intField(JsonNode b, String name, int dflt) throws HttpError {
        JsonNode v = b.get(name);
        if (v == null || v.isNull()) return dflt;
        if (!v.isIntegralNumber() || !v.canConvertToInt()) throw bad(name + " must be an integer, got " + v, name);
        return v.asInt();
    }

    private static double number(JsonNode b, String name, double dflt) throws HttpError {
        JsonNode v = b.get(name);
        if (v == null || v.isNull()) return dflt;
        if (!v.isNumber()) throw bad(name + " must be a number, got " + v, name);
        return v.asDouble();
    }

    /** The tokens a choice shows and its text: the stop string's tokens dropped unless asked for, a final special stop token not shown. */
    record Output(int tokens, String text) {}

    private Output output(Generation g, Parsed p, boolean chat) {
        int n = g.length();
        // vLLM drops the stop string from the output unless include_stop_str_in_output: the text ends where
        // the stop string begins; the tokens (and their logprobs) that complete it are dropped, a token
        // straddling the boundary kept
        if (g.finishReason() == FinishReason.STOP_STRING && !p.includeStop())
            return withoutStop(tokenizer, g.tokens(), n, g.stopString());
        int shown = n;
        // chat: the EOS (<|im_end|>) that ends the turn is a special token, not content (vLLM's skip_special_tokens)
        if (chat && g.finishReason() == FinishReason.STOP_TOKEN && n > 0 && tokenizer.isSpecial(g.tokens()[n - 1])) shown = n - 1;
        return new Output(n, tokenizer.decode(g.tokens(), 0, shown));
    }

    /**
     * The output of a generation of {@code tokens[0:n]} that ended on {@code stop}: the text up to the stop string's
     * first occurrence (where the generation found it: the token that completes it may hold another after it), the
     * tokens whose text lies before it (a token straddling the boundary kept).
     */
    static Output withoutStop(Tokenizer tokenizer, int[] tokens, int n, String stop) {
        String full = tokenizer.decode(tokens, 0, n);
        int cut = full.indexOf(stop);
        if (cut < 0) cut = full.length();  // (not found: nothing to drop)
        while (n > 0 && tokenizer.decode(tokens, 0, n - 1).length() >= cut) n--;
        return new Output(n, full.substring(0, cut));
    }

    private void finish(ObjectNode c, Generation g, boolean toolCalls) {
        switch (g.finishReason()) {
            case LENGTH -> c.put("finish_reason", "length").putNull("stop_reason");
            case STOP_STRING -> c.put("finish_reason", toolCalls ? "tool_calls" : "stop").put("stop_reason", g.stopString());
            case STOP_TOKEN -> {
                c.put("finish_reason", toolCalls ? "tool_calls" : "stop");
                if (g.stopTokenId() == tokenizer.eosId()) c.putNull("stop_reason");
                else c.put("stop_reason", g.stopTokenId());
            }
        }
    }

    private String piece(int id, boolean asIds) {
        return asIds ? "token_id:" + id : tokenizer.decode(new int[] {id});
    }

    /** The completions logprobs object of tokens [from, to) of {@code d}; text offsets start at {@code offset}. */
    private ObjectNode completionLogprobs(LocalGenerator.Detailed d, int from, int to, int offset, Parsed p) {
        Generation g = d.generation();
        ObjectNode lp = JSON.createObjectNode();
        ArrayNode toks = lp.putArray("tokens"), tlp = lp.putArray("token_logprobs"), off = lp.putArray("text_offset");
        ArrayNode top = p.topLogprobs() > 0 && d.topIds() != null ? lp.putArray("top_logprobs") : null;
        if (top == null) lp.putNull("top_logprobs");
        for (int i = from; i < to; i++) {
            String text = tokenizer.decode(g.tokens(), i, i + 1);
            toks.add(p.asIds() ? "token_id:" + g.tokens()[i] : text);
            tlp.add(g.logprobs()[i]);
            off.add(offset);
            offset += text.length();
            if (top != null) {
                ObjectNode alts = top.addObject();
                for (int j = 0; j < d.topIds()[i].length; j++) alts.put(piece(d.topIds()[i][j], p.asIds()), d.topLogprobs()[i][j]);
            }
        }
        return lp;
    }

    /** The chat logprobs object ({@code {"content": [{token, logprob, bytes, top_logprobs}]}}) of tokens [from, to). */
    private ObjectNode chatLogprobs(LocalGenerator.Detailed d, int from, int to, Parsed p) {
        Generation g = d.generation();
        ObjectNode lp = JSON.createObjectNode();
        ArrayNode content = lp.putArray("content");
        for (int i = from; i < to; i++) {
            ObjectNode e = tokenLogprob(g.tokens()[i], g.logprobs()[i], p.asIds());
            ArrayNode alts = e.putArray("top_logprobs");
            if (p.topLogprobs() > 0 && d.topIds() != null)
                for (int j = 0; j < d.topIds()[i].length; j++) alts.add(tokenLogprob(d.topIds()[i][j], d.topLogprobs()[i][j], p.asIds()));
            content.add(e);
        }
        return lp;
    }

    private ObjectNode tokenLogprob(int id, float logprob, boolean asIds) {
        String text = piece(id, asIds);
        ObjectNode e = JSON.createObjectNode().put("token", text).put("logprob", logprob);
        ArrayNode bytes = e.putArray("bytes");
        for (byte x : text.getBytes(StandardCharsets.UTF_8)) bytes.add(x & 0xff);
        return e;
    }

    private static ArrayNode ints(int[] a, int n) {
        ArrayNode out = JSON.createArrayNode();
        for (int i = 0; i < n; i++) out.add(a[i]);
        return out;
    }

    private static ObjectNode usage(int prompt, int completion) {
        return JSON.createObjectNode().put("prompt_tokens", prompt).put("completion_tokens", completion).put("total_tokens", prompt + completion);
    }

    /** Tool calls parsed from a turn: the text before the first call (null when empty), and {@code tool_calls}. */
    record ToolCalls(String content, ArrayNode json) {}

    /**
     * Qwen3's / Hermes' calls: every {@code <tool_call>{"name": …, "arguments": {…}}</tool_call>} of the text
     * (the last one may be unterminated); null when there is none or one is not such JSON — then the
     * whole text is the content, as vLLM's hermes parser does. Arguments are serialised as Python's
     * {@code json.dumps} (what vLLM returns).
     */
    static ToolCalls toolCalls(String text) {
        int first = text.indexOf(TOOL_OPEN);
        if (first < 0) return null;
        ArrayNode calls = JSON.createArrayNode();
        Matcher m = TOOL_CALL.matcher(text);
        while (m.find()) {
            JsonNode call;
            try {
                call = JSON.readTree(m.group(1).strip());
            } catch (IOException e) {
                return null;
            }
            if (call == null || !call.isObject() || !call.path("name").isTextual()) return null;
            JsonNode args = call.has("arguments") ? call.get("arguments") : call.get("parameters");
            String arguments;
            if (args == null || args.isNull()) arguments = "{}";
            else if (args.isTextual()) arguments = args.asText();
            else if (!args.isObject()) return null;
            else {
                Map<String, Object> map = JSON.convertValue(args, new TypeReference<LinkedHashMap<String, Object>>() {});
                String rendered = ChatFormat.toolCall("x", map);   // <tool_call>\n{"name": "x", "arguments": ARGS}\n</tool_call>
                String head = "{\"name\": \"x\", \"arguments\": ";
                int at = rendered.indexOf(head) + head.length();
                arguments = rendered.substring(at, rendered.lastIndexOf("}\n" + TOOL_CLOSE));
            }
            ObjectNode c = calls.addObject();
            c.put("id", "chatcmpl-tool-" + Long.toHexString(ThreadLocalRandom.current().nextLong() >>> 1));
            c.put("type", "function");
            c.putObject("function").put("name", call.get("name").asText()).put("arguments", arguments);
        }
        if (calls.isEmpty()) return null;
        String content = text.substring(0, first);
        return new ToolCalls(content.isEmpty() ? null : content, calls);
    }

    // ---------------------------------------------------------------------------------------------
    // streaming (server-sent events)

    private record TokenEvent(int choice, int token, float logprob, int[] topIds, float[] topLps, String version) {}

    private record DoneEvent(int choice, LocalGenerator.Detailed detailed, Throwable failure) {}

    /** Per-choice state of a stream: tokens so far and how much text was sent. */
    private static final class ChoiceState {
        final List<Integer> tokens = new ArrayList<>();
        final List<Float> lps = new ArrayList<>();
        final List<int[]> topIds = new ArrayList<>();
        final List<float[]> topLps = new ArrayList<>();
        int sentChars;
        int offset;
        boolean inToolCall;
        boolean done;
    }

    private void stream(HttpExchange ex, Parsed p, List<GenerationRequest> requests, boolean chat, String id, long created) throws Exception {
        LinkedBlockingQueue<Object> events = new LinkedBlockingQueue<>();
        List<CompletableFuture<LocalGenerator.Detailed>> futures = generator.generateGroup(requests,
                choice -> (index, token, logprob, topIds, topLps) -> events.add(new TokenEvent(choice, token, logprob, topIds, topLps, generator.weightVersion())));
        for (int i = 0; i < futures.size(); i++) {
            int choice = i;
            futures.get(i).whenComplete((d, t) -> events.add(new DoneEvent(choice, d, t)));
        }
        // a request refused before generating (bad input) is a plain error, not a stream
        CompletableFuture<LocalGenerator.Detailed> f0 = futures.get(0);
        if (f0.isCompletedExceptionally()) f0.get();
        ex.getResponseHeaders().set("Content-Type", "text/event-stream");
        ex.getResponseHeaders().set("Cache-Control", "no-cache");
        ex.sendResponseHeaders(200, 0);
        long deadline = System.nanoTime() + options.requestTimeout().toNanos();
        int maxStop = 0;
        for (String s : p.stops()) maxStop = Math.max(maxStop, s.length());
        ChoiceState[] st = new ChoiceState[p.n()];
        for (int i = 0; i < st.length; i++) st[i] = new ChoiceState();
        String version = generator.weightVersion();
        try (OutputStream out = ex.getResponseBody()) {
            if (chat) for (int i = 0; i < st.length; i++) {
                ObjectNode c = chunkChoice(i, chat);
                c.putObject("delta").put("role", "assistant").put("content", "");
                write(out, chunk(id, created, chat, c, version, p.returnTokenIds() && i == 0 ? p.prompt() : null));
            }
            int remaining = st.length, completion = 0;
            while (remaining > 0) {
                Object e = events.poll(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                if (e == null) {
                    ObjectNode err = error("generation did not finish within " + options.requestTimeout().toSeconds() + " s", "TimeoutError", null, 504);
                    write(out, err);
                    break;
                }
                if (e instanceof TokenEvent t) {
                    ChoiceState s = st[t.choice()];
                    if (s.done) continue;
                    version = t.version();   // the decode thread's version: weights change only between generations
                    s.tokens.add(t.token());
                    s.lps.add(t.logprob());
                    s.topIds.add(t.topIds());
                    s.topLps.add(t.topLps());
                    int[] toks = s.tokens.stream().mapToInt(Integer::intValue).toArray();
                    String text = tokenizer.decode(toks, 0, toks.length);
                    int hold = maxStop > 0 ? maxStop - 1 : 0;
                    if (!p.includeStop()) {
                        // a completed stop string ends the text where it begins (the generation finishes at this token)
                        int cut = -1;
                        for (String stop : p.stops()) {
                            int at = text.indexOf(stop);
                            if (at >= 0 && (cut < 0 || at < cut)) cut = at;
                        }
                        if (cut >= 0) {
                            text = text.substring(0, cut);
                            hold = 0;
                        }
                    }
                    if (p.parseTools()) {
                        int open = text.indexOf(TOOL_OPEN);
                        if (open >= 0) {
                            s.inToolCall = true;
                            text = text.substring(0, open);
                        } else hold = Math.max(hold, TOOL_OPEN.length() - 1);
                    }
                    if (chat && !s.inToolCall && tokenizer.isSpecial(t.token()) && t.token() == tokenizer.eosId()) hold = Integer.MAX_VALUE;
                    int upTo = hold == Integer.MAX_VALUE ? s.sentChars : Math.max(s.sentChars, text.length() - hold);
                    while (upTo > s.sentChars && Character.isHighSurrogate(text.charAt(upTo - 1))) upTo--;
                    if (upTo > s.sentChars && text.charAt(upTo - 1) == '\uFFFD') upTo = s.sentChars;  // an incomplete UTF-8 sequence
                    String delta = upTo <= s.sentChars || upTo > text.length() ? "" : text.substring(s.sentChars, upTo);
                    s.sentChars = upTo;
                    if (delta.isEmpty() && !p.logprobs() && !p.returnTokenIds()) continue;
                    ObjectNode c = chunkChoice(t.choice(), chat);
                    if (chat) {
                        c.putObject("delta").put("content", delta);
                        if (p.logprobs()) c.set("logprobs", chatLogprobs(single(t), 0, 1, p));
                    } else {
                        c.put("text", delta);
                        if (p.logprobs()) c.set("logprobs", completionLogprobs(single(t), 0, 1, s.offset, p));
                        s.offset += tokenizer.decode(new int[] {t.token()}).length();
                    }
                    if (p.returnTokenIds()) c.putArray("token_ids").add(t.token());
                    c.putNull("finish_reason");
                    write(out, chunk(id, created, chat, c, version, !chat && p.returnTokenIds() && s.tokens.size() == 1 ? p.prompt() : null));
                } else if (e instanceof DoneEvent d) {
                    ChoiceState s = st[d.choice()];
                    s.done = true;
                    remaining--;
                    if (d.failure() != null) {
                        Throwable c = d.failure() instanceof java.util.concurrent.CompletionException && d.failure().getCause() != null
                                ? d.failure().getCause() : d.failure();
                        write(out, error(String.valueOf(c.getMessage()), "InternalServerError", null, 500));
                        continue;
                    }
                    Generation g = d.detailed().generation();
                    version = d.detailed().weightVersion();
                    completion += g.length();
                    Output o = output(g, p, chat);
                    ToolCalls calls = p.parseTools() ? toolCalls(o.text()) : null;
                    String rest = calls != null ? (calls.content() == null ? "" : calls.content()) : o.text();
                    String delta = rest.length() > s.sentChars ? rest.substring(s.sentChars) : "";
                    ObjectNode c = chunkChoice(d.choice(), chat);
                    if (chat) {
                        ObjectNode delt = c.putObject("delta");
                        if (!delta.isEmpty()) delt.put("content", delta);
                        if (calls != null) {
                            ArrayNode tc = delt.putArray("tool_calls");
                            for (int k = 0; k < calls.json().size(); k++) tc.add(((ObjectNode) calls.json().get(k).deepCopy()).put("index", k));
                        }
                    } else {
                        c.put("text", delta);
                    }
                    finish(c, g, calls != null);
                    write(out, chunk(id, created, chat, c, version, null));
                }
            }
            if (p.includeUsage()) {
                ObjectNode u = chunk(id, created, chat, null, version, null);
                u.set("usage", usage(p.prompt().length, completion));
                write(out, u);
            }
            out.write("data: [DONE]\n\n".getBytes(StandardCharsets.UTF_8));
            out.flush();
        }
    }

    private static LocalGenerator.Detailed single(TokenEvent t) {
        Generation g = new Generation(new int[] {t.token()}, new float[] {t.logprob()}, null, FinishReason.LENGTH, null, -1);
        return t.topIds() == null ? new LocalGenerator.Detailed(g, null, null)
                : new LocalGenerator.Detailed(g, new int[][] {t.topIds()}, new float[][] {t.topLps()});
    }

    private static ObjectNode chunkChoice(int index, @SuppressWarnings("unused") boolean chat) {
        ObjectNode c = JSON.createObjectNode().put("index", index);
        c.putNull("logprobs");
        return c;
    }

    private ObjectNode chunk(String id, long created, boolean chat, ObjectNode choice, String version, int[] promptIds) {
        ObjectNode root = JSON.createObjectNode();
        root.put("id", id).put("object", chat ? "chat.completion.chunk" : "text_completion").put("created", created).put("model", options.model());
        ArrayNode choices = root.putArray("choices");
        if (choice != null) {
            if (promptIds != null && !chat) choice.set("prompt_token_ids", ints(promptIds, promptIds.length));
            choices.add(choice);
        }
        if (promptIds != null && chat) root.set("prompt_token_ids", ints(promptIds, promptIds.length));
        root.putObject("metadata").put("weight_version", version);
        return root;
    }

    private static void write(OutputStream out, JsonNode event) throws IOException {
        out.write(("data: " + JSON.writeValueAsString(event) + "\n\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
    }

    // ---------------------------------------------------------------------------------------------
    // weight updates (SGLang)

    private void updateWeights(HttpExchange ex, JsonNode b) throws Exception {
        if (options.weights() == null) throw bad("this server does not load weights (no weight loader)", "model_path");
        JsonNode mp = b.get("model_path");
        if (mp == null || !mp.isTextual() || mp.asText().isBlank()) throw bad("model_path (a checkpoint directory) is required", "model_path");
        String lf = b.path("load_format").asText("auto");
        if (!lf.equals("auto") && !lf.equals("safetensors")) throw bad("load_format '" + lf + "' is not supported (auto, safetensors)", "load_format");
        JsonNode wv = b.get("weight_version");
        if (wv != null && !wv.isNull() && (!wv.isValueNode() || wv.asText().isBlank())) throw bad("weight_version must be a non-empty string", "weight_version");
        synchronized (updateLock) {
            String version = wv != null && !wv.isNull() ? wv.asText() : String.valueOf(updates + 1);
            Runnable copy;
            try {
                copy = options.weights().load(Path.of(mp.asText()));
            } catch (IllegalArgumentException | IOException e) {
                ObjectNode err = error("update_weights_from_disk failed: " + e.getMessage(), "BadRequestError", "model_path", 400);
                err.put("success", false).put("message", "update_weights_from_disk failed: " + e.getMessage());
                send(ex, 400, err);
                return;
            }
            long t0 = System.nanoTime();
            generator.updateWeights(copy, version);
            updates++;
            send(ex, 200, JSON.createObjectNode().put("success", true)
                    .put("message", "loaded " + mp.asText() + " (" + (System.nanoTime() - t0) / 1_000_000 + " ms after the requests in flight finished)")
                    .put("num_paused_requests", 0).put("weight_version", version));
        }
    }

    // ---------------------------------------------------------------------------------------------

    private static ObjectNode error(String message, String type, String param, int code) {
        ObjectNode o = JSON.createObjectNode();
        ObjectNode e = o.putObject("error").put("message", message).put("type", type);
        if (param == null) e.putNull("param"); else e.put("param", param);
        e.put("code", code);
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
