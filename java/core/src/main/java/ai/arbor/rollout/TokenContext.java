package ai.arbor.rollout;

import java.util.Arrays;
import java.util.concurrent.atomic.AtomicLong;

/**
 * An immutable token prefix with an identity: the context a generation continues from. Contexts form a
 * tree — {@link #extend} makes a child that shares its parent's tokens — so a tree expansion that
 * continues from a node's context names that node, and a backend can reuse what it computed for it:
 * <ul>
 *   <li>a local generator keeps KV caches keyed by {@link #id()} and, for a new request, forks the
 *       cache of the nearest ancestor it still holds ({@link #parent()}, {@link #parentLength()});</li>
 *   <li>an HTTP backend sends {@link #toArray()} and routes by {@link #rootId()} so every branch of one
 *       prompt lands on the server whose prefix cache already holds it.</li>
 * </ul>
 * Only the tokens appended since the parent are stored here; the full prefix is stored once.
 */
public final class TokenContext {
    private static final AtomicLong IDS = new AtomicLong();

    private final long id;
    private final TokenContext parent;
    private final int[] segment;
    private final int length;
    private final long rootId;

    private TokenContext(TokenContext parent, int[] segment) {
        this.id = IDS.incrementAndGet();
        this.parent = parent;
        this.segment = segment;
        this.length = (parent == null ? 0 : parent.length) + segment.length;
        if (this.length < 0) throw new IllegalArgumentException("context length overflows an int");
        this.rootId = parent == null ? id : parent.rootId;
    }

    /** A root context (a prompt). The array is copied. */
    public static TokenContext of(int[] tokens) {
        if (tokens == null) throw new IllegalArgumentException("tokens must not be null");
        return new TokenContext(null, tokens.clone());
    }

    /** A child context: this prefix followed by {@code tokens} (copied). Extending by nothing returns this. */
    public TokenContext extend(int[] tokens) {
        if (tokens == null) throw new IllegalArgumentException("tokens must not be null");
        if (tokens.length == 0) return this;
        return new TokenContext(this, tokens.clone());
    }

    /** Unique id of this context in this JVM. */
    public long id() {
        return id;
    }

    /** The context this one extends, or null for a root. */
    public TokenContext parent() {
        return parent;
    }

    /** Id of the root (the prompt) this context descends from. */
    public long rootId() {
        return rootId;
    }

    /** Number of tokens of the whole prefix. */
    public int length() {
        return length;
    }

    /** Number of tokens shared with the parent (0 for a root). */
    public int parentLength() {
        return parent == null ? 0 : parent.length;
    }

    /** The tokens appended to the parent (a copy). */
    public int[] segment() {
        return segment.clone();
    }

    /** Token at {@code position} of the whole prefix. */
    public int tokenAt(int position) {
        if (position < 0 || position >= length)
            throw new IllegalArgumentException("position " + position + " is outside [0, " + length + ")");
        TokenContext c = this;
        while (position < c.parentLength()) c = c.parent;
        return c.segment[position - c.parentLength()];
    }

    /** The whole prefix as a new array. */
    public int[] toArray() {
        int[] out = new int[length];
        for (TokenContext c = this; c != null; c = c.parent) System.arraycopy(c.segment, 0, out, c.parentLength(), c.segment.length);
        return out;
    }

    /** True when {@code other} is this context or one of its ancestors. */
    public boolean startsWith(TokenContext other) {
        for (TokenContext c = this; c != null; c = c.parent) if (c == other) return true;
        return false;
    }

    @Override
    public String toString() {
        int[] head = Arrays.copyOf(segment, Math.min(8, segment.length));
        return "TokenContext[id=" + id + ", length=" + length + ", parent=" + (parent == null ? "none" : parent.id) + ", segment="
                + Arrays.toString(head) + (segment.length > 8 ? "…" : "") + "]";
    }
}
