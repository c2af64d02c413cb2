package ai.arbor.rollout;

/**
 * Text ↔ token ids. Tokens are the unit of everything in a rollout (loss masks, logprobs, budgets), so
 * the agent loop never re-tokenizes what the model generated: generated ids are kept as they came, and
 * only observations (tool output) and prompts are encoded.
 *
 * <p>Implementations are thread-safe: many agent loops encode and decode concurrently.
 */
public interface Tokenizer {

    /** Encodes {@code text} without adding any special token (no BOS/EOS is inserted). */
    int[] encode(String text);

    /**
     * Decodes {@code ids[from, to)}; special tokens (BOS, EOS, padding, chat markers flagged special)
     * are skipped, as {@code skip_special_tokens=True} does. Byte sequences that are not valid UTF-8
     * (a multi-byte character cut in two) decode to U+FFFD, never to an exception.
     *
     * @throws IllegalArgumentException when an id is outside [0, {@link #vocabSize()}) or the range is invalid
     */
    String decode(int[] ids, int from, int to);

    /** Decodes all of {@code ids} (see {@link #decode(int[], int, int)}). */
    default String decode(int[] ids) {
        return decode(ids, 0, ids.length);
    }

    /** Number of ids: every id is in [0, vocabSize). */
    int vocabSize();

    /** End-of-sequence id, or -1 when the tokenizer has none. */
    int eosId();

    /** Padding id used by batch assembly, or -1 when the tokenizer has none (batch assembly then uses 0). */
    int padId();

    /** Beginning-of-sequence id, or -1 when the tokenizer has none. */
    int bosId();

    /** True when {@code id} is a special token (skipped by {@link #decode}). */
    boolean isSpecial(int id);

    /** The id of a token given by its exact text (e.g. {@code "<|im_end|>"}), or -1 when absent. */
    int tokenId(String token);
}
