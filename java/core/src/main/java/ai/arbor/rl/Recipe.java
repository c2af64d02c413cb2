package ai.arbor.rl;

import ai.arbor.advantage.AdvantageEstimator;
import ai.arbor.advantage.DegenerateGroupFilter;
import ai.arbor.advantage.OverlongFilter;
import ai.arbor.advantage.VoidTurnFilter;
import ai.arbor.advantage.ToolAwareFilter;
import ai.arbor.advantage.TrajectoryFilter;
import ai.arbor.kernels.KlType;
import ai.arbor.kernels.PolicyLossConfig;
import ai.arbor.kernels.SamplingParams;
import ai.arbor.kernels.TokenShaping;
import ai.arbor.reward.AnswerChecker;
import ai.arbor.reward.CodeExecutionPenalty;
import ai.arbor.reward.FormatGatedReward;
import ai.arbor.reward.OutcomeReward;
import ai.arbor.reward.OverlongShaping;
import ai.arbor.reward.QaFormatReward;
import ai.arbor.reward.QaGrader;
import ai.arbor.reward.RewardFunction;
import ai.arbor.reward.ToolCallReward;
import ai.arbor.rollout.AgentConfig;
import ai.arbor.rollout.Budget;
import ai.arbor.rollout.RolloutStrategy;
import ai.arbor.task.TrainingTask;
import ai.arbor.tree.AepoRollout;
import ai.arbor.tree.ArpoRollout;
import ai.arbor.tree.ChainRollout;
import ai.arbor.tree.TreeGroup;
import ai.arbor.tree.TreeGrpoRollout;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * A training method as one value (docs/algorithms.md §6): everything it decides — how it samples rollouts,
 * how rewards become sequence advantages, which trajectories its filters drop, how advantages are shaped
 * per token, which clipped loss it optimizes, which reward it uses, how many trajectories per prompt, how
 * many mini-batches per step, the sampling distribution, how the agent loop behaves at the task's limits, and how
 * many samples rejection sampling keeps. The
 * step ({@link StepPipeline}, the trainer in arbor-torch) reads every decision from here; adding a method adds
 * a constant, not a case elsewhere.
 *
 * <p>The loss's temperature is the sampler's: the constructor sets {@code loss.temperature()} from
 * {@code sampling}, so the trained log-probs are those of the distribution the tokens were drawn from
 * (docs/algorithms.md §1, §10). Change it with {@link #withSampling}, never on the loss.
 *
 * @param name                  command-line name ({@code tree-grpo})
 * @param kind                  what it trains with
 * @param rollouts              the rollout strategy for n trajectories per prompt and a budget
 * @param estimator             sequence advantages (unused by the supervised kinds)
 * @param shaping               token-level shaping of the advantages
 * @param filters               trajectory filters applied after the advantages (empty: keep everything)
 * @param loss                  the clipped loss (its temperature is {@code sampling}'s)
 * @param reward                the reward on a task
 * @param trajectoriesPerPrompt n (chains: n; ARPO/AEPO: the path budget; Tree-GRPO: M = n / 3 trees of K = 3); 0 for SFT
 * @param miniBatches           optimizer steps per pass over a step's batch
 * @param sampling              the distribution rollouts, sampled evaluation and the loss use
 * @param keepPerPrompt         rejection sampling: the most correct samples kept per prompt, shortest first; 0 for
 *                              the other kinds
 * @param oversample            DAPO dynamic sampling (docs/algorithms.md §3): roll out this many times the step's
 *                              prompts and train on the first informative (non-degenerate) groups up to the step's
 *                              prompt count; 1 = off (TAO-RL's release: 3)
 * @param refill                what dynamic sampling does when its one over-sampled round holds fewer informative groups
 *                              than the step's prompts ({@link Refill}; TAO-RL's release: {@link Refill#REPLICATE})
 * @param agent                 the recipe's agent-loop options over the task's limits ({@link #agentConfig}: e.g.
 *                              Tree-GRPO's invalid-action reply and final turn without tools, CoRT's limit notice and
 *                              last round without tool stops); {@link Agent#TASK} leaves the task's loop as it is
 */
public record Recipe(String name, Kind kind, Rollouts rollouts, AdvantageEstimator estimator, TokenShaping shaping,
                     List<TrajectoryFilter> filters, PolicyLossConfig loss, Rewards reward, int trajectoriesPerPrompt,
                     int miniBatches, SamplingParams sampling, int keepPerPrompt, int oversample, Refill refill, Agent agent) {

    /**
     * What DAPO dynamic sampling does when its one over-sampled round ({@link #oversample}× the step's prompts) holds
     * fewer informative groups than the step's prompt count (docs/algorithms.md §3, §6).
     */
    public enum Refill {
        /**
         * Repeat the informative groups, each copy a group of its own, until the batch holds the step's prompt count (⌈target / kept⌉
         * copies in offer order, cut to the target): TAO-RL's release ({@code tao_rl_ray_trainer.py}, {@code
         * repeat_with_uid_suffix}), which keeps the batch size, and so the optimizer steps' sizes, constant. No
         * informative group: nothing is trained (the release skips the batch).
         */
        REPLICATE,
        /** Train on the informative groups there are: a smaller batch (DAPO's verl recipe rolls out further rounds instead; not implemented). */
        SHRINK
    }

    /** A recipe whose dynamic sampling, if any, refills as TAO-RL's release does ({@link Refill#REPLICATE}). */
    public Recipe(String name, Kind kind, Rollouts rollouts, AdvantageEstimator estimator, TokenShaping shaping, List<TrajectoryFilter> filters,
                  PolicyLossConfig loss, Rewards reward, int trajectoriesPerPrompt, int miniBatches, SamplingParams sampling, int keepPerPrompt,
                  int oversample, Agent agent) {
        this(name, kind, rollouts, estimator, shaping, filters, loss, reward, trajectoriesPerPrompt, miniBatches, sampling, keepPerPrompt, oversample,
                Refill.REPLICATE, agent);
    }

    /** What a recipe trains with. */
    public enum Kind {
        /** Cross entropy on demonstrations. */
        SUPERVISED,
        /** Cross entropy on the policy's own correct samples. */
        REJECTION_SAMPLING,
        /** A clipped policy-gradient loss on rollouts. */
        POLICY_GRADIENT
    }

    /** A rollout strategy for {@code n} trajectories per prompt under a per-prompt {@code budget}. */
    @FunctionalInterface
    public interface Rollouts {
        RolloutStrategy<TreeGroup> strategy(int n, Budget budget);
    }

    /** A reward on a task (the agent's limits set e.g. the overlong shaping's L_max). */
    @FunctionalInterface
    public interface Rewards {
        RewardFunction reward(TrainingTask task, AgentConfig agent);
    }

    /**
     * A recipe's changes to the task's agent loop: the task sets the limits (turns, calls, tokens) at the recipe's
     * sampling, the recipe the loop's behaviour at those limits.
     */
    @FunctionalInterface
    public interface Agent {
        AgentConfig configure(AgentConfig task);

        /** The task's loop unchanged. */
        Agent TASK = a -> a;
    }

    /** A recipe with the task's agent loop unchanged ({@link Agent#TASK}). */
    public Recipe(String name, Kind kind, Rollouts rollouts, AdvantageEstimator estimator, TokenShaping shaping, List<TrajectoryFilter> filters,
                  PolicyLossConfig loss, Rewards reward, int trajectoriesPerPrompt, int miniBatches, SamplingParams sampling, int keepPerPrompt,
                  int oversample) {
        this(name, kind, rollouts, estimator, shaping, filters, loss, reward, trajectoriesPerPrompt, miniBatches, sampling, keepPerPrompt, oversample,
                Agent.TASK);
    }

    public Recipe {
        if (name == null || name.isBlank()) throw new IllegalArgumentException("a recipe needs a name, got '" + name + "'");
        if (agent == null) agent = Agent.TASK;
        if (refill == null) throw new IllegalArgumentException(name + ": refill must not be null (Refill.REPLICATE is TAO-RL's release)");
        if (kind == null || estimator == null || shaping == null || loss == null || reward == null || sampling == null)
            throw new IllegalArgumentException(name + ": kind, estimator, shaping, loss, reward and sampling are required");
        if (kind != Kind.SUPERVISED && rollouts == null) throw new IllegalArgumentException(name + " samples: rollouts are required");
        filters = filters == null ? List.of() : List.copyOf(filters);
        if (trajectoriesPerPrompt < 0 || (kind != Kind.SUPERVISED && trajectoriesPerPrompt < 1))
            throw new IllegalArgumentException(name + ": trajectoriesPerPrompt must be >= 1, got " + trajectoriesPerPrompt);
        if (miniBatches < 1) throw new IllegalArgumentException(name + ": miniBatches must be >= 1, got " + miniBatches);
        int minWithin = minWithinLength(filters);
        if (kind != Kind.SUPERVISED && trajectoriesPerPrompt < minWithin)
            throw new IllegalArgumentException(name + ": " + trajectoriesPerPrompt + " responses per prompt are fewer than the " + minWithin
                    + " within the length limit that its overlong filter needs to train a group (OverlongFilter.minWithinLength): every group"
                    + " would be dropped; use a group size >= " + minWithin);
        if (oversample < 1) throw new IllegalArgumentException(name + ": oversample must be >= 1 (1 = off), got " + oversample);
        if (kind == Kind.REJECTION_SAMPLING ? keepPerPrompt < 1 : keepPerPrompt != 0)
            throw new IllegalArgumentException(name + ": keepPerPrompt must be " + (kind == Kind.REJECTION_SAMPLING ? ">= 1" : "0 (it is rejection sampling's)")
                    + ", got " + keepPerPrompt);
        if (kind == Kind.POLICY_GRADIENT && sampling.isGreedy())
            throw new IllegalArgumentException(name + " trains on sampled tokens: the sampling temperature must be > 0, got "
                    + sampling.temperature());
        // the loss scores tokens under the distribution they were sampled from (docs/algorithms.md §10)
        if (!sampling.isGreedy() && loss.temperature() != sampling.temperature())
            loss = loss.toBuilder().temperature(sampling.temperature()).build();
    }

    /** τ = 1, no truncation: the behaviour log-probs are then the trainer's own function of the logits (§10). */
    static final SamplingParams RL_SAMPLING = SamplingParams.temperature(1f);

    private static Recipe pg(String name, Rollouts rollouts, AdvantageEstimator est, TokenShaping shaping, List<TrajectoryFilter> filters,
                             PolicyLossConfig loss, Rewards reward, int n, int miniBatches) {
        return new Recipe(name, Kind.POLICY_GRADIENT, rollouts, est, shaping, filters, loss, reward, n, miniBatches, RL_SAMPLING, 0, 1);
    }

    private static final Rollouts CHAINS = ChainRollout::new;
    private static final Rewards OUTCOME = (task, agent) -> OutcomeReward.of(task.checker());
    /** GRPO-TCR's tool-call term plus DAPO's overlong shaping (L_max = the response budget, buffer L_max / 5). */
    private static final Rewards TOOL_CALL_OVERLONG = (task, agent) -> ToolCallReward.grpoTcr(task.checker())
            .plus(OverlongShaping.dapo(agent.maxResponseTokens(), Math.max(1, agent.maxResponseTokens() / 5)));

    /**
     * Supervised cold start (CoRT, Li et al. 2025, arXiv 2506.09820; docs/algorithms.md §11): cross entropy on
     * synthetic demonstrations, including CoRT's hint-engineered ones; no rollouts.
     */
    public static final Recipe SFT = new Recipe("sft", Kind.SUPERVISED, null, AdvantageEstimator.GRPO, TokenShaping.broadcast(),
            List.of(), PolicyLossConfig.defaults(), OUTCOME, 0, 1, RL_SAMPLING, 0, 1);

    /**
     * Rejection-sampling fine-tuning (CoRT §3, docs/algorithms.md §11): n = 8 chains per prompt, keep the correct
     * ones with no failed tool call, per prompt the shortest two, and fine-tune on them with cross entropy; the
     * outcome reward 1/0 for the selection.
     */
    public static final Recipe RFT = new Recipe("rft", Kind.REJECTION_SAMPLING, CHAINS, AdvantageEstimator.GRPO,
            TokenShaping.broadcast(), List.of(), PolicyLossConfig.defaults(), OUTCOME, 8, 1, RL_SAMPLING, 2, 1);

    /**
     * GRPO (Shao et al. 2024, arXiv 2402.03300) as configured in verl: n = 8 chains; A = (R − μ_g)/(σ_g + 1e-6); PPO
     * clip 0.2/0.2 with verl's dual clip c = 3; k3 KL to the reference with β = 0.001 (verl's {@code kl_loss_coef};
     * the paper used 0.04); token-mean; outcome reward 1/0; one optimizer step per batch.
     */
    public static final Recipe GRPO = pg("grpo", CHAINS, AdvantageEstimator.GRPO, TokenShaping.broadcast(), List.of(),
            PolicyLossConfig.vanilla().toBuilder().klType(KlType.K3).klCoef(0.001).build(), OUTCOME, 8, 1);

    /**
     * GRPO-TCR (Yu et al. 2025) as released (Gen-Verse/Open-AgentRL): token-mean, clip-higher 0.2/0.28 with dual clip
     * c = 10, no KL, DAPO's overlong shaping and the tool-call reward (1 if correct, else min(−0.6, −1 + 0.1·executed
     * calls)); n = 16 chains, 4 mini-batches.
     */
    public static final Recipe GRPO_TCR = pg("grpo-tcr", CHAINS, AdvantageEstimator.GRPO, TokenShaping.broadcast(), List.of(),
            PolicyLossConfig.grpoTcr(), TOOL_CALL_OVERLONG, 16, 4);

    /**
     * Tree-GRPO (Ji et al. 2025, arXiv 2509.21240) as released (AMAP-ML/Tree-GRPO): M = n / 3 trees, N = 2 expansions
     * per iteration, L = 1 iteration, K = 3 leaves per tree (with a budget: expansions until it is spent, every leaf
     * kept); A = GRPO(intra-tree) + GRPO(inter-tree); dual-clip c = 3, ε 0.2; k3 β = 0.001; entropy bonus 0.001;
     * sampling T 1, top-p 0.95; its agent loop ({@link AgentConfig#treeGrpo()}: an invalid action gets Search-R1's
     * "My previous action is invalid…" and the path goes on, after the task's turns one final generation whose call
     * is not executed); QA tasks: its EM-with-format table (1 / 0.8 / 0.2 / 0.1), math: the outcome 1/0; n = 6;
     * 8 mini-batches.
     */
    public static final Recipe TREE_GRPO = pg("tree-grpo", (n, budget) -> new TreeGrpoRollout(budget.unlimited()
                    ? new TreeGrpoRollout.Config(Math.max(1, n / 3), 2, 1, 3, Budget.UNLIMITED)
                    : new TreeGrpoRollout.Config(Math.max(1, n / 3), 2, 0, 0, budget)),
            AdvantageEstimator.TREE_GRPO, TokenShaping.broadcast(), List.of(), PolicyLossConfig.treeGrpo().toBuilder().entropyCoef(0.001).build(),
            (task, agent) -> task.questionAnswering() ? new QaFormatReward(QaGrader.standard(), task.wellFormed(), 1, 0.2, 0.1)
                    : OutcomeReward.of(task.checker()), 6, 8)
            .withSampling(SamplingParams.temperature(1f).withTopP(0.95f)).withAgent(AgentConfig::treeGrpo);

    // --- ARPO / AEPO: the released forms by default, AEPO's paper form as its own recipe (rollout strategies and
    // --- the search reward: see ai.arbor.tree, FormatGatedReward; docs/algorithms.md §4–§6)

    /**
     * ARPO's and AEPO's released reward ({@code deep_research.py}): on question answering, format-gated F1 (invalid
     * format −1; +0.1 with both tools) with the task's own format check; on math, the outcome 1/0.
     */
    private static final Rewards ARPO_REWARD = (task, agent) -> task.questionAnswering() ? FormatGatedReward.arpo(task.wellFormed())
            : OutcomeReward.of(task.checker());

    /**
     * ARPO (Dong et al. 2025, arXiv 2507.19849) as released: entropy-adaptive branching after tool calls
     * ({@link ArpoRollout.Config#released()}: ΔH of the step that ended with the call), n = 16 paths of which n / 2
     * global samples (with a budget: 8·n paths at most); GRPO; PPO 0.2 with dual clip c = 3; no KL; token-mean;
     * {@link #ARPO_REWARD}; 8 mini-batches.
     */
    public static final Recipe ARPO = pg("arpo", (n, budget) -> new ArpoRollout(ArpoRollout.Config.released()
                    .withPaths(budget.unlimited() ? n : 8 * n, Math.max(1, n / 2)).withBudget(budget)),
            AdvantageEstimator.GRPO, TokenShaping.broadcast(), List.of(), PolicyLossConfig.vanilla(), ARPO_REWARD, 16, 8);

    /**
     * AEPO (Dong et al. 2025, arXiv 2510.14545) as released ({@code AEPO_Qwen25_7B_DeepResearch.sh}): dynamic rollouts
     * off, so a fixed n / 2 of n = 16 paths are global samples, with the consecutive-branching penalty
     * ({@link AepoRollout.Config#released()}); the stop-gradient clip on every token with dual clip c = 3; no entropy-aware advantage (the
     * release computes it only when entropy_coeff ≠ 0, which it is not); GRPO; no KL; token-mean; {@link #ARPO_REWARD}; 8 mini-batches.
     */
    public static final Recipe AEPO = pg("aepo", (n, budget) -> new AepoRollout(AepoRollout.Config.released()
                    .withPaths(budget.unlimited() ? n : 8 * n, Math.max(1, n / 2)).withBudget(budget)),
            AdvantageEstimator.GRPO, TokenShaping.broadcast(), List.of(), PolicyLossConfig.aepo(), ARPO_REWARD, 16, 8);

    /**
     * AEPO as the paper describes it: entropy pre-monitoring splits the paths ({@link AepoRollout.Config#paper()}) and
     * the entropy-aware advantage Ã = A·(1 + 0.2·Ĥ) is on; otherwise as {@link #AEPO}.
     */
    public static final Recipe AEPO_PAPER = pg("aepo-paper", (n, budget) -> new AepoRollout(AepoRollout.Config.paper()
                    .withPaths(budget.unlimited() ? n : 8 * n, Math.max(1, n / 2)).withBudget(budget)),
            AdvantageEstimator.GRPO, TokenShaping.aepo(), List.of(), PolicyLossConfig.aepo(), ARPO_REWARD, 16, 8);
    // --- end ARPO / AEPO

    /** TAO-RL's loss as released: clip-higher 0.2 / 0.28, verl's dual clip c = 3, entropy bonus 0.001, token-mean. */
    private static final PolicyLossConfig TAO_RL_LOSS = PolicyLossConfig.builder().epsHigh(0.28).dualClipC(3).entropyCoef(0.001).build();

    /**
     * TAO-RL as released (WhyNot22222/TAO-RL; docs/algorithms.md §3, §6): n = 16 chains, the 1/0 outcome reward (no
     * tool-call term, no overlong shaping), overlong responses filtered, void-turn masking, degenerate groups
     * (std &lt; 1e-3 of the 1/0 reward, i.e. of correctness) dropped and refilled by over-sampling the prompts ×3 once,
     * a short batch filled by repeating its informative groups ({@link Refill#REPLICATE})
     * (DAPO dynamic sampling), GRPO, {@link #TAO_RL_LOSS}, 2 mini-batches. The release script leaves the paper's
     * tool-aware filter and post-tool shaping off: {@link #TAO_RL_PAPER}.
     */
    public static final Recipe TAO_RL = new Recipe("tao-rl", Kind.POLICY_GRADIENT, CHAINS, AdvantageEstimator.GRPO,
            TokenShaping.broadcast(), List.of(OverlongFilter.taoRl(), new VoidTurnFilter(), new DegenerateGroupFilter()), TAO_RL_LOSS,
            OUTCOME, 16, 2, RL_SAMPLING, 0, 3);

    /**
     * TAO-RL, the paper's method: {@link #TAO_RL} plus the tool-aware trajectory filter (a trajectory whose calls
     * all failed is dropped) and post-tool shaping Ã = A·(1 + 0.01·Ĥ) on the top 20 % by entropy of the tokens after
     * a tool observation.
     */
    public static final Recipe TAO_RL_PAPER = new Recipe("tao-rl-paper", Kind.POLICY_GRADIENT, CHAINS, AdvantageEstimator.GRPO,
            TokenShaping.taoRl(), List.of(OverlongFilter.taoRl(), new VoidTurnFilter(), new ToolAwareFilter(), new DegenerateGroupFilter()),
            TAO_RL_LOSS, OUTCOME, 16, 2, RL_SAMPLING, 0, 3);

    /** CoRT's reward: 1/0 correct plus −0.1 when no code ran or every execution failed. */
    private static final Rewards CORT_REWARD = (task, agent) -> OutcomeReward.of(task.checker()).plus(CodeExecutionPenalty.CORT);

    /**
     * CoRT's RL stage as released (Li et al. 2025, arXiv 2506.09820; ChengpengLi1003/CoRT; docs/algorithms.md §6):
     * n = 8 chains sampled at T 0.6, top-p 0.95; GRPO; PPO 0.2 with dual clip c = 3; k3 KL β = 0.001; entropy bonus
     * 0.001; reward 1/0 correct and −0.1 when no code ran or all code failed; its agent loop ({@link AgentConfig#cort()}:
     * the task's turns are its rounds, the call of the second-to-last round gets CoRT's "[SYSTEM] You have exceeded
     * the allowed number of code executions…" inside its output, the last round has no tool stop); 2 mini-batches. The
     * release also requires
     * {@code </think>} before the answer: {@link #CORT_THINK} (the built-in tasks' responses have no thinking section,
     * so this default leaves it out).
     */
    public static final Recipe CORT = new Recipe("cort", Kind.POLICY_GRADIENT, CHAINS, AdvantageEstimator.GRPO, TokenShaping.broadcast(),
            List.of(), PolicyLossConfig.vanilla().toBuilder().klType(KlType.K3).klCoef(0.001).entropyCoef(0.001).build(),
            CORT_REWARD, 8, 2, SamplingParams.temperature(0.6f).withTopP(0.95f), 0, 1, AgentConfig::cort);

    /** {@link #CORT} with the release's {@code </think>} requirement: an answer counts only after {@code </think>}. */
    public static final Recipe CORT_THINK = new Recipe("cort-think", Kind.POLICY_GRADIENT, CHAINS, AdvantageEstimator.GRPO,
            TokenShaping.broadcast(), List.of(), CORT.loss(),
            (task, agent) -> OutcomeReward.of(afterThinkEnd(task.checker())).plus(CodeExecutionPenalty.CORT), 8, 2, CORT.sampling(), 0, 1,
            CORT.agent());

    /** A checker that sees only the text after the last {@code </think>}, and no answer without one (CoRT's release). */
    static AnswerChecker afterThinkEnd(AnswerChecker checker) {
        return (response, gold) -> {
            int at = response.lastIndexOf("</think>");
            return at >= 0 && checker.isCorrect(response.substring(at + "</think>".length()), gold);
        };
    }

    private static final List<Recipe> ALL = List.of(SFT, RFT, GRPO, GRPO_TCR, TREE_GRPO, ARPO, AEPO, AEPO_PAPER, TAO_RL, TAO_RL_PAPER, CORT, CORT_THINK);

    /** Every built-in recipe, in the order of docs/algorithms.md §6. */
    public static List<Recipe> values() {
        return ALL;
    }

    /**
     * By command-line name ({@code sft, rft, grpo, grpo-tcr, tree-grpo, arpo, aepo, aepo-paper, tao-rl, tao-rl-paper, cort,
     * cort-think}); case and '-'/'_' ignored.
     */
    public static Recipe byName(String name) {
        if (name == null) throw new IllegalArgumentException("recipe name must not be null");
        String n = name.trim().toLowerCase(Locale.ROOT).replace('_', '-');
        for (Recipe r : ALL) if (r.name.equals(n)) return r;
        List<String> all = new ArrayList<>();
        for (Recipe r : ALL) all.add(r.name);
        throw new IllegalArgumentException("unknown recipe '" + name + "'; one of " + String.join(", ", all));
    }

    /** True for recipes that sample rollouts. */
    public boolean samples() {
        return kind != Kind.SUPERVISED;
    }

    /**
     * The fewest responses within the length limit a group needs to be trained: the largest group rule of the recipe's
     * {@link OverlongFilter}s (TAO-RL's release: 4), 0 when none. Dynamic sampling applies it before the fill.
     */
    public int minWithinLength() {
        return minWithinLength(filters);
    }

    private static int minWithinLength(List<TrajectoryFilter> filters) {
        int m = 0;
        for (TrajectoryFilter f : filters) if (f instanceof OverlongFilter o) m = Math.max(m, o.minWithinLength());
        return m;
    }

    /** This recipe with trajectory filters {@code f} (in order; empty: keep everything). */
    public Recipe withFilters(List<TrajectoryFilter> f) {
        if (f == null) throw new IllegalArgumentException(name + ": filters must not be null");
        return new Recipe(name, kind, rollouts, estimator, shaping, f, loss, reward, trajectoriesPerPrompt, miniBatches, sampling, keepPerPrompt,
                oversample, refill, agent);
    }

    /** True when the loss has a KL term to a reference policy. */
    public boolean needsReference() {
        return kind == Kind.POLICY_GRADIENT && loss.klType() != KlType.NONE;
    }

    /** The rollout strategy for this recipe's n trajectories per prompt under {@code budget} (null: unlimited). */
    public RolloutStrategy<TreeGroup> strategy(Budget budget) {
        if (!samples()) throw new IllegalStateException(name + " samples no rollouts");
        return rollouts.strategy(trajectoriesPerPrompt, budget == null ? Budget.UNLIMITED : budget);
    }

    /** This recipe with n trajectories per prompt ({@code n <= 0}: unchanged). */
    public Recipe withTrajectoriesPerPrompt(int n) {
        return n <= 0 || n == trajectoriesPerPrompt ? this
                : new Recipe(name, kind, rollouts, estimator, shaping, filters, loss, reward, n, miniBatches, sampling, keepPerPrompt, oversample, refill, agent);
    }

    /** This recipe with {@code m} mini-batches per pass. */
    public Recipe withMiniBatches(int m) {
        return new Recipe(name, kind, rollouts, estimator, shaping, filters, loss, reward, trajectoriesPerPrompt, m, sampling, keepPerPrompt,
                oversample, refill, agent);
    }

    /** This recipe over-sampling prompts {@code k}× for dynamic sampling (1 = off). */
    public Recipe withOversample(int k) {
        return new Recipe(name, kind, rollouts, estimator, shaping, filters, loss, reward, trajectoriesPerPrompt, miniBatches, sampling, keepPerPrompt, k, refill, agent);
    }

    /** This recipe refilling a short dynamic-sampling batch by {@code r} ({@link Refill}). */
    public Recipe withRefill(Refill r) {
        return new Recipe(name, kind, rollouts, estimator, shaping, filters, loss, reward, trajectoriesPerPrompt, miniBatches, sampling, keepPerPrompt,
                oversample, r, agent);
    }

    /** This recipe with {@code loss} (its temperature is set to the sampler's). */
    public Recipe withLoss(PolicyLossConfig l) {
        if (l == null) throw new IllegalArgumentException(name + ": loss must not be null");
        return new Recipe(name, kind, rollouts, estimator, shaping, filters, l, reward, trajectoriesPerPrompt, miniBatches, sampling, keepPerPrompt,
                oversample, refill, agent);
    }

    /** This recipe with the sequence-advantage estimator {@code e} (GRPO, Dr.GRPO, RLOO, REINFORCE++ baseline, ...). */
    public Recipe withEstimator(AdvantageEstimator e) {
        if (e == null) throw new IllegalArgumentException(name + ": estimator must not be null");
        return new Recipe(name, kind, rollouts, e, shaping, filters, loss, reward, trajectoriesPerPrompt, miniBatches, sampling, keepPerPrompt,
                oversample, refill, agent);
    }

    /** This recipe with the agent-loop options {@code a} ({@link Agent#TASK}: the task's loop as it is). */
    public Recipe withAgent(Agent a) {
        if (a == null) throw new IllegalArgumentException(name + ": agent must not be null (Agent.TASK leaves the task's loop)");
        return new Recipe(name, kind, rollouts, estimator, shaping, filters, loss, reward, trajectoriesPerPrompt, miniBatches, sampling, keepPerPrompt,
                oversample, refill, a);
    }

    /**
     * The agent loop this recipe rolls out with on {@code task}: the task's limits at this recipe's sampling, then
     * the recipe's options ({@link #agent}). The trainer's rollouts and the reward's limits use it.
     */
    public AgentConfig agentConfig(TrainingTask task) {
        if (task == null) throw new IllegalArgumentException(name + ": task must not be null");
        AgentConfig c = agent.configure(task.agentConfig(sampling));
        if (c == null) throw new IllegalStateException(name + ": its agent options returned no config");
        return c;
    }

    /** This recipe sampling from {@code s}; its loss follows the temperature. */
    public Recipe withSampling(SamplingParams s) {
        if (s == null) throw new IllegalArgumentException(name + ": sampling must not be null");
        return new Recipe(name, kind, rollouts, estimator, shaping, filters, loss, reward, trajectoriesPerPrompt, miniBatches, s, keepPerPrompt,
                oversample, refill, agent);
    }

    @Override
    public String toString() {
        return name;
    }
}
