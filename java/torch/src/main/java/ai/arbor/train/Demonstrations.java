package ai.arbor.train;

import ai.arbor.kernels.SamplingParams;
import ai.arbor.rl.Sequence;
import ai.arbor.rollout.AgentLoop;
import ai.arbor.rollout.FinishReason;
import ai.arbor.rollout.Generation;
import ai.arbor.rollout.GenerationException;
import ai.arbor.rollout.GenerationRequest;
import ai.arbor.rollout.Generator;
import ai.arbor.rollout.Prompt;
import ai.arbor.rollout.Termination;
import ai.arbor.rollout.Tokenizer;
import ai.arbor.rollout.Trajectory;
import ai.arbor.task.DemoScript;
import ai.arbor.task.DemoStyle;
import ai.arbor.task.Problem;
import ai.arbor.task.TrainingTask;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * Cold-start demonstrations (CoRT's recipe, docs/algorithms.md §11): for each problem a style is drawn from the
 * task's mix ({@link TrainingTask#demoMix()}), its script is played through the real {@link AgentLoop}
 * — so the tool calls are rendered by the task's tool-call format and the observations come from actually
 * running the tools, token for token what the policy will see in its own rollouts — and the result is a
 * {@link Sequence} whose trained positions are the demonstration's own turns (observations masked).
 */
public final class Demonstrations {
    private Demonstrations() {}

    /** One rendered demonstration. */
    public record Demonstration(Problem problem, DemoStyle style, Sequence sequence, String response) {}

    /** What {@link #render} made: the demonstrations, and how many were dropped (observations did not support them). */
    public record Rendered(List<Demonstration> demonstrations, int dropped, Map<DemoStyle, Integer> styles) {
        public List<Sequence> sequences() {
            List<Sequence> out = new ArrayList<>(demonstrations.size());
            for (Demonstration d : demonstrations) out.add(d.sequence());
            return out;
        }
    }

    /**
     * Renders one demonstration per problem (styles drawn from the task's mix with {@code seed}).
     *
     * @param threads tool threads (the tools run for real; demonstrations are rendered concurrently)
     */
    public static Rendered render(TrainingTask task, Tokenizer tokenizer, List<Problem> problems, long seed, int threads) {
        Random rnd = new Random(seed);
        List<DemoStyle> styles = new ArrayList<>(problems.size());
        for (int i = 0; i < problems.size(); i++) styles.add(draw(task.demoMix(), rnd));
        return render(task, tokenizer, problems, styles, threads);
    }

    /** Renders {@code problems.get(i)} in {@code styles.get(i)}. */
    public static Rendered render(TrainingTask task, Tokenizer tokenizer, List<Problem> problems, List<DemoStyle> styles, int threads) {
        if (problems.size() != styles.size()) throw new IllegalArgumentException(problems.size() + " problems but " + styles.size() + " styles");
        ExecutorService pool = Executors.newFixedThreadPool(Math.max(1, threads), r -> {
            Thread t = new Thread(r, "arbor-demo-tools");
            t.setDaemon(true);
            return t;
        });
        try {
            List<CompletableFuture<Trajectory>> runs = new ArrayList<>();
            List<Prompt> prompts = new ArrayList<>();
            for (int i = 0; i < problems.size(); i++) {
                Prompt prompt = task.prompt(problems.get(i), tokenizer);
                prompts.add(prompt);
                DemoScript script = task.demonstration(problems.get(i), styles.get(i));
                AgentLoop loop = AgentLoop.builder().generator(new Scripted(script, tokenizer, prompt.tokens().length, task))
                        .tokenizer(tokenizer).format(task.format()).tools(task.tools())
                        .config(task.agentConfig(SamplingParams.temperature(1f))).toolExecutor(pool).build();
                runs.add(loop.run(prompt, i));
            }
            List<Demonstration> out = new ArrayList<>();
            Map<DemoStyle, Integer> counts = new EnumMap<>(DemoStyle.class);
            int dropped = 0;
            for (int i = 0; i < runs.size(); i++) {
                Trajectory t = runs.get(i).join();
                boolean ok = t.termination() == Termination.ANSWER && !t.infrastructureFailure() && t.toolCalls().stream()
                        .allMatch(c -> !c.status().failed());
                if (!ok) {
                    dropped++;
                    continue;
                }
                out.add(new Demonstration(problems.get(i), styles.get(i), Sequence.of(prompts.get(i), t), t.responseText(tokenizer)));
                counts.merge(styles.get(i), 1, Integer::sum);
            }
            return new Rendered(List.copyOf(out), dropped, Map.copyOf(counts));
        } finally {
            pool.shutdownNow();
        }
    }

    static DemoStyle draw(Map<DemoStyle, Double> mix, Random rnd) {
        double u = rnd.nextDouble(), acc = 0;
        DemoStyle last = null;
        for (DemoStyle s : DemoStyle.values()) {  // fixed order: the draw does not depend on the map's order
            Double w = mix.get(s);
            if (w == null) continue;
            acc += w;
            last = s;
            if (u < acc) return s;
        }
        if (last == null) throw new IllegalArgumentException("empty demonstration mix");
        return last;
    }

    /** The generator side of a demonstration: returns the script's next turn, as the policy would have written it. */
    private static final class Scripted implements Generator {
        private final DemoScript script;
        private final Tokenizer tok;
        private final int promptLength;
        private final List<String> stops;
        private int turn;

        Scripted(DemoScript script, Tokenizer tok, int promptLength, TrainingTask task) {
            this.script = script;
            this.tok = tok;
            this.promptLength = promptLength;
            this.stops = task.format().stopStrings();
        }

        @Override
        public CompletableFuture<Generation> generate(GenerationRequest request) {
            int[] ctx = request.context().toArray();
            String so = tok.decode(Arrays.copyOfRange(ctx, promptLength, ctx.length));
            String text = script.turn(turn++, so);
            if (text == null) return CompletableFuture.failedFuture(new GenerationException("the observations do not support this demonstration"));
            int[] ids = tok.encode(text);
            for (String s : stops)
                if (text.endsWith(s)) return CompletableFuture.completedFuture(new Generation(ids, new float[ids.length], null,
                        FinishReason.STOP_STRING, s, -1));
            int[] withEos = Arrays.copyOf(ids, ids.length + 1);
            withEos[ids.length] = tok.eosId();
            return CompletableFuture.completedFuture(new Generation(withEos, new float[withEos.length], null, FinishReason.STOP_TOKEN,
                    null, tok.eosId()));
        }

        @Override
        public void close() {}
    }
}
