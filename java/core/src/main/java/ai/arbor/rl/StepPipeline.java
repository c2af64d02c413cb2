package ai.arbor.rl;

import ai.arbor.advantage.FilterResult;
import ai.arbor.advantage.DynamicSampling;
import ai.arbor.advantage.OverlongFilter;
import ai.arbor.advantage.ScoredTrajectory;
import ai.arbor.advantage.TrajectoryFilter;
import ai.arbor.kernels.ShapingStats;
import ai.arbor.kernels.TokenAdvantages;
import ai.arbor.rollout.Tokenizer;
import ai.arbor.rollout.Trajectory;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The RL step from scored rollouts to the {@link TokenBatch} the policy loss reads, as a {@link Recipe}
 * defines it (docs/algorithms.md, "How one RL step uses these sections"), without libtorch:
 *
 * <ol>
 *   <li><b>infrastructure masking</b>: trajectories with an infrastructure failure leave the group statistics
 *       and the loss (docs/algorithms.md §3);</li>
 *   <li><b>sequence advantages</b> over each group (per tree for Tree-GRPO) by the recipe's estimator (§3);</li>
 *   <li><b>filters</b> scale or drop trajectories from the loss; they still count in their group (§3);</li>
 *   <li><b>token shaping</b>: broadcast, AEPO's entropy-aware or TAO-RL's post-tool advantages from the
 *       rollout's entropies (§3, the {@link TokenAdvantages} kernel over the batch's own rows);</li>
 *   <li><b>per-token weights</b>: the loss weight of every trained token, 1 (the importance weights of §7
 *       would multiply here);</li>
 *   <li>the <b>token batch</b>: one row per trained token, old log-probs = the behaviour ones until the
 *       trainer recomputes them.</li>
 * </ol>
 *
 * Rejection-sampling recipes instead keep the correct, efficient samples ({@link #rejectionSample}).
 */
public final class StepPipeline {
    private final Recipe recipe;
    private final Tokenizer tokenizer;

    public StepPipeline(Recipe recipe, Tokenizer tokenizer) {
        if (recipe == null || tokenizer == null) throw new IllegalArgumentException("recipe and tokenizer are required");
        this.recipe = recipe;
        this.tokenizer = tokenizer;
    }

    public Recipe recipe() {
        return recipe;
    }

    /**
     * A step's trained batch, before any update.
     *
     * @param batch              the token batch (empty when nothing is trained)
     * @param sequenceAdvantages per scored trajectory, its sequence advantage after the filters (NaN: masked for
     *                           an infrastructure failure)
     * @param filter             the filters' decision over the trajectories without infrastructure failure, in order
     * @param stats              what the metrics report
     */
    public record Prepared(TokenBatch batch, float[] sequenceAdvantages, FilterResult filter, Stats stats) {}

    /**
     * @param entropyMissing trained tokens whose rollout gave no entropy (shaping saw 0)
     * @param advAbsMean     mean |advantage| over the trained tokens (NaN when none)
     * @param shaping        the shaping kernel's batch statistics (null when nothing is trained)
     */
    public record Stats(FilterResult filter, int trainedSequences, int trainedTokens, int entropyMissing, ShapingStats shaping,
                        double advAbsMean) {
        /** As the rows of {@code metrics.jsonl} name them ({@code filter/*}, {@code trained_*}, {@code adv/*}). */
        public Map<String, Object> metrics() {
            Map<String, Object> m = new LinkedHashMap<>(filter.metrics("filter/"));
            m.put("trained_sequences", trainedSequences);
            m.put("trained_tokens", trainedTokens);
            if (entropyMissing > 0) m.put("entropy_missing", entropyMissing);
            if (shaping != null) {
                m.putAll(shaping.metrics("adv/"));
                m.put("adv_abs_mean", advAbsMean);
            }
            return m;
        }
    }

    /** Scored rollouts to the token batch (steps 1–6 of the class comment). */
    public Prepared prepare(List<Scored> scored) {
        int[] live = live(scored);
        float[] seqAdv = sequenceAdvantages(scored, live);
        FilterResult filtered = filter(scored, live);
        seqAdv = filtered.applyTo(seqAdv);
        float[] perScored = new float[scored.size()];
        Arrays.fill(perScored, Float.NaN);
        for (int k = 0; k < live.length; k++) perScored[live[k]] = seqAdv[k];

        List<Integer> kept = new ArrayList<>();
        for (int k = 0; k < live.length; k++)
            if (filtered.weight(k) > 0 && scored.get(live[k]).trajectory().generatedTokens() > 0) kept.add(live[k]);
        float[] keptAdv = new float[kept.size()];
        for (int j = 0, k = 0; k < live.length; k++) if (j < kept.size() && kept.get(j) == live[k]) keptAdv[j++] = seqAdv[k];
        List<Trajectory> keptTrajectories = new ArrayList<>(kept.size());
        for (int i : kept) keptTrajectories.add(scored.get(i).trajectory());
        TokenBatch rows = TokenBatch.of(keptTrajectories, kept.stream().mapToInt(Integer::intValue).toArray());
        if (kept.isEmpty())
            return new Prepared(rows.withAdvantages(new float[0]), perScored, filtered, new Stats(filtered, 0, 0, 0, null, Double.NaN));
        TokenAdvantages.Result adv = TokenAdvantages.compute(keptAdv, rows.seqId(), null, rows.entropy(), rows.postTool(), recipe.shaping());
        double abs = 0;
        for (float a : adv.advantages()) abs += Math.abs(a);
        return new Prepared(rows.withAdvantages(adv.advantages()), perScored, filtered,
                new Stats(filtered, kept.size(), rows.rows(), entropyMissing(keptTrajectories), adv.stats(), abs / rows.rows()));
    }

    /**
     * DAPO dynamic sampling over one over-sampled round (docs/algorithms.md §3; TAO-RL's release rolls out 3× the
     * prompts): the trajectories of the first {@code targetGroups} informative groups, in offer order. A group is
     * informative when the 1/0 correctness of its live trajectories is not all equal (std ≥ 1e-3, {@link
     * DynamicSampling}'s criterion) — judged on correctness, not on a shaped reward, as the release does, so
     * groups that differ only in a shaping term are not trained. Fewer informative groups than the target: all of
     * them (the step trains on a smaller batch; no further refill round).
     */
    public static List<Scored> dynamicSample(List<Scored> scored, int targetGroups) {
        return dynamicSample(scored, targetGroups, 0);
    }

    /**
     * {@link #dynamicSample(List, int)}, where a group with fewer than {@code minWithinLength} live responses within the
     * length limit is not informative either (TAO-RL's release: {@code min_n} = 4 with {@code remove_clip}, checked in the
     * same pass as the correctness spread, before the fill; {@link OverlongFilter#taoRl}). The spread is judged over
     * all the group's live responses, truncated ones included, as there.
     */
    public static List<Scored> dynamicSample(List<Scored> scored, int targetGroups, int minWithinLength) {
        if (targetGroups < 1) throw new IllegalArgumentException("targetGroups must be >= 1, got " + targetGroups);
        if (minWithinLength < 0) throw new IllegalArgumentException("minWithinLength must be >= 0, got " + minWithinLength);
        Map<Integer, Integer> within = new HashMap<>();
        for (Scored s : scored)
            if (!s.infrastructureFailure()) within.merge(s.group(), s.trajectory().termination().truncated() ? 0 : 1, Integer::sum);
        List<ScoredTrajectory> offered = new ArrayList<>();
        for (Scored s : scored)
            if (!s.infrastructureFailure() && within.get(s.group()) >= minWithinLength)
                offered.add(ScoredTrajectory.of(s.group(), s.correct() ? 1f : 0f));
        DynamicSampling ds = new DynamicSampling(targetGroups, new ai.arbor.advantage.DegenerateGroupFilter(), 1);
        java.util.Set<Integer> keep = new java.util.HashSet<>();
        if (!offered.isEmpty()) {
            ds.add(offered);
            for (ScoredTrajectory t : ds.batch().trajectories()) keep.add(t.groupId());
        }
        List<Scored> out = new ArrayList<>();
        for (Scored s : scored) if (keep.contains(s.group())) out.add(s);
        return out;
    }

    /**
     * TAO-RL's refill of a short dynamic-sampling batch ({@link Recipe.Refill#REPLICATE}; {@code tao_rl_ray_trainer.py}:
     * {@code repeat_with_uid_suffix(⌈target / kept⌉)}, then {@code target} groups kept): {@code kept}'s groups, then copies
     * of them in the same order, each copy a group of its own (a fresh group id, so its advantages are those of the
     * original), until there are {@code targetGroups} groups. At least {@code targetGroups} groups, or none: unchanged.
     */
    public static List<Scored> replicateGroups(List<Scored> kept, int targetGroups) {
        if (targetGroups < 1) throw new IllegalArgumentException("targetGroups must be >= 1, got " + targetGroups);
        java.util.LinkedHashMap<Integer, List<Scored>> groups = new java.util.LinkedHashMap<>();
        for (Scored s : kept) groups.computeIfAbsent(s.group(), g -> new ArrayList<>()).add(s);
        if (groups.isEmpty() || groups.size() >= targetGroups) return kept;
        int next = groups.keySet().stream().mapToInt(Integer::intValue).max().getAsInt() + 1;
        List<Scored> out = new ArrayList<>(kept);
        int have = groups.size();
        while (have < targetGroups)
            for (List<Scored> g : groups.values()) {
                if (have == targetGroups) break;
                int id = next++;
                for (Scored s : g) out.add(new Scored(s.problem(), id, s.trajectory(), s.reward(), s.correct(), s.infrastructureFailure()));
                have++;
            }
        return out;
    }

    /** The indices of the trajectories without an infrastructure failure (docs/algorithms.md §3). */
    static int[] live(List<Scored> scored) {
        return java.util.stream.IntStream.range(0, scored.size()).filter(i -> !scored.get(i).infrastructureFailure()).toArray();
    }

    /** The recipe's sequence advantages over the live trajectories: groups by prompt, trees by (prompt, tree). */
    float[] sequenceAdvantages(List<Scored> scored, int[] live) {
        int n = live.length;
        if (n == 0) return new float[0];
        float[] rewards = new float[n];
        int[] groups = new int[n], trees = new int[n], tokens = new int[n];
        Map<Long, Integer> treeIds = new HashMap<>();
        for (int k = 0; k < n; k++) {
            Scored s = scored.get(live[k]);
            rewards[k] = (float) s.reward();
            groups[k] = s.group();
            for (boolean b : s.trajectory().lossMask()) if (b) tokens[k]++;  // REINFORCE++ baseline whitens over tokens
            long key = ((long) s.group() << 32) | s.trajectory().treeIndex();
            trees[k] = treeIds.computeIfAbsent(key, x -> treeIds.size());
        }
        return recipe.estimator().compute(rewards, groups, trees, tokens);
    }

    /** The recipe's filters over the live trajectories. */
    FilterResult filter(List<Scored> scored, int[] live) {
        List<ScoredTrajectory> in = new ArrayList<>(live.length);
        for (int i : live) {
            Scored s = scored.get(i);
            in.add(ScoredTrajectory.of(s.group(), (float) s.reward(), s.trajectory().summary(tokenizer), s.trajectory().hasVoidTurn()));
        }
        return TrajectoryFilter.all(recipe.filters().toArray(new TrajectoryFilter[0])).apply(in);
    }

    /**
     * Trained tokens whose rollout gave no entropy ({@link TokenBatch#of} gives them 0, so the shaping saw 0). The
     * loss weight of every row is 1: no importance weights yet (docs/algorithms.md §7).
     */
    static int entropyMissing(List<Trajectory> trajectories) {
        int n = 0;
        for (Trajectory t : trajectories)
            for (int q = 0; q < t.length(); q++) if (t.lossMask()[q] && !Float.isFinite(t.entropies()[q])) n++;
        return n;
    }

    /**
     * Rejection sampling (CoRT; docs/algorithms.md §11): the correct trajectories with no failed tool call, per
     * prompt the recipe's {@link Recipe#keepPerPrompt} shortest, as a supervised batch.
     */
    public TokenBatch rejectionSample(List<Scored> scored) {
        if (recipe.kind() != Recipe.Kind.REJECTION_SAMPLING)
            throw new IllegalStateException(recipe.name() + " is not a rejection-sampling recipe");
        int keepPerPrompt = recipe.keepPerPrompt();
        Map<Integer, List<Scored>> byGroup = new LinkedHashMap<>();
        for (Scored s : scored)
            if (s.correct() && s.trajectory().toolCalls().stream().noneMatch(c -> c.status().failed()))
                byGroup.computeIfAbsent(s.group(), g -> new ArrayList<>()).add(s);
        List<Sequence> keep = new ArrayList<>();
        for (List<Scored> g : byGroup.values()) {
            g.sort(Comparator.comparingInt(s -> s.trajectory().length()));
            for (int i = 0; i < Math.min(keepPerPrompt, g.size()); i++) keep.add(Sequence.of(g.get(i).trajectory().prompt(), g.get(i).trajectory()));
        }
        return TokenBatch.supervised(keep);
    }
}
