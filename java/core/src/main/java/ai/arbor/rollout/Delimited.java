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

    /** A block's body, or why there is none. */
    record Block(String body, String error) {}

    /**
     * The text between the last {@code open} before the last {@code close} and that close; or an error
     * when the close or the open is missing. Nested opens resolve to the innermost (the last one before
     * the close).
     */
    static Block lastBlock(String text, String open, String close) {
        int c = text.lastIndexOf(close);
        if (c < 0) return new Block(null, "the turn stopped at " + close + " but it is not in the text");
        int o = c == 0 ? -1 : text.lastIndexOf(open, c - 1);
        if (o < 0) return new Block(null, "found " + close + " without an opening " + open);
        return new Block(text.substring(o + open.length(), c), null);
    }

    /**
     * Tool output as it goes between delimiters: trailing line breaks removed (a program's output ends
     * with one, and the frame adds its own before the closing delimiter); everything else kept.
     */
    static String body(String output) {
        if (output == null) return "";
        int end = output.length();
        while (end > 0 && (output.charAt(end - 1) == '\n' || output.charAt(end - 1) == '\r')) end--;
        return output.substring(0, end);
    }

    static String tooLong(int length, int limit) {
        return "the call's arguments are " + length + " characters, more than the limit of " + limit;
    }
}
