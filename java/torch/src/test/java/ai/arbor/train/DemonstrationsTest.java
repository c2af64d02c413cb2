package ai.arbor.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.rl.Sequence;
import ai.arbor.rollout.CharTokenizer;
import ai.arbor.task.DemoStyle;
import ai.arbor.task.KbTask;
import ai.arbor.task.Problem;
import ai.arbor.task.TrainingTask;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * Demonstrations are rendered by the real agent loop with the real tools: the exact response text, the
 * trained positions (the demonstration's own turns and EOS, never the prompt or an observation), and the
 * style mix.
 */
class DemonstrationsTest {
    static final CharTokenizer TOK = CharTokenizer.ascii();

    /** Checks that exactly the characters of {@code trained} (in order, plus EOS) are trained in {@code d}. */
    static void assertTrained(Demonstrations.Demonstration d, TrainingTask task, String... trained) {
        Sequence s = d.sequence();
        int promptLen = task.prompt(d.problem(), TOK).tokens().length;
        StringBuilder got = new StringBuilder();
        for (int p = 0; p < s.length(); p++) {
            if (!s.mask()[p]) continue;
            assertTrue(p >= promptLen, "prompt position " + p + " is trained");
            got.append(s.tokens()[p] == TOK.eosId() ? "<eos>" : TOK.decode(new int[] {s.tokens()[p]}));
        }
        assertEquals(String.join("", trained) + "<eos>", got.toString());
        // the whole sequence decodes to prompt + response
        assertEquals(task.promptText(d.problem()) + d.response(), TOK.decode(s.tokens()));
    }

    @Test
    void arithDemonstrationsRunThePythonToolAndCopyItsOutput() {
        try (TrainingTask task = TrainingTask.create("arith", 4, 20, 4)) {
            List<Problem> ps = task.train().subList(0, 3);
            Demonstrations.Rendered r = Demonstrations.render(task, TOK, ps, List.of(DemoStyle.TOOL, DemoStyle.HINT, DemoStyle.HAND), 2);
            assertEquals(0, r.dropped());
            assertEquals(3, r.demonstrations().size());

            Demonstrations.Demonstration tool = r.demonstrations().get(0);
            Problem p = tool.problem();
            String call = "<python>print(" + p.question() + ")</python>", answer = "\\boxed{" + p.answer() + "}";
            assertEquals(call + " <result>\n" + p.answer() + "\n</result>" + answer, tool.response());
            assertTrained(tool, task, call, answer);

            Demonstrations.Demonstration hint = r.demonstrations().get(1);
            Problem q = hint.problem();
            String product = q.question().split("[+-]")[0].contains("*") ? q.question().split("[+-]")[0] : null;
            String first = hint.response().substring(0, hint.response().indexOf(' '));
            assertTrue(first.endsWith("."), first);
            String term = first.substring(0, first.indexOf('='));
            if (product != null) assertEquals(product, term);
            long value = 1;
            for (String f : term.split("\\*")) value *= Long.parseLong(f);
            assertEquals(term + "=" + value + ".", first, "the hand computation is right");
            String turn1 = first + " It looks tedious, and we can use python code to simplify the reasoning.\n<python>print(" + q.question() + ")</python>";
            String turn2 = "We don't need to doubt the accuracy of python calculations.\n\\boxed{" + q.answer() + "}";
            assertEquals(turn1 + " <result>\n" + q.answer() + "\n</result>" + turn2, hint.response());
            assertTrained(hint, task, turn1, turn2);

            Demonstrations.Demonstration hand = r.demonstrations().get(2);
            assertEquals("\\boxed{" + hand.problem().answer() + "}", hand.response());
            assertTrained(hand, task, hand.response());
            assertEquals(Map.of(DemoStyle.TOOL, 1, DemoStyle.HINT, 1, DemoStyle.HAND, 1), r.styles());
        }
    }

    @Test
    void kbDemonstrationsFollowTheSearchResults() {
        try (TrainingTask task = TrainingTask.create("kb", 3, 30, 6)) {
            KbTask kb = new KbTask(3, 30, 6);  // the same knowledge base, for the expected passages
            Map<String, String> fact = new java.util.HashMap<>();   // search -> the one document it must find
            kb.corpus().forEach(d -> fact.put(d.title() + " " + d.text().split(" ")[1], d.text()));
            List<Problem> ps = task.train().subList(0, 3);
            Demonstrations.Rendered r = Demonstrations.render(task, TOK, ps, List.of(DemoStyle.TOOL, DemoStyle.PARTIAL, DemoStyle.HAND), 2);
            assertEquals(3, r.demonstrations().size() + r.dropped());
            for (Demonstrations.Demonstration d : r.demonstrations()) {
                Problem p = d.problem();
                String hop1 = p.plan().get(0).argument(), hop2 = p.plan().get(1).argument(), answer = "<answer>" + p.answer() + "</answer>";
                String obs1 = " <result>\nDoc 1(Title: " + KbTask.subject(hop1) + ") " + fact.get(hop1) + "\n</result>";
                String obs2 = " <result>\nDoc 1(Title: " + KbTask.subject(hop2) + ") " + fact.get(hop2) + "\n</result>";
                switch (d.style()) {
                    case TOOL -> {
                        assertEquals("<search>" + hop1 + "</search>" + obs1 + "<search>" + hop2 + "</search>" + obs2 + answer, d.response());
                        assertTrained(d, task, "<search>" + hop1 + "</search>", "<search>" + hop2 + "</search>", answer);
                    }
                    case PARTIAL -> {
                        assertEquals("<search>" + hop1 + "</search>" + obs1 + answer, d.response());
                        assertTrained(d, task, "<search>" + hop1 + "</search>", answer);
                    }
                    default -> {
                        assertEquals(answer, d.response());
                        assertTrained(d, task, answer);
                    }
                }
            }
        }
    }

    @Test
    void stylesAreDrawnWithTheMixFrequencies() {
        Map<DemoStyle, Double> mix = Map.of(DemoStyle.TOOL, 0.45, DemoStyle.HINT, 0.10, DemoStyle.HAND, 0.45);
        Map<DemoStyle, Integer> counts = new EnumMap<>(DemoStyle.class);
        Random rnd = new Random(12);
        int n = 20_000;
        for (int i = 0; i < n; i++) counts.merge(Demonstrations.draw(mix, rnd), 1, Integer::sum);
        for (var e : mix.entrySet()) {
            double p = e.getValue(), sd = Math.sqrt(n * p * (1 - p));
            assertEquals(n * p, counts.getOrDefault(e.getKey(), 0), 3.3 * sd, e.getKey() + " count (99.9 % interval)");
        }
        assertEquals(null, counts.get(DemoStyle.PARTIAL));
    }
}
