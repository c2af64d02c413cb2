package ai.arbor.rollout;

import static org.junit.jupiter.api.Assertions.*;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

class ToolCallFormatTest {

    private static ParsedTurn parseAtStop(ToolCallFormat f, String text) {
        String stop = StopStrings.earliest(text, f.stopStrings());
        return f.parse(text, stop);
    }

    @Test
    void cortRoundTripOfAScriptedConversation() {
        MarkdownToolCallFormat f = MarkdownToolCallFormat.cort();
        assertEquals(List.of("```output"), f.stopStrings());
        String turn1 = "Let me compute.\n```python\nx = 2**10\nprint(x)\n```\n```output";
        ParsedTurn p = f.parse(turn1, "```output");
        assertEquals(ParsedTurn.Kind.TOOL_CALL, p.kind());
        assertEquals(new ToolCall("python", "x = 2**10\nprint(x)"), p.call());
        String obs = f.renderObservation(turn1, "1024");
        assertEquals("\n1024\n```\n", obs);
        assertEquals(obs, f.renderObservation(turn1, "1024\n"), "a program's trailing newline is not doubled");
        String transcript = turn1 + obs + "So the answer is \\boxed{1024}.";
        assertTrue(transcript.endsWith("```output\n1024\n```\nSo the answer is \\boxed{1024}."));
        assertEquals(ParsedTurn.Kind.ANSWER, f.parse("So the answer is \\boxed{1024}.", null).kind());
        // A stop token that already carried the newline: no second newline.
        assertEquals("7\n```\n", f.renderObservation("```python\nprint(7)\n```\n```output\n", "7"));
        // Without the model's ```output, the whole block is appended.
        assertEquals("\n```output\n7\n```\n", f.renderObservation("```python\nprint(7)\n```", "7"));
        assertEquals("\nReach max function call limit.", f.limitNotice());
    }

    @Test
    void cortLastBlockIsRunAndUnclosedBlockIsTolerated() {
        MarkdownToolCallFormat f = MarkdownToolCallFormat.cort();
        String two = "```python\na=1\n```\n```output\n1\n```\nnow\n```python\nprint(a+1)\n```\n```output";
        assertEquals("print(a+1)", f.parse(two, "```output").call().arguments());
        String unclosed = "```python\nprint(3)\n```output";
        assertEquals("print(3)", f.parse(unclosed, "```output").call().arguments());
        assertEquals(ParsedTurn.Kind.MALFORMED_CALL, f.parse("no code here\n```output", "```output").kind());
        assertEquals(ParsedTurn.Kind.MALFORMED_CALL, f.parse("```python\n   \n```\n```output", "```output").kind());
        // A code block without ```output is not a call (the model did not ask for execution).
        assertEquals(ParsedTurn.Kind.NONE, f.parse("```python\nprint(1)\n```\nDone.", null).kind());
    }

    @Test
    void arpoRoundTripOfAScriptedConversation() {
        TagToolCallFormat f = TagToolCallFormat.arpo();
        assertEquals(List.of("</python>", "</search>"), f.stopStrings());
        String t1 = "I will search. <search> capital of France </search>";
        ParsedTurn p = f.parse(t1, "</search>");
        assertEquals(new ToolCall("search", "capital of France"), p.call());
        assertEquals(" <result>\nParis\n</result>", f.renderObservation(t1, "Paris"));
        String t2 = "Check: <python>print(6*7)</python>";
        assertEquals(new ToolCall("python", "print(6*7)"), f.parse(t2, "</python>").call());
        assertEquals(ParsedTurn.Kind.ANSWER, f.parse("The answer is \\boxed{42}", null).kind());
        assertEquals(ParsedTurn.Kind.ANSWER, f.parse("<answer>Paris</answer>", null).kind());
        assertEquals(ParsedTurn.Kind.NONE, f.parse("I am thinking", null).kind());
        assertEquals(" <result>\nError: boom\n</result>", f.renderError(t2, "boom"));
    }

    @Test
    void searchR1RoundTripAndInvalidActionText() {
        TagToolCallFormat f = TagToolCallFormat.searchR1();
        assertEquals(List.of("</search>", "</answer>"), f.stopStrings());
        String t = "<think>need facts</think><search>who wrote Hamlet</search>";
        assertEquals(new ToolCall("search", "who wrote Hamlet"), f.parse(t, "</search>").call());
        assertEquals("\n\n<information>Doc 1(Title: Hamlet) Shakespeare</information>\n\n",
                f.renderObservation(t, "Doc 1(Title: Hamlet) Shakespeare"));
        assertEquals(ParsedTurn.Kind.ANSWER, f.parse("<answer>Shakespeare</answer>", "</answer>").kind());
        ParsedTurn bad = f.parse("oops </search>", "</search>");
        assertEquals(ParsedTurn.Kind.MALFORMED_CALL, bad.kind());
        assertEquals(TagToolCallFormat.SEARCH_R1_INVALID, f.renderError("oops </search>", bad.error()));
    }

    @Test
    void jsonRoundTripOfAScriptedConversation() {
        JsonToolCallFormat f = JsonToolCallFormat.hermes();
        String t = "Let me run it.\n<tool_call>\n{\"name\": \"python\", \"arguments\": {\"code\": \"print(1+1)\"}}\n</tool_call>";
        ParsedTurn p = f.parse(t, "</tool_call>");
        assertEquals("python", p.call().tool());
        assertEquals("{\"code\":\"print(1+1)\"}", p.call().arguments());
        assertEquals("\n<tool_response>\n2\n</tool_response>\n", f.renderObservation(t, "2"));
        assertEquals("calculator", f.parse("<tool_call>{\"name\":\"calculator\",\"arguments\":\"2+2\"}</tool_call>", "</tool_call>").call().tool());
        assertEquals("2+2", f.parse("<tool_call>{\"name\":\"calculator\",\"arguments\":\"2+2\"}</tool_call>", "</tool_call>").call().arguments());
        assertEquals(ParsedTurn.Kind.ANSWER, f.parse("The result is 2.", null).kind());
        String chat = JsonToolCallFormat.chatMl().renderObservation(t, "2");
        assertEquals("<|im_end|>\n<|im_start|>user\n<tool_response>\n2\n</tool_response><|im_end|>\n<|im_start|>assistant\n", chat);
    }

    @Test
    void jsonMalformedCalls() {
        JsonToolCallFormat f = JsonToolCallFormat.hermes();
        assertEquals(ParsedTurn.Kind.MALFORMED_CALL, f.parse("<tool_call>{not json</tool_call>", "</tool_call>").kind());
        assertEquals(ParsedTurn.Kind.MALFORMED_CALL, f.parse("<tool_call>[1,2]</tool_call>", "</tool_call>").kind());
        assertEquals(ParsedTurn.Kind.MALFORMED_CALL, f.parse("<tool_call>{\"arguments\":{}}</tool_call>", "</tool_call>").kind());
        assertEquals(ParsedTurn.Kind.MALFORMED_CALL, f.parse("<tool_call>{\"name\":\"x\",\"arguments\":5}</tool_call>", "</tool_call>").kind());
        assertEquals(ParsedTurn.Kind.MALFORMED_CALL, f.parse("{\"name\":\"x\"}</tool_call>", "</tool_call>").kind());
        // An unfinished call at EOS is neither a call nor an answer.
        assertEquals(ParsedTurn.Kind.NONE, f.parse("<tool_call>{\"name\":\"python\"", null).kind());
    }

    @Test
    void adversarialTagOutputs() {
        TagToolCallFormat f = TagToolCallFormat.arpo();
        // unclosed tag at EOS: no call
        assertEquals(ParsedTurn.Kind.NONE, f.parse("<python>print(1)", null).kind());
        // close without open
        ParsedTurn p = f.parse("print(1)</python>", "</python>");
        assertEquals(ParsedTurn.Kind.MALFORMED_CALL, p.kind());
        assertTrue(p.error().contains("without an opening <python>"), p.error());
        // nested tags: the innermost (last) opening wins
        assertEquals("x=1", f.parse("<python>a<python>x=1</python>", "</python>").call().arguments());
        // tags of another tool inside: passed through to the tool
        assertEquals("a<search>b", f.parse("<python>a<search>b</python>", "</python>").call().arguments());
        // a call inside a markdown code block is still a call
        assertEquals("print(2)", f.parse("```\n<python>print(2)</python>", "</python>").call().arguments());
        // empty call
        assertEquals(ParsedTurn.Kind.MALFORMED_CALL, f.parse("<python>   </python>", "</python>").kind());
        // giant arguments are refused, not passed on
        String giant = "<python>" + "x".repeat((1 << 20) + 1) + "</python>";
        ParsedTurn g = f.parse(giant, "</python>");
        assertEquals(ParsedTurn.Kind.MALFORMED_CALL, g.kind());
        assertTrue(g.error().contains("1048577"), g.error());
        // non-UTF-8 bytes after decode (U+FFFD) and lone surrogates: read, not thrown on
        assertEquals("print('\uFFFD\uD800')", f.parse("<python>print('\uFFFD\uD800')</python>", "</python>").call().arguments());
        // a NUL right after the opening tag is ordinary text
        assertEquals("\u0000x", f.parse("<python>\u0000x</python>", "</python>").call().arguments());
        // a stop reported by the backend that is not in the text
        assertEquals(ParsedTurn.Kind.MALFORMED_CALL, f.parse("nothing", "</python>").kind());
        // null text
        assertEquals(ParsedTurn.Kind.NONE, f.parse(null, null).kind());
    }

    @Test
    void randomGarbageNeverThrowsFromAnyFormat() {
        long seed = ScriptedGenerator.seed();
        System.out.println("randomGarbageNeverThrowsFromAnyFormat seed=" + seed);
        Random rnd = new Random(seed);
        String[] pieces = {"<python>", "</python>", "<search>", "</search>", "<result>", "```python", "```", "```output", "<tool_call>",
                "</tool_call>", "{\"name\":", "\"python\"", ",\"arguments\":", "{", "}", "[", "\"", "\\", "\uFFFD", "\uD800", "\n", " ",
                "\\boxed{", "<answer>", "</answer>", "print(1)", "\u0000"};
        List<ToolCallFormat> formats = List.of(MarkdownToolCallFormat.cort(), TagToolCallFormat.arpo(), TagToolCallFormat.searchR1(),
                JsonToolCallFormat.hermes(), JsonToolCallFormat.chatMl());
        int calls = 0, malformed = 0;
        for (int i = 0; i < 20000; i++) {
            StringBuilder sb = new StringBuilder();
            int n = rnd.nextInt(12);
            for (int j = 0; j < n; j++) sb.append(pieces[rnd.nextInt(pieces.length)]);
            ToolCallFormat f = formats.get(rnd.nextInt(formats.size()));
            String text = sb.toString();
            ParsedTurn p = parseAtStop(f, text);
            assertNotNull(p);
            switch (p.kind()) {
                case TOOL_CALL -> {
                    calls++;
                    assertFalse(p.call().arguments().isEmpty() && !(f instanceof JsonToolCallFormat));
                }
                case MALFORMED_CALL -> {
                    malformed++;
                    assertFalse(p.error().isEmpty());
                    assertNotNull(f.renderError(text, p.error()));
                }
                default -> { }
            }
            assertNotNull(f.renderObservation(text, text));
        }
        assertTrue(calls > 100 && malformed > 100, "the generator must exercise both paths: calls=" + calls + " malformed=" + malformed);
    }

    @Test
    void byNameKnowsTheBuiltIns() {
        List<String> names = new ArrayList<>();
        for (String n : List.of("cort", "arpo", "search-r1", "hermes", "chatml-json")) names.add(ToolCallFormat.byName(n).name());
        assertEquals(List.of("cort", "arpo", "search-r1", "hermes", "chatml-json"), names);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> ToolCallFormat.byName("xml"));
        assertTrue(e.getMessage().contains("xml"));
    }
}
