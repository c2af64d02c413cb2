package ai.arbor.reward;

import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The format check of Search-R1 / Tree-GRPO ({@code is_valid_sequence} in
 * {@code verl/utils/reward_score/qa_em_format.py}): the response is a sequence
 * <pre>  &lt;think&gt;…&lt;/think&gt; ( &lt;search&gt;…&lt;/search&gt; &lt;information&gt;…&lt;/information&gt; &lt;think&gt;…&lt;/think&gt; )* &lt;answer&gt;…&lt;/answer&gt;</pre>
 * with every tag balanced and nothing but whitespace between the tags (a new {@code <think>} may also
 * follow an information block directly). The released code first cuts the text at the assistant
 * marker; here {@code response} is already the assistant's part. The search and information tag names
 * are parameters (tools other than search use other names).
 *
 * @param searchTag      the tool-call tag ("search")
 * @param informationTag the observation tag ("information")
 */
public record SearchR1Format(String searchTag, String informationTag) implements Predicate<String> {
    /** Search-R1's tags. */
    public static final SearchR1Format SEARCH_R1 = new SearchR1Format("search", "information");

    public SearchR1Format {
        for (String t : new String[]{searchTag, informationTag}) {
            if (t == null || !t.matches("[A-Za-z_][A-Za-z0-9_-]*") || t.equals("think") || t.equals("answer")) {
                throw new IllegalArgumentException("tag must be a plain name other than think/answer, got " + t);
            }
        }
        if (searchTag.equals(informationTag)) throw new IllegalArgumentException("search and information tags must differ, got " + searchTag);
    }

    private enum State { START, IN_THINK, AFTER_THINK, IN_SEARCH, AFTER_SEARCH, IN_INFORMATION, AFTER_INFORMATION, IN_ANSWER, END }

    @Override
    public boolean test(String response) {
        return isValid(response);
    }

    /** True when the response follows the sequence above. */
    public boolean isValid(String response) {
        if (response == null) return false;
        String[] tags = {"think", searchTag, informationTag, "answer"};
        for (String tag : tags) {
            if (count(response, "<" + tag + ">") != count(response, "</" + tag + ">")) return false;
        }
        Pattern p = Pattern.compile("</?(?:think|" + Pattern.quote(searchTag) + "|" + Pattern.quote(informationTag) + "|answer)>");
        Matcher m = p.matcher(response);
        State st = State.START;
        int last = 0;
        while (m.find()) {
            if (!betweenOk(st, response.substring(last, m.start()))) return false;
            String tag = m.group();
            st = next(st, tag);
            if (st == null) return false;
            last = m.end();
        }
        return betweenOk(st, response.substring(last)) && st == State.END;
    }

    private static boolean betweenOk(State st, String text) {
        boolean inside = st == State.IN_THINK || st == State.IN_SEARCH || st == State.IN_INFORMATION || st == State.IN_ANSWER;
        return inside || text.isBlank();
    }

    private State next(State st, String tag) {
        if (tag.equals("<think>")) return st == State.START || st == State.AFTER_INFORMATION ? State.IN_THINK : null;
        if (tag.equals("</think>")) return st == State.IN_THINK ? State.AFTER_THINK : null;
        if (tag.equals("<" + searchTag + ">")) return st == State.AFTER_THINK ? State.IN_SEARCH : null;
        if (tag.equals("</" + searchTag + ">")) return st == State.IN_SEARCH ? State.AFTER_SEARCH : null;
        if (tag.equals("<" + informationTag + ">")) return st == State.AFTER_SEARCH ? State.IN_INFORMATION : null;
        if (tag.equals("</" + informationTag + ">")) return st == State.IN_INFORMATION ? State.AFTER_INFORMATION : null;
        if (tag.equals("<answer>")) return st == State.AFTER_THINK ? State.IN_ANSWER : null;
        if (tag.equals("</answer>")) return st == State.IN_ANSWER ? State.END : null;
        return null;
    }

    private static int count(String s, String sub) {
        int n = 0;
        for (int i = s.indexOf(sub); i >= 0; i = s.indexOf(sub, i + sub.length())) n++;
        return n;
    }
}
