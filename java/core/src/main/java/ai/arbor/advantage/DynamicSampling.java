package ai.arbor.advantage;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * DAPO dynamic sampling (Yu et al. 2025; verl {@code recipe/dapo}; docs/algorithms.md §3): over-sample prompts
 * until the batch holds {@code targetGroups} informative (non-degenerate) groups. The rollout engine
 * generates a round of prompts, hands the trajectories to {@link #add}, and draws
 * {@link Round#promptsToDraw()} more prompts until {@link #isFull()}; then {@link #batch()} gives the
 * trajectories to train on and, for every offered trajectory, what was kept and why.
 *
 * <p>How many more prompts: with {@code need} informative groups still missing and {@code k} of the
 * {@code n} groups seen so far informative,
 * <pre>
 *   promptsToDraw = ⌈ need / p̂ ⌉,   p̂ = (k + 1) / (n + 2)
 * </pre>
 * p̂ is the observed keep rate with a uniform prior (Laplace's rule), so it is never 0 and tends to k/n
 * as rounds accumulate. Groups are kept first come, first served (round order, then first appearance in
 * the round); informative groups beyond the target are reported as {@link FilterReason#OVERSAMPLED},
 * as verl's recipe truncates the batch to its size. The trajectories of one group must arrive in the same
 * round. Not thread-safe.
 */
public final class DynamicSampling {
    private final int targetGroups;
    private final DegenerateGroupFilter criterion;
    private final int maxRounds;
    private final List<ScoredTrajectory> offered = new ArrayList<>();
    private final List<FilterReason> dropReason = new ArrayList<>();  // per offered trajectory, null = in the batch
    private int rounds, groupsSeen, groupsInformative, groupsKept;

    /**
     * @param targetGroups prompts (groups) per training batch, >= 1
     * @param criterion    which groups are informative (not {@link DegenerateGroupFilter#isDegenerate degenerate})
     * @param maxRounds    generation rounds allowed before giving up ({@link #isExhausted()}); 0 = unlimited
     *                     (verl's {@code max_num_gen_batches})
     */
    public DynamicSampling(int targetGroups, DegenerateGroupFilter criterion, int maxRounds) {
        if (targetGroups < 1) throw new IllegalArgumentException("targetGroups must be >= 1, got " + targetGroups);
        if (criterion == null) throw new IllegalArgumentException("criterion must not be null");
        if (maxRounds < 0) throw new IllegalArgumentException("maxRounds must be >= 0, got " + maxRounds);
        this.targetGroups = targetGroups;
        this.criterion = criterion;
        this.maxRounds = maxRounds;
    }

    /** Default criterion (std &lt; 1e-3 is degenerate), unlimited rounds. */
    public DynamicSampling(int targetGroups) {
        this(targetGroups, new DegenerateGroupFilter(), 0);
    }

    /**
     * What one round added and what to do next.
     *
     * @param groups           groups in this round
     * @param informative      of those, informative
     * @param kept             informative groups in the batch so far (at most the target)
     * @param keepRate         informative / seen over all rounds so far
     * @param promptsToDraw    prompts to generate next (0 when full or exhausted)
     * @param full             the batch holds {@code targetGroups} groups
     */
    public record Round(int groups, int informative, int kept, double keepRate, int promptsToDraw, boolean full) {}

    /**
     * The training batch: the kept trajectories in offer order, their positions among all offered
     * trajectories, and a decision for every offered trajectory (weight 0 with
     * {@link FilterReason#DEGENERATE_GROUP} or {@link FilterReason#OVERSAMPLED} for those left out).
     */
    public record Batch(List<ScoredTrajectory> trajectories, int[] offeredIndex, FilterResult offered, int groups) {}

    /** Adds one round of generated trajectories (whole groups). */
    public Round add(List<ScoredTrajectory> round) {
        if (isFull()) throw new IllegalStateException("the batch is already full (" + targetGroups + " groups)");
        if (isExhausted()) throw new IllegalStateException("no rounds left (maxRounds = " + maxRounds + ")");
        Map<Integer, List<Integer>> groups = Filters.groups(round);
        rounds++;
        int base = offered.size();
        offered.addAll(round);
        for (int i = 0; i < round.size(); i++) dropReason.add(null);
        int informative = 0;
        for (List<Integer> idx : groups.values()) {
            float[] r = new float[idx.size()];
            for (int j = 0; j < r.length; j++) r[j] = round.get(idx.get(j)).reward();
            FilterReason reason = null;
            if (criterion.isDegenerate(r)) {
                reason = FilterReason.DEGENERATE_GROUP;
            } else {
                informative++;
                if (groupsKept < targetGroups) groupsKept++;
                else reason = FilterReason.OVERSAMPLED;
            }
            for (int i : idx) dropReason.set(base + i, reason);
        }
        groupsSeen += groups.size();
        groupsInformative += informative;
        return new Round(groups.size(), informative, groupsKept, keepRate(), promptsToDraw(), isFull());
    }

    /** Informative groups / groups seen (NaN before the first round). */
    public double keepRate() {
        return groupsSeen == 0 ? Double.NaN : (double) groupsInformative / groupsSeen;
    }

    /** Prompts to generate next: ⌈need / p̂⌉ with p̂ = (k+1)/(n+2); 0 when full or exhausted. */
    public int promptsToDraw() {
        if (isFull() || isExhausted()) return 0;
        return promptsToDraw(targetGroups - groupsKept, groupsInformative, groupsSeen);
    }

    /** ⌈need / p̂⌉, p̂ = (informative + 1) / (seen + 2). */
    public static int promptsToDraw(int need, int informative, int seen) {
        if (need < 0 || informative < 0 || seen < informative)
            throw new IllegalArgumentException("need=" + need + ", informative=" + informative + ", seen=" + seen);
        if (need == 0) return 0;
        double p = (informative + 1.0) / (seen + 2.0);
        double x = need / p;
        return (int) Math.min(Integer.MAX_VALUE, Math.ceil(x - 1e-9));
    }

    public boolean isFull() {
        return groupsKept >= targetGroups;
    }

    /** maxRounds reached without filling the batch. */
    public boolean isExhausted() {
        return !isFull() && maxRounds > 0 && rounds >= maxRounds;
    }

    public int rounds() {
        return rounds;
    }

    /**
     * The batch so far — complete when {@link #isFull()}, partial (fewer groups) when exhausted.
     */
    public Batch batch() {
        FilterResult.Builder b = FilterResult.builder(offered.size());
        List<ScoredTrajectory> kept = new ArrayList<>();
        int[] index = new int[offered.size()];
        int k = 0;
        for (int i = 0; i < offered.size(); i++) {
            FilterReason r = dropReason.get(i);
            if (r != null) {
                b.mark(i, r, 0f);
            } else {
                kept.add(offered.get(i));
                index[k++] = i;
            }
        }
        return new Batch(Collections.unmodifiableList(kept), java.util.Arrays.copyOf(index, k), b.build(), groupsKept);
    }
}
