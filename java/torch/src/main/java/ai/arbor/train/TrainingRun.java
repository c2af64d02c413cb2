package ai.arbor.train;

import ai.arbor.dist.Distributed;
import ai.arbor.dist.GradientSync;
import ai.arbor.generate.LocalGenerator;
import ai.arbor.kernels.SamplingParams;
import ai.arbor.rl.Recipe;
import ai.arbor.rl.RolloutCorrection;
import ai.arbor.rl.Sequence;
import ai.arbor.rollout.Budget;
import ai.arbor.chat.ChatFormat;
import ai.arbor.rollout.CharTokenizer;
import ai.arbor.rollout.Tokenizer;
import ai.arbor.rollout.Seeds;
import ai.arbor.task.Evaluator;
import ai.arbor.task.Problem;
import ai.arbor.task.TrainingTask;
import ai.arbor.torch.model.CpuThreads;
import ai.arbor.torch.model.HfCheckpoint;
import ai.arbor.torch.model.PolicyConfig;
import ai.arbor.torch.model.ReferencePolicy;
import ai.arbor.train.report.LinePlot;
import ai.arbor.train.report.MetricsLog;
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
 * held-out responses before and after); with a {@link Checkpoint.Policy}, the newest crash-safe
 * {@link Checkpoint} ({@code checkpoint-NNNNNN/}) to resume from.
 */
public final class TrainingRun {

    /**
     * Everything a run needs, each value in one place: what is trained ({@code recipe}, which also carries the
     * trajectories per prompt, the mini-batches and the sampling distribution of rollouts, sampled evaluation and
     * loss), on what and where ({@link Setup}), the cold start ({@link Sft}), the RL phase ({@link Rl}) and the
     * held-out evaluation ({@link Eval}). {@link #defaults()} is what {@code arbor train} does without options.
     */
    public record Options(Recipe recipe, Setup setup, Sft sft, Rl rl, Eval eval) {
        public Options {
            if (recipe == null || setup == null || sft == null || rl == null || eval == null)
                throw new IllegalArgumentException("recipe, setup, sft, rl and eval are required");
            if (recipe.kind() == Recipe.Kind.SUPERVISED && setup.init() != null)
                throw new IllegalArgumentException("recipe sft trains from scratch; --init (" + setup.init() + ") is for RL recipes");
        }

        /** The default run: SFT cold start then GRPO on arith (sizes measured to finish in minutes on 2 cores). */
        public static Options defaults() {
            return new Options(Recipe.GRPO, Setup.defaults(), Sft.defaults(), Rl.defaults(), Eval.defaults());
        }

        public Options withRecipe(Recipe r) {
            return new Options(r, setup, sft, rl, eval);
        }

        public Options withSetup(Setup s) {
            return new Options(recipe, s, sft, rl, eval);
        }

        public Options withSft(Sft s) {
            return new Options(recipe, setup, s, rl, eval);
        }

        public Options withRl(Rl r) {
            return new Options(recipe, setup, sft, r, eval);
        }

        public Options withEval(Eval e) {
            return new Options(recipe, setup, sft, rl, e);
        }
    }

    /**
     * What a run trains on and where it writes.
     *
     * @param task             built-in task ({@code arith}, {@code kb})
     * @param seed             seed of the task, the initialisation, the rollouts and the shuffles
     * @param trainSize        training problems generated
     * @param heldOutSize      held-out problems generated (the splits are drawn together)
     * @param model            the policy's shape when it is created, not loaded
     * @param init             a checkpoint to start from instead of an SFT cold start, or null
     * @param microBatchTokens padded tokens per forward
     * @param threads          libtorch's intra-op threads ({@link CpuThreads})
     * @param blasThreads      OpenBLAS's threads (1 unless {@code threads} is 1 and cores are free: the two pools spin
     *                         and oversubscribe the cores when both are above 1)
     * @param out              output directory
     * @param modelDir         a Hugging Face model directory whose weights start the run (SFT included), or null; the
     *                         trained policy is also written there in that layout, under {@code out/model}
     * @param tokenizer        a Hugging Face tokenizer directory (tokenizer.json + tokenizer_config.json with the chat
     *                         template, e.g. third_party/qwen3-tokenizer): the task is posed in its chat format
     *                         ({@link ChatFormat}, Qwen3, thinking off) and the created model gets its vocabulary;
     *                         null: the model directory's tokenizer where it has one, else the character tokenizer and the
     *                         tag format
     * @param noTools          the task without its tool ({@link TrainingTask#withoutTools}: in-head demonstrations only, no
     *                         call executed; CoRT's efficiency baseline, {@code --no-tools})
     */
    public record Setup(String task, long seed, int trainSize, int heldOutSize, PolicyConfig model, Path init, int microBatchTokens,
                        int threads, int blasThreads, Path out, Path modelDir, Path tokenizer, boolean noTools) {

        /** A run of the task with its tools, OpenBLAS on one thread. */
        public Setup(String task, long seed, int trainSize, int heldOutSize, PolicyConfig model, Path init, int microBatchTokens,
                     int threads, Path out, Path modelDir, Path tokenizer) {
            this(task, seed, trainSize, heldOutSize, model, init, microBatchTokens, threads, 1, out, modelDir, tokenizer, false);
        }

        /** A run whose policy is created from {@code model} or loaded from {@code init}, in the character format. */
        public Setup(String task, long seed, int trainSize, int heldOutSize, PolicyConfig model, Path init, int microBatchTokens,
                     int threads, Path out) {
            this(task, seed, trainSize, heldOutSize, model, init, microBatchTokens, threads, out, null, null);
        }

        public Setup {
            if (task == null || model == null || out == null) throw new IllegalArgumentException("task, model and out are required");
            if (trainSize < 1 || heldOutSize < 0)
                throw new IllegalArgumentException("trainSize must be >= 1 and heldOutSize >= 0, got " + trainSize + " and " + heldOutSize);
            if (microBatchTokens < 1) throw new IllegalArgumentException("microBatchTokens must be >= 1, got " + microBatchTokens);
            if (threads < 1) throw new IllegalArgumentException("threads must be >= 1, got " + threads);
            if (blasThreads < 1) throw new IllegalArgumentException("blasThreads must be >= 1, got " + blasThreads);
        }

        /** arith, seed 1, 4000 + 200 problems, {@link #defaultModel()}, 2048 tokens per forward, one thread. */
        public static Setup defaults() {
            return new Setup("arith", 1, 4000, 200, defaultModel(), null, 2048, 1, Path.of("runs", "arith-grpo"));
        }

        /**
         * libtorch's intra-op threads when none is given: kb's {@code min(2, cores)}, every other task's one. On 2
         * cores kb's cold start (2500 steps of 40) runs 8.5–9 minutes on two libtorch threads (OpenBLAS on one)
         * against ≈ 12 on one on an Intel Xeon (≈ 14 on two on a 2.45 GHz Zen 3; bench/RESULTS.md, "kb's cold start
         * on two threads", "kb's default cold start"); arith's published figures
         * were measured on one thread and stay reproducible there. The thread count changes libtorch's summation
         * order, so a seed's run is reproducible for a given count only.
         */
        public static int defaultThreads(String task) {
            return "kb".equals(task) ? Math.max(1, Math.min(2, Runtime.getRuntime().availableProcessors())) : 1;
        }

        public Setup withOut(Path dir) {
            return new Setup(task, seed, trainSize, heldOutSize, model, init, microBatchTokens, threads, blasThreads, dir, modelDir, tokenizer, noTools);
        }

        public Setup withModelDir(Path dir) {
            return new Setup(task, seed, trainSize, heldOutSize, model, init, microBatchTokens, threads, blasThreads, out, dir, tokenizer, noTools);
        }

        /** This run with ({@code false}) or without ({@code true}) the task's tool. */
        public Setup withNoTools(boolean on) {
            return new Setup(task, seed, trainSize, heldOutSize, model, init, microBatchTokens, threads, blasThreads, out, modelDir, tokenizer, on);
        }

        /**
         * The reference policy of the laptop runs: d = 64, 3 layers, 4 heads (2 KV heads), SwiGLU 160, 768 positions
         * (136 k parameters). Three layers learn to copy digits (the program from the question, the answer from the
         * result) about twice as fast as two at the same width.
         */
        public static PolicyConfig defaultModel() {
            return new PolicyConfig(CharTokenizer.ascii().vocabSize(), 64, 3, 4, 2, 160, 768, 10_000.0, 1e-6, true, 1234);
        }
    }

    /**
     * The supervised cold start (docs/algorithms.md §11).
     *
     * @param demos demonstrations rendered (tools run for real)
     * @param steps optimizer steps (0: none)
     * @param batch demonstrations per step
     * @param optim the optimizer and its schedule
     */
    public record Sft(int demos, int steps, int batch, OptimConfig optim) {
        public Sft {
            if (demos < 0 || steps < 0) throw new IllegalArgumentException("demos and steps must be >= 0, got " + demos + " and " + steps);
            if (batch < 1) throw new IllegalArgumentException("the SFT batch must be >= 1, got " + batch);
            if (optim == null) throw new IllegalArgumentException("optim must not be null");
        }

        /** 4000 demonstrations, 1000 steps of 32, {@link #of} at lr 3e-3, clipping at 1. */
        public static Sft defaults() {
            return of(4000, 1000, 32, 3e-3, 1.0);
        }

        /**
         * The cold start of {@code task}: {@link #defaults()}, except kb's 2500 steps of 40 at lr 5e-3 — at 3e-3 its
         * policy starts copying names only after 800–1150 steps (the loss sits at the no-copy plateau until then) and
         * one seed in five had not learnt every copy by step 2500; at 5e-3 the plateau ends sooner (bench/RESULTS.md,
         * "kb with one fact per document"). Batches of 40 rather than 32 on {@link Setup#defaultThreads two threads}:
         * at 32 one seed in four stayed on the plateau ("kb's cold start on two threads").
         */
        public static Sft defaults(String task) {
            Sft d = defaults();
            return "kb".equals(task) ? of(d.demos(), 2500, 40, 5e-3, d.optim().maxGradNorm()) : d;
        }

        /** AdamW at {@code lr}, warm-up over the first tenth of the steps (at most 50), then cosine decay. */
        public static Sft of(int demos, int steps, int batch, double lr, double maxGradNorm) {
            return new Sft(demos, steps, batch, OptimConfig.adamW(lr).withWarmup(Math.min(50, steps / 10))
                    .withSchedule(OptimConfig.Schedule.COSINE).withMaxGradNorm(maxGradNorm));
        }
    }

    /**
     * The RL phase (the recipe itself is {@link Options#recipe}).
     *
     * @param steps          RL steps (0: none)
     * @param promptsPerStep prompts per step (one group each)
     * @param budget         per-prompt rollout budget, or {@link Budget#UNLIMITED}
     * @param ppoEpochs      passes over each step's batch
     * @param oldLogprobs    behaviour or recomputed old log-probs
     * @param optim          the optimizer and its schedule
     * @param correction     off-policy correction of the rollout/trainer mismatch ({@link RolloutCorrection#NONE}: none)
     * @param fleet          where the rollouts are generated ({@link Fleet#none()}: in process)
     * @param packTrees      tree-packed update passes where they pay ({@link Trainer.Packing#AUTO}; false: off; docs/training.md "Tree packing")
     */
    public record Rl(int steps, int promptsPerStep, Budget budget, int ppoEpochs, RlTrainer.OldLogprobs oldLogprobs, OptimConfig optim,
                     RolloutCorrection correction, Fleet fleet, boolean packTrees) {
        public Rl {
            if (fleet == null) fleet = Fleet.none();
            if (steps < 0) throw new IllegalArgumentException("RL steps must be >= 0, got " + steps);
            if (promptsPerStep < 1) throw new IllegalArgumentException("promptsPerStep must be >= 1, got " + promptsPerStep);
            if (ppoEpochs < 1) throw new IllegalArgumentException("ppoEpochs must be >= 1, got " + ppoEpochs);
            if (budget == null || oldLogprobs == null || optim == null)
                throw new IllegalArgumentException("budget, oldLogprobs and optim are required");
            if (correction == null) correction = RolloutCorrection.NONE;
            if (correction.active() && oldLogprobs == RlTrainer.OldLogprobs.BEHAVIOUR)  // before SFT, not after it
                throw new IllegalArgumentException("the rollout correction " + correction + " needs recomputed old log-probs, not 'behaviour'");
        }

        /** With tree packing where it pays. */
        public Rl(int steps, int promptsPerStep, Budget budget, int ppoEpochs, RlTrainer.OldLogprobs oldLogprobs, OptimConfig optim,
                  RolloutCorrection correction, Fleet fleet) {
            this(steps, promptsPerStep, budget, ppoEpochs, oldLogprobs, optim, correction, fleet, true);
        }

        /** Without an off-policy correction, in process. */
        public Rl(int steps, int promptsPerStep, Budget budget, int ppoEpochs, RlTrainer.OldLogprobs oldLogprobs, OptimConfig optim) {
            this(steps, promptsPerStep, budget, ppoEpochs, oldLogprobs, optim, RolloutCorrection.NONE, Fleet.none());
        }

        /** In process. */
        public Rl(int steps, int promptsPerStep, Budget budget, int ppoEpochs, RlTrainer.OldLogprobs oldLogprobs, OptimConfig optim,
                  RolloutCorrection correction) {
            this(steps, promptsPerStep, budget, ppoEpochs, oldLogprobs, optim, correction, Fleet.none());
        }

        public Rl withFleet(Fleet f) {
            return new Rl(steps, promptsPerStep, budget, ppoEpochs, oldLogprobs, optim, correction, f, packTrees);
        }

        public Rl withPackTrees(boolean on) {
            return new Rl(steps, promptsPerStep, budget, ppoEpochs, oldLogprobs, optim, correction, fleet, on);
        }

        /** 60 steps × 16 prompts, no budget, one epoch, old log-probs by {@link RlTrainer.OldLogprobs#AUTO}, AdamW 1e-4 constant. */
        public static Rl defaults() {
            return new Rl(60, 16, Budget.UNLIMITED, 1, RlTrainer.OldLogprobs.AUTO, OptimConfig.adamW(1e-4));
        }

        public Rl withSteps(int n) {
            return new Rl(n, promptsPerStep, budget, ppoEpochs, oldLogprobs, optim, correction, fleet, packTrees);
        }

        public Rl withPromptsPerStep(int n) {
            return new Rl(steps, n, budget, ppoEpochs, oldLogprobs, optim, correction, fleet, packTrees);
        }
    }

    /**
     * Where the RL phase's rollouts are generated (docs/fleet.md): in process (the default), or on servers that speak
     * vLLM's completions API and SGLang's weight updates — running ones ({@code generators}) or {@code arbor serve}
     * processes the run starts on loopback ({@code localServers}). With a fleet, the policy is published after every
     * optimizer step ({@link WeightPublisher}) and every trajectory records the weight version that sampled it.
     *
     * @param generators    base URLs of running servers, or empty
     * @param localServers  {@code arbor serve} processes to start (0: none)
     * @param updateTimeout how long a server may take to load a new version
     * @param asyncSteps    k: the rollouts of up to k later steps are generated while a step trains (staleness ≤ k
     *                      versions, recorded as {@code rollout_staleness}); 0 = synchronous, exactly on-policy
     */
    public record Fleet(List<String> generators, int localServers, java.time.Duration updateTimeout, int asyncSteps) {
        public Fleet {
            if (asyncSteps < 0) throw new IllegalArgumentException("asyncSteps must be >= 0, got " + asyncSteps);
            generators = generators == null ? List.of() : List.copyOf(generators);
            if (localServers < 0) throw new IllegalArgumentException("localServers must be >= 0, got " + localServers);
            if (localServers > 0 && !generators.isEmpty())
                throw new IllegalArgumentException("a run uses either running generators " + generators + " or a local fleet (" + localServers + "), not both");
            if (updateTimeout == null || updateTimeout.isNegative() || updateTimeout.isZero())
                throw new IllegalArgumentException("updateTimeout must be positive, got " + updateTimeout);
            if (asyncSteps > 0 && localServers == 0 && generators.isEmpty())
                throw new IllegalArgumentException("asynchronous steps (" + asyncSteps + ") need a generation fleet (--generators or --local-fleet): "
                        + "the in-process generator decodes with the weights being trained");
        }

        /** Synchronous steps. */
        public Fleet(List<String> generators, int localServers, java.time.Duration updateTimeout) {
            this(generators, localServers, updateTimeout, 0);
        }

        /** In process. */
        public static Fleet none() {
            return new Fleet(List.of(), 0, java.time.Duration.ofMinutes(5), 0);
        }

        public boolean active() {
            return localServers > 0 || !generators.isEmpty();
        }
    }

    /**
     * The held-out evaluation, before and after RL; sampled answers are drawn from the recipe's sampling.
     *
     * @param problems held-out problems evaluated (0: none)
     * @param samples  sampled answers per problem (0: greedy only)
     * @param greedy   also decode greedily
     * @param before   also evaluate the starting point
     */
    public record Eval(int problems, int samples, boolean greedy, boolean before) {
        public Eval {
            if (problems < 0 || samples < 0)
                throw new IllegalArgumentException("eval problems and samples must be >= 0, got " + problems + " and " + samples);
        }

        /** 200 problems, 4 samples and greedy, before and after. */
        public static Eval defaults() {
            return new Eval(200, 4, true, true);
        }

        public Eval withBefore(boolean b) {
            return new Eval(problems, samples, greedy, b);
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

    /** Runs {@code o}, reporting to {@code listener} (no checkpoints). */
    public static Result run(Options o, Listener listener) throws IOException {
        return run(o, Checkpoint.Policy.none(), listener);
    }

    /**
     * Runs {@code o}, checkpointing as {@code checkpoints} says ({@link Checkpoint}); with {@code resume}, from the
     * newest complete checkpoint in the output directory (from the start when there is none). A run that does not
     * resume deletes the checkpoints it finds there (its metrics replace theirs).
     */
    public static Result run(Options o, Checkpoint.Policy checkpoints, Listener listener) throws IOException {
        return run(o, checkpoints, listener, null);
    }

    /**
     * {@link #run(Options, Checkpoint.Policy, Listener)} as one rank of a data-parallel job ({@code dist}; null or one
     * process: alone; docs/distributed.md). Every rank runs the same options: each trains on its share of every step's
     * SFT batch and RL prompts (rolled out with a seed of its own), the losses are normalized and the gradients summed
     * over the ranks, so each optimizer step is the one-process step over the union. Rank 0 writes the run's outputs
     * and checkpoints; another rank writes its own log and weights under {@code out/rank-N} and no checkpoint.
     */
    public static Result run(Options o, Checkpoint.Policy checkpoints, Listener listener, Distributed dist) throws IOException {
        GradientSync sync = null;
        if (dist != null && dist.worldSize() > 1) {
            if (checkpoints.resume()) throw new IllegalArgumentException("resuming a data-parallel run (" + dist.worldSize() + " processes) is not supported yet");
            if (o.rl().fleet().active())
                throw new IllegalArgumentException("a data-parallel run (" + dist.worldSize() + " processes) with a generation fleet is not supported yet: "
                        + "each rank generates its share in process");
            int world = dist.worldSize();
            if (o.rl().promptsPerStep() < world || o.sft().batch() < world)
                throw new IllegalArgumentException("every rank needs a share of each step: " + world + " processes, but " + o.rl().promptsPerStep()
                        + " prompts per RL step and " + o.sft().batch() + " demonstrations per SFT step");
            if (!dist.isMain()) {
                o = o.withSetup(o.setup().withOut(o.setup().out().resolve("rank-" + dist.rank())));
                checkpoints = Checkpoint.Policy.none();
                listener = new Listener() {};
            }
            sync = new GradientSync(dist);
        }
        long t0 = System.nanoTime();
        CpuThreads.set(o.setup().threads(), o.setup().blasThreads());
        Path out = o.setup().out();
        Files.createDirectories(out);
        // A model directory that carries a tokenizer with a chat template poses the task in that format too.
        Path tokDir = tokenizerDir(o.setup());
        ChatFormat chat = tokDir == null ? null : ChatFormat.qwen3(tokDir, false);
        Tokenizer tok = chat != null ? chat.tokenizer() : CharTokenizer.ascii();
        PolicyConfig model = o.setup().model();
        if (chat != null && model.vocab() < tok.vocabSize())
            model = new PolicyConfig(embeddingRows(tok), model.dModel(), model.layers(), model.heads(), model.kvHeads(), model.ffnDim(), model.maxSeq(),
                    model.ropeTheta(), model.normEps(), model.tiedEmbeddings(), model.seed());
        Path metricsFile = out.resolve("metrics.jsonl");
        Progress p = new Progress(o, checkpoints);
        if (checkpoints.resume()) {
            p.last = Checkpoint.latest(out, Checkpoint.fingerprint(o));
            listener.message(p.last == null ? "no complete checkpoint in " + out + ": starting from the beginning"
                    : "resuming from " + p.last.dir().getFileName() + " (" + p.last.state().phase().name().toLowerCase(Locale.ROOT) + " step "
                            + p.last.state().step() + ")");
        } else {
            Checkpoint.clear(out);
        }
        Checkpoint.State resumed = p.last == null ? null : p.last.state();
        Checkpoint.Phase phase = resumed == null ? Checkpoint.Phase.SFT : resumed.phase();
        double sftSeconds = resumed == null ? 0 : resumed.sftSeconds(), rlSeconds = resumed == null ? 0 : resumed.rlSeconds();
        List<Evaluator.Result> before = new ArrayList<>(), after = new ArrayList<>();
        Path checkpoint = out.resolve("policy.safetensors");
        List<String> samples = new ArrayList<>();
        try (chat; TrainingTask task = task(o.setup(), chat);
             MetricsLog log = p.last != null ? MetricsLog.resume(metricsFile, p.last.metricsLines()) : new MetricsLog(metricsFile);
             ReferencePolicy policy = p.last != null ? ReferencePolicy.load(p.last.file(Checkpoint.POLICY), "auto", ScalarType.Float)
                     : o.setup().init() != null ? ReferencePolicy.load(o.setup().init(), "auto", ScalarType.Float)
                     : o.setup().modelDir() != null ? HfCheckpoint.load(o.setup().modelDir(), "auto", ScalarType.Float)
                     : ReferencePolicy.create(model.withSeed(Seeds.derive(o.setup().seed(), 7)), "auto", ScalarType.Float)) {
            if (policy.config().vocab() < tok.vocabSize())
                throw new IllegalArgumentException("the policy's vocabulary (" + policy.config().vocab() + ") is smaller than the tokenizer's ("
                        + tok.vocabSize() + ")");
            // the GPU path: bf16 matmuls and attention under autocast, fp32 weights, norms and optimizer state
            if (policy.device().is_cuda()) policy.setAutocast(ScalarType.BFloat16);
            if (sync != null) {
                try (var params = policy.parameters()) {
                    sync.broadcastParameters(params);   // rank 0's start, before anything (the KL reference included) copies it
                }
            }
            List<Problem> evalSet = task.heldOut().subList(0, Math.min(o.eval().problems(), task.heldOut().size()));
            if (o.setup().init() == null && o.sft().steps() > 0 && phase == Checkpoint.Phase.SFT) {
                long s0 = System.nanoTime();
                sft(o, task, tok, policy, log, listener, p, sftSeconds, sync);
                policy.save(out.resolve("sft.safetensors"));
                sftSeconds += (System.nanoTime() - s0) / 1e9;
            }
            if (phase == Checkpoint.Phase.RL) {
                before = new ArrayList<>(resumed.before());
                for (Evaluator.Result r : before) addSamples(samples, "before", r);
            } else if (!evalSet.isEmpty() && o.eval().before()) {
                before = evaluate(o, task, tok, policy, evalSet, "before", log, listener, samples);
            }
            if (o.recipe().samples() && o.rl().steps() > 0) {
                long r0 = System.nanoTime();
                p.before = before;
                p.sftSeconds = sftSeconds;
                rl(o, task, tok, policy, log, listener, p, rlSeconds, sync);
                rlSeconds += (System.nanoTime() - r0) / 1e9;
                if (!evalSet.isEmpty()) after = evaluate(o, task, tok, policy, evalSet, "after", log, listener, samples);
            }
            policy.save(checkpoint);
            if (o.setup().modelDir() != null) {
                // the trained policy in the layout it came in, with the tokenizer files it was trained with
                HfCheckpoint.save(policy, out.resolve("model"), HfCheckpoint.SaveOptions.defaults().withTokenizer(tokDir));
            }
            Path plot = plot(o, log, out.resolve("training.png"));
            Path table = out.resolve("eval.md");
            Files.writeString(table, evalTable(o, before, after, sftSeconds, rlSeconds), StandardCharsets.UTF_8);
            Files.writeString(out.resolve("eval.json"), evalJson(o, before, after, sftSeconds, rlSeconds), StandardCharsets.UTF_8);
            Files.write(out.resolve("samples.txt"), samples, StandardCharsets.UTF_8);
            return new Result(before, after, metricsFile, plot, table, checkpoint, (System.nanoTime() - t0) / 1e9, sftSeconds, rlSeconds);
        }
    }

    /**
     * Embedding rows of a model created for a Hugging Face tokenizer: the Qwen2 / Qwen3 checkpoints' 151,936 for
     * their 151,669-token tokenizer (so every kernel runs at the real logit width), else the tokenizer's size
     * rounded up to a multiple of 128.
     */
    static int embeddingRows(Tokenizer tok) {
        if (tok.tokenId("<|im_start|>") >= 0 && tok.vocabSize() <= 151_936) return 151_936;
        return (tok.vocabSize() + 127) / 128 * 128;
    }

    /** A run's checkpointing: its policy, the last checkpoint written or resumed from, and what the next one records. */
    private static final class Progress {
        final Checkpoint.Policy policy;
        final String fingerprint;
        final Path out;
        Checkpoint last;
        List<Evaluator.Result> before = List.of();
        double sftSeconds;

        Progress(Options o, Checkpoint.Policy policy) {
            this.policy = policy;
            this.fingerprint = Checkpoint.fingerprint(o);
            this.out = o.setup().out();
        }

        /** The phase's steps done when it resumes here (0 when it starts). */
        int resumeStep(Checkpoint.Phase phase) {
            return last != null && last.state().phase() == phase ? last.state().step() : 0;
        }

        /** Writes a checkpoint at {@code step} steps of {@code phase}, {@code seconds} into it. */
        void save(Checkpoint.Phase phase, int step, double seconds, ReferencePolicy policy, Trainer trainer, List<Sequence> demos,
                  ReferencePolicy reference, MetricsLog log) throws IOException {
            int seq = last == null ? 1 : last.state().sequence() + 1;
            boolean sft = phase == Checkpoint.Phase.SFT;
            Checkpoint.State st = new Checkpoint.State(Checkpoint.VERSION, fingerprint, phase, step, trainer == null ? 0 : trainer.steps(), seq,
                    sft ? seconds : sftSeconds, sft ? 0 : seconds, sft ? List.of() : before);
            last = Checkpoint.write(out, last, st, policy, trainer, demos, reference, log.lines());
        }
    }

    // ---------------------------------------------------------------------------------------------

    private static void sft(Options o, TrainingTask task, Tokenizer tok, ReferencePolicy policy, MetricsLog log, Listener listener,
                            Progress progress, double secondsBefore, GradientSync sync) throws IOException {
        long t0 = System.nanoTime();
        int start = progress.resumeStep(Checkpoint.Phase.SFT);
        List<Sequence> data;
        if (start > 0) {
            data = progress.last.demos();   // as rendered before the crash: the tools' output may differ between runs
        } else {
            listener.message("rendering " + o.sft().demos() + " demonstrations (tools run for real) ...");
            List<Problem> demoProblems = new ArrayList<>();
            for (int i = 0; i < o.sft().demos(); i++) demoProblems.add(task.train().get(i % task.train().size()));
            Demonstrations.Rendered demos = Demonstrations.render(task, tok, demoProblems, Seeds.derive(o.setup().seed(), 11), Math.max(2, 2 * o.setup().threads()));
            data = new ArrayList<>(demos.sequences());
            listener.message("demonstrations: " + demos.styles() + (demos.dropped() > 0 ? ", dropped " + demos.dropped() : ""));
        }
        if (data.isEmpty()) throw new IllegalStateException("no demonstration could be rendered");
        OptimConfig optim = o.sft().optim();
        Random rnd = new Random(Seeds.derive(o.setup().seed(), 13));
        listener.phase("sft", o.sft().steps());
        try (Trainer trainer = new Trainer(policy, optim, o.sft().steps(), o.setup().microBatchTokens(), tok.vocabSize()).dataParallel(sync)) {
            if (start > 0) trainer.loadOptimizer(progress.last.file(Checkpoint.OPTIMIZER), progress.last.state().optimizerSteps());
            List<Integer> order = new ArrayList<>();
            int at = 0;
            for (int s = 0; s < o.sft().steps(); s++) {
                List<Sequence> batch = new ArrayList<>(o.sft().batch());
                while (batch.size() < o.sft().batch()) {
                    if (at == order.size()) {
                        order.clear();
                        for (int i = 0; i < data.size(); i++) order.add(i);
                        Collections.shuffle(order, rnd);
                        at = 0;
                    }
                    batch.add(data.get(order.get(at++)));
                }
                if (s < start) continue;   // resumed: the data order is replayed up to the checkpoint
                Trainer.SftStats st = trainer.sftStep(shard(batch, sync));
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("phase", "sft");
                m.put("step", s + 1);
                m.put("loss", st.loss());
                m.put("tokens", st.tokens());
                m.put("grad_norm", st.gradNorm());
                m.put("lr", st.lr());
                m.put("seconds", st.seconds());
                log.log(m);
                listener.step("sft", s + 1, o.sft().steps(), m);
                if (progress.policy.due(s + 1, o.sft().steps()))
                    progress.save(Checkpoint.Phase.SFT, s + 1, secondsBefore + (System.nanoTime() - t0) / 1e9, policy, trainer, data, null, log);
            }
        }
    }

    private static void rl(Options o, TrainingTask task, Tokenizer tok, ReferencePolicy policy, MetricsLog log, Listener listener,
                           Progress progress, double secondsBefore, GradientSync sync) throws IOException {
        long t0 = System.nanoTime();
        int start = progress.resumeStep(Checkpoint.Phase.RL);
        boolean resumed = progress.last != null && progress.last.state().phase() == Checkpoint.Phase.RL;
        Recipe recipe = o.recipe();
        // asynchronous rollouts come from older weights: under auto, π_old is recomputed (decoupled PPO, §7)
        RlTrainer.OldLogprobs old = o.rl().fleet().asyncSteps() > 0 && o.rl().oldLogprobs() == RlTrainer.OldLogprobs.AUTO
                ? RlTrainer.OldLogprobs.RECOMPUTE : o.rl().oldLogprobs();
        RlTrainer.Config cfg = new RlTrainer.Config(recipe, o.rl().budget(), o.rl().ppoEpochs(), old, o.rl().correction());
        boolean kl = recipe.needsReference();
        long optSteps = recipe.kind() == Recipe.Kind.REJECTION_SAMPLING ? o.rl().steps() : (long) o.rl().steps() * o.rl().ppoEpochs() * recipe.miniBatches();
        OptimConfig optim = o.rl().optim();
        ReferencePolicy reference = !kl ? null
                : resumed ? ReferencePolicy.load(progress.last.file(Checkpoint.REFERENCE), "auto", ScalarType.Float) : copy(policy);
        Fleet fleet = o.rl().fleet();
        try (FleetRollouts remote = !fleet.active() ? null : FleetRollouts.start(fleet, o.setup().out().resolve("weights"), policy,
                     tokenizerDir(o.setup()), tok.vocabSize(), start, listener);
             LocalGenerator gen = remote == null ? new LocalGenerator(policy, tok, LocalGenerator.Options.defaults()) : null;
             Trainer trainer = new Trainer(policy, optim, optSteps, o.setup().microBatchTokens(), tok.vocabSize()).dataParallel(sync)
                     .packing(o.rl().packTrees() ? Trainer.Packing.AUTO : Trainer.Packing.OFF, Trainer.DEFAULT_MAX_PACK_TOKENS);
             RlTrainer rl = remote == null
                     ? new RlTrainer(task, tok, trainer, gen, reference, cfg, o.setup().microBatchTokens(), Math.max(2, 2 * o.setup().threads()))
                     : new RlTrainer(task, tok, trainer, remote.generator(), remote::publishNext, reference, cfg, o.setup().microBatchTokens(),
                             Math.max(2, 2 * o.setup().threads()))) {
            listener.phase(o.recipe().name(), o.rl().steps());
            listener.message("rl: " + o.recipe().name() + ", " + rl.strategy().name() + ", loss " + rl.lossConfig().clipMode()
                    + " " + rl.lossConfig().epsLow() + "/" + rl.lossConfig().epsHigh() + (rl.lossConfig().dualClipC() > 0
                    ? " dual-clip " + rl.lossConfig().dualClipC() : "") + ", KL " + rl.lossConfig().klType()
                    + ", n " + recipe.trajectoriesPerPrompt() + ", mini-batches " + recipe.miniBatches()
                    + (recipe.oversample() > 1 ? ", over-sampling x" + recipe.oversample() : "")
                    + ", shaping " + recipe.shaping().mode() + ", filters " + recipe.filters());
            if (start > 0) trainer.loadOptimizer(progress.last.file(Checkpoint.OPTIMIZER), progress.last.state().optimizerSteps());
            if (!resumed && progress.policy.every() > 0)   // SFT and the first evaluation are done: a resume starts here
                progress.save(Checkpoint.Phase.RL, 0, 0, policy, null, null, reference, log);
            Random rnd = new Random(Seeds.derive(o.setup().seed(), 17));
            List<Problem> order = new ArrayList<>(task.train());
            Collections.shuffle(order, rnd);
            int at = 0;
            // every step's prompts, in the data order (a resumed run replays it up to its checkpoint)
            List<List<Problem>> batches = new ArrayList<>(o.rl().steps());
            for (int s = 0; s < o.rl().steps(); s++) {
                // dynamic sampling (Recipe.oversample > 1) rolls out k× the prompts and trains on the informative groups
                int draw = o.rl().promptsPerStep() * (recipe.kind() == Recipe.Kind.POLICY_GRADIENT ? recipe.oversample() : 1);
                List<Problem> batch = new ArrayList<>(draw);
                while (batch.size() < draw) {
                    if (at == order.size()) {
                        Collections.shuffle(order, rnd);
                        at = 0;
                    }
                    batch.add(order.get(at++));
                }
                batches.add(batch);
            }
            // asynchronous steps (a fleet only): the rollouts of the next k steps are generated while this one trains
            int ahead = fleet.asyncSteps();
            java.util.concurrent.ExecutorService roller = ahead > 0 ? java.util.concurrent.Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "arbor-async-rollouts");
                t.setDaemon(true);
                return t;
            }) : null;
            Map<Integer, java.util.concurrent.Future<RlTrainer.Rollout>> inFlight = new java.util.HashMap<>();
            int submitted = start;
            try {
                for (int s = start; s < o.rl().steps(); s++) {
                    long seed = Seeds.derive(o.setup().seed(), 1000 + s);
                    Map<String, Object> m = new LinkedHashMap<>();
                    m.put("phase", "rl");
                    m.put("step", s + 1);
                    m.put("recipe", o.recipe().name());
                    if (roller == null) {
                        // data parallel: this rank's share of the prompts, rolled out with a seed of its own
                        m.putAll(sync == null ? rl.step(batches.get(s), seed) : rl.step(shard(batches.get(s), sync), Seeds.derive(seed, sync.distributed().rank())));
                        if (sync != null) DataParallelMetrics.globalRollout(m, sync);
                    } else {
                        // steps s … s + k in flight (one thread: s + 1 starts when s's rollouts end, while s trains)
                        for (; submitted < Math.min(o.rl().steps(), s + 1 + ahead); submitted++) {
                            int q = submitted;
                            List<Problem> b = batches.get(q);
                            long sq = Seeds.derive(o.setup().seed(), 1000 + q);
                            inFlight.put(q, roller.submit(() -> rl.rollout(b, sq)));
                        }
                        RlTrainer.Rollout r;
                        long w0 = System.nanoTime();
                        try {
                            r = inFlight.remove(s).get();
                        } catch (java.util.concurrent.ExecutionException e) {
                            throw e.getCause() instanceof RuntimeException re ? re : new IllegalStateException(e.getCause());
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                            throw new IllegalStateException("interrupted while waiting for step " + (s + 1) + "'s rollouts", e);
                        }
                        m.put("rollout_wait_seconds", (System.nanoTime() - w0) / 1e9);
                        m.putAll(rl.train(batches.get(s), r, seed));
                        m.put("rollout_staleness", FleetRollouts.staleness(r, s));   // ≤ ahead: this step trained version s
                    }
                    if (remote != null) remote.metrics(m, s + 1, listener);
                    log.log(m);
                    listener.step("rl", s + 1, o.rl().steps(), m);
                    if (progress.policy.due(s + 1, o.rl().steps()))
                        progress.save(Checkpoint.Phase.RL, s + 1, secondsBefore + (System.nanoTime() - t0) / 1e9, policy, trainer, null, reference, log);
                }
            } finally {
                if (roller != null) {
                    inFlight.values().forEach(f -> f.cancel(true));
                    roller.shutdownNow();
                }
            }
        } finally {
            if (reference != null) reference.close();
        }
    }

    /** This rank's contiguous share of a step's items (all of them alone): rank r of w gets [r·n/w, (r+1)·n/w). */
    static <T> List<T> shard(List<T> all, GradientSync sync) {
        if (sync == null) return all;
        long n = all.size(), r = sync.distributed().rank(), w = sync.distributed().worldSize();
        return all.subList((int) (r * n / w), (int) ((r + 1) * n / w));
    }

    /** The Hugging Face tokenizer directory of a run: the given one, or the model directory's when it has one; else null. */
    static Path tokenizerDir(Setup setup) {
        return setup.tokenizer() != null ? setup.tokenizer()
                : setup.modelDir() != null && Files.isRegularFile(setup.modelDir().resolve("tokenizer.json"))
                        && Files.isRegularFile(setup.modelDir().resolve("tokenizer_config.json")) ? setup.modelDir() : null;
    }

    /** The run's task: the built-in one by name, posed in {@code chat}'s format when given, without its tool when asked. */
    static TrainingTask task(Setup setup, ChatFormat chat) {
        TrainingTask t = TrainingTask.create(setup.task(), setup.seed(), setup.trainSize(), setup.heldOutSize(), chat);
        return setup.noTools() ? TrainingTask.withoutTools(t) : t;
    }

    /** A frozen copy of {@code policy} (the KL reference). */
    static ReferencePolicy copy(ReferencePolicy policy) {
        ReferencePolicy ref = ReferencePolicy.create(policy.config(), policy.device().is_cpu() ? "cpu" : "cuda", policy.dtype());
        ref.loadParameters(policy.namedParameters());
        return ref;
    }

    private static List<Evaluator.Result> evaluate(Options o, TrainingTask task, Tokenizer tok, ReferencePolicy policy, List<Problem> set,
                                                   String when, MetricsLog log, Listener listener, List<String> samples) {
        List<Evaluator.Result> out = new ArrayList<>();
        listener.message("evaluating " + when + " on " + set.size() + " held-out problems ...");
        try (LocalGenerator gen = new LocalGenerator(policy, tok, LocalGenerator.Options.defaults())) {
            if (o.eval().samples() > 0)
                out.add(Evaluator.evaluate(task, tok, gen, set, o.recipe().sampling(), o.eval().samples(), Seeds.derive(o.setup().seed(), 23), Math.max(2, 2 * o.setup().threads())));
            if (o.eval().greedy()) out.add(Evaluator.evaluate(task, tok, gen, set, SamplingParams.greedy(), 1, 0, Math.max(2, 2 * o.setup().threads())));
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
            addSamples(samples, when, r);
        }
        return out;
    }

    private static void addSamples(List<String> samples, String when, Evaluator.Result r) {
        samples.add("== " + when + ", " + r.decoding());
        samples.addAll(r.examples());
    }

    /** The training curves: RL reward, accuracy, rollout entropy and tool calls per trajectory over the steps (SFT loss when there is no RL). */
    static Path plot(Options o, MetricsLog log, Path png) throws IOException {
        LinePlot plot = new LinePlot("arbor train: " + o.setup().task() + ", " + o.recipe().name() + ", seed " + o.setup().seed());
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
        sb.append(String.format(Locale.ROOT, "Held-out evaluation: task %s, recipe %s, seed %d (SFT %.0f s, RL %.0f s)%n%n", o.setup().task(),
                o.recipe().name(), o.setup().seed(), sftSeconds, rlSeconds));
        sb.append("| policy | decoding | accuracy | tool use | tool calls / answer | tool failure rate | response tokens | generated tokens | generated tokens / correct | answers |\n");
        sb.append("|---|---|---|---|---|---|---|---|---|---|\n");
        String start = o.setup().init() != null ? "start (" + o.setup().init().getFileName() + ")" : "SFT cold start";
        for (Evaluator.Result r : before) row(sb, start, r);
        for (Evaluator.Result r : after) row(sb, "after " + o.recipe().name(), r);
        return sb.toString();
    }

    private static void row(StringBuilder sb, String who, Evaluator.Result r) {
        sb.append(String.format(Locale.ROOT, "| %s | %s | %.3f | %.3f | %.2f | %.3f | %.1f | %.1f | %s | %d |%n", who, r.decoding(), r.accuracy(), r.toolUse(),
                r.toolCalls(), r.toolFailureRate(), r.responseTokens(), r.generatedTokens(), r.generatedTokensPerCorrectText(), r.answers()));
    }

    static String evalJson(Options o, List<Evaluator.Result> before, List<Evaluator.Result> after, double sftSeconds, double rlSeconds) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("task", o.setup().task());
        m.put("recipe", o.recipe().name());
        m.put("seed", o.setup().seed());
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
