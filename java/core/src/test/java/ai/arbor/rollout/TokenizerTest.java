package ai.arbor.rollout;

import static org.junit.jupiter.api.Assertions.*;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TokenizerTest {

    @Test
    void charTokenizerRoundTripsAndNeverParsesSpecials() {
        CharTokenizer t = CharTokenizer.ascii();
        assertEquals(101, t.vocabSize());
        String s = "print(2**10)\n\t<eos> ok";
        int[] ids = t.encode(s);
        assertEquals(s.length(), ids.length);
        assertEquals(s, t.decode(ids));
        // "<eos>" in text stays characters: an observation can never end a sequence
        for (int id : ids) assertFalse(t.isSpecial(id));
        assertEquals(4 + 2 + ('a' - 32), t.encode("a")[0]);  // after 4 specials and "\n\t"
        // unknown characters: <unk>, decoded as U+FFFD; specials are skipped in decode
        assertArrayEquals(new int[] {CharTokenizer.UNK}, t.encode("é"));
        assertEquals("a\uFFFDb", t.decode(new int[] {CharTokenizer.BOS, t.encode("a")[0], CharTokenizer.UNK, t.encode("b")[0], CharTokenizer.EOS,
                CharTokenizer.PAD}));
        assertEquals(CharTokenizer.EOS, t.tokenId("<eos>"));
        assertEquals(t.encode("z")[0], t.tokenId("z"));
        assertEquals(-1, t.tokenId("zz"));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> t.decode(new int[] {101}));
        assertTrue(e.getMessage().contains("101"));
        assertThrows(IllegalArgumentException.class, () -> new CharTokenizer("abca"));
        assertThrows(IllegalArgumentException.class, () -> t.decode(new int[] {1, 2}, 2, 1));
    }

    /** GPT-2's byte → printable-character map (bytes_to_unicode). */
    static char[] byteSymbols() {
        List<Integer> bs = new ArrayList<>();
        for (int b = '!'; b <= '~'; b++) bs.add(b);
        for (int b = 0xA1; b <= 0xAC; b++) bs.add(b);
        for (int b = 0xAE; b <= 0xFF; b++) bs.add(b);
        char[] map = new char[256];
        for (int b : bs) map[b] = (char) b;
        int n = 0;
        for (int b = 0; b < 256; b++) if (!bs.contains(b)) map[b] = (char) (256 + n++);
        return map;
    }

    /**
     * A byte-level BPE tokenizer.json written by hand: ids 0..255 are the bytes, then the merges
     * (h e)=256 (l l)=257 (he ll)=258 (hell o)=259 (Ġ w)=260 (o r)=261 (Ġw or)=262 (l d)=263, and added
     * tokens <|endoftext|>=300 (special), <|im_end|>=301 (special), <python>=302 (not special).
     */
    static Path writeTokenizerJson(Path dir) throws Exception {
        ObjectMapper m = new ObjectMapper();
        char[] sym = byteSymbols();
        ObjectNode root = m.createObjectNode();
        root.put("version", "1.0");
        root.putNull("truncation");
        root.putNull("padding");
        ArrayNode added = root.putArray("added_tokens");
        String[][] specials = {{"300", "<|endoftext|>", "true"}, {"301", "<|im_end|>", "true"}, {"302", "<python>", "false"}};
        for (String[] a : specials) {
            ObjectNode t = added.addObject();
            t.put("id", Integer.parseInt(a[0]));
            t.put("content", a[1]);
            t.put("single_word", false);
            t.put("lstrip", false);
            t.put("rstrip", false);
            t.put("normalized", false);
            t.put("special", Boolean.parseBoolean(a[2]));
        }
        root.putNull("normalizer");
        ObjectNode pre = root.putObject("pre_tokenizer");
        pre.put("type", "ByteLevel");
        pre.put("add_prefix_space", false);
        pre.put("trim_offsets", true);
        pre.put("use_regex", true);
        root.putNull("post_processor");
        ObjectNode dec = root.putObject("decoder");
        dec.put("type", "ByteLevel");
        dec.put("add_prefix_space", true);
        dec.put("trim_offsets", true);
        dec.put("use_regex", true);
        ObjectNode model = root.putObject("model");
        model.put("type", "BPE");
        model.putNull("dropout");
        model.putNull("unk_token");
        model.putNull("continuing_subword_prefix");
        model.putNull("end_of_word_suffix");
        model.put("fuse_unk", false);
        model.put("byte_fallback", false);
        ObjectNode vocab = model.putObject("vocab");
        for (int b = 0; b < 256; b++) vocab.put(String.valueOf(sym[b]), b);
        String G = String.valueOf(sym[' ']);
        String[][] merges = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {G, "w"}, {"o", "r"}, {G + "w", "or"}, {"l", "d"}};
        ArrayNode mg = model.putArray("merges");
        int id = 256;
        for (String[] mm : merges) {
            vocab.put(mm[0] + mm[1], id++);
            mg.add(mm[0] + " " + mm[1]);
        }
        vocab.put("<|endoftext|>", 300);
        vocab.put("<|im_end|>", 301);
        vocab.put("<python>", 302);
        Path file = dir.resolve("tokenizer.json");
        m.writerWithDefaultPrettyPrinter().writeValue(file.toFile(), root);
        return file;
    }

    @Test
    void huggingFaceTokenizerJsonThroughDjlOffline(@TempDir Path dir) throws Exception {
        Path file = writeTokenizerJson(dir);
        try (HuggingFaceTokenizer t = HuggingFaceTokenizer.load(file)) {
            assertEquals(303, t.vocabSize());
            assertEquals(300, t.eosId(), "the first common EOS name present is <|endoftext|>");
            assertTrue(t.isSpecial(300) && t.isSpecial(301) && !t.isSpecial(302) && !t.isSpecial(104));
            // merges applied by rank, hand-computed in the fixture's doc
            assertArrayEquals(new int[] {259, 262, 263}, t.encode("hello world"));
            assertEquals("hello world", t.decode(new int[] {259, 262, 263}));
            // multi-byte characters go through the byte alphabet; half a character decodes to U+FFFD
            int[] e = t.encode("héllo");
            assertArrayEquals(new int[] {'h', 0xC3, 0xA9, 257, 'o'}, e);
            assertEquals("héllo", t.decode(e));
            assertEquals("h\uFFFD", t.decode(new int[] {'h', 0xC3}));
            // added tokens are matched in text; special ones are skipped by decode
            assertArrayEquals(new int[] {'h', 'i', 301}, t.encode("hi<|im_end|>"));
            assertEquals("hi", t.decode(new int[] {'h', 'i', 301}));
            assertArrayEquals(new int[] {302, 'x'}, t.encode("<python>x"));
            assertEquals("<python>x", t.decode(new int[] {302, 'x'}));
            assertEquals(301, t.tokenId("<|im_end|>"));
            assertEquals(259, t.tokenId("hello"));
            // no truncation or special tokens added on long inputs
            String longText = "hello world ".repeat(2000);
            int[] l = t.encode(longText);
            assertEquals(longText, t.decode(l));
            assertEquals(0, t.encode("").length);
            assertThrows(IllegalArgumentException.class, () -> t.decode(new int[] {303}));
        }
        // EOS named by the caller, by tokenizer_config.json, or refused when absent
        try (HuggingFaceTokenizer t = HuggingFaceTokenizer.load(dir, "<|im_end|>")) {
            assertEquals(301, t.eosId());
        }
        Files.writeString(dir.resolve("tokenizer_config.json"), "{\"eos_token\": {\"content\": \"<|im_end|>\"}}");
        try (HuggingFaceTokenizer t = HuggingFaceTokenizer.load(dir)) {
            assertEquals(301, t.eosId());
        }
        IllegalArgumentException ex = assertThrows(IllegalArgumentException.class, () -> HuggingFaceTokenizer.load(file, "<nope>"));
        assertTrue(ex.getMessage().contains("<nope>"));
        Files.writeString(dir.resolve("bad.json"), "{\"x\": 1}");
        assertThrows(IllegalArgumentException.class, () -> HuggingFaceTokenizer.load(dir.resolve("bad.json")));
    }
}
