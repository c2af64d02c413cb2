package ai.arbor.task;

import java.util.List;

/**
 * One task instance.
 *
 * @param id       stable identifier within its task and split
 * @param question the question shown to the policy
 * @param answers  gold answers (any one is correct)
 * @param plan     the tool calls that solve it, in order (each a tool name and its argument text), used to
 *                 write demonstrations; the observations come from running the real tools
 */
public record Problem(String id, String question, List<String> answers, List<ToolStep> plan) {
    public Problem {
        if (answers == null || answers.isEmpty()) throw new IllegalArgumentException("a problem needs a gold answer");
        answers = List.copyOf(answers);
        plan = plan == null ? List.of() : List.copyOf(plan);
    }

    /** The first gold answer. */
    public String answer() {
        return answers.get(0);
    }

    /** One planned tool call: the tool's name and the text of its argument. */
    public record ToolStep(String tool, String argument) {}
}
