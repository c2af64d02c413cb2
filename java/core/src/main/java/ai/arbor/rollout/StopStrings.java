package ai.arbor.rollout;

import java.util.Collection;

/**
 * Stop-string matching for backends that decode themselves (the local generator, test generators): after
 * each new token, decode the generated text and ask whether a stop string has appeared. Matching is on
 * decoded text, as vLLM does, so a stop string split across tokens is found when its last piece arrives.
 */
public final class StopStrings {
    private StopStrings() {}

    /**
     * The stop string whose first occurrence in {@code text} at or after {@code from} ends earliest, or
     * null when none occurs. Ties (two stops ending at the same character) go to the longer one.
     */
    public static String earliest(String text, Collection<String> stops, int from) {
        if (text == null || stops == null || stops.isEmpty()) return null;
        String best = null;
        int bestEnd = Integer.MAX_VALUE;
        for (String s : stops) {
            if (s == null || s.isEmpty()) continue;
            int at = text.indexOf(s, Math.max(0, from));
            if (at < 0) continue;
            int end = at + s.length();
            if (end < bestEnd || (end == bestEnd && s.length() > best.length())) {
                best = s;
                bestEnd = end;
            }
        }
        return best;
    }

    /** {@link #earliest(String, Collection, int)} over the whole text. */
    public static String earliest(String text, Collection<String> stops) {
        return earliest(text, stops, 0);
    }

    /**
     * Where to resume searching after decoding {@code text}: stops already ruled out cannot start before
     * {@code text.length() - maxStopLength + 1}, so incremental callers need not rescan the whole text.
     */
    public static int resumeFrom(String text, Collection<String> stops) {
        int max = 0;
        for (String s : stops) if (s != null) max = Math.max(max, s.length());
        return Math.max(0, text.length() - max + 1);
    }
}
