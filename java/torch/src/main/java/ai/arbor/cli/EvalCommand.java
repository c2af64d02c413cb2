package ai.arbor.cli;

import ai.arbor.chat.ChatFormat;
import ai.arbor.generate.LocalGenerator;
import ai.arbor.kernels.SamplingParams;
import ai.arbor.rollout.CharTokenizer;
import ai.arbor.rollout.Tokenizer;
import ai.arbor.task.Evaluator;
import ai.arbor.task.Problem;
import ai.arbor.task.TrainingTask;
import ai.arbor.torch.model.CpuThreads;
import ai.arbor.torch.model.ReferencePolicy;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import org.bytedeco.pytorch.global.torch.ScalarType;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code arbor eval}: a checkpoint on a task's held-out problems, with its tools; prints the table. */
@Command(name = "eval", mixinStandardHelpOptions = true, sortOptions = false,
        description = {"Evaluate a checkpoint on a built-in task's held-out problems (with the task's tools):",
                "accuracy, tool use, tool calls and failures, response length; sampled and greedy decoding."})
public final class EvalCommand implements Callable<Integer> {

    @Option(names = {"--checkpoint", "--model"}, required = true,
            description = "A policy checkpoint (safetensors, e.g. runs/…/policy.safetensors) or a Hugging Face model directory (docs/models.md).")
    Path checkpoint;

    @Option(names = "--task", defaultValue = "arith", description = "arith, arith-small or kb (default ${DEFAULT-VALUE}; docs/training.md, docs/models.md).")
    String task;

    @Option(names = "--seed", defaultValue = "1", description = "Task seed: the held-out split depends on it; use the training run's (default ${DEFAULT-VALUE}).")
    long seed;

    @Option(names = "--train-size", defaultValue = "4000", description = "Training problems the run generated (the splits are drawn together; default ${DEFAULT-VALUE}).")
    int trainSize;

    @Option(names = "--held-out-size", defaultValue = "200", description = "Held-out problems the run generated (default ${DEFAULT-VALUE}).")
    int heldOutSize;

    @Option(names = "--problems", defaultValue = "200", description = "Held-out problems evaluated, the first of the split (default ${DEFAULT-VALUE}).")
    int problems;

    @Option(names = "--samples", defaultValue = "4", description = "Sampled answers per problem (0 = greedy only; default ${DEFAULT-VALUE}).")
    int samples;

    @Option(names = "--temperature", defaultValue = "1.0", description = "Sampling temperature (default ${DEFAULT-VALUE}).")
    double temperature;

    @Option(names = "--top-p", defaultValue = "1.0", description = "Nucleus sampling, in (0, 1] (default ${DEFAULT-VALUE}: off; CoRT and Tree-GRPO train at 0.95).")
    double topP;

    @Option(names = "--no-tools", description = "The task without its tool, as `arbor train --no-tools` trained it (one generation, no call executed).")
    boolean noTools;

    @Option(names = "--no-greedy", description = "Skip the greedy evaluation.")
    boolean noGreedy;

    @Option(names = "--out", description = "Also write the table (markdown) to this file.")
    Path out;

    @Option(names = "--show", defaultValue = "3", description = "Responses to print (default ${DEFAULT-VALUE}).")
    int show;

    @Option(names = "--threads", defaultValue = "1", description = "libtorch's intra-op threads (default ${DEFAULT-VALUE}).")
    int threads;

    @Option(names = "--blas-threads", defaultValue = "1", description = "OpenBLAS's threads (default ${DEFAULT-VALUE}; the two pools spin, so keep one of them at 1).")
    int blasThreads;

    @Override
    public Integer call() throws Exception {
        if (problems < 1) throw new IllegalArgumentException("--problems must be >= 1, got " + problems);
        if (!(topP > 0 && topP <= 1)) throw new IllegalArgumentException("--top-p must be in (0, 1] (1 = off), got " + topP);
        CpuThreads.set(threads, blasThreads);
        // a model directory with a tokenizer and chat template is asked in that chat format, as arbor train posed it
        ChatFormat chat = Files.isRegularFile(checkpoint.resolve("tokenizer.json")) && Files.isRegularFile(checkpoint.resolve("tokenizer_config.json"))
                ? ChatFormat.qwen3(checkpoint, false) : null;
        Tokenizer tok = chat != null ? chat.tokenizer() : CharTokenizer.ascii();
        List<Evaluator.Result> results = new ArrayList<>();
        // the task is generated exactly as the training run generated it (kb's knowledge base depends on both split sizes)
        try (chat; TrainingTask t = withTools(TrainingTask.create(task, seed, trainSize, heldOutSize, chat), !noTools);
             ReferencePolicy policy = ReferencePolicy.load(checkpoint, "auto", ScalarType.Float);
             LocalGenerator gen = new LocalGenerator(policy, tok, LocalGenerator.Options.defaults())) {
            List<Problem> set = t.heldOut().subList(0, Math.min(problems, t.heldOut().size()));
            if (samples > 0) results.add(Evaluator.evaluate(t, tok, gen, set, SamplingParams.temperature((float) temperature).withTopP((float) topP), samples, seed, 2 * threads + 2));
            if (!noGreedy) results.add(Evaluator.evaluate(t, tok, gen, set, SamplingParams.greedy(), 1, 0, 2 * threads + 2));
        }
        String table = table(checkpoint, task, results);
        System.out.print(table);
        for (Evaluator.Result r : results) {
            System.out.println();
            System.out.println(r.decoding() + ":");
            r.examples().stream().limit(show).forEach(e -> System.out.println("  " + e.replace("\n", "\n    ")));
        }
        if (out != null) {
            if (out.getParent() != null) Files.createDirectories(out.getParent());
            Files.writeString(out, table, StandardCharsets.UTF_8);
        }
        return 0;
    }

    /** {@code t}, or {@code t} without its tool ({@link TrainingTask#withoutTools}). */
    static TrainingTask withTools(TrainingTask t, boolean tools) {
        return tools ? t : TrainingTask.withoutTools(t);
    }

    static String table(Path checkpoint, String task, List<Evaluator.Result> results) {
        StringBuilder sb = new StringBuilder();
        sb.append("Held-out evaluation of ").append(checkpoint).append(" on ").append(task).append("\n\n");
        sb.append("| decoding | accuracy | tool use | tool calls / answer | tool failure rate | response tokens | generated tokens | generated tokens / correct | answers |\n");
        sb.append("|---|---|---|---|---|---|---|---|---|\n");
        for (Evaluator.Result r : results)
            sb.append(String.format(Locale.ROOT, "| %s | %.3f | %.3f | %.2f | %.3f | %.1f | %.1f | %s | %d |%n", r.decoding(), r.accuracy(), r.toolUse(),
                    r.toolCalls(), r.toolFailureRate(), r.responseTokens(), r.generatedTokens(), r.generatedTokensPerCorrectText(), r.answers()));
        return sb.toString();
    }
}
