package ai.arbor.rl;

import ai.arbor.rollout.Prompt;
import ai.arbor.rollout.Trajectory;
import java.util.Arrays;

/**
 * One supervised sequence: prompt and response tokens in order, and per position whether that token is
 * trained (cross entropy; docs/algorithms.md §11). Position p is predicted from the logits at p − 1, so
 * {@code mask[0]} is always false. {@link TokenBatch#supervised} turns a list of them into the token batch
 * the trainer reads.
 *
 * @param tokens token ids (prompt, then response)
 * @param mask   true where {@code tokens[p]} is a training target (generated tokens; never prompt, tool
 *               observations or padding)
 */
public record Sequence(int[] tokens, boolean[] mask) {
    public Sequence {
        if (tokens == null || mask == null) throw new IllegalArgumentException("tokens and mask are required");
        if (tokens.length < 2) throw new IllegalArgumentException("a sequence needs at least 2 tokens, got " + tokens.length);
        if (mask.length != tokens.length)
            throw new IllegalArgumentException("mask has " + mask.length + " entries for " + tokens.length + " tokens");
        if (mask[0]) throw new IllegalArgumentException("position 0 cannot be trained (nothing predicts it)");
    }

    /** A supervised sequence: train the masked positions. */
    public static Sequence sft(int[] tokens, boolean[] mask) {
        return new Sequence(tokens, mask);
    }

    /** Prompt + response as one sequence; the trained positions are the response's generated tokens. */
    public static Sequence of(Prompt prompt, Trajectory t) {
        int p = prompt.tokens().length, n = p + t.length();
        int[] tokens = Arrays.copyOf(prompt.tokens(), n);
        System.arraycopy(t.tokens(), 0, tokens, p, t.length());
        boolean[] mask = new boolean[n];
        System.arraycopy(t.lossMask(), 0, mask, p, t.length());
        return new Sequence(tokens, mask);
    }

    public int length() {
        return tokens.length;
    }

    /** Number of trained positions. */
    public int trainedTokens() {
        int n = 0;
        for (boolean m : mask) if (m) n++;
        return n;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Sequence s && Arrays.equals(tokens, s.tokens) && Arrays.equals(mask, s.mask);
    }

    @Override
    public int hashCode() {
        return 31 * Arrays.hashCode(tokens) + Arrays.hashCode(mask);
    }

    @Override
    public String toString() {
        return "Sequence[" + tokens.length + " tokens, " + trainedTokens() + " trained]";
    }
}
