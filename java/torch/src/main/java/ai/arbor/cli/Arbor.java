package ai.arbor.cli;

import ai.arbor.torch.NativeCache;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * The {@code arbor} command line. Subcommands are registered here; each lives in its own class.
 */
@Command(name = "arbor", mixinStandardHelpOptions = true, version = "arbor 0.1.0",
        description = "Agentic reinforcement learning of LLMs on the JVM.",
        subcommands = {DemoCommand.class, SandboxCommand.class, InitModelCommand.class,
                TrainCommand.class, EvalCommand.class, CompareCommand.class, ServeCommand.class})
public final class Arbor implements Runnable {

    /** The subcommands that load libtorch, OpenBLAS or the kernels (not {@code sandbox}, help or version). */
    private static final java.util.Set<String> NATIVE = java.util.Set.of("demo", "init-model", "train", "eval", "compare", "serve");

    public static void main(String[] args) {
        // two commands started at once on an empty library cache would extract libtorch over each other
        if (args.length > 0 && NATIVE.contains(args[0])) NativeCache.fill();
        int code = new CommandLine(new Arbor()).execute(args);
        System.exit(code);
    }

    @Override
    public void run() {
        new CommandLine(this).usage(System.out);
    }
}
