package ai.arbor.task;

import ai.arbor.kernels.SamplingParams;
import ai.arbor.reward.AnswerChecker;
import ai.arbor.reward.QaGrader;
import ai.arbor.rollout.AgentConfig;
import ai.arbor.rollout.ToolProvider;
import ai.arbor.tools.SearchTool;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * {@link KbTask} for training: BM25 search over the generated knowledge base (the best passage per
 * search, so observations stay short for a character-level tokenizer), answers in {@code <answer>} tags
 * graded by exact match ({@link QaGrader}). A solved response reads
 * <pre>{@code Q: Founder of the employer of NOXZ?
 * <search>NOXZ employer</search> <result>
 * Doc 1(Title: NOXZ) The employer of NOXZ is GYPL.
 * </result><search>GYPL founder</search> <result>
 * Doc 1(Title: GYPL) The founder of GYPL is JXUE.
 * </result><answer>JXUE</answer>}</pre>
 * Every name has a fixed length and every result ends with the name to copy next, no letter of which recurs
 * elsewhere in the result ({@link KbTask}), so the copies from a result (into the second search, into the
 * answer) span one fixed distance.
 */
final class KbTraining implements TrainingTask {
    /** The cold start: 40 % two searches, 20 % one search then a guess, 40 % a guess without searching. */
    static final Map<DemoStyle, Double> MIX;

    static {
        Map<DemoStyle, Double> m = new LinkedHashMap<>();
        m.put(DemoStyle.TOOL, 0.4);
        m.put(DemoStyle.PARTIAL, 0.2);
        m.put(DemoStyle.HAND, 0.4);
        MIX = Map.copyOf(m);
    }

    private final KbTask task;
    private final SearchTool search;
    private final QaGrader grader = QaGrader.standard();

    KbTraining(KbTask task) {
        this.task = task;
        List<SearchTool.Doc> docs = new ArrayList<>();
        for (KbTask.Doc d : task.corpus()) docs.add(new SearchTool.Doc(d.id(), d.title(), d.text()));
        this.search = new SearchTool(docs, 1, 200, 0.9f, 0.4f);
    }

    @Override
    public String name() {
        return "kb";
    }

    @Override
    public List<Problem> train() {
        return task.train();
    }

    @Override
    public List<Problem> heldOut() {
        return task.heldOut();
    }

    @Override
    public ToolProvider tools() {
        return ToolProvider.shared(search);
    }

    @Override
    public AnswerChecker checker() {
        return grader;
    }

    @Override
    public boolean questionAnswering() {
        return true;
    }

    /** 4 turns, 3 tool calls, 64 tokens per turn, 448 response tokens, observations up to 160 tokens. */
    @Override
    public AgentConfig agentConfig(SamplingParams sampling) {
        return AgentConfig.builder().sampling(sampling).maxNewTokens(64).maxTurns(4).maxToolCalls(3).maxResponseTokens(448)
                .maxObservationTokens(160).toolTimeout(Duration.ofSeconds(30)).build();
    }

    @Override
    public Map<DemoStyle, Double> demoMix() {
        return MIX;
    }

    @Override
    public DemoScript demonstration(Problem p, DemoStyle style) {
        String hop1 = p.plan().get(0).argument(), hop2 = p.plan().get(1).argument();
        String answer = "<answer>" + p.answer() + "</answer>";
        return switch (style) {
            case TOOL -> (turn, so) -> switch (turn) {
                case 0 -> "<search>" + hop1 + "</search>";
                // the next hop is what the search returned; a demonstration whose search missed is dropped
                case 1 -> lastResultContains(so, KbTask.subject(hop2)) ? "<search>" + hop2 + "</search>" : null;
                default -> lastResultContains(so, p.answer()) ? answer : null;
            };
            case PARTIAL -> (turn, so) -> turn == 0 ? "<search>" + hop1 + "</search>" : answer;
            case HAND -> (turn, so) -> answer;
            case HINT -> throw new IllegalArgumentException("kb has no HINT demonstrations (CoRT's hints are about code)");
        };
    }

    private static boolean lastResultContains(String so, String s) {
        String r = ArithTraining.lastResult(so);
        return r != null && r.contains(s);
    }

    @Override
    public void close() {
        search.close();
    }
}
