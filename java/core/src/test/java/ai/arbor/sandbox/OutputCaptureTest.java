package ai.arbor.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The bounded head + tail capture against the plain answer computed from the whole output. */
class OutputCaptureTest {

    private static OutputCapture.Text capture(byte[] all, int chunk, int head, int tail) {
        OutputCapture c = OutputCapture.forChars(head, tail);
        for (int i = 0; i < all.length; i += chunk) c.append(all, i, Math.min(chunk, all.length - i));
        assertEquals(all.length, c.total());
        return c.text(head, tail);
    }

    @Test
    void shortOutputIsKeptWhole() {
        byte[] b = "hello\nwörld €\n".getBytes(StandardCharsets.UTF_8);
        for (int chunk : new int[] {1, 2, 3, 100}) {
            OutputCapture.Text t = capture(b, chunk, 10, 10);
            assertEquals("hello\nwörld €\n", t.text());
            assertFalse(t.truncated());
        }
    }

    @Test
    void longOutputKeepsHeadAndTailCharacters() {
        long seed = SandboxTests.seed();
        Random rnd = new Random(seed);
        String[] pieces = {"a", "b", "€", "😀", "\n"}; // 1, 1, 3 and 4 UTF-8 bytes; 😀 is two Java chars
        System.out.println("longOutputKeepsHeadAndTailCharacters: seed " + seed);
        for (int trial = 0; trial < 200; trial++) {
            StringBuilder sb = new StringBuilder();
            int n = rnd.nextInt(3000);
            while (sb.length() < n) sb.append(pieces[rnd.nextInt(pieces.length)]);
            if (rnd.nextBoolean()) sb.append("😀€x");
            String s = sb.toString();
            int head = 1 + rnd.nextInt(50), tail = 1 + rnd.nextInt(50);
            byte[] b = s.getBytes(StandardCharsets.UTF_8);
            OutputCapture.Text t = capture(b, 1 + rnd.nextInt(200), head, tail);
            if (s.length() <= head + tail) {
                assertEquals(s, t.text(), "seed " + seed);
                assertFalse(t.truncated());
            } else {
                assertTrue(t.truncated(), "seed " + seed);
                int m = t.text().indexOf("\n[... ");
                String h = t.text().substring(0, m);
                String rest = t.text().substring(t.text().indexOf(" bytes truncated ...]\n") + " bytes truncated ...]\n".length());
                assertTrue(s.startsWith(h) && h.length() >= head - 1 && h.length() <= head, "seed " + seed + ": head " + h);
                assertTrue(s.endsWith(rest) && rest.length() >= tail - 1 && rest.length() <= tail, "seed " + seed + ": tail " + rest);
                long omitted = Long.parseLong(t.text().substring(m + 6, t.text().indexOf(" bytes truncated")));
                assertEquals(b.length - h.getBytes(StandardCharsets.UTF_8).length - rest.getBytes(StandardCharsets.UTF_8).length, omitted, "seed " + seed);
            }
        }
    }

    @Test
    void hugeOutputUsesBoundedMemoryAndCutsCleanly() {
        OutputCapture c = OutputCapture.forChars(4, 4);
        byte[] chunk = "0123456789".repeat(1000).getBytes(StandardCharsets.US_ASCII);
        for (int i = 0; i < 1000; i++) c.append(chunk, 0, chunk.length); // 10 MB through 32 bytes of buffers
        OutputCapture.Text t = c.text(4, 4);
        assertEquals("0123" + OutputCapture.marker(10_000_000 - 8) + "6789", t.text());
        assertTrue(t.truncated());
    }

    @Test
    void invalidUtf8IsReplacedNotThrown() {
        byte[] b = {'o', 'k', (byte) 0xff, (byte) 0xfe, ' ', (byte) 0xed, (byte) 0xa0, (byte) 0x80, '!'};
        OutputCapture.Text t = capture(b, 2, 100, 100);
        assertTrue(t.text().startsWith("ok\uFFFD"), t.text());
        assertTrue(t.text().endsWith("!"), t.text());
    }
}
