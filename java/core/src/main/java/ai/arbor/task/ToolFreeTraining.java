package ai.arbor.task;

import ai.arbor.kernels.SamplingParams;
import ai.arbor.reward.AnswerChecker;
import ai.arbor.rollout.AgentConfig;
import ai.arbor.rollout.Prompt;
import ai.arbor.rollout.Tokenizer;
import ai.arbor.rollout.ToolCallFormat;
import ai.arbor.rollout.ToolProvider;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;

/**
 * A task without its tool ({@link TrainingTask#withoutTools}): the baseline of CoRT's efficiency claim, a policy
 * trained the same way (same problems, checker, SFT budget, recipe and RL steps) that never had the tool. Its cold
 * start is the task's in-head demonstrations only ({@link DemoStyle#HAND}, the whole mix); the agent loop takes one
 * generation sampled without the format's tool-call stops, so a response runs to its answer (or its length) and
 * any call it writes is text: with no call allowed ({@code maxToolCalls} 0) a parsed call ends the path
 * unexecuted. Opening the tools is an error.
 */
final class ToolFreeTraining implements TrainingTask {
    private final TrainingTask base;

    ToolFreeTraining(TrainingTask base) {
        if (base == null) throw new IllegalArgumentException("base task must not be null");
        this.base = base;
    }

    @Override
    public String name() {
        return base.name();
    }

    @Override
    public List<Problem> train() {
        return base.train();
    }

    @Override
    public List<Problem> heldOut() {
        return base.heldOut();
    }

    @Override
    public String promptText(Problem p) {
        return base.promptText(p);
    }

    @Override
    public Prompt prompt(Problem p, Tokenizer tokenizer) {
        return base.prompt(p, tokenizer);
    }

    @Override
    public ToolCallFormat format() {
        return base.format();
    }

    /** No tools: the loop never opens one (no call is executed), and opening one is an error. */
    @Override
    public ToolProvider tools() {
        return () -> {
            throw new IllegalStateException(base.name() + " without tools: no tool session can be opened");
        };
    }

    @Override
    public AnswerChecker checker() {
        return base.checker();
    }

    @Override
    public boolean questionAnswering() {
        return base.questionAnswering();
    }

    /** The task's limits and sampling with one generation, no tool call and no tool-call stop strings. */
    @Override
    public AgentConfig agentConfig(SamplingParams sampling) {
        AgentConfig c = base.agentConfig(sampling);
        return new AgentConfig(c.sampling(), c.limits(), 1, 0, c.maxResponseTokens(), c.maxObservationTokens(), c.limitNotice(), c.toolTimeout(),
                c.toolSessions(), null, false, true, false);
    }

    /** In-head demonstrations only. */
    @Override
    public Map<DemoStyle, Double> demoMix() {
        return Map.of(DemoStyle.HAND, 1.0);
    }

    @Override
    public DemoScript demonstration(Problem p, DemoStyle style) {
        if (style != DemoStyle.HAND) throw new IllegalArgumentException(base.name() + " without tools has only HAND demonstrations, got " + style);
        return base.demonstration(p, style);
    }

    @Override
    public Predicate<String> wellFormed() {
        return base.wellFormed();
    }

    @Override
    public void close() {
        base.close();
    }
}
