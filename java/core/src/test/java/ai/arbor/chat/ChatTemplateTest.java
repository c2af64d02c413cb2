package ai.arbor.chat;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.rollout.HuggingFaceTokenizer;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * {@link ChatTemplate} against independent implementations: the real Qwen3 chat template rendered by
 * Python's jinja2 (Debian python3-jinja2, set up as transformers sets it up: render_jinja2.py) on 25
 * conversations — system prompts, multi-turn, tools, tool calls and responses, {@code <think>} content and
 * {@code reasoning_content}, generation prompts, {@code enable_thinking} true / false / unset — compared as
 * strings, and their token ids from {@link HuggingFaceTokenizer} (DJL, Rust tokenizers) compared with
 * those of a JavaScript port of the tokenizers (@lenml/tokenizers, encode_js.js). A second, synthetic
 * template covers what Qwen3's does not: trim/lstrip_blocks without dashes, loop controls, dict methods,
 * {@code tojson(indent=…)}, {@code raise_exception}.
 */
class ChatTemplateTest {
    static final ObjectMapper JSON = new ObjectMapper();

    /** The Qwen3 tokenizer fetched by scripts/fetch-qwen3-tokenizer.sh; missing files fail the test. */
    static Path qwen3() {
        Path dir = ai.arbor.testing.Repository.root().resolve("third_party/qwen3-tokenizer");
        for (String f : List.of("tokenizer.json", "tokenizer_config.json", "js/dist/main.js"))
            if (!Files.isRegularFile(dir.resolve(f)))
                throw new IllegalStateException(dir.resolve(f) + " is missing: run scripts/fetch-qwen3-tokenizer.sh (scripts/setup.sh --test does)");
        return dir;
    }

    static Path resource(String name) {
        try {
            return Path.of(ChatTemplateTest.class.getResource(name).toURI());
        } catch (Exception e) {
            throw new IllegalStateException("test resource " + name + " is missing", e);
        }
    }

    static JsonNode run(List<String> command) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        byte[] out = p.getInputStream().readAllBytes();
        int rc = p.waitFor();
        if (rc != 0) throw new IllegalStateException(command + " exited with " + rc);
        return JSON.readTree(new String(out, StandardCharsets.UTF_8));
    }

    static List<Map<String, Object>> cases(Path file) throws IOException {
        return JSON.readValue(file.toFile(), new TypeReference<>() {});
    }

    @SuppressWarnings("unchecked")
    static String render(ChatTemplate t, Map<String, Object> c) {
        return t.render((List<Map<String, Object>>) c.get("messages"), (List<Map<String, Object>>) c.get("tools"),
                Boolean.TRUE.equals(c.get("add_generation_prompt")), (Map<String, Object>) c.get("kwargs"));
    }

    @Test
    void qwen3TemplateMatchesJinja2AndTokenIdsMatchTheJavaScriptTokenizer() throws Exception {
        Path dir = qwen3();
        Path convs = resource("qwen3_conversations.json");
        List<Map<String, Object>> cases = cases(convs);
        assertTrue(cases.size() >= 20, "at least 20 conversations, got " + cases.size());
        JsonNode expected = run(List.of("/usr/bin/python3", resource("render_jinja2.py").toString(), dir.resolve("tokenizer_config.json").toString(),
                convs.toString()));
        ChatTemplate template = ChatTemplate.load(dir);
        List<String> rendered = new ArrayList<>();
        for (int i = 0; i < cases.size(); i++) {
            String name = (String) cases.get(i).get("name");
            assertTrue(expected.get(i).isTextual(), name + ": jinja2 failed: " + expected.get(i));
            String got = render(template, cases.get(i));
            assertEquals(expected.get(i).asText(), got, "case " + i + " (" + name + ")");
            rendered.add(got);
        }
        Path strings = Files.createTempFile("arbor-chat", ".json");
        try {
            JSON.writeValue(strings.toFile(), rendered);
            JsonNode ids = run(List.of("node", resource("encode_js.js").toString(), dir.toString(), strings.toString()));
            try (HuggingFaceTokenizer tok = HuggingFaceTokenizer.load(dir)) {
                int specials = 0;
                for (int i = 0; i < rendered.size(); i++) {
                    int[] want = JSON.treeToValue(ids.get(i), int[].class);
                    int[] got = tok.encode(rendered.get(i));
                    assertArrayEquals(want, got, "token ids of case " + i + " (" + cases.get(i).get("name") + ")");
                    for (int id : got) if (id >= 151643) specials++;
                }
                assertTrue(specials > 100, "the chat markers are single added tokens (" + specials + " of them)");
            }
        } finally {
            Files.deleteIfExists(strings);
        }
    }

    @Test
    void qwen3MarkersAreSingleTokens() throws Exception {
        try (HuggingFaceTokenizer tok = HuggingFaceTokenizer.load(qwen3())) {
            // ids from Qwen3's tokenizer.json added_tokens
            assertEquals(151645, tok.eosId(), "eos is <|im_end|> (tokenizer_config.json)");
            assertEquals(151643, tok.padId());
            assertArrayEquals(new int[] {151644, 77091, 198, 151667, 271, 151668, 271}, tok.encode("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
            assertArrayEquals(new int[] {151657}, tok.encode("<tool_call>"));
            assertArrayEquals(new int[] {151665, 198, 151666}, tok.encode("<tool_response>\n</tool_response>"));
            assertEquals(151669, tok.vocabSize());
            // special tokens are skipped when decoding; <tool_call>, <think> are added but not special, so kept
            assertEquals("assistant\n<tool_call>", tok.decode(tok.encode("<|im_start|>assistant\n<tool_call><|im_end|>")));
        }
    }

    @Test
    void featureTemplateMatchesJinja2() throws Exception {
        Path tplFile = resource("features_template.json");
        Path convs = resource("features_conversations.json");
        JsonNode cfg = JSON.readTree(tplFile.toFile());
        ChatTemplate t = ChatTemplate.of(cfg.get("template").asText(), Map.of("bos_token", "<s>", "eos_token", "</s>"));
        JsonNode expected = run(List.of("/usr/bin/python3", resource("render_jinja2.py").toString(), tplFile.toString(), convs.toString()));
        List<Map<String, Object>> cases = cases(convs);
        for (int i = 0; i < cases.size(); i++) {
            if (expected.get(i).isTextual()) {
                assertEquals(expected.get(i).asText(), render(t, cases.get(i)), "case " + i);
            } else {
                Map<String, Object> c = cases.get(i);
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> render(t, c));
                assertTrue(e.getMessage().contains(expected.get(i).get("error").asText()), e.getMessage());
            }
        }
    }

    @Test
    void steppedSlicesOtherThanReversalAreRefused() {
        assertEquals("{% for m in (messages|reverse) %}", ChatTemplate.rewrite("{% for m in messages[::-1] %}"));
        assertEquals("text [::-1] stays", ChatTemplate.rewrite("text [::-1] stays"));
        assertEquals("{% set ns = namespace(a=(true), b=(messages|length - 1)) %}{{ f('x=1', k=(g(1, j=(2)) )) }}{{ a == b }}",
                ChatTemplate.rewrite("{% set ns = namespace(a=true, b=messages|length - 1) %}{{ f('x=1', k=g(1, j=2) ) }}{{ a == b }}"));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> ChatTemplate.of("{{ messages[::2] }}", null));
        assertTrue(e.getMessage().contains("[::2]"), e.getMessage());
    }

    @Test
    void pythonJsonFloatsAndStrings() {
        assertEquals("[0.1, 1e-05, 0.0001, 1e+16, 1234567890123456.0, -2.5e-07, 100.0, 1.5, -0.0]",
                PyJson.dumps(List.of(0.1, 1e-5, 1e-4, 1e16, 1234567890123456.0, -2.5e-7, 100.0, 1.5, -0.0), null));
        assertEquals("\"a\\\"b\\\\c\\n\\u0001é\u2028\"", PyJson.dumps("a\"b\\c\n\u0001é\u2028", null));
    }

    @Test
    void missingTemplateAndBadRendersNameTheProblem() throws IOException {
        Path dir = Files.createTempDirectory("arbor-chat");
        try {
            Files.writeString(dir.resolve("tokenizer_config.json"), "{\"eos_token\": \"</s>\"}");
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> ChatTemplate.load(dir));
            assertTrue(e.getMessage().contains("no chat template"), e.getMessage());
        } finally {
            Files.deleteIfExists(dir.resolve("tokenizer_config.json"));
            Files.deleteIfExists(dir);
        }
        IllegalArgumentException unclosed = assertThrows(IllegalArgumentException.class, () -> ChatTemplate.of("{% for m in messages %}{{ m }}", null));
        assertTrue(unclosed.getMessage().contains("does not parse"), unclosed.getMessage());
        ChatTemplate t = ChatTemplate.of("{{ messages[0].content.nosuchmethod() }}", null);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> t.render(List.of(Map.of("role", "user", "content", "x")), null, false, null));
        assertTrue(e.getMessage().contains("nosuchmethod"), e.getMessage());
    }
}
