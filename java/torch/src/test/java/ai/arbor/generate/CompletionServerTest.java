package ai.arbor.generate;

import ai.arbor.kernels.SamplingParams;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.rollout.CharTokenizer;
import ai.arbor.rollout.FinishReason;
import ai.arbor.rollout.Generation;
import ai.arbor.rollout.GenerationLimits;
import ai.arbor.rollout.GenerationRequest;
import ai.arbor.rollout.OpenAiCompatibleGenerator;
import ai.arbor.rollout.TokenContext;
import ai.arbor.rollout.Tokenizer;
import ai.arbor.torch.model.CpuThreads;
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
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The HTTP generator (the vLLM client of the rollout module) against arbor's completions server, end to end. */
class CompletionServerTest {
    static final CharTokenizer TOK = CharTokenizer.ascii();
    static ReferencePolicy policy;
    static LocalGenerator local;
    static CompletionServer server;

    @BeforeAll
    static void start(@TempDir Path dir) throws Exception {
        CpuThreads.set(1);
        // served from a checkpoint, as `arbor serve --checkpoint` does
        try (ReferencePolicy p = ReferencePolicy.create(PolicyConfig.tiny(TOK.vocabSize()))) {
            p.save(dir.resolve("policy.safetensors"));
        }
        policy = ReferencePolicy.load(dir.resolve("policy.safetensors"), "cpu", org.bytedeco.pytorch.global.torch.ScalarType.Float);
        local = new LocalGenerator(policy, TOK, LocalGenerator.Options.defaults());
        server = CompletionServer.start(local, TOK, "tiny", "127.0.0.1", 0, 16, Duration.ofMinutes(1));
    }

    @AfterAll
    static void stop() {
        server.close();
        local.close();
        policy.close();
    }

    @Test
    void httpGeneratorGetsTheLocalGeneratorsTokensAndLogprobs() throws Exception {
        int[] prompt = TOK.encode("Q: 417*38\n");
        SamplingParams d = SamplingParams.temperature(1f);
        GenerationLimits p = GenerationLimits.defaults().withMaxNewTokens(24).withTopLogprobs(5);
        try (OpenAiCompatibleGenerator http = OpenAiCompatibleGenerator.builder().baseUrl(server.baseUrl())
                .model("tiny").vocabSize(TOK.vocabSize()).build()) {
            Generation viaHttp = http.generate(new GenerationRequest(TokenContext.of(prompt), d, p, 1234)).get();
            // the client sends seed mod 2^31 - 1: the same seed locally gives the same draw
            Generation direct = local.generate(new GenerationRequest(TokenContext.of(prompt), d, p, 1234)).get();
            assertArrayEquals(direct.tokens(), viaHttp.tokens());
            assertArrayEquals(direct.logprobs(), viaHttp.logprobs());
            assertEquals(direct.finishReason(), viaHttp.finishReason());
            assertNotNull(viaHttp.entropies(), "top-5 logprobs give ARPO's entropy estimate");
            for (int i = 0; i < viaHttp.length(); i++)
                assertTrue(viaHttp.entropies()[i] <= direct.entropies()[i] + 1e-4f,
                        "the top-k estimate is a lower bound of the exact entropy at " + i);
            // stop strings: the client asks for the stop string to be included
            String text = TOK.decode(direct.tokens());
            assertTrue(text.length() >= 2, "a stop string needs a generation of two characters: " + text);
            int at = Math.min(3, text.length() - 2);  // (how long the tiny model runs depends on the draw)
            String stop = text.substring(at, at + 2);
            Generation stopped = http.generate(new GenerationRequest(TokenContext.of(prompt), d, p.withStopStrings(List.of(stop)), 1234)).get();
            assertEquals(FinishReason.STOP_STRING, stopped.finishReason());
            assertEquals(stop, stopped.stopString());
            assertTrue(TOK.decode(stopped.tokens()).endsWith(stop));
            // min-p travels as min_p: the server draws what the local generator draws with it, which is not the
            // untruncated draw (so the equality says the value arrived)
            SamplingParams m = d.withMinP(0.9f);
            int[] minPHttp = http.generate(new GenerationRequest(TokenContext.of(prompt), m, p, 1234)).get().tokens();
            int[] minPLocal = local.generate(new GenerationRequest(TokenContext.of(prompt), m, p, 1234)).get().tokens();
            assertArrayEquals(minPLocal, minPHttp);
            assertFalse(java.util.Arrays.equals(minPLocal, direct.tokens()), "min-p 0.9 changes the draw");
        }
    }

    /**
     * A stop string ends the text at its first occurrence, where the generation found it, also when the token that
     * completes it holds a second one (the server cut at the last occurrence once, so the official client saw the stop
     * string in the text: OpenAiClientTest, seed 42219755285482); the tokens after the cut are dropped, one straddling
     * it kept.
     */
    @Test
    void aStopStringEndsTheTextAtItsFirstOccurrence() {
        String[] vocab = {"Once", "\t\n\t\n", " upon", "a\t", "\n!"};
        Tokenizer pieces = new Tokenizer() {
            public int[] encode(String text) { throw new UnsupportedOperationException(); }
            public String decode(int[] ids, int from, int to) {
                StringBuilder b = new StringBuilder();
                for (int i = from; i < to; i++) b.append(vocab[ids[i]]);
                return b.toString();
            }
            public int vocabSize() { return vocab.length; }
            public int eosId() { return -1; }
            public int padId() { return -1; }
            public int bosId() { return -1; }
            public boolean isSpecial(int id) { return false; }
            public int tokenId(String token) { return java.util.Arrays.asList(vocab).indexOf(token); }
        };
        // "Once" + "\t\n\t\n": the second token completes "\t\n" and holds another
        CompletionServer.Output o = CompletionServer.withoutStop(pieces, new int[] {0, 1}, 2, "\t\n");
        assertEquals("Once", o.text());
        assertEquals(1, o.tokens());
        // "Once" + " upon" + "a\t" + "\n!": the stop straddles two tokens; the one it starts in is kept
        o = CompletionServer.withoutStop(pieces, new int[] {0, 2, 3, 4}, 4, "\t\n");
        assertEquals("Once upona", o.text());
        assertEquals(3, o.tokens());
        // the stop string at the very start: nothing shown
        o = CompletionServer.withoutStop(pieces, new int[] {1}, 1, "\t\n");
        assertEquals("", o.text());
        assertEquals(0, o.tokens());
    }

    @Test
    void plainTextClientsAndErrors() throws Exception {
        HttpClient c = HttpClient.newHttpClient();
        ObjectMapper json = new ObjectMapper();
        String body = "{\"model\":\"tiny\",\"prompt\":\"Hello\",\"max_tokens\":8,\"temperature\":0,\"logprobs\":2}";
        HttpResponse<String> r = c.send(HttpRequest.newBuilder(URI.create(server.baseUrl() + "/v1/completions"))
                .POST(HttpRequest.BodyPublishers.ofString(body)).header("Content-Type", "application/json").build(),
                HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), r.body());
        JsonNode choice = json.readTree(r.body()).path("choices").get(0);
        JsonNode lp = choice.path("logprobs");
        assertEquals(8, lp.path("tokens").size());
        assertEquals(choice.path("text").asText(), String.join("", json.convertValue(lp.path("tokens"), String[].class)));
        assertEquals(2, lp.path("top_logprobs").get(0).size());
        assertEquals("length", choice.path("finish_reason").asText());
        // greedy: the sampled token is the best alternative
        double best = lp.path("top_logprobs").get(0).elements().next().asDouble();
        assertEquals(best, lp.path("token_logprobs").get(0).asDouble(), 1e-6);
        for (String bad : new String[] {"{\"prompt\":\"x\",\"n\":0}", "{\"prompt\":[1,2,9999]}", "{\"max_tokens\":3}", "not json",
                "{\"prompt\":\"x\",\"temperature\":-1}"}) {
            HttpResponse<String> e = c.send(HttpRequest.newBuilder(URI.create(server.baseUrl() + "/v1/completions"))
                    .POST(HttpRequest.BodyPublishers.ofString(bad)).build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(400, e.statusCode(), bad + " -> " + e.body());
            JsonNode err = json.readTree(e.body()).path("error");
            assertTrue(err.path("message").asText().length() > 3);
            assertEquals("BadRequestError", err.path("type").asText(), e.body());
            assertEquals(400, err.path("code").asInt(), e.body());
            assertTrue(err.has("param"), e.body());
        }
        // the offending field is named
        HttpResponse<String> e = c.send(HttpRequest.newBuilder(URI.create(server.baseUrl() + "/v1/completions"))
                .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\":\"x\",\"top_k\":-2}")).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals("top_k", json.readTree(e.body()).path("error").path("param").asText(), e.body());
        // the model list reports the policy's context length
        HttpResponse<String> models = c.send(HttpRequest.newBuilder(URI.create(server.baseUrl() + "/v1/models")).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(policy.config().maxSeq(), json.readTree(models.body()).path("data").get(0).path("max_model_len").asInt());
    }

    /** Qwen3 / Hermes tool calls as vLLM's hermes parser reads them: every call, the content before the first, arguments by json.dumps. */
    @Test
    void toolCallsAreReadAsVllmsHermesParserReadsThem() {
        CompletionServer.ToolCalls two = CompletionServer.toolCalls("Let me add.\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": [2, \"x\"]}}\n</tool_call>\n"
                + "<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>");
        assertEquals("Let me add.\n", two.content());
        assertEquals(2, two.json().size());
        assertEquals("add", two.json().get(0).path("function").path("name").asText());
        assertEquals("{\"a\": 1, \"b\": [2, \"x\"]}", two.json().get(0).path("function").path("arguments").asText());
        assertEquals("function", two.json().get(0).path("type").asText());
        assertTrue(two.json().get(0).path("id").asText().startsWith("chatcmpl-tool-"));
        assertEquals("{}", two.json().get(1).path("function").path("arguments").asText());
        // a call first: no content; an unterminated last call still counts; arguments given as a string stay as they are
        CompletionServer.ToolCalls open = CompletionServer.toolCalls("<tool_call>{\"name\":\"f\",\"arguments\":\"{\\\"q\\\": 1}\"}");
        assertEquals(null, open.content());
        assertEquals("{\"q\": 1}", open.json().get(0).path("function").path("arguments").asText());
        // no call, or a call that is not JSON with a name: no tool calls (the text is the content)
        assertEquals(null, CompletionServer.toolCalls("just an answer"));
        assertEquals(null, CompletionServer.toolCalls("<tool_call>{not json}</tool_call>"));
        assertEquals(null, CompletionServer.toolCalls("<tool_call>{\"arguments\": {}}</tool_call>"));
        assertEquals(null, CompletionServer.toolCalls("<tool_call>{\"name\": \"f\", \"arguments\": 3}</tool_call>"));
    }

    /** Weight updates name the first config.json field in which a checkpoint differs from the served model. */
    @Test
    void aCheckpointOfAnotherModelIsNamedByItsField() {
        PolicyConfig c = PolicyConfig.tiny(TOK.vocabSize());
        assertEquals(null, CompletionServer.configDifference(c, c.withSeed(99)), "the seed is not the model's shape");
        PolicyConfig wider = new PolicyConfig(c.vocab(), c.dModel(), c.layers(), c.heads(), c.kvHeads(), c.ffnDim() * 2, c.maxSeq(),
                c.ropeTheta(), c.normEps(), c.tiedEmbeddings(), c.seed());
        assertEquals("intermediate_size is 256, the served model's 128", CompletionServer.configDifference(c, wider));
        PolicyConfig longer = new PolicyConfig(c.vocab(), c.dModel(), c.layers(), c.heads(), c.kvHeads(), c.ffnDim(), 2 * c.maxSeq(),
                c.ropeTheta(), c.normEps(), c.tiedEmbeddings(), c.seed());
        assertEquals("max_position_embeddings is 1024, the served model's 512", CompletionServer.configDifference(c, longer));
    }
}
