package ai.arbor.torch.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

@SuppressWarnings("try") // PointerScope and NoGradGuard act through their try blocks
class SafetensorsTest {

    @TempDir
    Path dir;

    @BeforeAll
    static void threads() {
        NaiveTransformer.singleThreaded();
    }

    private static Tensor tensor(double[] values, long[] shape, ScalarType dtype) {
        return Tensors.doubles(values, shape, dtype, new Device("cpu"));
    }

    @Test
    void roundTripKeepsDtypesShapesValuesAndMetadata() throws IOException {
        long seed = NaiveTransformer.seed();
        System.out.println("seed " + seed);
        Random rnd = new Random(seed);
        int saved = Safetensors.chunkBytes;
        Safetensors.chunkBytes = 5; // exercise the chunked reads and writes
        try (PointerScope scope = new PointerScope()) {
            Map<String, Tensor> in = new LinkedHashMap<>();
            double[] v = new double[6];
            for (int i = 0; i < v.length; i++) v[i] = rnd.nextGaussian();
            in.put("f32", tensor(v, new long[] {2, 3}, ScalarType.Float));
            in.put("bf16", tensor(new double[] {1.5, -0.0078125, 3e38, 0}, new long[] {4}, ScalarType.BFloat16));
            in.put("f16", tensor(new double[] {65504, -1e-3, 0.25, 7, 1, 2}, new long[] {3, 2}, ScalarType.Half));
            in.put("f64.scalar", tensor(new double[] {Math.PI}, new long[] {}, ScalarType.Double));
            in.put("i64", Tensors.longs(new long[] {Long.MIN_VALUE, -1, 0, 1, Long.MAX_VALUE}, new Device("cpu")));
            in.put("empty", tensor(new double[0], new long[] {0, 3}, ScalarType.Float));
            Map<String, String> meta = Map.of("format", "pt", "note", "ünïcode ✓");
            Path file = dir.resolve("t.safetensors");
            Safetensors.write(file, in, meta);
            assertEquals(Files.size(file), Safetensors.readHeader(file).dataStart() + dataBytes(in));
            try (Safetensors.Contents out = Safetensors.read(file)) {
                assertEquals(meta, out.metadata());
                assertEquals(List.copyOf(in.keySet()), List.copyOf(out.tensors().keySet()));
                for (Map.Entry<String, Tensor> e : in.entrySet()) {
                    Tensor got = out.tensors().get(e.getKey());
                    assertEquals(e.getValue().scalar_type().intern(), got.scalar_type().intern(), e.getKey());
                    assertArrayEquals(Tensors.shape(e.getValue()), Tensors.shape(got), e.getKey());
                    if (e.getKey().equals("i64")) {
                        for (int i = 0; i < 5; i++) assertEquals(e.getValue().select(0, i).item_long(), got.select(0, i).item_long());
                    } else {
                        assertArrayEquals(Tensors.toDoubles(e.getValue()), Tensors.toDoubles(got), 0.0, e.getKey());
                    }
                }
            }
            Safetensors.Header header = Safetensors.readHeader(file);
            assertEquals(0, header.dataStart() % 8, "header padded to a multiple of 8 bytes");
            assertEquals(6, header.entries().size());
        } finally {
            Safetensors.chunkBytes = saved;
        }
    }

    private static long dataBytes(Map<String, Tensor> tensors) {
        return tensors.values().stream().mapToLong(Tensor::nbytes).sum();
    }

    @Test
    void writerProducesTheExactBytesOfTheFormat() throws IOException {
        try (PointerScope scope = new PointerScope()) {
            Path file = dir.resolve("x.safetensors");
            Map<String, Tensor> one = new LinkedHashMap<>();
            one.put("x", tensor(new double[] {1.0, -2.0}, new long[] {2}, ScalarType.Float));
            Safetensors.write(file, one, Map.of());
            String json = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
            int padded = (json.length() + 7) / 8 * 8;
            ByteBuffer want = ByteBuffer.allocate(8 + padded + 8).order(ByteOrder.LITTLE_ENDIAN);
            want.putLong(padded).put(json.getBytes(StandardCharsets.UTF_8));
            while (want.position() < 8 + padded) want.put((byte) ' ');
            want.putInt(0x3F800000).putInt(0xC0000000); // 1.0f, -2.0f little-endian
            assertArrayEquals(want.array(), Files.readAllBytes(file));
        }
    }

    /** A file assembled byte by byte: header length, JSON, then little-endian F32 / BF16 / F16 data. */
    @Test
    void readsAHandWrittenFileWithKnownBytes() throws IOException {
        String json = "{\"__metadata__\":{\"k\":\"v\"},"
                + "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                + "\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[8,14]},"
                + "\"c\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[14,22]}}";
        ByteArrayOutputStream data = new ByteArrayOutputStream();
        le32(data, Float.floatToIntBits(1.5f));
        le32(data, Float.floatToIntBits(-2.25f));
        for (int bits : new int[] {0x3F80, 0xC000, 0x3F00}) le16(data, bits);           // bf16: 1, -2, 0.5
        for (int bits : new int[] {0x3C00, 0xC000, 0x3800, 0x7BFF}) le16(data, bits);   // f16: 1, -2, 0.5, 65504
        Path file = dir.resolve("hand.safetensors");
        Files.write(file, file(json, data.toByteArray()));
        try (Safetensors.Contents c = Safetensors.read(file)) {
            assertEquals(Map.of("k", "v"), c.metadata());
            assertArrayEquals(new double[] {1.5, -2.25}, Tensors.toDoubles(c.tensors().get("a")));
            assertEquals(ScalarType.BFloat16, c.tensors().get("b").scalar_type().intern());
            assertArrayEquals(new double[] {1, -2, 0.5}, Tensors.toDoubles(c.tensors().get("b")));
            assertEquals(ScalarType.Half, c.tensors().get("c").scalar_type().intern());
            assertArrayEquals(new long[] {2, 2}, Tensors.shape(c.tensors().get("c")));
            assertArrayEquals(new double[] {1, -2, 0.5, 65504}, Tensors.toDoubles(c.tensors().get("c")));
        }
    }

    @Test
    void malformedFilesAreRejectedWithTheReason() throws IOException {
        String ok = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
        rejects(file(ok, new byte[7]), "truncated: tensor a");                                        // truncated data
        rejects(file(ok, new byte[9]), "tensors cover");                                           // trailing bytes
        rejects(file(ok.replace("F32", "F31"), new byte[8]), "F31");                          // unknown dtype
        rejects(file(ok.replace("[0,8]", "[0,12]"), new byte[12]), "needs 8 bytes");          // size vs shape
        rejects(file(ok.replace("[2]", "[-2]"), new byte[8]), "shape");
        rejects(file("[1,2]", new byte[0]), "not a JSON object");
        rejects(file("{\"a\":", new byte[0]), "not JSON");
        rejects(file("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                + "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", new byte[12]), "gap or overlap");
        rejects(file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                + "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", new byte[8]), "gap or overlap");
        rejects(file("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                + "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", new byte[8]), "not JSON");
        rejects(file("{\"__metadata__\":{\"k\":1}}", new byte[0]), "not a string");
        byte[] huge = new byte[16];
        ByteBuffer.wrap(huge).order(ByteOrder.LITTLE_ENDIAN).putLong(1L << 40);
        rejects(huge, "header length");
        rejects(new byte[3], "too short");
    }

    @Test
    void policyCheckpointRoundTrips() throws IOException {
        long seed = NaiveTransformer.seed();
        System.out.println("seed " + seed);
        for (PolicyConfig config : new PolicyConfig[] {NaiveTransformer.gqa(seed), NaiveTransformer.mha(seed)}) {
            try (ReferencePolicy policy = ReferencePolicy.create(config); PointerScope scope = new PointerScope()) {
                NaiveTransformer.randomize(policy, new Random(seed), 0.3);
                Path file = dir.resolve("policy-" + config.tiedEmbeddings() + ".safetensors");
                policy.save(file);
                int[][] tokens = {NaiveTransformer.randomTokens(new Random(seed), 9, config.vocab())};
                try (ReferencePolicy loaded = ReferencePolicy.load(file, "cpu", ScalarType.Float)) {
                    assertEquals(config, loaded.config());
                    assertEquals(policy.namedParameters().keySet(), loaded.namedParameters().keySet());
                    for (String name : policy.namedParameters().keySet())
                        assertArrayEquals(Tensors.toDoubles(policy.namedParameters().get(name)),
                                Tensors.toDoubles(loaded.namedParameters().get(name)), 0.0, name);
                    assertArrayEquals(Tensors.toDoubles(policy.forward(tokens)), Tensors.toDoubles(loaded.forward(tokens)), 0.0);
                    assertTrue(loaded.namedParameters().values().stream().allMatch(Tensor::requires_grad));
                }
                // bf16 storage: each weight comes back as its bf16 rounding
                Path half = dir.resolve("policy-bf16.safetensors");
                policy.save(half, ScalarType.BFloat16);
                assertTrue(Files.size(half) < Files.size(file) * 0.6);
                assertEquals("BF16", Safetensors.readHeader(half).entries().get(0).dtype().name());
                try (ReferencePolicy loaded = ReferencePolicy.load(half, "cpu", ScalarType.Float)) {
                    for (String name : policy.namedParameters().keySet())
                        assertArrayEquals(Tensors.toDoubles(policy.namedParameters().get(name).to(ScalarType.BFloat16)),
                                Tensors.toDoubles(loaded.namedParameters().get(name)), 0.0, name);
                }
            }
        }
    }

    @Test
    void checkpointsThatDoNotMatchAreRejected() throws IOException {
        PolicyConfig config = NaiveTransformer.gqa(3);
        try (ReferencePolicy policy = ReferencePolicy.create(config); PointerScope scope = new PointerScope()) {
            Map<String, Tensor> params = new LinkedHashMap<>(policy.namedParameters());
            params.remove("model.norm.weight");
            Path file = dir.resolve("missing.safetensors");
            Safetensors.write(file, params, Map.of(ReferencePolicy.CONFIG_KEY, config.toJson()));
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> ReferencePolicy.load(file, "cpu", ScalarType.Float));
            assertTrue(e.getMessage().contains("model.norm.weight"), e.getMessage());
            Path noConfig = dir.resolve("noconfig.safetensors");
            Safetensors.write(noConfig, policy.namedParameters(), Map.of());
            e = assertThrows(IllegalArgumentException.class, () -> ReferencePolicy.load(noConfig, "cpu", ScalarType.Float));
            assertTrue(e.getMessage().contains(ReferencePolicy.CONFIG_KEY), e.getMessage());
            Path wrongShape = dir.resolve("shape.safetensors");
            PolicyConfig wider = new PolicyConfig(config.vocab() + 1, config.dModel(), config.layers(), config.heads(), config.kvHeads(),
                    config.ffnDim(), config.maxSeq(), config.ropeTheta(), config.normEps(), config.tiedEmbeddings(), config.seed());
            Safetensors.write(wrongShape, policy.namedParameters(), Map.of(ReferencePolicy.CONFIG_KEY, wider.toJson()));
            e = assertThrows(IllegalArgumentException.class, () -> ReferencePolicy.load(wrongShape, "cpu", ScalarType.Float));
            assertTrue(e.getMessage().contains("model.embed_tokens.weight"), e.getMessage());
        }
    }

    // ------------------------------------------------------------------ helpers

    private void rejects(byte[] bytes, String... anyOf) throws IOException {
        Path file = Files.createTempFile(dir, "bad", ".safetensors");
        Files.write(file, bytes);
        Exception e = assertThrows(Exception.class, () -> {
            try (Safetensors.Contents c = Safetensors.read(file)) {
                c.tensors();
            }
        });
        assertTrue(e instanceof IllegalArgumentException || e instanceof IOException, "unexpected " + e);
        boolean named = false;
        for (String s : anyOf) named |= e.getMessage().contains(s);
        assertTrue(named, "message '" + e.getMessage() + "' names none of " + List.of(anyOf));
    }

    private static byte[] file(String json, byte[] data) {
        byte[] header = json.getBytes(StandardCharsets.UTF_8);
        ByteBuffer b = ByteBuffer.allocate(8 + header.length + data.length).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(header.length).put(header).put(data);
        return b.array();
    }

    private static void le32(ByteArrayOutputStream out, int v) {
        for (int i = 0; i < 4; i++) out.write(v >>> (8 * i));
    }

    private static void le16(ByteArrayOutputStream out, int v) {
        out.write(v & 0xFF);
        out.write(v >>> 8);
    }
}
