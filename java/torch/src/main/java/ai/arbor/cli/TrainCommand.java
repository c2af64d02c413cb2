package ai.arbor.cli;

import ai.arbor.rl.Recipe;
import ai.arbor.rollout.Budget;
import ai.arbor.train.OptimConfig;
import ai.arbor.train.RlTrainer;
import ai.arbor.train.TrainingRun;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

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

    @Override
    public Integer call() throws Exception {
        TrainingRun.Options o = run.options(Recipe.byName(recipe), out);
        System.out.printf(Locale.ROOT, "arbor train: task %s, recipe %s, seed %d, model %,d parameters (d=%d, %d layers), out %s%n", o.task(),
                o.recipe().name(), o.seed(), o.model().parameterCount(), o.model().dModel(), o.model().layers(), o.out());
        TrainingRun.Result r = TrainingRun.run(o, new ProgressBar(System.out));
        System.out.println();
        System.out.print(Files.readString(r.table()));
        System.out.printf(Locale.ROOT, "%ntotal %.0f s (SFT %.0f s, RL %.0f s). Wrote %s, %s, %s, %s%n", r.seconds(), r.sftSeconds(), r.rlSeconds(),
                r.metrics(), r.plot(), r.table(), r.checkpoint());
        return 0;
    }

    /** The options shared by {@code train} and {@code compare}. */
    static final class RunOptions {
        private static final TrainingRun.Options D = TrainingRun.Options.defaults();

        @Option(names = "--task", defaultValue = "arith", description = "arith or kb (default ${DEFAULT-VALUE}).")
        String task;

        @Option(names = "--seed", defaultValue = "1", description = "Seed of the task, the initialisation, the rollouts (default ${DEFAULT-VALUE}).")
        long seed;

        @Option(names = "--init", description = {"Start RL from this checkpoint instead of an SFT cold start (e.g. a run's sft.safetensors).", "compare: {seed} in the path is replaced by each seed (runs/arith-grpo-seed{seed}/sft.safetensors)."})
        Path init;

        @Option(names = "--sft-steps", description = "SFT optimizer steps (default 1000).")
        Integer sftSteps;

        @Option(names = "--sft-demos", description = "Demonstrations rendered for SFT (default 4000).")
        Integer sftDemos;

        @Option(names = "--sft-batch", description = "Demonstrations per SFT step (default 32).")
        Integer sftBatch;

        @Option(names = "--sft-lr", description = "SFT peak learning rate (cosine, default 3e-3).")
        Double sftLr;

        @Option(names = "--steps", description = "RL steps (default 60).")
        Integer steps;

        @Option(names = "--prompts", description = "Prompts per RL step (default 16).")
        Integer prompts;

        @Option(names = "--group-size", description = "Trajectories per prompt (chains n, ARPO/AEPO paths, Tree-GRPO 3 per tree; default 8; 0 = the paper's).")
        Integer groupSize;

        @Option(names = "--budget", description = "Per-prompt rollout budget in generated tokens (0 = none; strategies then add work until it is reached).")
        long budgetTokens;

        @Option(names = "--tool-budget", description = "Per-prompt rollout budget in tool calls (0 = none).")
        long budgetTools;

        @Option(names = "--temperature", description = "Sampling temperature of rollouts and sampled evaluation (default 1.0).")
        Double temperature;

        @Option(names = "--lr", description = "RL learning rate (default 1e-4).")
        Double lr;

        @Option(names = "--schedule", description = "RL learning-rate schedule after warm-up: constant or cosine (default constant).")
        String schedule;

        @Option(names = "--warmup", description = "RL warm-up optimizer steps (default 0).")
        Integer warmup;

        @Option(names = "--ppo-epochs", description = "Passes over each RL batch (default 1).")
        Integer ppoEpochs;

        @Option(names = "--mini-batches", description = "Optimizer steps per pass (default 1).")
        Integer miniBatches;

        @Option(names = "--old-logprobs", description = "auto, behaviour or recompute (auto: recompute when a batch is used for more than one step).")
        String oldLogprobs;

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

        @Option(names = "--model", description = "Model size: d,layers,heads,kvHeads,ffn (default 64,3,4,2,160).")
        String model;

        @Option(names = "--micro-batch-tokens", description = "Padded tokens per forward (default 2048).")
        Integer microBatchTokens;

        @Option(names = "--threads", description = "libtorch / OpenBLAS threads (default 1: fastest for the tiny model on a small machine).")
        Integer threads;

        TrainingRun.Options options(Recipe recipe, Path out) {
            TrainingRun.Builder b = new TrainingRun.Builder(D);
            b.task = task;
            b.seed = seed;
            b.recipe = recipe;
            b.init = init;
            if (sftSteps != null) b.sftSteps = sftSteps;
            if (sftDemos != null) b.sftDemos = sftDemos;
            if (sftBatch != null) b.sftBatch = sftBatch;
            if (sftLr != null) b.sftLr = sftLr;
            if (steps != null) b.rlSteps = steps;
            if (prompts != null) b.promptsPerStep = prompts;
            if (groupSize != null) b.groupSize = groupSize;
            if (budgetTokens > 0 || budgetTools > 0) b.budget = new Budget(budgetTokens, budgetTools);
            if (temperature != null) b.temperature = temperature;
            if (lr != null) b.rlLr = lr;
            if (schedule != null) b.schedule = OptimConfig.Schedule.byName(schedule);
            if (warmup != null) b.warmupSteps = warmup;
            if (ppoEpochs != null) b.ppoEpochs = ppoEpochs;
            if (miniBatches != null) b.miniBatches = miniBatches;
            if (oldLogprobs != null) b.oldLogprobs = RlTrainer.OldLogprobs.valueOf(oldLogprobs.trim().toUpperCase(Locale.ROOT));
            if (maxGradNorm != null) b.maxGradNorm = maxGradNorm;
            if (trainSize != null) b.trainSize = trainSize;
            if (evalProblems != null) b.evalProblems = evalProblems;
            if (evalSamples != null) b.evalSamples = evalSamples;
            b.evalGreedy = !noGreedy;
            if (model != null) b.model = parseModel(model, D.model());
            if (microBatchTokens != null) b.microBatchTokens = microBatchTokens;
            if (threads != null) b.threads = threads;
            if (!recipe.samples()) b.rlSteps = 0;
            b.out = out != null ? out : Path.of("runs", task + "-" + recipe.name() + "-seed" + seed);
            return b.build();
        }

        static ai.arbor.torch.model.PolicyConfig parseModel(String spec, ai.arbor.torch.model.PolicyConfig base) {
            String[] f = spec.split(",");
            if (f.length != 5) throw new IllegalArgumentException("--model wants d,layers,heads,kvHeads,ffn, got " + spec);
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
