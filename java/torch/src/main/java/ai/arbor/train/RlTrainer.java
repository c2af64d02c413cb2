package ai.arbor.train;

import ai.arbor.generate.LocalGenerator;
import ai.arbor.kernels.PolicyLossConfig;
import ai.arbor.kernels.PolicyLossResult;
import ai.arbor.reward.RewardFunction;
import ai.arbor.rl.Recipe;
import ai.arbor.rl.RolloutCorrection;
import ai.arbor.rl.Scored;
import ai.arbor.rl.StepPipeline;
import ai.arbor.rl.TokenBatch;
import ai.arbor.rollout.AgentConfig;
import ai.arbor.rollout.Budget;
import ai.arbor.rollout.Generator;
import ai.arbor.rollout.Prompt;
import ai.arbor.rollout.RolloutBatch;
import ai.arbor.rollout.RolloutEngine;
import ai.arbor.rollout.RolloutStrategy;
import ai.arbor.rollout.Tokenizer;
import ai.arbor.task.Problem;
import ai.arbor.task.TrainingTask;
import ai.arbor.torch.model.ReferencePolicy;
import ai.arbor.tree.TreeGroup;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

/**
 * One step of reinforcement learning (docs/algorithms.md, "How one RL step uses these sections"), as a
 * {@link Recipe} defines it: rollouts of a batch of prompts by the recipe's strategy and the task's real
 * tools; scores ({@link Scored}); the torch-free {@link StepPipeline} from scores to the {@link TokenBatch}
 * (infrastructure masking, sequence advantages, filters, token shaping, weights); old log-probs — the
 * behaviour policy's, or recomputed by a no-gradient forward ({@link OldLogprobs}) — and reference log-probs
 * when the loss has a KL term, as columns of that batch; {@code ppoEpochs} passes in the recipe's
 * mini-batches, each one {@link Trainer#policyStep}; then {@code afterUpdate} (the local generator's KV
 * caches hold keys and values of the old weights).
 *
 * <p>Rejection-sampling recipes ({@link Recipe#RFT}) instead keep the correct, efficient samples and take a
 * cross-entropy step on them. Every step returns its metrics as a flat map, the row of the JSONL log.
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
     * @param recipe           the method (must sample); its trajectories per prompt, mini-batches and sampling included
     * @param budget           per-prompt rollout budget, or {@link Budget#UNLIMITED}
     * @param ppoEpochs        passes over each batch
     * @param oldLogprobs      behaviour or recomputed old log-probs
     * @param correction       off-policy correction (docs/algorithms.md §7): IS weights and rejection from
     *                         δ = log π_old − log π_rollout; an active one needs the recomputed π_old (decoupled mode),
     *                         so it is refused with {@link OldLogprobs#BEHAVIOUR} (bypass mode)
     */
    public record Config(Recipe recipe, Budget budget, int ppoEpochs, OldLogprobs oldLogprobs, RolloutCorrection correction) {
        public Config {
            if (recipe == null || !recipe.samples()) throw new IllegalArgumentException("an RL config needs a sampling recipe, got " + recipe);
            if (budget == null) budget = Budget.UNLIMITED;
            if (ppoEpochs < 1) throw new IllegalArgumentException("ppoEpochs must be >= 1, got " + ppoEpochs);
            if (oldLogprobs == null) oldLogprobs = OldLogprobs.AUTO;
            if (correction == null) correction = RolloutCorrection.NONE;
            if (correction.active() && oldLogprobs == OldLogprobs.BEHAVIOUR)
                throw new IllegalArgumentException("the rollout correction " + correction + " compares the rollout's log-probs with "
                        + "recomputed ones: old log-probs 'behaviour' (bypass mode) leaves nothing to correct; use auto or recompute");
            correction.check(recipe.loss().clipMode());
        }

        /** Without an off-policy correction. */
        public Config(Recipe recipe, Budget budget, int ppoEpochs, OldLogprobs oldLogprobs) {
            this(recipe, budget, ppoEpochs, oldLogprobs, RolloutCorrection.NONE);
        }

        /** The recipe as it is, no budget, one epoch, old log-probs by {@link OldLogprobs#AUTO}. */
        public static Config of(Recipe recipe) {
            return new Config(recipe, Budget.UNLIMITED, 1, OldLogprobs.AUTO);
        }

        public boolean recomputeOld() {
            return oldLogprobs == OldLogprobs.RECOMPUTE
                    || (oldLogprobs == OldLogprobs.AUTO && (ppoEpochs * recipe.miniBatches() > 1 || correction.active()));
        }
    }

    private final TrainingTask task;
    private final Tokenizer tokenizer;
    private final Trainer trainer;
    private final Runnable afterUpdate;
    private final ReferencePolicy reference;
    private final Config config;
    private final RewardFunction reward;
    private final StepPipeline pipeline;
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
        Recipe recipe = config.recipe();
        if (recipe.needsReference() && reference == null)
            throw new IllegalArgumentException(recipe.name() + " has a KL term: a reference policy is required");
        this.task = task;
        this.tokenizer = tokenizer;
        this.trainer = trainer;
        this.afterUpdate = afterUpdate;
        this.config = config;
        AgentConfig agent = recipe.agentConfig(task);   // the task's limits, the recipe's sampling and loop options
        this.reward = recipe.reward().reward(task, agent);
        this.reference = reference;
        this.strategy = recipe.strategy(config.budget());
        this.pipeline = new StepPipeline(recipe, tokenizer);
        this.microBatchTokens = microBatchTokens;
        this.engine = RolloutEngine.builder().generator(generator).tokenizer(tokenizer).format(task.format()).tools(task.tools())
                .config(agent).toolThreads(Math.max(1, toolThreads)).build();
    }

    public Config config() {
        return config;
    }

    /** The recipe's loss, at its sampling temperature. */
    public PolicyLossConfig lossConfig() {
        return config.recipe().loss();
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
        return new Rollout(prompts, batch, Scored.score(batch, problems, task, reward, tokenizer), (System.nanoTime() - t0) / 1e9);
    }

    /** Scores to the token batch (the torch-free part of the step). */
    public StepPipeline.Prepared prepare(List<Scored> scored) {
        return pipeline.prepare(scored);
    }

    /** One step on {@code problems} (one group each); {@code seed} drives the rollouts and the shuffles. */
    public Map<String, Object> step(List<Problem> problems, long seed) {
        return train(problems, rollout(problems, seed), seed);
    }

    /**
     * The second half of {@link #step}: the update from a rollout of {@code problems} made earlier — by
     * {@link #rollout} on this step's policy (synchronous), or on an older one while the previous step trained
     * (asynchronous steps: the trajectories' weight versions say which).
     */
    public Map<String, Object> train(List<Problem> problems, Rollout r, long seed) {
        long t0 = System.nanoTime() - (long) (r.seconds() * 1e9);
        Map<String, Object> m = new LinkedHashMap<>(Scored.rolloutMetrics(r.scored(), r.batch()));
        m.put("rollout_seconds", r.seconds());
        java.util.TreeSet<String> versions = new java.util.TreeSet<>();   // the policy versions that sampled (a fleet reports them)
        for (Scored x : r.scored()) versions.addAll(x.trajectory().policyVersions());
        if (!versions.isEmpty()) m.put("rollout_weight_versions", String.join(",", versions));
        long t1 = System.nanoTime();
        List<Scored> train = r.scored();
        int k = config.recipe().oversample();
        if (k > 1 && config.recipe().kind() == Recipe.Kind.POLICY_GRADIENT) {
            // DAPO dynamic sampling: the caller passed k× the step's prompts (TrainingRun does); train on the first
            // informative groups up to the step's prompt count
            int target = Math.max(1, (problems.size() + k - 1) / k);
            train = StepPipeline.dynamicSample(r.scored(), target, config.recipe().minWithinLength());
            int kept = (int) train.stream().mapToInt(Scored::group).distinct().count();
            // a short batch: TAO-RL's release repeats its informative groups up to the target (Recipe.Refill)
            if (config.recipe().refill() == Recipe.Refill.REPLICATE) train = StepPipeline.replicateGroups(train, target);
            m.put("dynamic/offered_groups", problems.size());
            m.put("dynamic/kept_groups", kept);
            m.put("dynamic/trained_groups", (int) train.stream().mapToInt(Scored::group).distinct().count());
            m.put("dynamic/target_groups", target);
        }
        if (config.recipe().kind() == Recipe.Kind.REJECTION_SAMPLING) rftUpdate(m, train);
        else policyUpdate(m, train, seed);
        afterUpdate.run();
        m.put("train_seconds", (System.nanoTime() - t1) / 1e9);
        m.put("seconds", (System.nanoTime() - t0) / 1e9);
        return m;
    }

    // ---------------------------------------------------------------------------------------------

    /** The policy updates of one step, averaged over its optimizer steps (the learning rate is the last one's). */
    private static final class UpdateStats {
        double loss, pgLoss, klRef, policyEntropy, clipFracHigh, clipFracLow, dualClipFrac, approxKl, gradNorm, lr;
        int updates;

        void add(Trainer.PolicyStats st) {
            PolicyLossResult r = st.loss();
            loss += r.loss();
            pgLoss += r.pgLoss();
            klRef += r.klLoss();
            policyEntropy += r.entropyMean();
            clipFracHigh += r.clipFracHigh();
            clipFracLow += r.clipFracLow();
            dualClipFrac += r.dualClipFrac();
            approxKl += r.approxKl();
            gradNorm += st.gradNorm();
            lr = st.lr();
            updates++;
        }

        void into(Map<String, Object> m) {
            m.put("loss", loss / updates);
            m.put("pg_loss", pgLoss / updates);
            m.put("kl_ref", klRef / updates);
            m.put("policy_entropy", policyEntropy / updates);
            m.put("clip_frac_high", clipFracHigh / updates);
            m.put("clip_frac_low", clipFracLow / updates);
            m.put("dual_clip_frac", dualClipFrac / updates);
            m.put("approx_kl", approxKl / updates);
            m.put("grad_norm", gradNorm / updates);
            m.put("lr", lr);
            m.put("optimizer_steps", updates);
        }
    }

    private void policyUpdate(Map<String, Object> m, List<Scored> scored, long seed) {
        StepPipeline.Prepared prepared = pipeline.prepare(scored);
        m.putAll(prepared.stats().metrics());
        TokenBatch batch = prepared.batch();
        // data parallel: every rank takes the same optimizer steps, so skip and count mini-batches over all ranks' batches
        if (trainer.globalSum(batch.sequenceCount()) == 0) {
            m.put("skipped", 1);
            return;
        }
        PolicyLossConfig loss = config.recipe().loss();
        float temperature = (float) loss.temperature();   // the sampler's (Recipe sets it)
        int vocab = tokenizer.vocabSize();
        // the update by phase (seconds): old / reference log-prob passes (no gradient), the optimizer steps
        long tOld = System.nanoTime();
        if (config.recomputeOld()) {
            float[] old = Trainer.score(trainer.policy(), batch, temperature, microBatchTokens, vocab, trainer.packs(batch)).logprobs();
            double diff = 0;
            for (int k = 0; k < old.length; k++) diff += Math.abs(old[k] - batch.behaviour()[k]);
            batch = batch.withOldLogprobs(old);
            m.put("old_logprob_abs_diff", diff / old.length);  // behaviour vs recomputed: numerics of decoding vs training forward
            RolloutCorrection.Applied corrected = config.correction().apply(batch);  // metrics always; weights when active
            batch = corrected.batch();
            m.putAll(corrected.metrics());
        }
        long tRef = System.nanoTime();
        if (config.recipe().needsReference())
            batch = batch.withRefLogprobs(Trainer.score(reference, batch, temperature, microBatchTokens, vocab, trainer.packs(batch)).logprobs());
        long tSteps = System.nanoTime();
        m.put("old_logprob_seconds", (tRef - tOld) / 1e9);
        m.put("ref_logprob_seconds", (tSteps - tRef) / 1e9);
        m.putAll(trainer.packingMetrics(batch));

        Random rnd = new Random(seed ^ 0x5DEECE66DL);
        UpdateStats stats = new UpdateStats();
        int mbs = (int) Math.min(config.recipe().miniBatches(), trainer.globalMax(batch.sequenceCount()));
        for (int e = 0; e < config.ppoEpochs(); e++) {
            List<Integer> order = new ArrayList<>();
            for (int i = 0; i < batch.sequenceCount(); i++) order.add(i);
            if (config.recipe().miniBatches() > 1) Collections.shuffle(order, rnd);
            for (int b = 0; b < mbs; b++) {
                List<Integer> part = new ArrayList<>();
                for (int i = b; i < order.size(); i += mbs) part.add(order.get(i));
                stats.add(trainer.policyStep(batch.select(part.stream().mapToInt(Integer::intValue).toArray()), loss));
            }
        }
        stats.into(m);
        m.put("policy_step_seconds", (System.nanoTime() - tSteps) / 1e9);
    }

    private void rftUpdate(Map<String, Object> m, List<Scored> scored) {
        TokenBatch keep = pipeline.rejectionSample(scored);
        m.put("trained_sequences", keep.sequenceCount());
        if (trainer.globalSum(keep.sequenceCount()) == 0) {   // data parallel: every rank steps, or none
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

    @Override
    public void close() {
        engine.close();
    }
}
