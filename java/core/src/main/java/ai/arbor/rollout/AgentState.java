package ai.arbor.rollout;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * The state of one path of an agent loop after some steps: the context so far, the steps taken, the
 * counters the limits apply to, and (internally) the path's tool session. Immutable apart from the
 * session handle, which moves to the next state at each {@link AgentLoop#step}; to continue a state a
 * second time (a tree branch), {@link AgentLoop#fork} it first.
 */
public final class AgentState {
    /** A persistent list of steps: a branch shares its parent's prefix of steps. */
    private record StepList(AgentStep step, StepList prev, int size) {}

    final Prompt prompt;
    final TokenContext context;
    private final StepList steps;
    final int turns, toolCalls, responseTokens;
    final boolean nextPostTool;
    final Termination termination;
    final long pathSeed;
    final CostMeter meter;
    final PathTools tools;

    private AgentState(Prompt prompt, TokenContext context, StepList steps, int turns, int toolCalls, int responseTokens,
                       boolean nextPostTool, Termination termination, long pathSeed, CostMeter meter, PathTools tools) {
        this.prompt = prompt;
        this.context = context;
        this.steps = steps;
        this.turns = turns;
        this.toolCalls = toolCalls;
        this.responseTokens = responseTokens;
        this.nextPostTool = nextPostTool;
        this.termination = termination;
        this.pathSeed = pathSeed;
        this.meter = meter;
        this.tools = tools;
    }

    static AgentState initial(Prompt prompt, TokenContext promptContext, long pathSeed, CostMeter meter, ToolProvider provider,
                              ToolSessionMode mode) {
        PathTools t = new PathTools(provider, meter, mode, List.of());
        AgentState s = new AgentState(prompt, promptContext, null, 0, 0, 0, false, null, pathSeed, meter, t);
        t.owner = s;
        return s;
    }

    /** The state after {@code step}; takes over this state's tool session. */
    AgentState next(AgentStep step, TokenContext newContext, int newToolCalls, Termination term) {
        AgentState s = new AgentState(prompt, newContext, new StepList(step, steps, stepCount() + 1), turns + 1, newToolCalls,
                responseTokens + step.length(), step.observation().length > 0 || step.toolCall() != null, term, pathSeed, meter, tools);
        tools.owner = s;
        return s;
    }

    /** A copy that owns a new tool session (replaying this path's executed calls when stateful). */
    AgentState fork(long newPathSeed, ToolProvider provider, ToolSessionMode mode) {
        List<PathTools.Executed> executed = new ArrayList<>();
        for (AgentStep st : steps()) {
            ToolCallRecord r = st.toolCall();
            if (r != null && (r.status() == ToolCallStatus.OK || r.status() == ToolCallStatus.TOOL_ERROR))
                executed.add(PathTools.Executed.of(new ToolCall(r.tool(), r.arguments()), r.status(), r.output(), r.raw()));
        }
        PathTools t = new PathTools(provider, meter, mode, executed);
        AgentState s = new AgentState(prompt, context, steps, turns, toolCalls, responseTokens, nextPostTool, termination, newPathSeed, meter, t);
        t.owner = s;
        return s;
    }

    /** True when this state may be stepped (it owns its tool session). */
    boolean owns() {
        return tools.owner == this;
    }

    public Prompt prompt() {
        return prompt;
    }

    /** Prompt plus everything generated and observed on this path. */
    public TokenContext context() {
        return context;
    }

    /** Generations so far. */
    public int turns() {
        return turns;
    }

    /** Tool calls so far (malformed ones included). */
    public int toolCalls() {
        return toolCalls;
    }

    /** Generated plus observation tokens so far. */
    public int responseTokens() {
        return responseTokens;
    }

    /** True when the next turn follows a tool observation (its tokens are M_post). */
    public boolean nextTurnPostTool() {
        return nextPostTool;
    }

    /** Why the path ended, or null while it is active. */
    public Termination termination() {
        return termination;
    }

    public boolean terminated() {
        return termination != null;
    }

    /** The seed this path's generations derive from. */
    public long pathSeed() {
        return pathSeed;
    }

    /** The meter this path's cost goes to. */
    public CostMeter meter() {
        return meter;
    }

    public int stepCount() {
        return steps == null ? 0 : steps.size;
    }

    /** The last step, or null before the first. */
    public AgentStep lastStep() {
        return steps == null ? null : steps.step;
    }

    /** The steps from the first to the last. */
    public List<AgentStep> steps() {
        ArrayList<AgentStep> out = new ArrayList<>(stepCount());
        for (StepList l = steps; l != null; l = l.prev) out.add(l.step);
        Collections.reverse(out);
        return out;
    }

    @Override
    public String toString() {
        return "AgentState[prompt=" + prompt.id() + ", turns=" + turns + ", toolCalls=" + toolCalls + ", responseTokens=" + responseTokens
                + ", termination=" + termination + "]";
    }
}
