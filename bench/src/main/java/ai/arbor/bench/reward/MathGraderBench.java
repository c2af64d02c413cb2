package ai.arbor.bench.reward;

import ai.arbor.reward.MathData;
import ai.arbor.reward.MathGrader;
import ai.arbor.reward.Verdict;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.infra.Blackhole;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Gradings per second of {@link MathGrader} without the symbolic fallback, over the 600 gold answers of
 * the repository's {@code data/math/*.jsonl} (MATH-500, AIME 2024/2025, AMC 2023). Three workloads, each one
 * grading per row:
 * <ul>
 *   <li>{@code selfInResponse}: a response ending in {@code \boxed{gold}} against the gold (extraction included);</li>
 *   <li>{@code rewritten}: a rewritten gold ({@code \frac → \dfrac}, {@code 27 → 27.0}, {@code 025 → 25},
 *       spaces after commas) against the gold — the string rule alone does not decide most of these;</li>
 *   <li>{@code otherGold}: the next row's gold against this gold (mostly different values).</li>
 * </ul>
 * {@code main} prints, for the same workloads, how many gradings would need the symbolic fallback (verdict
 * unparseable by rule SYMBOLIC), with variable sampling on (the default) and off.
 * Run: see bench/RESULTS.md, section "Rewards".
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
public class MathGraderBench {
    static final int ROWS = 600;

    List<String> golds;
    List<String> responses;
    List<String> rewrites;
    List<String> others;
    MathGrader grader;

    @Setup
    public void setup() {
        golds = loadGolds();
        if (golds.size() != ROWS) throw new IllegalStateException("expected " + ROWS + " rows, found " + golds.size());
        responses = new ArrayList<>();
        rewrites = new ArrayList<>();
        others = new ArrayList<>();
        for (int i = 0; i < golds.size(); i++) {
            String g = golds.get(i);
            responses.add("<think>Let me compute.</think> Therefore the answer is $\\boxed{" + g + "}$.");
            rewrites.add(rewrite(g));
            others.add(golds.get((i + 1) % golds.size()));
        }
        grader = MathGrader.standard();
    }

    /** A value-preserving rewrite that the string rule alone cannot undo for most rows. */
    static String rewrite(String g) {
        if (g.matches("0\\d+")) return g.replaceFirst("^0+", "");
        if (g.matches("-?\\d+\\.0+")) return g.replaceFirst("\\.0+$", "");
        if (g.matches("-?\\d+")) return g + ".0";
        if (g.contains("\\frac")) return g.replace("\\frac", "\\dfrac").replace(" ", "");
        if (g.contains(",") && !g.contains(", ")) return g.replace(",", ", ");
        return "$" + g + "$";
    }

    @Benchmark
    @OperationsPerInvocation(ROWS)
    public void selfInResponse(Blackhole bh) {
        for (int i = 0; i < ROWS; i++) bh.consume(grader.gradeResponse(responses.get(i), golds.get(i)));
    }

    @Benchmark
    @OperationsPerInvocation(ROWS)
    public void rewritten(Blackhole bh) {
        for (int i = 0; i < ROWS; i++) bh.consume(grader.grade(rewrites.get(i), golds.get(i)));
    }

    @Benchmark
    @OperationsPerInvocation(ROWS)
    public void otherGold(Blackhole bh) {
        for (int i = 0; i < ROWS; i++) bh.consume(grader.grade(others.get(i), golds.get(i)));
    }

    /** Prints the rule counts of each workload and the fraction that needs the symbolic fallback. */
    public static void main(String[] args) {
        MathGraderBench b = new MathGraderBench();
        b.setup();
        for (boolean sampling : new boolean[]{true, false}) {
            MathGrader g = MathGrader.builder().sampleVariables(sampling).build();
            for (String workload : new String[]{"selfInResponse", "rewritten", "otherGold"}) {
                Map<Verdict.Rule, Integer> rules = new EnumMap<>(Verdict.Rule.class);
                Map<Verdict.Outcome, Integer> outcomes = new EnumMap<>(Verdict.Outcome.class);
                int fallback = 0;
                for (int i = 0; i < ROWS; i++) {
                    Verdict v = switch (workload) {
                        case "selfInResponse" -> g.gradeResponse(b.responses.get(i), b.golds.get(i));
                        case "rewritten" -> g.grade(b.rewrites.get(i), b.golds.get(i));
                        default -> g.grade(b.others.get(i), b.golds.get(i));
                    };
                    rules.merge(v.rule(), 1, Integer::sum);
                    outcomes.merge(v.outcome(), 1, Integer::sum);
                    if (v.outcome() == Verdict.Outcome.UNPARSEABLE && v.rule() == Verdict.Rule.SYMBOLIC) fallback++;
                }
                System.out.printf("sampling=%-5s %-15s needs fallback %3d/%d = %.4f  outcomes %s  rules %s%n",
                        sampling, workload, fallback, ROWS, fallback / (double) ROWS, outcomes, rules);
            }
        }
    }

    static List<String> loadGolds() {
        try {
            return MathData.rows().stream().map(MathData.Row::gold).toList();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
