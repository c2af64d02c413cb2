package ai.arbor.cli;

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

    public static void main(String[] args) {
        int code = new CommandLine(new Arbor()).execute(args);
        System.exit(code);
    }

    @Override
    public void run() {
        new CommandLine(this).usage(System.out);
    }
}
