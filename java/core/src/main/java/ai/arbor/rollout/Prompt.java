package ai.arbor.rollout;

import java.util.Map;

/**
 * A task to roll out.
 *
 * @param id       identifier (group id for advantages; unique within a batch)
 * @param tokens   the prompt's token ids (chat template already applied)
 * @param text     the prompt's text, for logs; may be null
 * @param metadata anything the reward needs (e.g. {@code "answer"}); never null
 */
public record Prompt(String id, int[] tokens, String text, Map<String, Object> metadata) {
    public Prompt {
        if (id == null || id.isEmpty()) throw new IllegalArgumentException("id must not be empty");
        if (tokens == null || tokens.length == 0) throw new IllegalArgumentException("prompt " + id + " has no tokens");
        metadata = metadata == null ? Map.of() : Map.copyOf(metadata);
    }

    /** A prompt encoded by {@code tokenizer} (with its BOS first when it has one). */
    public static Prompt of(String id, String text, Tokenizer tokenizer, Map<String, Object> metadata) {
        int[] body = tokenizer.encode(text);
        int bos = tokenizer.bosId();
        int[] t = body;
        if (bos >= 0) {
            t = new int[body.length + 1];
            t[0] = bos;
            System.arraycopy(body, 0, t, 1, body.length);
        }
        return new Prompt(id, t, text, metadata);
    }
}
