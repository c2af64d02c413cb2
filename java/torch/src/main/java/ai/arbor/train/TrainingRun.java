package ai.arbor.train;

import ai.arbor.generate.LocalGenerator;
import ai.arbor.rl.Recipe;
import ai.arbor.rl.Sequence;
import ai.arbor.kernels.SamplingParams;
import ai.arbor.rollout.Budget;
import ai.arbor.rollout.CharTokenizer;
import ai.arbor.rollout.Seeds;
import ai.arbor.task.Evaluator;
import ai.arbor.torch.model.CpuThreads;
import ai.arbor.torch.model.PolicyConfig;
import ai.arbor.torch.model.ReferencePolicy;
import ai.arbor.train.report.LinePlot;
import ai.arbor.train.report.MetricsLog;
import ai.arbor.task.Problem;
import ai.arbor.task.TrainingTask;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * A whole training run, as {@code arbor train} does it: the cold start (SFT on rendered demonstrations, or
 * a checkpoint), a held-out evaluation of that starting point, reinforcement learning with a recipe, the
 * final held-out evaluation, and the outputs — per-step metrics as JSONL, a PNG of reward, accuracy,
 * entropy and tool calls over the steps, the evaluation table, and the checkpoints.
 *
 * <p>Files written to {@code out}: {@code metrics.jsonl} (one object per step: {@code phase} sft / rl /
 * eval), {@code training.png}, {@code eval.md} (the table), {@code eval.json}, {@code sft.safetensors}
 * (the cold-start checkpoint) and {@code policy.safetensors} (the final one), {@code samples.txt} (a few
 * held-out responses before and after).
 */
public final class TrainingRun {

    /** Everything a run needs; {@link #defaults()} is what {@code arbor train} does without options. */
    public record Options(String task, long seed, int trainSize, int heldOutSize, PolicyConfig model, Path init,
                          int sftDemos, int sftSteps, int sftBatch, double sftLr,
                          Recipe recipe, int rlSteps, int promptsPerStep, int groupSize, Budget budget, double temperature,
                          int ppoEpochs, int miniBatches, RlTrainer.OldLogprobs oldLogprobs, double rlLr, int warmupSteps,
                          OptimConfig.Schedule schedule, double maxGradNorm,
                          int evalProblems, int evalSamples, boolean evalGreedy, boolean evalBefore, int microBatchTokens, int threads, Path out) {
        public Options {
            if (task == null || recipe == null || model == null || out == null) throw new IllegalArgumentException("task, recipe, model and out are required");
            if (recipe.kind() == Recipe.Kind.SUPERVISED && init != null) throw new IllegalArgumentException("recipe sft trains from scratch; --init is for RL recipes");
            if (sftSteps < 0 || rlSteps < 0) throw new IllegalArgumentException("step counts must be >= 0");
            if (sftBatch < 1 || promptsPerStep < 1) throw new IllegalArgumentException("batch sizes must be >= 1");
            if (evalProblems < 0) throw new IllegalArgumentException("evalProblems must be >= 0, got " + evalProblems);
            if (threads < 1) throw new IllegalArgumentException("threads must be >= 1, got " + threads);
            if (!(temperature > 0) || Double.isInfinite(temperature))
                throw new IllegalArgumentException("temperature must be finite and > 0, got " + temperature);
            if (miniBatches < 1) throw new IllegalArgumentException("miniBatches must be >= 1, got " + miniBatches);
        }

        /** The default run: SFT cold start then GRPO on arith (sizes measured to finish in minutes on 2 cores). */
        public static Options defaults() {
            return new Options("arith", 1, 4000, 200, defaultModel(), null,
                    4000, 1000, 32, 3e-3,
                    Recipe.GRPO, 60, 16, 8, Budget.UNLIMITED, 1.0,
                    1, 1, RlTrainer.OldLogprobs.AUTO, 1e-4, 0, OptimConfig.Schedule.CONSTANT, 1.0,
                    200, 4, true, true, 2048, 1, Path.of("runs", "arith-grpo"));
        }

        /**
         * The reference policy of the laptop runs: d = 64, 3 layers, 4 heads (2 KV heads), SwiGLU 160, 768 positions
         * (136 k parameters). Three layers learn to copy digits (the program from the question, the answer from the
         * result) about twice as fast as two at the same width.
         */
        public static PolicyConfig defaultModel() {
            return new PolicyConfig(CharTokenizer.ascii().vocabSize(), 64, 3, 4, 2, 160, 768, 10_000.0, 1e-6, true, 1234);
        }

        /**
         * The recipe as this run trains it: its trajectories per prompt replaced by {@code groupSize} (when &gt; 0),
         * its mini-batches by {@code miniBatches}, sampling at {@code temperature} (rollouts, sampled evaluation and
         * the loss read this one value).
         */
        public Recipe rlRecipe() {
            return recipe.withTrajectoriesPerPrompt(groupSize).withMiniBatches(miniBatches).withSampling(sampling());
        }

        /** The sampling distribution of the rollouts, the sampled evaluation and the loss. */
        public SamplingParams sampling() {
            return SamplingParams.temperature((float) temperature);
        }

        public Options with(java.util.function.UnaryOperator<Builder> edit) {
            return edit.apply(new Builder(this)).build();
        }
    }

    /** Mutable copy of {@link Options} for the command line. */
    public static final class Builder {
        public String task;
        public long seed;
        public int trainSize, heldOutSize;
        public PolicyConfig model;
        public Path init;
        public int sftDemos, sftSteps, sftBatch;
        public double sftLr;
        public Recipe recipe;
        public int rlSteps, promptsPerStep, groupSize;
        public Budget budget;
        public double temperature;
        public int ppoEpochs, miniBatches;
        public RlTrainer.OldLogprobs oldLogprobs;
        public double rlLr;
        public int warmupSteps;
        public OptimConfig.Schedule schedule;
        public double maxGradNorm;
        public int evalProblems, evalSamples;
        public boolean evalGreedy, evalBefore;
        public int microBatchTokens, threads;
        public Path out;

        public Builder(Options o) {
            task = o.task(); seed = o.seed(); trainSize = o.trainSize(); heldOutSize = o.heldOutSize(); model = o.model(); init = o.init();
            sftDemos = o.sftDemos(); sftSteps = o.sftSteps(); sftBatch = o.sftBatch(); sftLr = o.sftLr(); recipe = o.recipe();
            rlSteps = o.rlSteps(); promptsPerStep = o.promptsPerStep(); groupSize = o.groupSize(); budget = o.budget();
            temperature = o.temperature(); ppoEpochs = o.ppoEpochs(); miniBatches = o.miniBatches(); oldLogprobs = o.oldLogprobs();
            rlLr = o.rlLr(); warmupSteps = o.warmupSteps(); schedule = o.schedule(); maxGradNorm = o.maxGradNorm();
            evalProblems = o.evalProblems(); evalSamples = o.evalSamples(); evalGreedy = o.evalGreedy(); evalBefore = o.evalBefore();
            microBatchTokens = o.microBatchTokens(); threads = o.threads(); out = o.out();
        }

        public Options build() {
            return new Options(task, seed, trainSize, heldOutSize, model, init, sftDemos, sftSteps, sftBatch, sftLr, recipe, rlSteps,
                    promptsPerStep, groupSize, budget, temperature, ppoEpochs, miniBatches, oldLogprobs, rlLr, warmupSteps, schedule,
                    maxGradNorm, evalProblems, evalSamples, evalGreedy, evalBefore, microBatchTokens, threads, out);
        }
    }

    /** Progress callbacks (the command line draws its progress bar from them). */
    public interface Listener {
        default void phase(String name, int steps) {}

        default void step(String phase, int step, int steps, Map<String, Object> metrics) {}

        default void message(String text) {}
    }

    /** What a run produced: the evaluations of the starting point and of the result, and the files. */
    public record Result(List<Evaluator.Result> before, List<Evaluator.Result> after, Path metrics, Path plot, Path table,
                         Path checkpoint, double seconds, double sftSeconds, double rlSeconds) {}

    private TrainingRun() {}

    /** Runs {@code o}, reporting to {@code listener}. */
    public static Result run(Options o, Listener listener) throws IOException {
        long t0 = System.nanoTime();
        CpuThreads.set(o.threads());
        Files.createDirectories(o.out());
        CharTokenizer tok = CharTokenizer.ascii();
        Path metricsFile = o.out().resolve("metrics.jsonl");
        double sftSeconds = 0, rlSeconds = 0;
        List<Evaluator.Result> before = new ArrayList<>(), after = new ArrayList<>();
        Path checkpoint = o.out().resolve("policy.safetensors");
        List<String> samples = new ArrayList<>();
        try (TrainingTask task = TrainingTask.create(o.task(), o.seed(), o.trainSize(), o.heldOutSize());
             MetricsLog log = new MetricsLog(metricsFile);
             ReferencePolicy policy = o.init() != null ? ReferencePolicy.load(o.init(), "auto", ScalarType.Float)
                     : ReferencePolicy.create(o.model().withSeed(Seeds.derive(o.seed(), 7)), "auto", ScalarType.Float)) {
            if (policy.config().vocab() < tok.vocabSize())
                throw new IllegalArgumentException("the policy's vocabulary (" + policy.config().vocab() + ") is smaller than the tokenizer's ("
                        + tok.vocabSize() + ")");
            List<Problem> evalSet = task.heldOut().subList(0, Math.min(o.evalProblems(), task.heldOut().size()));
            if (o.init() == null && o.sftSteps() > 0) {
                long s0 = System.nanoTime();
                sft(o, task, tok, policy, log, listener);
                policy.save(o.out().resolve("sft.safetensors"));
                sftSeconds = (System.nanoTime() - s0) / 1e9;
            }
            if (!evalSet.isEmpty() && o.evalBefore()) before = evaluate(o, task, tok, policy, evalSet, "before", log, listener, samples);
            if (o.recipe().samples() && o.rlSteps() > 0) {
                long r0 = System.nanoTime();
                rl(o, task, tok, policy, log, listener);
                rlSeconds = (System.nanoTime() - r0) / 1e9;
                if (!evalSet.isEmpty()) after = evaluate(o, task, tok, policy, evalSet, "after", log, listener, samples);
            }
            policy.save(checkpoint);
            Path plot = plot(o, log, o.out().resolve("training.png"));
            Path table = o.out().resolve("eval.md");
            Files.writeString(table, evalTable(o, before, after, sftSeconds, rlSeconds), StandardCharsets.UTF_8);
            Files.writeString(o.out().resolve("eval.json"), evalJson(o, before, after, sftSeconds, rlSeconds), StandardCharsets.UTF_8);
            Files.write(o.out().resolve("samples.txt"), samples, StandardCharsets.UTF_8);
            return new Result(before, after, metricsFile, plot, table, checkpoint, (System.nanoTime() - t0) / 1e9, sftSeconds, rlSeconds);
        }
    }

    // ---------------------------------------------------------------------------------------------

    private static void sft(Options o, TrainingTask task, CharTokenizer tok, ReferencePolicy policy, MetricsLog log, Listener listener) {
        listener.message("rendering " + o.sftDemos() + " demonstrations (tools run for real) ...");
        List<Problem> demoProblems = new ArrayList<>();
        for (int i = 0; i < o.sftDemos(); i++) demoProblems.add(task.train().get(i % task.train().size()));
        Demonstrations.Rendered demos = Demonstrations.render(task, tok, demoProblems, Seeds.derive(o.seed(), 11), Math.max(2, 2 * o.threads()));
        List<Sequence> data = new ArrayList<>(demos.sequences());
        if (data.isEmpty()) throw new IllegalStateException("no demonstration could be rendered");
        listener.message("demonstrations: " + demos.styles() + (demos.dropped() > 0 ? ", dropped " + demos.dropped() : ""));
        OptimConfig optim = OptimConfig.adamW(o.sftLr()).withWarmup(Math.min(50, o.sftSteps() / 10)).withSchedule(OptimConfig.Schedule.COSINE)
                .withMaxGradNorm(o.maxGradNorm());
        Random rnd = new Random(Seeds.derive(o.seed(), 13));
        listener.phase("sft", o.sftSteps());
        try (Trainer trainer = new Trainer(policy, optim, o.sftSteps(), o.microBatchTokens(), tok.vocabSize())) {
            List<Integer> order = new ArrayList<>();
            int at = 0;
            for (int s = 0; s < o.sftSteps(); s++) {
                List<Sequence> batch = new ArrayList<>(o.sftBatch());
                while (batch.size() < o.sftBatch()) {
                    if (at == order.size()) {
                        order.clear();
                        for (int i = 0; i < data.size(); i++) order.add(i);
                        Collections.shuffle(order, rnd);
                        at = 0;
                    }
                    batch.add(data.get(order.get(at++)));
                }
                Trainer.SftStats st = trainer.sftStep(batch);
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("phase", "sft");
                m.put("step", s + 1);
                m.put("loss", st.loss());
                m.put("tokens", st.tokens());
                m.put("grad_norm", st.gradNorm());
                m.put("lr", st.lr());
                m.put("seconds", st.seconds());
                log.log(m);
                listener.step("sft", s + 1, o.sftSteps(), m);
            }
        }
    }

    private static void rl(Options o, TrainingTask task, CharTokenizer tok, ReferencePolicy policy, MetricsLog log, Listener listener)
            throws IOException {
        Recipe recipe = o.rlRecipe();
        RlTrainer.Config cfg = new RlTrainer.Config(recipe, o.budget(), o.ppoEpochs(), o.oldLogprobs(), 2);
        boolean kl = recipe.needsReference();
        long optSteps = recipe.kind() == Recipe.Kind.REJECTION_SAMPLING ? o.rlSteps() : (long) o.rlSteps() * o.ppoEpochs() * recipe.miniBatches();
        OptimConfig optim = OptimConfig.adamW(o.rlLr()).withWarmup(o.warmupSteps()).withSchedule(o.schedule()).withMaxGradNorm(o.maxGradNorm());
        ReferencePolicy reference = kl ? copy(policy) : null;
        try (LocalGenerator gen = new LocalGenerator(policy, tok, LocalGenerator.Options.defaults());
             Trainer trainer = new Trainer(policy, optim, optSteps, o.microBatchTokens(), tok.vocabSize());
             RlTrainer rl = new RlTrainer(task, tok, trainer, gen, reference, cfg, o.microBatchTokens(), Math.max(2, 2 * o.threads()))) {
            listener.phase(o.recipe().name(), o.rlSteps());
            listener.message("rl: " + o.recipe().name() + ", " + rl.strategy().name() + ", loss " + rl.lossConfig().clipMode()
                    + " " + rl.lossConfig().epsLow() + "/" + rl.lossConfig().epsHigh() + ", KL " + rl.lossConfig().klType()
                    + ", shaping " + recipe.shaping().mode() + ", filters " + recipe.filters());
            Random rnd = new Random(Seeds.derive(o.seed(), 17));
            List<Problem> order = new ArrayList<>(task.train());
            Collections.shuffle(order, rnd);
            int at = 0;
            for (int s = 0; s < o.rlSteps(); s++) {
                List<Problem> batch = new ArrayList<>(o.promptsPerStep());
                while (batch.size() < o.promptsPerStep()) {
                    if (at == order.size()) {
                        Collections.shuffle(order, rnd);
                        at = 0;
                    }
                    batch.add(order.get(at++));
                }
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("phase", "rl");
                m.put("step", s + 1);
                m.put("recipe", o.recipe().name());
                m.putAll(rl.step(batch, Seeds.derive(o.seed(), 1000 + s)));
                log.log(m);
                listener.step("rl", s + 1, o.rlSteps(), m);
            }
        } finally {
            if (reference != null) reference.close();
        }
    }

    /** A frozen copy of {@code policy} (the KL reference). */
    static ReferencePolicy copy(ReferencePolicy policy) {
        ReferencePolicy ref = ReferencePolicy.create(policy.config(), policy.device().is_cpu() ? "cpu" : "cuda", policy.dtype());
        ref.loadParameters(policy.namedParameters());
        return ref;
    }

    private static List<Evaluator.Result> evaluate(Options o, TrainingTask task, CharTokenizer tok, ReferencePolicy policy, List<Problem> set,
                                                   String when, MetricsLog log, Listener listener, List<String> samples) {
        List<Evaluator.Result> out = new ArrayList<>();
        listener.message("evaluating " + when + " on " + set.size() + " held-out problems ...");
        try (LocalGenerator gen = new LocalGenerator(policy, tok, LocalGenerator.Options.defaults())) {
            if (o.evalSamples() > 0)
                out.add(Evaluator.evaluate(task, tok, gen, set, o.sampling(), o.evalSamples(), Seeds.derive(o.seed(), 23), Math.max(2, 2 * o.threads())));
            if (o.evalGreedy()) out.add(Evaluator.evaluate(task, tok, gen, set, SamplingParams.greedy(), 1, 0, Math.max(2, 2 * o.threads())));
        }
        for (Evaluator.Result r : out) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("phase", "eval");
            m.put("when", when);
            m.put("decoding", r.decoding());
            m.putAll(r.metrics(""));
            log.log(m);
            listener.message(String.format(Locale.ROOT, "  %-6s %-18s accuracy %.3f  tool use %.3f  tool calls %.2f", when, r.decoding(),
                    r.accuracy(), r.toolUse(), r.toolCalls()));
            samples.add("== " + when + ", " + r.decoding());
            samples.addAll(r.examples());
        }
        return out;
    }

    /** The training curves: RL reward, accuracy, rollout entropy and tool calls per trajectory over the steps (SFT loss when there is no RL). */
    static Path plot(Options o, MetricsLog log, Path png) throws IOException {
        LinePlot plot = new LinePlot("arbor train: " + o.task() + ", " + o.recipe().name() + ", seed " + o.seed());
        List<Map<String, Object>> rows = log.rows();
        List<Map<String, Object>> rl = rows.stream().filter(r -> "rl".equals(r.get("phase"))).toList();
        List<Map<String, Object>> sft = rows.stream().filter(r -> "sft".equals(r.get("phase"))).toList();
        if (!rl.isEmpty()) {
            for (String key : List.of("reward", "accuracy", "entropy", "tool_calls"))
                plot.add(key, new LinePlot.Series(o.recipe().name(), column(rl, "step"), column(rl, key)));
        }
        if (!sft.isEmpty()) plot.add("sft loss", new LinePlot.Series("sft", column(sft, "step"), column(sft, "loss")));
        return plot.write(png);
    }

    static double[] column(List<Map<String, Object>> rows, String key) {
        double[] v = new double[rows.size()];
        for (int i = 0; i < v.length; i++) v[i] = rows.get(i).get(key) instanceof Number n ? n.doubleValue() : Double.NaN;
        return v;
    }

    static String evalTable(Options o, List<Evaluator.Result> before, List<Evaluator.Result> after, double sftSeconds, double rlSeconds) {
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT, "Held-out evaluation: task %s, recipe %s, seed %d (SFT %.0f s, RL %.0f s)%n%n", o.task(),
                o.recipe().name(), o.seed(), sftSeconds, rlSeconds));
        sb.append("| policy | decoding | accuracy | tool use | tool calls / answer | tool failure rate | response tokens | answers |\n");
        sb.append("|---|---|---|---|---|---|---|---|\n");
        String start = o.init() != null ? "start (" + o.init().getFileName() + ")" : "SFT cold start";
        for (Evaluator.Result r : before) row(sb, start, r);
        for (Evaluator.Result r : after) row(sb, "after " + o.recipe().name(), r);
        return sb.toString();
    }

    private static void row(StringBuilder sb, String who, Evaluator.Result r) {
        sb.append(String.format(Locale.ROOT, "| %s | %s | %.3f | %.3f | %.2f | %.3f | %.1f | %d |%n", who, r.decoding(), r.accuracy(), r.toolUse(),
                r.toolCalls(), r.toolFailureRate(), r.responseTokens(), r.answers()));
    }

    static String evalJson(Options o, List<Evaluator.Result> before, List<Evaluator.Result> after, double sftSeconds, double rlSeconds) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("task", o.task());
        m.put("recipe", o.recipe().name());
        m.put("seed", o.seed());
        m.put("sft_seconds", sftSeconds);
        m.put("rl_seconds", rlSeconds);
        List<Map<String, Object>> rows = new ArrayList<>();
        for (Evaluator.Result r : before) rows.add(evalRow("before", r));
        for (Evaluator.Result r : after) rows.add(evalRow("after", r));
        m.put("evaluations", rows);
        try {
            return new com.fasterxml.jackson.databind.ObjectMapper().writerWithDefaultPrettyPrinter().writeValueAsString(m);
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static Map<String, Object> evalRow(String when, Evaluator.Result r) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("when", when);
        m.put("decoding", r.decoding());
        m.putAll(r.metrics(""));
        return m;
    }
}
