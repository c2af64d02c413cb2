package ai.arbor.rollout;

import java.util.function.Predicate;

/** Final-answer detectors used by the tool-call formats. */
public final class Answers {
    private Answers() {}

    /** Contains {@code \boxed{} (math: CoRT, TIR, ARPO/AEPO on math). */
    public static final Predicate<String> BOXED = t -> t.contains("\\boxed{");

    /** Contains {@code <answer>…</answer>} (Search-R1, Tree-GRPO, ARPO on deep search). */
    public static final Predicate<String> ANSWER_TAG = t -> {
        int o = t.indexOf("<answer>");
        return o >= 0 && t.indexOf("</answer>", o + 8) >= 0;
    };

    /** Either of the above. */
    public static final Predicate<String> BOXED_OR_TAG = BOXED.or(ANSWER_TAG);

    /** Any turn with visible text (JSON tool calls: a turn without a call is the reply). */
    public static final Predicate<String> NON_BLANK = t -> !t.isBlank();
}
