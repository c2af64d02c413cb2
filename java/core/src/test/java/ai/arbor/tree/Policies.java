package ai.arbor.tree;

import ai.arbor.rollout.AgentConfig;
import ai.arbor.rollout.CharTokenizer;
import ai.arbor.rollout.Prompt;
import ai.arbor.rollout.RolloutEngine;
import ai.arbor.rollout.ScriptedGenerator;
import ai.arbor.rollout.TagToolCallFormat;
import ai.arbor.rollout.ToolProvider;
import ai.arbor.tools.Observation;
import ai.arbor.tools.Tool;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** Scripted policies and an engine factory for tree tests. */
final class Policies {
    private Policies() {}

    static final CharTokenizer TOK = CharTokenizer.ascii();

    static int results(String ctx) {
        int c = 0;
        for (int i = ctx.indexOf("<result>"); i >= 0; i = ctx.indexOf("<result>", i + 1)) c++;
        return c;
    }

    static String word(java.util.Random rnd, int len) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < len; i++) sb.append((char) ('a' + rnd.nextInt(26)));
        return sb.toString();
    }

    /**
     * A random agent: each turn writes a random 20+-character thought, then calls python with
     * probability {@code pCall} (always on the first turn), else answers. First-turn tokens have
     * entropy {@code e0}, later ones {@code e1}.
     */
    static ScriptedGenerator.Script random(double pCall, double e0, double e1) {
        return (ctx, rnd) -> {
            int k = results(ctx);
            double e = k == 0 ? e0 : e1;
            String thought = word(rnd, 24) + " ";
            if (k == 0 || rnd.nextDouble() < pCall) return new ScriptedGenerator.Turn(thought + "<python>" + word(rnd, 3) + "</python>", false, e);
            return new ScriptedGenerator.Turn(thought + "\\boxed{" + word(rnd, 2) + "}", true, e);
        };
    }

    /** Exactly {@code calls} tool calls, then an answer; every turn is 24+ characters. */
    static ScriptedGenerator.Script fixed(int calls, double e0, double e1) {
        return (ctx, rnd) -> {
            int k = results(ctx);
            double e = k == 0 ? e0 : e1;
            String thought = word(rnd, 24) + " ";
            if (k < calls) return new ScriptedGenerator.Turn(thought + "<python>" + word(rnd, 3) + "</python>", false, e);
            return new ScriptedGenerator.Turn(thought + "\\boxed{" + word(rnd, 2) + "}", true, e);
        };
    }

    static Tool echo() {
        return new Tool() {
            public String name() {
                return "python";
            }

            public String description() {
                return "echo";
            }

            public String parametersSchema() {
                return "{}";
            }

            public Observation call(String a) {
                return Observation.ok("ok " + a, null);
            }
        };
    }

    static RolloutEngine engine(ScriptedGenerator gen, int maxTurns) {
        return RolloutEngine.builder().generator(gen).tokenizer(TOK).format(TagToolCallFormat.arpo()).tools(ToolProvider.shared(echo()))
                .config(AgentConfig.builder().maxNewTokens(200).maxTurns(maxTurns).maxToolCalls(maxTurns)
                        .build()).toolThreads(2).build();
    }

    static List<Prompt> prompts(int n) {
        List<Prompt> out = new ArrayList<>();
        for (int i = 0; i < n; i++) out.add(new Prompt("q" + i, TOK.encode("Question " + i + "?\n"), null, Map.of()));
        return out;
    }

    /** Pearson's chi-square statistic of {@code counts} against equal expected counts. */
    static double chiSquareUniform(long[] counts) {
        long total = 0;
        for (long c : counts) total += c;
        double e = (double) total / counts.length, x = 0;
        for (long c : counts) x += (c - e) * (c - e) / e;
        return x;
    }
}
