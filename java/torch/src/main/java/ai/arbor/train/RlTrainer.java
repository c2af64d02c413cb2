package ai.arbor.train;

import ai.arbor.advantage.FilterResult;
import ai.arbor.advantage.ScoredTrajectory;
import ai.arbor.generate.LocalGenerator;
import ai.arbor.kernels.TokenAdvantages;
import ai.arbor.advantage.TrajectoryFilter;
import ai.arbor.kernels.KlType;
import ai.arbor.kernels.PolicyLossConfig;
import ai.arbor.kernels.PolicyLossResult;
import ai.arbor.reward.RewardFunction;
import ai.arbor.rollout.AgentConfig;
import ai.arbor.rollout.Budget;
import ai.arbor.rollout.Generator;
import ai.arbor.rollout.Prompt;
import ai.arbor.rollout.RolloutBatch;
import ai.arbor.rollout.RolloutEngine;
import ai.arbor.rollout.RolloutStrategy;
import ai.arbor.rollout.SamplingParams;
import ai.arbor.rollout.Tokenizer;
import ai.arbor.rollout.ToolCallRecord;
import ai.arbor.rollout.Trajectory;
import ai.arbor.torch.model.ReferencePolicy;
import ai.arbor.task.Problem;
import ai.arbor.task.TrainingTask;
import ai.arbor.tree.TreeGroup;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

/**
 * One step of reinforcement learning (docs/algorithms.md, "How one RL step uses these sections"), as a
 * {@link Recipe} defines it:
 *
 * <ol>
 *   <li>rollouts of a batch of prompts by the recipe's strategy, through the {@link LocalGenerator} and the
 *       task's real tools;</li>
 *   <li>rewards ({@link Recipe#reward}) and correctness of every trajectory;</li>
 *   <li>sequence advantages ({@link Recipe#estimator}) over each group; trajectories with an
 *       <b>infrastructure failure</b> (a generation that failed, a sandbox error, a tool over its timeout)
 *       are masked — left out of the group statistics and the loss — never punished with a reward;</li>
 *   <li>the recipe's filters ({@link Recipe#filters}) scale or drop trajectories from the loss (they still
 *       count in their group's statistics);</li>
 *   <li>token advantages ({@link Recipe#shaping}: broadcast, AEPO entropy-aware, TAO-RL post-tool) from the
 *       rollout's entropies;</li>
 *   <li>old log-probs: the behaviour policy's from the rollout, or recomputed by a forward pass before the
 *       update ({@link OldLogprobs}); reference log-probs when the loss has a KL term;</li>
 *   <li>{@code ppoEpochs} passes over the batch in {@code miniBatches} shuffled mini-batches, each one
 *       {@link Trainer#policyStep} (micro-batched forward, fused policy-loss kernel, backward, clip, AdamW);</li>
 *   <li>the generator's KV caches are invalidated (they hold keys and values of the old weights).</li>
 * </ol>
 *
 * {@link Recipe#RFT} instead keeps the correct, efficient samples and takes a cross-entropy step on them.
 * Every step returns its metrics (reward, accuracy, entropy, clip fractions, KL, tool use, failures, tokens,
 * seconds) as a flat map, the row of the JSONL log.
 */
public final class RlTrainer implements AutoCloseable {

    /** Where the importance ratio's denominator comes from. */
    public enum OldLogprobs {
        /** {@link #RECOMPUTE} when the batch is used for more than one optimizer step, else {@link #BEHAVIOUR}. */
        AUTO,
        /** The log-probs the sampler reported (tempered, untruncated): exact for the local generator. */
        BEHAVIOUR,
        /** A no-gradient forward of the policy before the update (verl's "old log prob" recomputation). */
        RECOMPUTE
    }

    /**
     * @param recipe           the method (must sample)
     * @param groupSize        trajectories per prompt (&lt;= 0: the recipe's default)
     * @param budget           per-prompt rollout budget, or {@link Budget#UNLIMITED}
     * @param temperature      sampling temperature (the loss uses the same)
     * @param ppoEpochs        passes over each batch
     * @param miniBatches      optimizer steps per pass
     * @param oldLogprobs      behaviour or recomputed old log-probs
     * @param rftKeepPerPrompt RFT: most correct samples kept per prompt (shortest first)
     */
    public record Config(Recipe recipe, int groupSize, Budget budget, double temperature, int ppoEpochs, int miniBatches,
                         OldLogprobs oldLogprobs, int rftKeepPerPrompt) {
        public Config {
            if (recipe == null || !recipe.samples()) throw new IllegalArgumentException("an RL config needs a sampling recipe, got " + recipe);
            if (budget == null) budget = Budget.UNLIMITED;
            if (!(temperature > 0) || Double.isInfinite(temperature)) throw new IllegalArgumentException("temperature must be > 0, got " + temperature);
            if (ppoEpochs < 1) throw new IllegalArgumentException("ppoEpochs must be >= 1, got " + ppoEpochs);
            if (miniBatches < 1) throw new IllegalArgumentException("miniBatches must be >= 1, got " + miniBatches);
            if (oldLogprobs == null) oldLogprobs = OldLogprobs.AUTO;
            if (rftKeepPerPrompt < 1) throw new IllegalArgumentException("rftKeepPerPrompt must be >= 1, got " + rftKeepPerPrompt);
        }

        /** The recipe with its paper's group size, τ = 1, one epoch, one mini-batch, behaviour log-probs. */
        public static Config of(Recipe recipe) {
            return new Config(recipe, 0, Budget.UNLIMITED, 1.0, 1, 1, OldLogprobs.AUTO, 2);
        }

        public boolean recomputeOld() {
            return oldLogprobs == OldLogprobs.RECOMPUTE || (oldLogprobs == OldLogprobs.AUTO && ppoEpochs * miniBatches > 1);
        }
    }

    /** A scored trajectory: what the reward, the filters and the metrics need. */
    public record Scored(Problem problem, int group, Trajectory trajectory, double reward, boolean correct, boolean infrastructureFailure) {}

    private final TrainingTask task;
    private final Tokenizer tokenizer;
    private final Trainer trainer;
    private final Runnable afterUpdate;
    private final ReferencePolicy reference;
    private final Config config;
    private final AgentConfig agent;
    private final RewardFunction reward;
    private final PolicyLossConfig loss;
    private final RolloutEngine engine;
    private final RolloutStrategy<TreeGroup> strategy;
    private final int microBatchTokens;

    /**
     * With the local generator over the trained policy (its caches are invalidated after every update).
     *
     * @param reference the frozen reference policy for the KL term (required when the recipe's loss has one)
     */
    public RlTrainer(TrainingTask task, Tokenizer tokenizer, Trainer trainer, LocalGenerator generator, ReferencePolicy reference,
                     Config config, int microBatchTokens, int toolThreads) {
        this(task, tokenizer, trainer, generator, generator::invalidate, reference, config, microBatchTokens, toolThreads);
    }

    /**
     * With any generator (e.g. a server that must reload the weights: {@code afterUpdate} is called after each
     * step's optimizer updates).
     */
    public RlTrainer(TrainingTask task, Tokenizer tokenizer, Trainer trainer, Generator generator, Runnable afterUpdate,
                     ReferencePolicy reference, Config config, int microBatchTokens, int toolThreads) {
        if (task == null || tokenizer == null || trainer == null || generator == null || afterUpdate == null || config == null)
            throw new IllegalArgumentException("task, tokenizer, trainer, generator, afterUpdate and config are required");
        if (microBatchTokens < 1) throw new IllegalArgumentException("microBatchTokens must be >= 1, got " + microBatchTokens);
        this.task = task;
        this.tokenizer = tokenizer;
        this.trainer = trainer;
        this.afterUpdate = afterUpdate;
        this.config = config;
        this.agent = task.agentConfig(SamplingParams.defaults().withTemperature(config.temperature()));
        this.reward = config.recipe().reward(task, agent);
        this.loss = config.recipe().loss(config.temperature());
        if (loss.klType() != KlType.NONE && config.recipe().kind() == Recipe.Kind.POLICY_GRADIENT && reference == null)
            throw new IllegalArgumentException(config.recipe().cliName() + " has a KL term: a reference policy is required");
        this.reference = reference;
        this.strategy = config.recipe().strategy(config.groupSize(), config.budget());
        this.microBatchTokens = microBatchTokens;
        this.engine = RolloutEngine.builder().generator(generator).tokenizer(tokenizer).format(task.format()).tools(task.tools())
                .config(agent).toolThreads(Math.max(1, toolThreads)).build();
    }

    public Config config() {
        return config;
    }

    public PolicyLossConfig lossConfig() {
        return loss;
    }

    public RewardFunction reward() {
        return reward;
    }

    public RolloutStrategy<TreeGroup> strategy() {
        return strategy;
    }

    /** One step's rollouts: the prompts, the batch, every trajectory scored, the wall time. */
    public record Rollout(List<Prompt> prompts, RolloutBatch<TreeGroup> batch, List<Scored> scored, double seconds) {}

    /** Rolls out {@code problems} (one group each) with the recipe's strategy and scores every trajectory. */
    public Rollout rollout(List<Problem> problems, long seed) {
        long t0 = System.nanoTime();
        List<Prompt> prompts = new ArrayList<>(problems.size());
        for (Problem p : problems) prompts.add(task.prompt(p, tokenizer));
        RolloutBatch<TreeGroup> batch = engine.run(prompts, strategy, seed);
        return new Rollout(prompts, batch, score(batch, problems), (System.nanoTime() - t0) / 1e9);
    }

    /** One step on {@code problems} (one group each); {@code seed} drives the rollouts and the shuffles. */
    public Map<String, Object> step(List<Problem> problems, long seed) {
        long t0 = System.nanoTime();
        Rollout r = rollout(problems, seed);
        Map<String, Object> m = new LinkedHashMap<>();
        rolloutMetrics(m, r.scored(), r.batch());
        m.put("rollout_seconds", r.seconds());
        long t1 = System.nanoTime();
        if (config.recipe() == Recipe.RFT) rftUpdate(m, r.scored(), r.prompts());
        else policyUpdate(m, r.scored(), r.prompts(), seed);
        afterUpdate.run();
        m.put("train_seconds", (System.nanoTime() - t1) / 1e9);
        m.put("seconds", (System.nanoTime() - t0) / 1e9);
        return m;
    }

    /** Rewards and correctness of every trajectory of {@code batch} (groups in prompt order). */
    public List<Scored> score(RolloutBatch<TreeGroup> batch, List<Problem> problems) {
        List<Scored> out = new ArrayList<>();
        for (int g = 0; g < batch.groups().size(); g++) {
            Problem p = problems.get(g);
            for (Trajectory t : batch.groups().get(g).trajectories()) {
                var summary = t.summary(tokenizer);
                boolean infra = t.infrastructureFailure();
                boolean correct = !infra && task.checker().isCorrect(summary.text(), p.answers());
                double r = infra ? 0 : reward.reward(summary, p.answers());
                out.add(new Scored(p, g, t, r, correct, infra));
            }
        }
        return out;
    }

    // ---------------------------------------------------------------------------------------------

    /**
     * The trained batch of one step, before any update.
     *
     * @param sequences          prompt + response of every trained trajectory, with behaviour log-probs and token advantages
     * @param source             for each sequence, its index in the scored list
     * @param sequenceAdvantages per scored trajectory, its sequence advantage after the filters (NaN: masked for an
     *                           infrastructure failure, in neither the group statistics nor the loss)
     * @param filter             the filters' decision over the trajectories without infrastructure failure, in order
     * @param metrics            filter counts and shaping statistics
     */
    public record Prepared(List<Sequence> sequences, int[] source, float[] sequenceAdvantages, FilterResult filter, Map<String, Object> metrics) {}

    /** Rewards to advantages to sequences (steps 3–5 of the class comment) for the recipe. */
    public Prepared prepare(List<Scored> scored, List<Prompt> prompts) {
        Recipe recipe = config.recipe();
        Map<String, Object> m = new LinkedHashMap<>();
        // infrastructure failures: out of the statistics and the loss
        List<Integer> live = new ArrayList<>();
        for (int i = 0; i < scored.size(); i++) if (!scored.get(i).infrastructureFailure()) live.add(i);
        int n = live.size();
        float[] rewards = new float[n];
        int[] groups = new int[n], trees = new int[n];
        Map<Long, Integer> treeIds = new HashMap<>();
        List<ScoredTrajectory> forFilters = new ArrayList<>(n);
        for (int k = 0; k < n; k++) {
            Scored s = scored.get(live.get(k));
            rewards[k] = (float) s.reward();
            groups[k] = s.group();
            long key = ((long) s.group() << 32) | s.trajectory().treeIndex();
            trees[k] = treeIds.computeIfAbsent(key, x -> treeIds.size());
            forFilters.add(ScoredTrajectory.of(s.group(), rewards[k], s.trajectory().summary(tokenizer), s.trajectory().hasVoidTurn()));
        }
        float[] seqAdv = n == 0 ? new float[0] : recipe.estimator().compute(rewards, groups, trees);
        FilterResult filtered = TrajectoryFilter.all(recipe.filters().toArray(new TrajectoryFilter[0])).apply(forFilters);
        seqAdv = filtered.applyTo(seqAdv);
        for (var e : filtered.metrics("filter/").entrySet()) m.put(e.getKey(), e.getValue());
        float[] perScored = new float[scored.size()];
        java.util.Arrays.fill(perScored, Float.NaN);
        for (int k = 0; k < n; k++) perScored[live.get(k)] = seqAdv[k];

        // the trained trajectories and their flat token arrays
        List<Integer> kept = new ArrayList<>();
        for (int k = 0; k < n; k++) if (filtered.weight(k) > 0 && scored.get(live.get(k)).trajectory().generatedTokens() > 0) kept.add(k);
        int tokens = 0;
        for (int k : kept) tokens += scored.get(live.get(k)).trajectory().generatedTokens();
        float[] keptAdv = new float[kept.size()];
        int[] seqIds = new int[tokens];
        float[] entropy = new float[tokens];
        boolean[] post = new boolean[tokens];
        int at = 0, nanEntropy = 0;
        for (int j = 0; j < kept.size(); j++) {
            Trajectory t = scored.get(live.get(kept.get(j))).trajectory();
            keptAdv[j] = seqAdv[kept.get(j)];
            for (int q = 0; q < t.length(); q++) {
                if (!t.lossMask()[q]) continue;
                seqIds[at] = j;
                float h = t.entropies()[q];
                if (!Float.isFinite(h)) {
                    h = 0;  // a backend without entropies: shaping then sees 0 (counted below)
                    nanEntropy++;
                }
                entropy[at] = h;
                post[at] = t.postTool()[q];
                at++;
            }
        }
        m.put("trained_sequences", kept.size());
        m.put("trained_tokens", tokens);
        if (nanEntropy > 0) m.put("entropy_missing", nanEntropy);
        List<Sequence> seqs = new ArrayList<>(kept.size());
        int[] source = new int[kept.size()];
        if (kept.isEmpty()) return new Prepared(seqs, source, perScored, filtered, m);
        TokenAdvantages.Result tokenAdv = TokenAdvantages.compute(keptAdv, seqIds, null, entropy, post, recipe.shaping());
        for (var e : tokenAdv.stats().metrics("adv/").entrySet()) m.put(e.getKey(), e.getValue());
        at = 0;
        double advAbs = 0;
        for (int j = 0; j < kept.size(); j++) {
            source[j] = live.get(kept.get(j));
            Scored s = scored.get(source[j]);
            Prompt prompt = prompts.get(s.group());
            Trajectory t = s.trajectory();
            int p0 = prompt.tokens().length, len = p0 + t.length();
            int[] toks = Arrays.copyOf(prompt.tokens(), len);
            System.arraycopy(t.tokens(), 0, toks, p0, t.length());
            boolean[] mask = new boolean[len];
            float[] old = new float[len], adv = new float[len];
            for (int q = 0; q < t.length(); q++) {
                if (!t.lossMask()[q]) continue;
                mask[p0 + q] = true;
                old[p0 + q] = t.logprobs()[q];
                adv[p0 + q] = tokenAdv.advantages()[at++];
                advAbs += Math.abs(adv[p0 + q]);
            }
            seqs.add(new Sequence(toks, mask, old, adv));
        }
        m.put("adv_abs_mean", advAbs / tokens);
        return new Prepared(seqs, source, perScored, filtered, m);
    }

    private void policyUpdate(Map<String, Object> m, List<Scored> scored, List<Prompt> prompts, long seed) {
        Prepared prepared = prepare(scored, prompts);
        m.putAll(prepared.metrics());
        List<Sequence> seqs = prepared.sequences();
        if (seqs.isEmpty()) {
            m.put("skipped", 1);
            return;
        }
        long tokens = Trainer.trainedTokens(seqs);
        if (config.recomputeOld()) {
            Trainer.Scores now = Trainer.score(trainer.policy(), seqs, (float) config.temperature(), microBatchTokens, tokenizer.vocabSize());
            double diff = 0;
            List<Sequence> re = new ArrayList<>(seqs.size());
            for (int i = 0; i < seqs.size(); i++) {
                Sequence s = seqs.get(i);
                float[] old = now.logprobs().get(i).clone();
                for (int p = 0; p < old.length; p++) {
                    if (!s.mask()[p]) old[p] = 0;
                    else diff += Math.abs(old[p] - s.oldLogprobs()[p]);
                }
                re.add(s.withOldLogprobs(old));
            }
            seqs = re;
            m.put("old_logprob_abs_diff", diff / tokens);  // behaviour vs recomputed: numerics of decoding vs training forward
        }
        List<float[]> ref = null;
        if (loss.klType() != KlType.NONE)
            ref = Trainer.score(reference, seqs, (float) config.temperature(), microBatchTokens, tokenizer.vocabSize()).logprobs();

        Random rnd = new Random(seed ^ 0x5DEECE66DL);
        double[] acc = new double[10];
        int updates = 0;
        for (int e = 0; e < config.ppoEpochs(); e++) {
            List<Integer> order = new ArrayList<>();
            for (int i = 0; i < seqs.size(); i++) order.add(i);
            if (config.miniBatches() > 1) Collections.shuffle(order, rnd);
            int mbs = Math.min(config.miniBatches(), seqs.size());
            for (int b = 0; b < mbs; b++) {
                List<Sequence> part = new ArrayList<>();
                List<float[]> partRef = ref == null ? null : new ArrayList<>();
                for (int i = b; i < order.size(); i += mbs) {
                    part.add(seqs.get(order.get(i)));
                    if (ref != null) partRef.add(ref.get(order.get(i)));
                }
                Trainer.PolicyStats st = trainer.policyStep(part, loss, partRef);
                PolicyLossResult r = st.loss();
                acc[0] += r.loss();
                acc[1] += r.pgLoss();
                acc[2] += r.klLoss();
                acc[3] += r.entropyMean();
                acc[4] += r.clipFracHigh();
                acc[5] += r.clipFracLow();
                acc[6] += r.dualClipFrac();
                acc[7] += r.approxKl();
                acc[8] += st.gradNorm();
                acc[9] = st.lr();
                updates++;
            }
        }
        m.put("loss", acc[0] / updates);
        m.put("pg_loss", acc[1] / updates);
        m.put("kl_ref", acc[2] / updates);
        m.put("policy_entropy", acc[3] / updates);
        m.put("clip_frac_high", acc[4] / updates);
        m.put("clip_frac_low", acc[5] / updates);
        m.put("dual_clip_frac", acc[6] / updates);
        m.put("approx_kl", acc[7] / updates);
        m.put("grad_norm", acc[8] / updates);
        m.put("lr", acc[9]);
        m.put("optimizer_steps", updates);
    }

    private void rftUpdate(Map<String, Object> m, List<Scored> scored, List<Prompt> prompts) {
        // CoRT's rejection sampling: correct, no failed tool call, shortest first, at most k per prompt
        Map<Integer, List<Scored>> byGroup = new LinkedHashMap<>();
        for (Scored s : scored)
            if (s.correct() && s.trajectory().toolCalls().stream().noneMatch(c -> c.status().failed()))
                byGroup.computeIfAbsent(s.group(), g -> new ArrayList<>()).add(s);
        List<Sequence> keep = new ArrayList<>();
        for (List<Scored> g : byGroup.values()) {
            g.sort(Comparator.comparingInt(s -> s.trajectory().length()));
            for (int i = 0; i < Math.min(config.rftKeepPerPrompt(), g.size()); i++)
                keep.add(Demonstrations.sequenceOf(prompts.get(g.get(i).group()), g.get(i).trajectory()));
        }
        m.put("trained_sequences", keep.size());
        if (keep.isEmpty()) {
            m.put("skipped", 1);
            return;
        }
        Trainer.SftStats st = trainer.sftStep(keep);
        m.put("loss", st.loss());
        m.put("trained_tokens", st.tokens());
        m.put("grad_norm", st.gradNorm());
        m.put("lr", st.lr());
        m.put("optimizer_steps", 1);
    }

    /** Reward, accuracy, tool use and rollout cost of one batch, into {@code m}. */
    static void rolloutMetrics(Map<String, Object> m, List<Scored> scored, RolloutBatch<TreeGroup> batch) {
        int n = scored.size(), infra = 0, correct = 0, withTool = 0;
        long calls = 0, failed = 0;
        double reward = 0, entropy = 0, length = 0;
        long entropyTokens = 0;
        for (Scored s : scored) {
            Trajectory t = s.trajectory();
            if (s.infrastructureFailure()) {
                infra++;
                continue;
            }
            reward += s.reward();
            if (s.correct()) correct++;
            if (!t.toolCalls().isEmpty()) withTool++;
            calls += t.toolCalls().size();
            for (ToolCallRecord c : t.toolCalls()) if (c.status().failed()) failed++;
            length += t.length();
            for (int q = 0; q < t.length(); q++)
                if (t.lossMask()[q] && Float.isFinite(t.entropies()[q])) {
                    entropy += t.entropies()[q];
                    entropyTokens++;
                }
        }
        int live = Math.max(1, n - infra);
        m.put("trajectories", n);
        m.put("reward", reward / live);
        m.put("accuracy", (double) correct / live);
        m.put("entropy", entropyTokens == 0 ? Double.NaN : entropy / entropyTokens);
        m.put("tool_calls", (double) calls / live);
        m.put("tool_use", (double) withTool / live);
        m.put("tool_failure_rate", calls == 0 ? 0.0 : (double) failed / calls);
        m.put("infra_masked", infra);
        m.put("response_tokens", length / live);
        m.put("gen_tokens", batch.cost().generatedTokens());
        m.put("tool_calls_total", batch.cost().toolCalls());
    }

    @Override
    public void close() {
        engine.close();
    }
}
