package ai.arbor.tree;

import static org.junit.jupiter.api.Assertions.*;

import ai.arbor.rl.TokenBatch;
import ai.arbor.rollout.*;
import ai.arbor.tools.Observation;
import ai.arbor.tools.Tool;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/** The README's "Rollouts" example, verbatim between the markers, so it keeps working as written. */
class ReadmeExampleTest {

    @Test
    void readmeExampleRunsAsWritten() {
        // --- README example start ---
        CharTokenizer tok = CharTokenizer.ascii();
        // Any Generator (vLLM/SGLang over HTTP, the local libtorch policy, ...); here a toy policy
        // that calls the tool once, then answers.
        Generator policy = request -> {
            String context = tok.decode(request.context().toArray());
            boolean seenResult = context.contains("<result>");
            int[] ids = tok.encode(seenResult ? "So \\boxed{4}" : "Let me add. <python>2+2</python>");
            float[] logprobs = new float[ids.length];   // a real backend returns the sampled tokens' logprobs
            return CompletableFuture.completedFuture(seenResult
                    ? new Generation(ids, logprobs, null, FinishReason.STOP_TOKEN, null, -1)
                    : new Generation(ids, logprobs, null, FinishReason.STOP_STRING, "</python>", -1));
        };
        Tool adder = new Tool() {
            public String name() { return "python"; }
            public String description() { return "adds two integers"; }
            public String parametersSchema() { return "{\"type\":\"string\"}"; }
            public Observation call(String code) {
                String[] ab = code.split("\\+");
                return Observation.ok(String.valueOf(Integer.parseInt(ab[0].trim()) + Integer.parseInt(ab[1].trim())), null);
            }
        };
        try (RolloutEngine engine = RolloutEngine.builder().generator(policy).tokenizer(tok)
                .format(TagToolCallFormat.arpo()).tools(ToolProvider.shared(adder))
                .config(AgentConfig.builder().maxTurns(4).maxResponseTokens(512).build()).build()) {
            List<Prompt> prompts = List.of(Prompt.of("q1", "What is 2+2?\n", tok, Map.of("answer", "4")));
            RolloutBatch<TreeGroup> batch = engine.run(prompts, new TreeGrpoRollout(), 42);   // M=2, N=2, L=1, K=3
            Trajectory t = batch.trajectories().get(0);
            System.out.println(t.responseText(tok));    // Let me add. <python>2+2</python> <result>\n4\n</result>So \boxed{4}
            System.out.println(batch.metrics());         // trajectories, cost, tool calls, latencies, ...
            TokenBatch rows = TokenBatch.of(batch.trajectories());   // one row per generated token, the policy loss's layout
            // rows.seqId(), position(), label(), behaviour(), entropy(), postTool(); StepPipeline adds a recipe's advantages
        // --- README example end ---
            assertEquals("Let me add. <python>2+2</python> <result>\n4\n</result>So \\boxed{4}", t.responseText(tok));
            assertEquals(6, batch.trajectories().size());
            assertEquals(6, rows.sequenceCount());
            // trajectory 0's rows: its two generated turns, not the prompt nor the tool's observation between them
            String turn1 = "Let me add. <python>2+2</python>", turn2 = "So \\boxed{4}";
            int p0 = t.prompt().tokens().length, obs = t.length() - turn1.length() - turn2.length();
            assertEquals(turn1.length() + turn2.length(), rows.rowStarts()[1]);
            assertEquals(p0, rows.position()[0]);
            assertEquals(p0 + turn1.length() + obs, rows.position()[turn1.length()], "the first row after the observation");
            assertEquals(tok.encode("S")[0], rows.label()[turn1.length()]);
            assertEquals(Termination.ANSWER, t.termination());
        }
    }
}
