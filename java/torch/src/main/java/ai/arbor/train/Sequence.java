package ai.arbor.train;

import java.util.Arrays;

/**
 * One training sequence: prompt and response tokens in order, and per position whether that token is
 * trained. Position p is predicted from the logits at p − 1 (so {@code mask[0]} is always false). For
 * policy-gradient training, the behaviour (old) log-probability and the advantage of each trained token,
 * and optionally its reference log-probability, ride along, aligned by position.
 *
 * @param tokens      token ids (prompt, then response)
 * @param mask        true where {@code tokens[p]} is a training target (generated tokens; never prompt,
 *                    tool observations or padding)
 * @param oldLogprobs log π_old(tokens[p] | tokens[&lt;p]) on trained positions, or null (SFT, or recomputed)
 * @param advantages  the advantage of each trained position, or null (SFT)
 */
public record Sequence(int[] tokens, boolean[] mask, float[] oldLogprobs, float[] advantages) {
    public Sequence {
        if (tokens == null || mask == null) throw new IllegalArgumentException("tokens and mask are required");
        if (tokens.length < 2) throw new IllegalArgumentException("a sequence needs at least 2 tokens, got " + tokens.length);
        if (mask.length != tokens.length)
            throw new IllegalArgumentException("mask has " + mask.length + " entries for " + tokens.length + " tokens");
        if (mask[0]) throw new IllegalArgumentException("position 0 cannot be trained (nothing predicts it)");
        if (oldLogprobs != null && oldLogprobs.length != tokens.length)
            throw new IllegalArgumentException("oldLogprobs has " + oldLogprobs.length + " entries for " + tokens.length + " tokens");
        if (advantages != null && advantages.length != tokens.length)
            throw new IllegalArgumentException("advantages has " + advantages.length + " entries for " + tokens.length + " tokens");
        for (int p = 0; p < tokens.length; p++) {
            if (!mask[p]) continue;
            if (oldLogprobs != null && !(Float.isFinite(oldLogprobs[p]) && oldLogprobs[p] <= 1e-4f))
                throw new IllegalArgumentException("oldLogprobs[" + p + "] = " + oldLogprobs[p] + " is not a log-probability");
            if (advantages != null && !Float.isFinite(advantages[p]))
                throw new IllegalArgumentException("advantages[" + p + "] = " + advantages[p] + " is not finite");
        }
    }

    /** A supervised sequence: train the masked positions. */
    public static Sequence sft(int[] tokens, boolean[] mask) {
        return new Sequence(tokens, mask, null, null);
    }

    /** This sequence with other old log-probabilities (e.g. recomputed). */
    public Sequence withOldLogprobs(float[] old) {
        return new Sequence(tokens, mask, old, advantages);
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
        return o instanceof Sequence s && Arrays.equals(tokens, s.tokens) && Arrays.equals(mask, s.mask)
                && Arrays.equals(oldLogprobs, s.oldLogprobs) && Arrays.equals(advantages, s.advantages);
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
