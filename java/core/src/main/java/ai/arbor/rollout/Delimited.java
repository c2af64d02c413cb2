package ai.arbor.rollout;

/** Shared parsing of calls written between an opening and a closing delimiter. Package-private. */
final class Delimited {
    private Delimited() {}

    /**
     * True when the turn ended at {@code close}: the backend reported it as the matched stop, or (for
     * backends that do not report stops) the text ends with it.
     */
    static boolean endsAt(String text, String matchedStop, String close) {
        if (matchedStop != null) return matchedStop.equals(close) || matchedStop.endsWith(close);
        return text.stripTrailing().endsWith(close);
    }

    /**
     * The text between the last {@code open} before the last {@code close} and that close, or null when
     * there is no close, or an error string prefixed with {@code "\0"} when the open is missing. Nested
     * opens resolve to the innermost (the last one before the close).
     */
    static String lastBlock(String text, String open, String close) {
        int c = text.lastIndexOf(close);
        if (c < 0) return null;
        int o = text.lastIndexOf(open, c - 1);
        if (o < 0) return "\0found " + close + " without an opening " + open;
        return text.substring(o + open.length(), c);
    }

    static String tooLong(int length, int limit) {
        return "the call's arguments are " + length + " characters, more than the limit of " + limit;
    }
}
