package ai.arbor.rollout;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

/**
 * Character-level tokenizer for the reference policy: one id per Unicode code point of a fixed
 * alphabet, after four special tokens {@code <pad>=0, <bos>=1, <eos>=2, <unk>=3}. Characters outside the
 * alphabet encode to {@code <unk>} (which decodes to U+FFFD). Special-token text inside the input is
 * never turned into a special id — a tool output that prints {@code "<eos>"} stays five characters, so an
 * observation can never end a sequence.
 */
public final class CharTokenizer implements Tokenizer {
    public static final int PAD = 0, BOS = 1, EOS = 2, UNK = 3;
    private static final String[] SPECIALS = {"<pad>", "<bos>", "<eos>", "<unk>"};

    private final int[] codePoints;              // id - SPECIALS.length -> code point
    private final Map<Integer, Integer> index;   // code point -> id

    /**
     * @param alphabet the characters of the vocabulary, in id order (duplicates rejected)
     */
    public CharTokenizer(String alphabet) {
        if (alphabet == null || alphabet.isEmpty()) throw new IllegalArgumentException("alphabet must not be empty");
        codePoints = alphabet.codePoints().toArray();
        index = new HashMap<>(codePoints.length * 2);
        for (int i = 0; i < codePoints.length; i++) {
            Integer prev = index.put(codePoints[i], SPECIALS.length + i);
            if (prev != null)
                throw new IllegalArgumentException("alphabet repeats character " + new String(Character.toChars(codePoints[i])) + " (U+"
                        + Integer.toHexString(codePoints[i]) + ")");
        }
    }

    /** Printable ASCII (32..126) plus newline and tab: 101 ids in all. */
    public static CharTokenizer ascii() {
        StringBuilder sb = new StringBuilder("\n\t");
        for (char c = 32; c < 127; c++) sb.append(c);
        return new CharTokenizer(sb.toString());
    }

    @Override
    public int[] encode(String text) {
        if (text == null) throw new IllegalArgumentException("text must not be null");
        return text.codePoints().map(cp -> index.getOrDefault(cp, UNK)).toArray();
    }

    @Override
    public String decode(int[] ids, int from, int to) {
        if (ids == null) throw new IllegalArgumentException("ids must not be null");
        if (from < 0 || to > ids.length || from > to)
            throw new IllegalArgumentException("range [" + from + ", " + to + ") is invalid for " + ids.length + " ids");
        StringBuilder sb = new StringBuilder(to - from);
        for (int i = from; i < to; i++) {
            int id = ids[i];
            if (id < 0 || id >= vocabSize()) throw new IllegalArgumentException("ids[" + i + "] = " + id + " is outside [0, " + vocabSize() + ")");
            if (id == UNK) sb.append('\uFFFD');
            else if (id >= SPECIALS.length) sb.appendCodePoint(codePoints[id - SPECIALS.length]);
        }
        return sb.toString();
    }

    @Override
    public int vocabSize() {
        return SPECIALS.length + codePoints.length;
    }

    @Override
    public int eosId() {
        return EOS;
    }

    @Override
    public int padId() {
        return PAD;
    }

    @Override
    public int bosId() {
        return BOS;
    }

    @Override
    public boolean isSpecial(int id) {
        return id >= 0 && id < SPECIALS.length && id != UNK;
    }

    @Override
    public int tokenId(String token) {
        for (int i = 0; i < SPECIALS.length; i++) if (SPECIALS[i].equals(token)) return i;
        if (token != null && token.codePointCount(0, token.length()) == 1) return index.getOrDefault(token.codePointAt(0), -1);
        return -1;
    }

    /** The alphabet, in id order after the specials. */
    public String alphabet() {
        return new String(codePoints, 0, codePoints.length);
    }

    @Override
    public String toString() {
        return "CharTokenizer[vocab=" + vocabSize() + ", specials=" + Arrays.toString(SPECIALS) + "]";
    }
}
