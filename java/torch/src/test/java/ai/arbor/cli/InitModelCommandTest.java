package ai.arbor.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.torch.model.HfCheckpoint;
import ai.arbor.torch.model.PolicyConfig;
import ai.arbor.torch.model.ReferencePolicy;
import ai.arbor.torch.model.Safetensors;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** {@code arbor init-model} → {@code arbor train --model DIR} → {@code arbor eval --model OUT/model}. */
class InitModelCommandTest {

    @TempDir
    Path dir;

    @Test
    void initTrainAndEvalAHuggingFaceDirectory() throws Exception {
        Path model = dir.resolve("qwen3-tiny");
        String out = TrainCommandTest.run("init-model", "--family", "qwen3", "--out", model.toString(), "--hidden", "16", "--layers", "1",
                "--heads", "2", "--kv-heads", "1", "--head-dim", "12", "--ffn", "32", "--max-positions", "512", "--dtype", "bf16");
        assertTrue(out.contains("Qwen3ForCausalLM"), out);
        JsonNode cfg = new ObjectMapper().readTree(model.resolve("config.json").toFile());
        assertEquals(12, cfg.get("head_dim").asInt());
        assertEquals("bfloat16", cfg.get("torch_dtype").asText());
        PolicyConfig c = HfCheckpoint.readConfig(model.resolve("config.json"));
        // 16·V embedding (tied) + q 24·16 + k,v 12·16 each + o 16·24 + q/k norms 2·12 + MLP 3·16·32 + 2 norms·16 + final norm 16
        long v = c.vocab();
        assertEquals(16 * v + 24 * 16 + 2 * 12 * 16 + 16 * 24 + 24 + 3 * 16 * 32 + 32 + 16, c.parameterCount());
        assertTrue(Safetensors.readHeader(model.resolve("model.safetensors")).entries().stream()
                .allMatch(e -> e.dtype() == Safetensors.Dtype.BF16));

        Path run = dir.resolve("run");
        String[] tiny = TrainCommandTest.TINY.clone();
        tiny[1] = model.toString();   // --model DIR instead of a size
        TrainCommandTest.run(concat(new String[] {"train", "--recipe", "grpo", "--out", run.toString()}, tiny));
        Path trained = run.resolve("model");
        assertTrue(Files.isRegularFile(trained.resolve("config.json")) && Files.isRegularFile(trained.resolve("model.safetensors")));
        try (ReferencePolicy before = ReferencePolicy.load(model, "cpu", ScalarType.Float);
             ReferencePolicy after = ReferencePolicy.load(trained, "cpu", ScalarType.Float);
             ReferencePolicy own = ReferencePolicy.load(run.resolve("policy.safetensors"), "cpu", ScalarType.Float)) {
            assertEquals(before.config(), after.config());
            String name = "model.layers.0.self_attn.q_norm.weight";
            double[] b = doubles(before, name), a = doubles(after, name), o = doubles(own, name);
            assertNotEquals(Arrays.toString(b), Arrays.toString(a), "training moved the weights");
            // the HF copy is bf16 (its default); the run's own checkpoint keeps float32
            for (int i = 0; i < a.length; i++) assertEquals(o[i], a[i], Math.abs(o[i]) / 128, name);
        }
        String table = TrainCommandTest.run("eval", "--model", trained.toString(), "--problems", "2", "--samples", "1", "--train-size", "40");
        assertTrue(table.contains(trained.toString()), table);
    }

    /** A directory written with the Qwen3 tokenizer is evaluated in its chat format (system turn, tools, the user's question). */
    @Test
    void evalAsksAChatTokenizerDirectoryInItsChatFormat() throws Exception {
        Path tokenizer = ai.arbor.testing.Repository.root().resolve("third_party/qwen3-tokenizer");
        if (!Files.isRegularFile(tokenizer.resolve("tokenizer.json")))
            throw new IllegalStateException(tokenizer + "/tokenizer.json is missing: run scripts/fetch-qwen3-tokenizer.sh (scripts/setup.sh --test does)");
        Path model = dir.resolve("qwen3-chat");
        TrainCommandTest.run("init-model", "--family", "qwen3", "--out", model.toString(), "--hidden", "16", "--layers", "1",
                "--heads", "2", "--kv-heads", "1", "--head-dim", "8", "--ffn", "32", "--max-positions", "1024", "--tokenizer", tokenizer.toString());
        String out = TrainCommandTest.run("eval", "--model", model.toString(), "--problems", "1", "--samples", "0", "--train-size", "40", "--show", "1");
        assertTrue(out.contains("<|im_start|>system") && out.contains("<|im_start|>user") && out.contains("<|im_start|>assistant"), out);
        assertTrue(out.contains("<tools>") && out.contains("\"name\": \"python\""), "the python tool is declared through the template: " + out);
    }

    @Test
    void badFlagsAreRefusedByName() {
        CommandLine cli = new CommandLine(new Arbor());
        int code = cli.execute("init-model", "--family", "gpt2", "--out", dir.resolve("x").toString());
        assertNotEquals(0, code);
        code = cli.execute("init-model", "--family", "qwen2", "--out", dir.resolve("y").toString(), "--hidden", "16", "--heads", "2", "--head-dim", "12");
        assertNotEquals(0, code);
        assertTrue(!Files.exists(dir.resolve("x")) && !Files.exists(dir.resolve("y")));
    }

    private static double[] doubles(ReferencePolicy p, String name) {
        org.bytedeco.pytorch.Tensor t = p.namedParameters().get(name).detach().to(ScalarType.Double).contiguous();
        double[] out = new double[(int) t.numel()];
        new org.bytedeco.javacpp.DoublePointer(t.data_ptr()).capacity(out.length).get(out);
        return out;
    }

    private static String[] concat(String[] a, String[] b) {
        List<String> l = new java.util.ArrayList<>(List.of(a));
        l.addAll(List.of(b));
        return l.toArray(new String[0]);
    }
}
