package ai.arbor.sandbox;

import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * Bounded capture of one output stream: the first {@code headBytes} and the last {@code tailBytes}
 * bytes, plus a count of everything seen. Memory never grows with the output, however much the
 * worker writes; the middle is dropped while draining. {@link #text} decodes (invalid UTF-8 becomes
 * U+FFFD, never an exception) and keeps the first {@code headChars} and last {@code tailChars}
 * characters around a truncation marker, the way CoRT shows interpreter output (400 + 400 there).
 * Not thread-safe: the owning worker's lock guards it.
 */
final class OutputCapture {

    /** Decoded text and whether anything was cut. */
    record Text(String text, boolean truncated) {}

    private final byte[] head;
    private int headLen;
    private final byte[] tail;
    private int tailPos; // next write position in the ring
    private int tailLen;
    private long total;

    OutputCapture(int headBytes, int tailBytes) {
        this.head = new byte[headBytes];
        this.tail = new byte[tailBytes];
    }

    /** Sizes the byte buffers so that at least the wanted number of characters survive (UTF-8 ≤ 4 bytes/char). */
    static OutputCapture forChars(int headChars, int tailChars) {
        return new OutputCapture(Math.multiplyExact(headChars, 4), Math.multiplyExact(tailChars, 4));
    }

    long total() {
        return total;
    }

    void append(byte[] b, int off, int len) {
        total += len;
        int toHead = Math.min(len, head.length - headLen);
        if (toHead > 0) {
            System.arraycopy(b, off, head, headLen, toHead);
            headLen += toHead;
            off += toHead;
            len -= toHead;
        }
        if (len == 0 || tail.length == 0) return;
        if (len >= tail.length) { // only the last tail.length bytes can survive
            System.arraycopy(b, off + len - tail.length, tail, 0, tail.length);
            tailPos = 0;
            tailLen = tail.length;
            return;
        }
        int first = Math.min(len, tail.length - tailPos);
        System.arraycopy(b, off, tail, tailPos, first);
        System.arraycopy(b, off + first, tail, 0, len - first);
        tailPos = (tailPos + len) % tail.length;
        tailLen = Math.min(tail.length, tailLen + len);
    }

    private byte[] tailBytes() {
        byte[] out = new byte[tailLen];
        int start = (tailPos - tailLen + tail.length) % Math.max(1, tail.length);
        int first = Math.min(tailLen, tail.length - start);
        System.arraycopy(tail, start, out, 0, first);
        System.arraycopy(tail, 0, out, first, tailLen - first);
        return out;
    }

    /** The captured output as text: whole when it fits in {@code headChars + tailChars}, else head + marker + tail. */
    Text text(int headChars, int tailChars) {
        byte[] tailBytes = tailBytes();
        boolean bytesDropped = total > (long) headLen + tailLen;
        if (!bytesDropped) {
            byte[] all = new byte[headLen + tailBytes.length];
            System.arraycopy(head, 0, all, 0, headLen);
            System.arraycopy(tailBytes, 0, all, headLen, tailBytes.length);
            String s = decode(all, 0, all.length);
            if (s.length() <= headChars + tailChars) return new Text(s, false);
            String h = prefix(s, headChars), t = suffix(s, tailChars);
            long omitted = utf8Length(s) - utf8Length(h) - utf8Length(t);
            return new Text(h + marker(omitted) + t, true);
        }
        // The middle is gone: decode the ends separately, skipping a UTF-8 sequence cut at the boundary.
        int tailStart = 0;
        while (tailStart < Math.min(3, tailBytes.length) && (tailBytes[tailStart] & 0xC0) == 0x80) tailStart++;
        String h = prefix(decode(head, 0, completeLength(head, headLen)), headChars);
        String t = suffix(decode(tailBytes, tailStart, tailBytes.length - tailStart), tailChars);
        long omitted = total - utf8Length(h) - utf8Length(t);
        return new Text(h + marker(omitted) + t, true);
    }

    static String marker(long omittedBytes) {
        return "\n[... " + Math.max(0, omittedBytes) + " bytes truncated ...]\n";
    }

    /** Length of {@code b[0..len)} without a trailing incomplete UTF-8 sequence. */
    private static int completeLength(byte[] b, int len) {
        int i = len - 1, back = 0;
        while (i >= 0 && back < 3 && (b[i] & 0xC0) == 0x80) {
            i--;
            back++;
        }
        if (i < 0) return len;
        int lead = b[i] & 0xFF;
        int need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
        return (len - i) < need ? i : len;
    }

    private static String prefix(String s, int chars) {
        if (s.length() <= chars) return s;
        int end = chars;
        if (end > 0 && Character.isHighSurrogate(s.charAt(end - 1))) end--;
        return s.substring(0, end);
    }

    private static String suffix(String s, int chars) {
        if (s.length() <= chars) return s;
        int start = s.length() - chars;
        if (start < s.length() && Character.isLowSurrogate(s.charAt(start))) start++;
        return s.substring(start);
    }

    private static long utf8Length(String s) {
        long n = 0;
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c < 0x80) n += 1;
            else if (c < 0x800) n += 2;
            else if (Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
                n += 4;
                i++;
            } else n += 3;
        }
        return n;
    }

    /** Decodes UTF-8, replacing malformed input with U+FFFD (never throws). */
    static String decode(byte[] b, int off, int len) {
        CharsetDecoder d = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPLACE)
                .onUnmappableCharacter(CodingErrorAction.REPLACE);
        try {
            CharBuffer cb = d.decode(ByteBuffer.wrap(b, off, len));
            return cb.toString();
        } catch (CharacterCodingException e) {
            throw new IllegalStateException("unreachable with REPLACE", e);
        }
    }
}
