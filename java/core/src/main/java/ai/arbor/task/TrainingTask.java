package ai.arbor.task;

import ai.arbor.kernels.SamplingParams;
import ai.arbor.reward.AnswerChecker;
import ai.arbor.rollout.AgentConfig;
import ai.arbor.rollout.Prompt;
import ai.arbor.rollout.TagToolCallFormat;
import ai.arbor.rollout.Tokenizer;
import ai.arbor.rollout.ToolCallFormat;
import ai.arbor.rollout.ToolProvider;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.Predicate;
import java.util.regex.Pattern;

/**
 * A built-in task as the trainer sees it: the problems (train / held-out), how a problem is shown to the
 * policy, the tools and their call format, how an answer is checked, the agent loop's limits, and the
 * scripts of the cold-start demonstrations. Owns its tools (a Python sandbox, a search index): close it.
 *
 * <p>Both built-in tasks use the ARPO/AEPO tag format ({@code <python>…</python>}, {@code <search>…</search>}
 * → {@code " <result>\n…\n</result>"}), the shortest of the formats for a character-level tokenizer.
 */
public interface TrainingTask extends AutoCloseable {

    /** Task names accepted by {@link #create}. */
    List<String> NAMES = List.of("arith", "kb");

    /** The task's name ({@code arith}, {@code kb}). */
    String name();

    List<Problem> train();

    List<Problem> heldOut();

    /** The text the policy sees before its response (after the tokenizer's BOS). */
    default String promptText(Problem p) {
        return "Q: " + p.question() + "\n";
    }

    /** The prompt of {@code p}, with its gold answers in the metadata ({@code "answers"}). */
    default Prompt prompt(Problem p, Tokenizer tokenizer) {
        return Prompt.of(p.id(), promptText(p), tokenizer, Map.of("answers", p.answers()));
    }

    /** The tool-call format. */
    default ToolCallFormat format() {
        return TagToolCallFormat.arpo();
    }

    /** Opens the tools of one trajectory (the agent loop calls it once per path, on its first tool call). */
    ToolProvider tools();

    /** Whether an answer is correct (the outcome reward; also the accuracy metric). */
    AnswerChecker checker();

    /** True for question answering (exact match of a name), false for math (answer equivalence). */
    boolean questionAnswering();

    /** The agent loop's limits for this task, with {@code sampling} (temperature etc.). */
    AgentConfig agentConfig(SamplingParams sampling);

    /** The cold-start mix: the share of each demonstration style (sums to 1). */
    Map<DemoStyle, Double> demoMix();

    /**
     * The script of one demonstration of {@code style} for {@code p}; the observations come from running
     * the real tools, so each turn may read what came back.
     */
    DemoScript demonstration(Problem p, DemoStyle style);

    /**
     * The format check of a response (generated text with observations): a sequence of complete tool calls,
     * each followed by its result, then a final answer. Used by format-aware rewards (Tree-GRPO's QA reward).
     */
    default Predicate<String> wellFormed() {
        return WELL_FORMED::test;
    }

    /** See {@link #wellFormed()}: calls with results, optional free text between them, then one answer. */
    Predicate<String> WELL_FORMED = Pattern.compile(
            "(?s)\\A(?:[^<]*<(python|search)>[^<]+</\\1> <result>\\n.*?\\n</result>)*[^<]*(?:<answer>[^<]+</answer>|\\\\boxed\\{[^}]+\\})\\s*\\z")
            .asPredicate();

    /**
     * {@code task} without its tool (CoRT's efficiency baseline, {@code --no-tools}; {@link ToolFreeTraining}): in-head
     * demonstrations only, one generation without tool-call stops, no call executed.
     */
    static TrainingTask withoutTools(TrainingTask task) {
        return new ToolFreeTraining(task);
    }

    /** Releases the tools. */
    @Override
    void close();

    /**
     * A built-in task by name.
     *
     * @param name        {@code arith} or {@code kb}
     * @param seed        generates the problems (and, for {@code kb}, the knowledge base)
     * @param trainSize   training problems
     * @param heldOutSize held-out problems (disjoint from training)
     */
    static TrainingTask create(String name, long seed, int trainSize, int heldOutSize) {
        return create(name, seed, trainSize, heldOutSize, null);
    }

    /**
     * A built-in task posed in a model's chat format ({@link ai.arbor.chat.ChatFormat}: its template, its tool
     * calls, its tokenizer), or in the tag format when {@code chat} is null. Only {@code arith} has chat-format
     * demonstrations so far.
     */
    static TrainingTask create(String name, long seed, int trainSize, int heldOutSize, ai.arbor.chat.ChatFormat chat) {
        if (chat != null) {
            String n = name == null ? "" : name.trim().toLowerCase(Locale.ROOT);
            if (!n.equals("arith")) throw new IllegalArgumentException("task '" + name + "' has no chat-format version yet (arith has)");
            return new ChatArithTraining(new ArithTraining(new ArithTask(seed, trainSize, heldOutSize)), chat);
        }
        String n = name == null ? "" : name.trim().toLowerCase(Locale.ROOT);
        return switch (n) {
            case "arith" -> new ArithTraining(new ArithTask(seed, trainSize, heldOutSize));
            case "kb" -> new KbTraining(new KbTask(seed, trainSize, heldOutSize));
            default -> throw new IllegalArgumentException("unknown task '" + name + "'; one of " + NAMES);
        };
    }
}
