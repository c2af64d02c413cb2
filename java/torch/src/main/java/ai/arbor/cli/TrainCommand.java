package ai.arbor.cli;

import ai.arbor.dist.Distributed;
import ai.arbor.dist.LocalLauncher;
import ai.arbor.kernels.SamplingParams;
import ai.arbor.rl.Recipe;
import ai.arbor.rl.RolloutCorrection;
import ai.arbor.rollout.Budget;
import ai.arbor.train.Checkpoint;
import ai.arbor.train.OptimConfig;
import ai.arbor.train.RlTrainer;
import ai.arbor.train.TrainingRun;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.global.torch;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code arbor train}: SFT cold start, then RL with a recipe, on a built-in task; progress bar with live
 * reward and accuracy; metrics JSONL, a PNG of the curves, a held-out evaluation table, checkpoints.
 */
@Command(name = "train", mixinStandardHelpOptions = true, sortOptions = false,
        description = {"Train the reference policy on a built-in tool-use task: SFT cold start on demonstrations (tools run for real),",
                "then reinforcement learning with a recipe; evaluates on held-out problems before and after.",
                "Without options: SFT then GRPO on arith (a few minutes on 2 cores). See docs/training.md."})
public final class TrainCommand implements Callable<Integer> {

    @Mixin
    RunOptions run = new RunOptions();

    @Option(names = "--recipe", defaultValue = "grpo", description = "sft, rft, grpo, grpo-tcr, tree-grpo, arpo, aepo or tao-rl (default ${DEFAULT-VALUE}).")
    String recipe;

    @Option(names = "--out", description = "Output directory (default runs/<task>-<recipe>-seed<seed>).")
    Path out;

    @Option(names = "--checkpoint-every", paramLabel = "N",
            description = "Write a crash-safe checkpoint every N steps of SFT and of RL and at each phase's end (default 20; 0 = none).")
    Integer checkpointEvery;

    @Option(names = "--resume", paramLabel = "DIR",
            description = {"Continue the run whose output directory is DIR (after a crash or kill -9) from its newest complete checkpoint,",
                "with the options it was started with (DIR/" + ARGS_FILE + "); only --checkpoint-every may be given with it."})
    Path resume;

    @Mixin
    DistOptions dist = new DistOptions();

    @Spec
    CommandSpec spec;

    /** The file in a run's output directory that keeps the options it was started with, for {@code --resume}. */
    static final String ARGS_FILE = "train-args.json";

    private static final ObjectMapper JSON = new ObjectMapper();

    @Override
    public Integer call() throws Exception {
        if (dist.nproc > 1 || dist.nnodes > 1) return launch();
        Distributed.Config dc = dist.config();
        if (dc == null) return train(null);
        try (Distributed d = Distributed.init(dc, torch.cuda_is_available() ? new Device("cuda:0") : new Device("cpu"))) {
            return train(d);
        }
    }

    /** {@code --nproc N} (and {@code --nnodes}): this machine's ranks as child JVMs running this command without those options. */
    private int launch() throws Exception {
        if (dist.rank != null || dist.worldSize != null || dist.localRank != null)
            throw new IllegalArgumentException("--nproc starts the ranks itself: --rank, --world-size and --local-rank are not given with it");
        if (resume != null) throw new IllegalArgumentException("resuming a data-parallel run (--resume with --nproc) is not supported yet");
        List<String> cmd = LocalLauncher.javaCommand(Arbor.class);
        cmd.add("train");
        cmd.addAll(givenArgs(java.util.Set.of("--nproc", "--nnodes", "--node-rank", "--master-addr", "--master-port", "--dist-timeout")));
        String addr = dist.masterAddr != null ? dist.masterAddr : "127.0.0.1";
        int port = dist.masterPort != null ? dist.masterPort : dist.nnodes == 1 ? LocalLauncher.freePort() : Distributed.Config.DEFAULT_PORT;
        Path outDir = out != null ? out : run.options(Recipe.byName(recipe), run.seed, run.init, null).setup().out();
        System.out.printf(Locale.ROOT, "arbor train: %d processes%s, store %s:%d, logs of ranks > 0 in %s%n", dist.nproc,
                dist.nnodes > 1 ? " on node " + dist.nodeRank + " of " + dist.nnodes : "", addr, port, outDir);
        return LocalLauncher.run(new LocalLauncher.Job(cmd, dist.nproc, dist.nnodes, dist.nodeRank, addr, port, dist.timeout(), outDir,
                torch.cuda_is_available() ? torch.cuda_device_count() : 0));
    }

    private int train(Distributed d) throws Exception {
        boolean main = d == null || d.isMain();
        TrainingRun.Options o;
        Checkpoint.Policy checkpoints;
        if (resume != null) {
            for (OptionSpec given : spec.commandLine().getParseResult().matchedOptions())
                if (!given.longestName().equals("--resume") && !given.longestName().equals("--checkpoint-every"))
                    throw new IllegalArgumentException("--resume continues a run with the options it was started with (" + resume.resolve(ARGS_FILE)
                            + "); " + given.longestName() + " cannot be given with it");
            Path argsFile = resume.resolve(ARGS_FILE);
            if (!Files.isRegularFile(argsFile))
                throw new IllegalArgumentException("--resume " + resume + ": no " + ARGS_FILE + " there (not the output directory of arbor train)");
            List<String> args = JSON.readValue(argsFile.toFile(), JSON.getTypeFactory().constructCollectionType(List.class, String.class));
            TrainCommand saved = new TrainCommand();
            new CommandLine(saved).parseArgs(args.toArray(new String[0]));
            o = saved.run.options(Recipe.byName(saved.recipe), saved.run.seed, saved.run.init, resume);
            int every = checkpointEvery != null ? checkpointEvery : saved.checkpointEvery != null ? saved.checkpointEvery : Checkpoint.Policy.DEFAULT_EVERY;
            checkpoints = new Checkpoint.Policy(every, true);
        } else {
            o = run.options(Recipe.byName(recipe), run.seed, run.init, out);
            checkpoints = new Checkpoint.Policy(checkpointEvery != null ? checkpointEvery : Checkpoint.Policy.DEFAULT_EVERY, false);
            Files.createDirectories(o.setup().out());
            if (main) Checkpoint.writeAtomically(o.setup().out().resolve(ARGS_FILE), JSON.writeValueAsBytes(givenArgs(java.util.Set.of())));
        }
        TrainingRun.Setup s = o.setup();
        // a model directory's own size, not the default configuration it replaces
        ai.arbor.torch.model.PolicyConfig m = s.modelDir() != null
                ? ai.arbor.torch.model.HfCheckpoint.readConfig(s.modelDir().resolve(ai.arbor.torch.model.HfCheckpoint.CONFIG)) : s.model();
        System.out.printf(Locale.ROOT, "arbor train: task %s, recipe %s, seed %d, model %,d parameters (d=%d, %d layers, vocab %,d), out %s%s%n", s.task(),
                o.recipe().name(), s.seed(), m.parameterCount(), m.dModel(), m.layers(), m.vocab(), s.out(),
                d == null ? "" : ", rank " + d.rank() + " of " + d.worldSize() + " (" + d.backend() + ")");
        TrainingRun.Result r = TrainingRun.run(o, checkpoints, new ProgressBar(System.out), d);
        System.out.println();
        System.out.print(Files.readString(r.table()));
        System.out.printf(Locale.ROOT, "%ntotal %.0f s (SFT %.0f s, RL %.0f s). Wrote %s, %s, %s, %s%n", r.seconds(), r.sftSeconds(), r.rlSeconds(),
                r.metrics(), r.plot(), r.table(), r.checkpoint());
        return 0;
    }

    /** The options this command was given but {@code leaveOut}, as a command line that parses to them again. */
    private List<String> givenArgs(java.util.Set<String> leaveOut) {
        List<String> args = new ArrayList<>();
        for (OptionSpec given : spec.commandLine().getParseResult().matchedOptions()) {
            if (leaveOut.contains(given.longestName())) continue;
            List<String> values = given.originalStringValues();
            if (given.arity().max() == 0 || values.isEmpty()) args.add(given.longestName());
            else for (String v : values) {
                args.add(given.longestName());
                args.add(v);
            }
        }
        return args;
    }

    /**
     * Data-parallel training (docs/distributed.md): {@code --nproc} starts the ranks of this machine; a rank started
     * otherwise (torchrun-like, by hand or by a scheduler) takes its place from the flags or, where a flag is left
     * out, from {@code RANK}, {@code WORLD_SIZE}, {@code LOCAL_RANK}, {@code MASTER_ADDR}, {@code MASTER_PORT}.
     */
    static final class DistOptions {
        @Option(names = "--nproc", paramLabel = "N", defaultValue = "1",
                description = "Train data-parallel with N processes on this machine (one rank each; default ${DEFAULT-VALUE}). See docs/distributed.md.")
        int nproc;

        @Option(names = "--nnodes", paramLabel = "M", defaultValue = "1", description = "With --nproc: machines in the job, each started with --node-rank (default 1).")
        int nnodes;

        @Option(names = "--node-rank", paramLabel = "K", defaultValue = "0", description = "With --nnodes: this machine, 0..M-1 (0 serves the store; default 0).")
        int nodeRank;

        @Option(names = "--rank", description = "This process's rank (default: $RANK).")
        Integer rank;

        @Option(names = "--world-size", description = "Processes in the job (default: $WORLD_SIZE; 1 = alone).")
        Integer worldSize;

        @Option(names = "--local-rank", description = "This process's rank on its machine (default: $LOCAL_RANK, else the rank).")
        Integer localRank;

        @Option(names = "--master-addr", description = "Host of rank 0's rendezvous store (default: $MASTER_ADDR, else 127.0.0.1).")
        String masterAddr;

        @Option(names = "--master-port", description = "Port of the store (default: $MASTER_PORT, else 29500; --nproc on one machine: a free port).")
        Integer masterPort;

        @Option(names = "--dist-timeout", paramLabel = "SECONDS",
                description = "Rendezvous and collective timeout: a dead or missing rank fails the others after this long (default: $ARBOR_DIST_TIMEOUT, else 300).")
        Double timeoutSeconds;

        /** This process's place in a job from the flags and the environment, or null when it runs alone. */
        Distributed.Config config() {
            Map<String, String> env = new HashMap<>(System.getenv());
            if (rank != null) env.put("RANK", rank.toString());
            if (worldSize != null) env.put("WORLD_SIZE", worldSize.toString());
            if (localRank != null) env.put("LOCAL_RANK", localRank.toString());
            if (masterAddr != null) env.put("MASTER_ADDR", masterAddr);
            if (masterPort != null) env.put("MASTER_PORT", masterPort.toString());
            if (timeoutSeconds != null) env.put("ARBOR_DIST_TIMEOUT", timeoutSeconds.toString());
            return Distributed.Config.inEnv(env) ? Distributed.Config.fromEnv(env) : null;
        }

        Duration timeout() {
            double t = timeoutSeconds != null ? timeoutSeconds : System.getenv("ARBOR_DIST_TIMEOUT") != null
                    ? Double.parseDouble(System.getenv("ARBOR_DIST_TIMEOUT")) : Distributed.Config.DEFAULT_TIMEOUT.toSeconds();
            if (!(t > 0)) throw new IllegalArgumentException("--dist-timeout must be > 0 seconds, got " + t);
            return Duration.ofMillis(Math.round(t * 1000));
        }
    }

    /**
     * The options shared by {@code train} and {@code compare}. An option left out keeps the library's default
     * ({@link TrainingRun.Options#defaults()}); an option given replaces that one value — of the recipe, too
     * ({@code --group-size}, {@code --mini-batches}, {@code --temperature}), never the recipe as a whole.
     */
    static final class RunOptions {
        private static final TrainingRun.Options D = TrainingRun.Options.defaults();

        @Option(names = "--task", defaultValue = "arith", description = "arith, arith-small or kb (default ${DEFAULT-VALUE}; docs/training.md, docs/models.md).")
        String task;

        @Option(names = "--seed", defaultValue = "1", description = "Seed of the task, the initialisation, the rollouts (default ${DEFAULT-VALUE}).")
        long seed;

        @Option(names = "--init", description = {"Start RL from this checkpoint instead of an SFT cold start (e.g. a run's sft.safetensors).", "compare: {seed} in the path is replaced by each seed (runs/arith-grpo-seed{seed}/sft.safetensors)."})
        Path init;

        @Option(names = "--sft-steps", description = "SFT optimizer steps (default 1000; kb 2500).")
        Integer sftSteps;

        @Option(names = "--sft-demos", description = "Demonstrations rendered for SFT (default 4000).")
        Integer sftDemos;

        @Option(names = "--sft-batch", description = "Demonstrations per SFT step (default 32).")
        Integer sftBatch;

        @Option(names = "--sft-lr", description = "SFT peak learning rate (cosine; default 3e-3, kb 5e-3).")
        Double sftLr;

        @Option(names = "--steps", description = "RL steps (default 60).")
        Integer steps;

        @Option(names = "--prompts", description = "Prompts per RL step (default 16).")
        Integer prompts;

        @Option(names = "--group-size",
                description = "Trajectories per prompt (chains n, ARPO/AEPO paths, Tree-GRPO 3 per tree; default: the recipe's own n, docs/algorithms.md §6).")
        Integer groupSize;

        @Option(names = "--estimator", description = "Sequence advantages instead of the recipe's: grpo, dr_grpo, tree_grpo, rloo or reinforce_plus_plus_baseline.")
        String estimator;

        @Option(names = "--policy-loss", description = {"Surrogate instead of the recipe's (docs/algorithms.md §8), with its verl defaults:",
                "cispo (ε 1 / 0.2, token-mean), gspo or gspo-sequence (ε 3e-4 / 4e-4, seq-mean-token-mean); the recipe's KL and entropy terms are kept."})
        String policyLoss;

        @Option(names = "--budget", description = "Per-prompt rollout budget in generated tokens (0 = none; strategies then add work until it is reached).")
        long budgetTokens;

        @Option(names = "--tool-budget", description = "Per-prompt rollout budget in tool calls (0 = none).")
        long budgetTools;

        @Option(names = "--temperature", description = "Sampling temperature of rollouts and sampled evaluation (default: the recipe's; 1.0, CoRT 0.6).")
        Double temperature;

        @Option(names = "--top-p", description = "Nucleus sampling of rollouts and sampled evaluation, in (0, 1] (default: the recipe's; 1 = off, Tree-GRPO and CoRT 0.95).")
        Double topP;

        @Option(names = "--lr", description = "RL learning rate (default 1e-4).")
        Double lr;

        @Option(names = "--schedule", description = "RL learning-rate schedule after warm-up: constant or cosine (default constant).")
        String schedule;

        @Option(names = "--warmup", description = "RL warm-up optimizer steps (default 0).")
        Integer warmup;

        @Option(names = "--ppo-epochs", description = "Passes over each RL batch (default 1).")
        Integer ppoEpochs;

        @Option(names = "--mini-batches", description = "Optimizer steps per pass (default: the recipe's own, docs/algorithms.md §6).")
        Integer miniBatches;

        @Option(names = "--old-logprobs", description = "auto, behaviour or recompute (auto: recompute when a batch is used for more than one step).")
        String oldLogprobs;

        @Option(names = "--rollout-correction", description = "Off-policy correction of the rollout/trainer mismatch (docs/algorithms.md §7): none (default) or "
                + "comma-separated is=token|sequence, is-threshold=C (2), reject=token|sequence|geometric, reject-high=H (2), reject-low=L (1/H), veto=V; "
                + "recomputes the old log-probs (decoupled mode).")
        String rolloutCorrection;

        @Option(names = "--generators", split = ",", description = "Generate the RL rollouts on these running servers (base URLs, comma-separated: "
                + "arbor serve, SGLang, or vLLM with weight updates from disk); the policy is published to them after every step (docs/fleet.md).")
        List<String> generators;

        @Option(names = "--local-fleet", description = "Start N arbor serve processes on loopback and generate the RL rollouts on them (docs/fleet.md).")
        Integer localFleet;

        @Option(names = "--weight-update-timeout", description = "Seconds a fleet server may take to load a new weight version (default 300).")
        Integer weightUpdateTimeout;

        @Option(names = "--async-steps", description = "With a fleet: generate the rollouts of up to K later steps while a step trains "
                + "(staleness <= K versions; old log-probs recomputed); 0 (default) = synchronous, exactly on-policy.")
        Integer asyncSteps;

        @Option(names = "--max-grad-norm", description = "Gradient clipping (default 1.0; 0 = off).")
        Double maxGradNorm;

        @Option(names = "--train-size", description = "Training problems generated (default 4000).")
        Integer trainSize;

        @Option(names = "--eval-problems", description = "Held-out problems evaluated (default 200; 0 = no evaluation).")
        Integer evalProblems;

        @Option(names = "--eval-samples", description = "Sampled answers per held-out problem (default 4; 0 = greedy only).")
        Integer evalSamples;

        @Option(names = "--no-greedy", description = "Skip the greedy evaluation.")
        boolean noGreedy;

        @Option(names = "--model", description = {"Model size d,layers,heads,kvHeads,ffn (default 64,3,4,2,160), or a Hugging Face model",
                "directory (arbor init-model; docs/models.md): its weights start the run, the result is also written to OUT/model."})
        String model;

        @Option(names = "--tokenizer", description = {"Pose the task in this Hugging Face tokenizer's chat format (its tokenizer.json, chat template,",
                "Qwen3 tool calls; thinking off): a directory, or qwen3 for third_party/qwen3-tokenizer (fetched by ./arbor). See docs/chat.md."})
        String tokenizer;

        @Option(names = "--micro-batch-tokens", description = "Padded tokens per forward (default 2048).")
        Integer microBatchTokens;

        @Option(names = "--pack-trees", negatable = true, defaultValue = "true", fallbackValue = "true",
                description = {"Tree-packed update (default on): trajectories sharing a prefix run as one packed sequence, each shared",
                        "token computed once, the same gradient (docs/training.md). --no-pack-trees: one padded row per trajectory."})
        boolean packTrees = true;

        @Option(names = "--no-pack", description = "Same as --no-pack-trees.")
        boolean noPack;

        @Option(names = "--threads", description = {"libtorch's intra-op threads (default: kb min(2, cores), other tasks 1). Give the cores to one pool: libtorch 2 / OpenBLAS 1",
                "took 0.19 s a kb SFT step on 2 cores, libtorch 2 / OpenBLAS 2 1.94 s (both pools spin; docs/policy.md)."})
        Integer threads;

        @Option(names = "--blas-threads", description = "OpenBLAS's threads (default 1; above 1 only with --threads 1).")
        Integer blasThreads;

        @Option(names = "--no-tools", description = {"The task without its tool (CoRT's efficiency baseline, docs/algorithms.md §6): in-head",
                "demonstrations only, one generation without tool-call stops, no call executed; the same SFT budget, recipe and steps."})
        boolean noTools;

        /** The run these options describe for {@code recipe}, {@code seed} and {@code init} (null: an SFT cold start). */
        TrainingRun.Options options(Recipe recipe, long seed, Path init, Path out) {
            Recipe r = recipe;
            if (groupSize != null) {
                if (groupSize < 1) throw new IllegalArgumentException("--group-size must be >= 1 (leave it out for the recipe's own), got " + groupSize);
                r = r.withTrajectoriesPerPrompt(groupSize);
            }
            if (miniBatches != null) r = r.withMiniBatches(miniBatches);
            if (estimator != null) r = r.withEstimator(ai.arbor.advantage.AdvantageEstimator.byName(estimator));
            if (policyLoss != null) r = r.withLoss(policyLoss(policyLoss, r.loss()));
            if (temperature != null) {
                if (!(temperature > 0) || temperature.isInfinite())
                    throw new IllegalArgumentException("--temperature must be finite and > 0 (greedy evaluation is its own row), got " + temperature);
                r = r.withSampling(new SamplingParams(temperature.floatValue(), r.sampling().topK(), r.sampling().topP(), r.sampling().minP()));
            }
            if (topP != null) {
                if (!(topP > 0 && topP <= 1)) throw new IllegalArgumentException("--top-p must be in (0, 1] (1 = off), got " + topP);
                r = r.withSampling(r.sampling().withTopP(topP.floatValue()));
            }
            TrainingRun.Setup ds = D.setup();
            Path modelDir = model != null && java.nio.file.Files.isDirectory(Path.of(model)) ? Path.of(model) : null;
            TrainingRun.Setup setup = new TrainingRun.Setup(task, seed, or(trainSize, ds.trainSize()), ds.heldOutSize(),
                    model == null || modelDir != null ? ds.model() : parseModel(model, ds.model()), init, or(microBatchTokens, ds.microBatchTokens()),
                    or(threads, TrainingRun.Setup.defaultThreads(task)), or(blasThreads, ds.blasThreads()), out != null ? out : Path.of("runs", task + "-" + recipe.name() + "-seed" + seed), modelDir,
                    tokenizerDir(tokenizer), noTools);
            TrainingRun.Sft dsft = TrainingRun.Sft.defaults(task);
            TrainingRun.Sft sft = TrainingRun.Sft.of(or(sftDemos, dsft.demos()), or(sftSteps, dsft.steps()), or(sftBatch, dsft.batch()),
                    or(sftLr, dsft.optim().lr()), or(maxGradNorm, dsft.optim().maxGradNorm()));
            TrainingRun.Rl drl = D.rl();
            OptimConfig rlOptim = drl.optim().withLr(or(lr, drl.optim().lr())).withWarmup(or(warmup, drl.optim().warmupSteps()))
                    .withSchedule(schedule == null ? drl.optim().schedule() : OptimConfig.Schedule.byName(schedule))
                    .withMaxGradNorm(or(maxGradNorm, drl.optim().maxGradNorm()));
            TrainingRun.Rl rl = new TrainingRun.Rl(recipe.samples() ? or(steps, drl.steps()) : 0, or(prompts, drl.promptsPerStep()),
                    budgetTokens > 0 || budgetTools > 0 ? new Budget(budgetTokens, budgetTools) : drl.budget(), or(ppoEpochs, drl.ppoEpochs()),
                    oldLogprobs == null ? drl.oldLogprobs() : oldLogprobs(oldLogprobs), rlOptim,
                    rolloutCorrection == null ? drl.correction() : RolloutCorrection.parse(rolloutCorrection),
                    generators == null && localFleet == null && weightUpdateTimeout == null && asyncSteps == null ? drl.fleet()
                            : new TrainingRun.Fleet(generators, or(localFleet, 0), java.time.Duration.ofSeconds(or(weightUpdateTimeout, 300)),
                                    or(asyncSteps, 0)), packTrees && !noPack);
            TrainingRun.Eval de = D.eval();
            TrainingRun.Eval eval = new TrainingRun.Eval(or(evalProblems, de.problems()), or(evalSamples, de.samples()), !noGreedy, de.before());
            return new TrainingRun.Options(r, setup, sft, rl, eval);
        }

        /** The surrogate named {@code name} with the recipe's KL, entropy bonus and temperature. */
        static ai.arbor.kernels.PolicyLossConfig policyLoss(String name, ai.arbor.kernels.PolicyLossConfig recipe) {
            ai.arbor.kernels.PolicyLossConfig base = switch (name.trim().toLowerCase(Locale.ROOT)) {
                case "cispo" -> ai.arbor.kernels.PolicyLossConfig.cispo();
                case "gspo" -> ai.arbor.kernels.PolicyLossConfig.gspo();
                case "gspo-sequence", "gspo_sequence" -> ai.arbor.kernels.PolicyLossConfig.gspo().toBuilder()
                        .clipMode(ai.arbor.kernels.ClipMode.GSPO_SEQUENCE).build();
                default -> throw new IllegalArgumentException("--policy-loss must be cispo, gspo or gspo-sequence, got '" + name + "'");
            };
            return base.toBuilder().klType(recipe.klType()).klCoef(recipe.klCoef()).entropyCoef(recipe.entropyCoef())
                    .temperature(recipe.temperature()).build();
        }

        /** {@code --tokenizer}: {@code qwen3} is the copy scripts/fetch-qwen3-tokenizer.sh makes under the repository ($ARBOR_HOME, set by ./arbor). */
        static Path tokenizerDir(String spec) {
            if (spec == null) return null;
            if (spec.equals("qwen3")) {
                String home = System.getenv("ARBOR_HOME");
                Path dir = (home != null ? Path.of(home) : Path.of("")).resolve("third_party/qwen3-tokenizer");
                if (!Files.isRegularFile(dir.resolve("tokenizer.json")))
                    throw new IllegalArgumentException("--tokenizer qwen3: " + dir + " has no tokenizer.json; run scripts/fetch-qwen3-tokenizer.sh");
                return dir;
            }
            Path dir = Path.of(spec);
            if (!Files.isDirectory(dir)) throw new IllegalArgumentException("--tokenizer " + spec + " is neither qwen3 nor a directory");
            return dir;
        }

        static RlTrainer.OldLogprobs oldLogprobs(String name) {
            try {
                return RlTrainer.OldLogprobs.valueOf(name.trim().toUpperCase(Locale.ROOT));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("--old-logprobs must be auto, behaviour or recompute, got '" + name + "'");
            }
        }

        private static <T> T or(T given, T otherwise) {
            return given != null ? given : otherwise;
        }

        static ai.arbor.torch.model.PolicyConfig parseModel(String spec, ai.arbor.torch.model.PolicyConfig base) {
            String[] f = spec.split(",");
            if (f.length != 5)
                throw new IllegalArgumentException("--model wants d,layers,heads,kvHeads,ffn or an existing model directory, got " + spec);
            int[] v = new int[5];
            for (int i = 0; i < 5; i++) {
                try {
                    v[i] = Integer.parseInt(f[i].trim());
                } catch (NumberFormatException e) {
                    throw new IllegalArgumentException("--model field " + (i + 1) + " is not an integer: " + f[i]);
                }
            }
            return new ai.arbor.torch.model.PolicyConfig(base.vocab(), v[0], v[1], v[2], v[3], v[4], base.maxSeq(), base.ropeTheta(),
                    base.normEps(), base.tiedEmbeddings(), base.seed());
        }
    }
}
