package ai.arbor.task;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigInteger;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

class TasksTest {

    /** Arith's Python tool keeps variables between the calls of a path (leased per call by the engine, restored by replay). */
    @Test
    void arithPythonIsStatefulAndLeasedPerCall() {
        try (TrainingTask task = TrainingTask.create("arith", 4, 20, 4);
                ai.arbor.rollout.ToolSession tools = task.tools().open()) {
            assertTrue(tools.stateful());
            assertEquals(ai.arbor.rollout.ToolSessionMode.LEASE_PER_CALL,
                    task.agentConfig(ai.arbor.kernels.SamplingParams.temperature(1f)).toolSessions());
            var python = tools.tool("python");
            assertEquals("15846\n", python.call("x = 417*38\nprint(x)").text());
            assertEquals("15556\n", python.call("print(x - 290)").text());
        }
    }

    /**
     * {@code --no-tools}: in-head demonstrations only, one generation sampled without the tool-call stops, and a call
     * the policy writes anyway is text (never executed, no tool session opened); the rest of the task is unchanged.
     */
    @Test
    void arithWithoutToolsAnswersInItsHeadAndNeverRunsACall() {
        ai.arbor.kernels.SamplingParams sampling = ai.arbor.kernels.SamplingParams.temperature(0.6f);
        ai.arbor.rollout.AgentConfig withTool;
        try (TrainingTask plain = TrainingTask.create("arith", 4, 20, 4)) {
            withTool = plain.agentConfig(sampling);
        }
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(2);
        try (TrainingTask task = TrainingTask.withoutTools(TrainingTask.create("arith", 4, 20, 4))) {
            assertEquals(java.util.Map.of(DemoStyle.HAND, 1.0), task.demoMix());
            Problem p = task.train().get(0);
            assertEquals("\\boxed{" + p.answer() + "}", task.demonstration(p, DemoStyle.HAND).turn(0, ""));
            assertThrows(IllegalArgumentException.class, () -> task.demonstration(p, DemoStyle.TOOL));
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> task.tools().open());
            assertTrue(e.getMessage().contains("without tools"), e.getMessage());
            ai.arbor.rollout.AgentConfig c = task.agentConfig(sampling);
            assertEquals(1, c.maxTurns());
            assertEquals(0, c.maxToolCalls());
            assertTrue(c.lastTurnWithoutToolStops());
            assertEquals(withTool.limits(), c.limits(), "the same per-turn limits and sampling");
            assertEquals(withTool.maxResponseTokens(), c.maxResponseTokens());
            assertEquals(sampling, c.sampling());
            // CoRT's loop over it (the recipe's agent transform) allows no call either
            assertEquals(0, c.cort().maxToolCalls());

            var tok = ai.arbor.rollout.CharTokenizer.ascii();
            String response = "<python>print(" + p.question() + ")</python> \\boxed{" + p.answer() + "}";
            var gen = new ai.arbor.rollout.ScriptedGenerator(tok, (ctx, rnd) -> ai.arbor.rollout.ScriptedGenerator.Turn.of(response));
            var loop = ai.arbor.rollout.AgentLoop.builder().generator(gen).tokenizer(tok).format(task.format()).tools(task.tools())
                    .config(c).toolExecutor(pool).build();
            ai.arbor.rollout.Trajectory t = loop.run(task.prompt(p, tok), 1).join();
            assertEquals(1, gen.calls(), "one generation");
            assertEquals(response, t.generatedText(), "not cut at the call's stop string");
            assertEquals(0, t.toolCalls().size(), "no call executed");
            assertFalse(t.infrastructureFailure(), "no tool session was opened");
            // the same response with the tool: cut at the call, which runs
            try (TrainingTask plain = TrainingTask.create("arith", 4, 20, 4)) {
                var withLoop = ai.arbor.rollout.AgentLoop.builder().generator(gen).tokenizer(tok).format(plain.format()).tools(plain.tools())
                        .config(plain.agentConfig(sampling)).toolExecutor(pool).build();
                ai.arbor.rollout.Trajectory u = withLoop.run(plain.prompt(p, tok), 1).join();
                assertFalse(u.toolCalls().isEmpty(), "the call ran");
                assertEquals(p.answer(), u.toolCalls().get(0).output().strip());
            }
        } finally {
            pool.shutdownNow();
        }
    }

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

    /** arith-small: the dd o d o dd shape, gold answers by an independent evaluation, disjoint splits, plain tool demonstrations only. */
    @Test
    void arithSmallHasItsShapeAndOnlyToolDemonstrations() {
        try (TrainingTask t = TrainingTask.create("arith-small", 2, 400, 50)) {
            assertEquals("arith-small", t.name());
            assertEquals(400, t.train().size());
            assertEquals(50, t.heldOut().size());
            Set<String> train = new HashSet<>();
            for (var p : t.train()) {
                assertTrue(p.question().matches("[1-9][0-9][-+*][1-9][-+*][1-9][0-9]"), "shape dd o d o dd: " + p.question());
                assertTrue(p.question().contains("*"), "every problem has a multiplication: " + p.question());
                assertEquals(Long.toString(evalLong(p.question())), p.answer(), p.question());
                assertEquals("print(" + p.question() + ")", p.plan().get(0).argument());
                train.add(p.question());
            }
            assertEquals(400, train.size(), "distinct training questions");
            t.heldOut().forEach(p -> assertFalse(train.contains(p.question()), "held-out question in train: " + p.question()));
            assertEquals(java.util.Map.of(DemoStyle.TOOL, 1.0, DemoStyle.HINT, 0.0, DemoStyle.HAND, 0.0), t.demoMix());
            // 47*3-58 by hand: 141 - 58
            assertEquals(BigInteger.valueOf(83), ArithTask.evaluate("47*3-58"));
        }
        // the default task keeps its shape and mix
        try (TrainingTask t = TrainingTask.create("arith", 2, 40, 5)) {
            assertEquals("arith", t.name());
            assertEquals(0.6, t.demoMix().get(DemoStyle.TOOL), 0);
            assertTrue(t.train().get(0).question().matches("[1-9][0-9]{2}[-+*][1-9][0-9][-+*][1-9][0-9]{2}"));
        }
    }

    @Test
    void arithShapesAreChecked() {
        // 9 * 9 values times 1 operator pattern (a product) = 81 distinct expressions: 41 problems need more than twice 40
        assertEquals(81, ArithTask.distinctExpressions(new int[] {1, 1}), 0);
        // two operators: 9 patterns, 4 of them without a product
        assertEquals(900.0 * 90 * 900 * (9 - 4), ArithTask.distinctExpressions(new int[] {3, 2, 3}), 0);
        new ArithTask(1, 30, 10, new int[] {1, 1});
        var e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, () -> new ArithTask(1, 31, 10, new int[] {1, 1}));
        assertTrue(e.getMessage().contains("81 distinct"), e.getMessage());
        e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, () -> new ArithTask(1, 3, 1, new int[] {2, 0, 2}));
        assertTrue(e.getMessage().contains("got 0"), e.getMessage());
        e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, () -> new ArithTask(1, 3, 1, new int[] {4}));
        assertTrue(e.getMessage().contains("at least two operands"), e.getMessage());
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
        var facts = facts(kb);
        for (var p : kb.train()) checkAnswerable(p, facts);
        for (var p : kb.heldOut()) checkAnswerable(p, facts);
        Set<String> trainSubjects = new HashSet<>();
        kb.train().forEach(p -> trainSubjects.add(KbTask.subject(p.plan().get(0).argument())));
        kb.heldOut().forEach(p -> assertFalse(trainSubjects.contains(KbTask.subject(p.plan().get(0).argument())),
                "held-out subject also asked about in train: " + p.plan().get(0).argument()));
        // same seed, same knowledge base
        assertEquals(kb.train(), new KbTask(3, 300, 60).train());
    }

    static final Pattern NAME = Pattern.compile("[" + KbTask.LETTERS + "]{4}");
    static final Pattern QUESTION = Pattern.compile("(City|Founder|Birthplace) of the (employer|founder) of (.{4})\\?");
    static final Pattern FACT = Pattern.compile("The (employer|birthplace|founder|city) of (.{4}) is (.{4})\\.");

    /** The knowledge base as search → object ({@code "NOXZ employer" → "GYPL"}), read back from the documents' text. */
    static java.util.Map<String, String> facts(KbTask kb) {
        var facts = new java.util.HashMap<String, String>();
        for (KbTask.Doc d : kb.corpus()) {
            Matcher m = FACT.matcher(d.text());
            assertTrue(m.matches(), "a fact document: " + d.text());
            assertEquals(m.group(2), d.title(), "titled with its subject: " + d.text());
            assertNull(facts.put(m.group(2) + " " + m.group(1), m.group(3)), "one document per fact: " + d.text());
        }
        return facts;
    }

    /** The fixed shapes: names of 4 distinct capitals, one fact per document, the object last; every question ending with its name. */
    @Test
    void kbNamesQuestionsAndDocumentsHaveFixedShapes() {
        KbTask kb = new KbTask(5, 4000, 200);   // the default split sizes of `arbor train`
        Set<String> people = new HashSet<>(), orgs = new HashSet<>(), cities = new HashSet<>();
        for (KbTask.Doc d : kb.corpus()) {
            Matcher m = FACT.matcher(d.text());
            assertTrue(m.matches(), d.text());
            String subject = m.group(2), object = m.group(3);
            assertTrue(NAME.matcher(subject).matches() && distinctLetters(subject), "a name of 4 distinct letters: " + subject);
            assertTrue(NAME.matcher(object).matches() && distinctLetters(object), "a name of 4 distinct letters: " + object);
            assertEquals(0, KbTask.mask(subject) & KbTask.mask(object), d.text());
            switch (m.group(1)) {
                case "employer" -> { people.add(subject); orgs.add(object); }
                case "birthplace" -> { people.add(subject); cities.add(object); }
                case "founder" -> { orgs.add(subject); people.add(object); }
                default -> { orgs.add(subject); cities.add(object); }
            }
        }
        assertEquals(4 * orgs.size(), people.size());
        assertTrue(cities.size() >= orgs.size() / 2, cities.size() + " cities");
        // no name is of two kinds
        assertEquals(Set.of(), intersection(people, orgs));
        assertEquals(Set.of(), intersection(people, cities));
        assertEquals(Set.of(), intersection(orgs, cities));
        // every person and every organisation has both its facts
        var facts = facts(kb);
        assertEquals(2 * (people.size() + orgs.size()), kb.corpus().size());
        for (String p : people) assertTrue(facts.containsKey(p + " employer") && facts.containsKey(p + " birthplace"), p);
        for (String o : orgs) assertTrue(facts.containsKey(o + " founder") && facts.containsKey(o + " city"), o);
        for (var p : java.util.stream.Stream.concat(kb.train().stream(), kb.heldOut().stream()).toList()) {
            Matcher m = QUESTION.matcher(p.question());
            assertTrue(m.matches(), "question shape: " + p.question());
            String hop1 = p.plan().get(0).argument(), hop2 = p.plan().get(1).argument();
            // the first search: the question's name and its inner relation; the second: the first hop's object and the outer one
            assertEquals(m.group(3) + " " + m.group(2), hop1, p.question());
            assertEquals(facts.get(hop1) + " " + m.group(1).toLowerCase(java.util.Locale.ROOT), hop2, p.question());
            assertEquals(p.answer(), facts.get(hop2), p.question());
            assertTrue(m.group(2).equals("founder") ? orgs.contains(m.group(3)) : people.contains(m.group(3)), p.question());
            assertFalse(m.group(1).equals("Birthplace") && m.group(2).equals("employer"), p.question());
        }
    }

    /** Every letter of a name written into a search or the answer occurs once in the result it is copied from. */
    @Test
    void kbNamesInOneDocumentShareNoLetter() {
        long seed = ai.arbor.testing.Seeds.seed("kbNamesInOneDocumentShareNoLetter");
        for (int[] split : new int[][] {{30, 6}, {300, 60}, {4000, 200}}) {   // tiny ones take the fallback draws
            KbTask kb = new KbTask(seed, split[0], split[1]);
            int checked = 0;
            for (KbTask.Doc d : kb.corpus()) {
                Matcher m = FACT.matcher(d.text());
                assertTrue(m.matches(), d.text());
                // the whole result as the policy reads it: the object's letters once, the subject's twice (title and text)
                String result = "Doc 1(Title: " + d.title() + ") " + d.text();
                for (char c : m.group(3).toCharArray())
                    assertEquals(1, result.chars().filter(ch -> ch == c).count(), "letter " + c + " of " + m.group(3) + " in " + result);
                for (char c : m.group(2).toCharArray())
                    assertEquals(2, result.chars().filter(ch -> ch == c).count(), "letter " + c + " of " + m.group(2) + " in " + result);
                assertTrue(result.endsWith(" is " + m.group(3) + "."), result);
                checked++;
            }
            int orgs = Math.max(8, (split[0] + split[1]) / 6);   // 4 people per organisation; two facts each
            assertTrue(checked >= 10 * orgs, checked + " fact documents checked, expected at least " + 10 * orgs);
        }
    }

    /** The splits are disjoint: no held-out question is a training question, and their subjects differ. */
    @Test
    void kbSplitsAreDisjoint() {
        long seed = ai.arbor.testing.Seeds.seed("kbSplitsAreDisjoint");
        KbTask kb = new KbTask(seed, 4000, 200);
        Set<String> trainQuestions = new HashSet<>(), trainNames = new HashSet<>();
        for (var p : kb.train()) {
            trainQuestions.add(p.question());
            trainNames.add(KbTask.subject(p.plan().get(0).argument()));
        }
        assertEquals(4000, trainQuestions.size(), "distinct training questions");
        for (var p : kb.heldOut()) {
            assertFalse(trainQuestions.contains(p.question()), p.question());
            assertFalse(trainNames.contains(KbTask.subject(p.plan().get(0).argument())), p.question());
        }
        assertEquals(200, new HashSet<>(kb.heldOut().stream().map(Problem::question).toList()).size());
    }

    private static boolean distinctLetters(String n) {
        return n.chars().distinct().count() == n.length();
    }

    private static void assertDisjoint(String a, String b, String c) {
        assertEquals(0, KbTask.mask(a) & KbTask.mask(b), a + " / " + b);
        assertEquals(0, KbTask.mask(a) & KbTask.mask(c), a + " / " + c);
        assertEquals(0, KbTask.mask(b) & KbTask.mask(c), b + " / " + c);
    }

    private static Set<String> intersection(Set<String> a, Set<String> b) {
        Set<String> s = new HashSet<>(a);
        s.retainAll(b);
        return s;
    }

    /** The task's own search (BM25, one hit) finds each hop's fact first, for every question. */
    @Test
    void kbSearchFindsEveryHop() {
        var facts = facts(new KbTask(5, 4000, 200));
        try (TrainingTask task = TrainingTask.create("kb", 5, 4000, 200);
                ai.arbor.rollout.ToolSession tools = task.tools().open()) {
            var search = (ai.arbor.tools.SearchTool) tools.tool("search");
            int searches = 0;
            for (var p : java.util.stream.Stream.concat(task.train().stream(), task.heldOut().stream()).toList()) {
                for (var step : p.plan()) {
                    var hits = search.search(step.argument(), 1);
                    String subject = KbTask.subject(step.argument()), relation = step.argument().substring(5);
                    assertEquals(subject, hits.get(0).title(), "top hit for " + step.argument());
                    assertEquals("The " + relation + " of " + subject + " is " + facts.get(step.argument()) + ".", hits.get(0).text(),
                            "top hit for " + step.argument());
                    searches++;
                }
            }
            assertEquals(2 * 4200, searches);
        }
    }

    @Test
    void kbRejectsSplitsLargerThanItsNames() {
        var e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, () -> new KbTask(1, 100_000, 200));
        assertTrue(e.getMessage().contains("100200"), e.getMessage());
    }

    /** Following the plan through the corpus reaches the gold answer, and the question names only hop 1. */
    private static void checkAnswerable(Problem p, java.util.Map<String, String> facts) {
        assertEquals(2, p.plan().size());
        String hop1 = p.plan().get(0).argument(), hop2 = p.plan().get(1).argument();
        assertTrue(p.question().contains(KbTask.subject(hop1)));
        assertFalse(p.question().contains(KbTask.subject(hop2)), "the second hop must come from a search: " + p.question());
        assertEquals(KbTask.subject(hop2), facts.get(hop1), "hop 1's fact names hop 2");
        assertEquals(p.answer(), facts.get(hop2), "hop 2's fact is the answer");
    }
}
