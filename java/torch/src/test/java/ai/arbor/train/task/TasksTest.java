package ai.arbor.train.task;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigInteger;
import java.util.HashSet;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

class TasksTest {

    @Test
    void arithEvaluatesWithPrecedenceAndSplitsAreDisjoint() {
        assertEquals(BigInteger.valueOf(417 * 38 - 2905 + 66), ArithTask.evaluate("417*38-2905+66"));
        assertEquals(BigInteger.valueOf(2 - 3 * 4 * 5 + 6), ArithTask.evaluate("2-3*4*5+6"));
        ArithTask t = new ArithTask(1, 500, 100);
        assertEquals(500, t.train().size());
        assertEquals(100, t.heldOut().size());
        Set<String> train = new HashSet<>();
        t.train().forEach(p -> train.add(p.question()));
        assertEquals(500, train.size(), "distinct training questions");
        t.heldOut().forEach(p -> assertFalse(train.contains(p.question()), "held-out question in train: " + p.question()));
        // the gold answer is the value of the planned program, computed independently here with longs
        for (var p : t.train()) {
            assertEquals("print(" + p.question() + ")", p.plan().get(0).argument());
            assertEquals(Long.toString(evalLong(p.question())), p.answer(), p.question());
            assertTrue(p.question().contains("*"), "every problem has a multiplication: " + p.question());
            assertTrue(p.question().matches("[1-9][0-9]{2}[-+*][1-9][0-9][-+*][1-9][0-9]{2}"), "shape ddd o dd o ddd: " + p.question());
        }
        // same seed, same problems
        assertEquals(t.train(), new ArithTask(1, 500, 100).train());
    }

    private static long evalLong(String e) {
        // independent evaluation: split on + and - (keeping signs), products inside
        long total = 0;
        Matcher m = Pattern.compile("([+-]?)([0-9*]+)").matcher(e);
        while (m.find()) {
            long prod = 1;
            for (String f : m.group(2).split("\\*")) prod *= Long.parseLong(f);
            total += m.group(1).equals("-") ? -prod : prod;
        }
        return total;
    }

    @Test
    void kbQuestionsNeedTwoSearchesAndHeldOutEntitiesAreUnseen() {
        KbTask kb = new KbTask(3, 300, 60);
        assertEquals(300, kb.train().size());
        assertEquals(60, kb.heldOut().size());
        var byTitle = new java.util.HashMap<String, String>();
        kb.corpus().forEach(d -> byTitle.put(d.title(), d.text()));
        for (var p : kb.train()) checkAnswerable(p, byTitle);
        for (var p : kb.heldOut()) checkAnswerable(p, byTitle);
        Set<String> trainSubjects = new HashSet<>();
        kb.train().forEach(p -> trainSubjects.add(p.plan().get(0).argument()));
        kb.heldOut().forEach(p -> assertFalse(trainSubjects.contains(p.plan().get(0).argument()),
                "held-out subject also asked about in train: " + p.plan().get(0).argument()));
    }

    /** Following the plan through the corpus reaches the gold answer, and the question names only hop 1. */
    private static void checkAnswerable(Problem p, java.util.Map<String, String> byTitle) {
        assertEquals(2, p.plan().size());
        String hop1 = p.plan().get(0).argument(), hop2 = p.plan().get(1).argument();
        assertTrue(p.question().contains(hop1));
        assertFalse(p.question().contains(hop2), "the second hop must come from a search: " + p.question());
        assertTrue(byTitle.get(hop1).contains(hop2), "hop 1's document names hop 2");
        assertTrue(byTitle.get(hop2).contains(p.answer()), "hop 2's document names the answer");
    }
}
