package ai.arbor.generate;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.chat.ChatTemplate;
import ai.arbor.rollout.HuggingFaceTokenizer;
import ai.arbor.testing.Repository;
import ai.arbor.testing.Seeds;
import ai.arbor.torch.model.CpuThreads;
import ai.arbor.torch.model.HfCheckpoint;
import ai.arbor.torch.model.PolicyConfig;
import ai.arbor.torch.model.ReferencePolicy;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.bytedeco.javacpp.DoublePointer;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code arbor serve} driven by the official OpenAI JavaScript client (npm {@code openai}, fetched by
 * scripts/fetch-openai-node.sh; node and npm come from scripts/setup.sh --test, and their absence fails
 * this test): completions, logprobs, n, stream, chat with tools, errors (openai_client.js lists the
 * checks). The model is a Qwen3-architecture checkpoint with the real Qwen3 tokenizer and chat template,
 * its weights built so that it is a bigram model: attention and MLP outputs are zero, so the next token's
 * logits depend on the last token only; random for most tokens, and a chain
 * {@code \n → <tool_call> → {" → name → … → </tool_call> → <|im_end|>} that writes one tool call after
 * the chat template's generation prompt. The greedy completion's log-probs the client received are checked
 * here against the training forward of the checkpoint (an independent path from the server's decode).
 */
class OpenAiClientTest {
    static final ObjectMapper JSON = new ObjectMapper();
    /** {@code \n}, then the tokens of {@code <tool_call>{"name":"add","arguments":{"a":1}}</tool_call><|im_end|>} (Qwen3's tokenizer). */
    static final int[] CHAIN = {198, 151657, 4913, 606, 3252, 718, 2198, 16370, 22317, 64, 788, 16, 3417, 151658, 151645};
    static final int VOCAB = 151936, D = 32;

    @TempDir
    Path dir;

    static Path need(Path p, String what) {
        if (!Files.exists(p)) throw new IllegalStateException(p + " is missing: " + what);
        return p;
    }

    @Test
    void theOfficialOpenAiClientDrivesArborServe() throws Exception {
        CpuThreads.set(1);
        long seed = Seeds.seed("OpenAiClientTest");
        Path qwen3 = Repository.root().resolve("third_party/qwen3-tokenizer");
        need(qwen3.resolve("tokenizer.json"), "run scripts/fetch-qwen3-tokenizer.sh (scripts/setup.sh --test does)");
        Path openai = need(Repository.root().resolve("third_party/openai-node/package.json"),
                "run scripts/fetch-openai-node.sh (scripts/setup.sh --test does)").getParent();
        Path script = Path.of(OpenAiClientTest.class.getResource("openai_client.js").toURI());

        Path model = dir.resolve("bigram");
        PolicyConfig c = HfCheckpoint.Family.QWEN3.config(VOCAB, D, 1, 2, 1, 8, 16, 512, 1e6, 1e-6, false, false, seed);
        try (ReferencePolicy p = ReferencePolicy.create(c)) {
            bigram(p, new Random(seed));
            HfCheckpoint.save(p, model, HfCheckpoint.SaveOptions.defaults().withStoreAs(ScalarType.Float).withTokenizer(qwen3)
                    .withSpecialTokens(null, 151645));
        }
        try (ReferencePolicy policy = ReferencePolicy.load(model, "cpu", ScalarType.Float);
             HuggingFaceTokenizer tok = HuggingFaceTokenizer.load(model);
             LocalGenerator local = new LocalGenerator(policy, tok, LocalGenerator.Options.defaults());
             CompletionServer server = CompletionServer.start(local, tok, new CompletionServer.Options("bigram", model.toString(),
                     c.maxSeq(), ChatTemplate.load(model), null, CompletionServer.weightLoader(policy, tok, "cpu"), 16, 16,
                     Duration.ofMinutes(2)), "127.0.0.1", 0)) {
            long t0 = System.nanoTime();
            Process node = new ProcessBuilder("node", script.toString(), openai.toString(), server.baseUrl(), "bigram",
                    String.valueOf(c.maxSeq())).redirectErrorStream(true).start();
            String out = new String(node.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertTrue(node.waitFor(3, TimeUnit.MINUTES), "node did not finish");
            System.out.println("OpenAiClientTest: node client ran in " + (System.nanoTime() - t0) / 1_000_000 + " ms");
            assertEquals(0, node.exitValue(), "the OpenAI client's checks failed:\n" + out);
            assertTrue(out.strip().endsWith("ALL OK"), out);
            Map<String, JsonNode> checks = new LinkedHashMap<>();
            for (String line : out.split("\n"))
                if (line.startsWith("{")) {
                    JsonNode j = JSON.readTree(line);
                    checks.put(j.path("check").asText(), j);
                }
            assertEquals(List.of("models", "greedy", "token_ids_prompt", "n", "stop", "stream", "chat_tools", "chat_turn2", "chat_finish",
                    "chat_stream", "errors"), new ArrayList<>(checks.keySet()));

            // the greedy completion: each token is the argmax of the training forward and its logprob is that forward's
            JsonNode g = checks.get("greedy");
            int[] prompt = JSON.convertValue(g.path("prompt_token_ids"), int[].class);
            assertArrayEquals(tok.encode("Hello, world"), prompt);
            int[] got = JSON.convertValue(g.path("token_ids"), int[].class);
            assertEquals(8, got.length, g.toString());
            int[] ctx = prompt;
            for (int t = 0; t < got.length; t++) {
                double[] lp = forwardLogprobs(policy, ctx, tok.vocabSize());
                int best = 0;
                for (int v = 1; v < lp.length; v++) if (lp[v] > lp[best]) best = v;
                assertEquals(best, got[t], "greedy token " + t);
                assertEquals(lp[got[t]], g.path("token_logprobs").get(t).asDouble(), 2e-5, "logprob of token " + t);
                ctx = java.util.Arrays.copyOf(ctx, ctx.length + 1);
                ctx[ctx.length - 1] = got[t];
            }
            // the chat prompt is the template's rendering with the tool declared; the turn is the chain
            JsonNode chat = checks.get("chat_tools");
            int[] chatPrompt = JSON.convertValue(chat.path("prompt_token_ids"), int[].class);
            String rendered = tok.decode(chatPrompt, 0, chatPrompt.length);
            assertTrue(rendered.contains("\"name\": \"add\"") && rendered.contains("<tools>") && rendered.endsWith("assistant\n"), rendered);
            assertEquals(151644, chatPrompt[chatPrompt.length - 3], "the generation prompt opens with <|im_start|>");
            assertArrayEquals(java.util.Arrays.copyOfRange(CHAIN, 1, CHAIN.length), JSON.convertValue(chat.path("token_ids"), int[].class));
            assertEquals("{\"a\": 1}", chat.path("arguments").asText(), "arguments as vLLM returns them (json.dumps)");
            // the second turn renders the returned call and the tool's result as the template does
            int[] turn2 = JSON.convertValue(checks.get("chat_turn2").path("prompt_token_ids"), int[].class);
            String second = tok.decode(turn2, 0, turn2.length);
            assertTrue(second.startsWith(rendered.substring(0, rendered.length() - "assistant\n".length())), second);
            assertTrue(second.contains("<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>"), second);
            assertTrue(second.contains("<tool_response>\n3\n</tool_response>") && second.endsWith("assistant\n"), second);
        }
    }

    /**
     * Makes {@code p} a bigram model: every projection zero but the embedding and the LM head, norms 1. The
     * chain's tokens embed as the unit vectors e_0 … e_13 and the LM head row of each one's successor holds 6
     * there (logit 6·√D ≈ 34 against 0: the successor, surely); the other tokens embed N(0, 1) and read
     * N(0, 0.3²) in dimensions 14 … D−1, where the chain's embeddings are zero.
     */
    static void bigram(ReferencePolicy p, Random rnd) {
        int k = CHAIN.length - 1;
        float[] embed = new float[VOCAB * D], head = new float[VOCAB * D];
        for (int v = 0; v < VOCAB; v++)
            for (int j = k; j < D; j++) {
                embed[v * D + j] = (float) rnd.nextGaussian();
                head[v * D + j] = (float) (0.3 * rnd.nextGaussian());
            }
        for (int i = 0; i < k; i++) {
            int src = CHAIN[i], next = CHAIN[i + 1];
            java.util.Arrays.fill(embed, src * D, src * D + D, 0f);
            embed[src * D + i] = 1f;
            head[next * D + i] = 6f;
        }
        try (PointerScope scope = new PointerScope(); org.bytedeco.pytorch.NoGradGuard g = new org.bytedeco.pytorch.NoGradGuard()) {
            for (Map.Entry<String, Tensor> e : p.namedParameters().entrySet()) {
                String name = e.getKey();
                if (name.endsWith("norm.weight")) e.getValue().fill_(new org.bytedeco.pytorch.Scalar(1.0));
                else if (name.equals("model.embed_tokens.weight")) e.getValue().copy_(Tensor.create(embed, VOCAB, D));
                else if (name.equals("lm_head.weight")) e.getValue().copy_(Tensor.create(head, VOCAB, D));
                else e.getValue().zero_();
            }
        }
    }

    static double[] forwardLogprobs(ReferencePolicy p, int[] context, int vocab) {
        try (PointerScope scope = new PointerScope()) {
            Tensor logits = p.forward(new int[][] {context});
            Tensor last = logits.select(0, 0).select(0, context.length - 1).narrow(0, 0, vocab).to(ScalarType.Double);
            Tensor lp = torch.log_softmax(last, 0).contiguous();
            double[] out = new double[vocab];
            new DoublePointer(lp.data_ptr()).capacity(out.length).get(out);
            return out;
        }
    }
}
