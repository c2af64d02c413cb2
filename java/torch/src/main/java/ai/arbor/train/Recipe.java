package ai.arbor.train;

import ai.arbor.advantage.AdvantageEstimator;
import ai.arbor.advantage.DegenerateGroupFilter;
import ai.arbor.kernels.TokenShaping;
import ai.arbor.advantage.ToolAwareFilter;
import ai.arbor.advantage.TrajectoryFilter;
import ai.arbor.kernels.PolicyLossConfig;
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
 * The training recipes by name (docs/algorithms.md §6), each with its paper's defaults: what rollout strategy it
 * samples with, how it turns rewards into advantages, which trajectories it filters out of the loss, which
 * clipped loss it optimizes and which reward it uses. The trainer reads everything from here; nothing about
 * a method is decided elsewhere.
 *
 * <p>Sizes: {@code groupSize} is the trajectories per prompt a recipe aims at (chains: n; ARPO/AEPO: the
 * path budget; Tree-GRPO: M = groupSize / 3 trees of K = 3 kept leaves). With a {@link Budget} (equal-cost
 * comparisons) the strategies keep adding work until the per-prompt budget of generated tokens and tool
 * calls is reached (Tree-GRPO then iterates expansions until the budget and keeps every leaf; ARPO/AEPO's
 * path count becomes an upper bound).
 */
public enum Recipe {

    /**
     * Supervised cold start (CoRT, Li et al. 2025, "CoRT: Code-integrated Reasoning within Thinking",
     * arXiv 2506.09820): cross entropy on synthetic demonstrations, including CoRT's hint-engineered ones
     * that switch from hand computation to code ({@link ai.arbor.task.DemoStyle#HINT}). Sets: no
     * rollouts; token-mean cross entropy on the demonstrations' own turns (observations masked).
     */
    SFT(Kind.SUPERVISED, 0),

    /**
     * Rejection-sampling fine-tuning (CoRT §3, after the cold start): sample n = 8 chains per prompt, keep the
     * correct and efficient ones — right answer, no failed tool call, and per prompt the shortest two — and
     * fine-tune on them with cross entropy. Sets: chains n = 8; outcome reward 1/0 for the selection.
     */
    RFT(Kind.REJECTION_SAMPLING, 8),

    /**
     * GRPO (Shao et al. 2024, "DeepSeekMath", arXiv 2402.03300) as configured in verl, the base the
     * agentic-RL papers build on (and Tree-GRPO's chain baseline): n = 8 independent chains per prompt;
     * A = (R − μ_g)/(σ_g + 1e-6); PPO clip ε = 0.2/0.2; k3 ("low_var_kl") KL to the reference with β = 0.001
     * (verl's {@code kl_loss_coef}; the paper used 0.04); token-mean aggregation (the paper: sequence mean of
     * token means); outcome reward 1/0.
     */
    GRPO(Kind.POLICY_GRADIENT, 8),

    /**
     * GRPO-TCR ("Demystifying Reinforcement Learning in Agentic Reasoning", Yu et al. 2025): GRPO with
     * token-mean loss, clip-higher ε = 0.2/0.28, no KL, DAPO's overlong reward shaping (L_max = the response
     * budget, buffer L_max / 5) and the tool-call reward: 1 if correct, else min(−0.6, −1 + 0.1·tool_calls).
     * n = 8 chains.
     */
    GRPO_TCR(Kind.POLICY_GRADIENT, 8),

    /**
     * Tree-GRPO (Ji et al. 2025, "Tree Search for LLM Agent Reinforcement Learning", arXiv 2509.21240; code
     * AMAP-ML/Tree-GRPO): tree rollouts over agent steps, M = 2 trees, N = 2 expansions per iteration, L = 1
     * iteration, K = 3 leaves kept per tree; advantages A = GRPO(intra-tree) + GRPO(inter-tree); dual-clip PPO
     * (c = 3) with ε = 0.2; k3 KL β = 0.001; token-mean. Reward: QA tasks use its exact-match-with-format table
     * (1 / 0.8 / 0.2 / 0.1, {@link QaFormatReward}, with the task's format check); math tasks the outcome 1/0.
     */
    TREE_GRPO(Kind.POLICY_GRADIENT, 6),

    /**
     * ARPO (Dong et al. 2025, "Agentic Reinforced Policy Optimization", arXiv 2507.19849): entropy-adaptive
     * branching after tool calls, 16 paths per prompt of which 8 global samples, one branch per event with
     * the released rule (U + 0.2·ΔH ≥ 0.5); GRPO advantages; PPO clip 0.2; no KL (the released scripts set
     * {@code kl_loss_coef = 0}); token-mean; outcome reward.
     */
    ARPO(Kind.POLICY_GRADIENT, 16),

    /**
     * AEPO (Dong et al. 2025, "Agentic Entropy-Balanced Policy Optimization", arXiv 2510.14545): entropy
     * pre-monitoring splits 16 paths into global samples and branches, with the consecutive-branching
     * penalty; the entropy-balanced (stop-gradient) clip on every token (released code); entropy-aware
     * advantage Ã = A·(1 + 0.2·Ĥ); GRPO; no KL; token-mean; outcome reward.
     */
    AEPO(Kind.POLICY_GRADIENT, 16),

    /**
     * TAO-RL (tool-aware policy optimization; docs/algorithms.md §3, §6): GRPO-TCR plus the tool-aware trajectory
     * filter (a trajectory whose tool calls all failed leaves the loss), the degenerate-group filter (groups
     * whose rewards have std &lt; 1e-3) and entropy-guided post-tool advantage shaping Ã = A·(1 + 0.01·Ĥ) on
     * the top 20 % by entropy of the tokens right after a tool observation. n = 8 chains.
     */
    TAO_RL(Kind.POLICY_GRADIENT, 8);

    /** What a recipe trains with. */
    public enum Kind {
        /** Cross entropy on demonstrations. */
        SUPERVISED,
        /** Cross entropy on the policy's own correct samples. */
        REJECTION_SAMPLING,
        /** A clipped policy-gradient loss on rollouts. */
        POLICY_GRADIENT
    }

    private final Kind kind;
    private final int defaultGroupSize;

    Recipe(Kind kind, int defaultGroupSize) {
        this.kind = kind;
        this.defaultGroupSize = defaultGroupSize;
    }

    public Kind kind() {
        return kind;
    }

    /** The paper's trajectories per prompt (0 for SFT). */
    public int defaultGroupSize() {
        return defaultGroupSize;
    }

    /** The command-line name: lower case with dashes ({@code tree-grpo}). */
    public String cliName() {
        return name().toLowerCase(Locale.ROOT).replace('_', '-');
    }

    /** By command-line name ({@code sft, rft, grpo, grpo-tcr, tree-grpo, arpo, aepo, tao-rl}); case and '-'/'_' ignored. */
    public static Recipe byName(String name) {
        if (name == null) throw new IllegalArgumentException("recipe name must not be null");
        String n = name.trim().toUpperCase(Locale.ROOT).replace('-', '_');
        for (Recipe r : values()) if (r.name().equals(n)) return r;
        List<String> all = new ArrayList<>();
        for (Recipe r : values()) all.add(r.cliName());
        throw new IllegalArgumentException("unknown recipe '" + name + "'; one of " + String.join(", ", all));
    }

    /** True for recipes that sample rollouts. */
    public boolean samples() {
        return kind != Kind.SUPERVISED;
    }

    /**
     * The rollout strategy.
     *
     * @param groupSize trajectories per prompt (see the class comment); &lt;= 0 = the paper's
     * @param budget    per-prompt cost cap for equal-cost comparisons, or {@link Budget#UNLIMITED}
     */
    public RolloutStrategy<TreeGroup> strategy(int groupSize, Budget budget) {
        int g = groupSize > 0 ? groupSize : defaultGroupSize;
        boolean capped = budget != null && !budget.unlimited();
        Budget b = budget == null ? Budget.UNLIMITED : budget;
        return switch (this) {
            case SFT -> throw new IllegalStateException("sft samples no rollouts");
            case RFT, GRPO, GRPO_TCR, TAO_RL -> new ChainRollout(g, b);
            case TREE_GRPO -> new TreeGrpoRollout(capped
                    ? new TreeGrpoRollout.Config(Math.max(1, g / 3), 2, 0, 0, b)
                    : new TreeGrpoRollout.Config(Math.max(1, g / 3), 2, 1, 3, Budget.UNLIMITED));
            case ARPO -> new ArpoRollout(ArpoRollout.Config.defaults().withPaths(capped ? 8 * g : g, Math.max(1, g / 2)).withBudget(b));
            case AEPO -> new AepoRollout(AepoRollout.Config.defaults().withPaths(capped ? 8 * g : g).withBudget(b));
        };
    }

    /** Sequence-level advantages. */
    public AdvantageEstimator estimator() {
        return this == TREE_GRPO ? AdvantageEstimator.TREE_GRPO : AdvantageEstimator.GRPO;
    }

    /** Token-level shaping of the advantages. */
    public TokenShaping shaping() {
        return switch (this) {
            case AEPO -> TokenShaping.aepo();
            case TAO_RL -> TokenShaping.taoRl();
            default -> TokenShaping.broadcast();
        };
    }

    /**
     * The clipped loss at the rollout's sampling {@code temperature} (the trained log-probs must be those of
     * the distribution the tokens were drawn from).
     */
    public PolicyLossConfig loss(double temperature) {
        PolicyLossConfig base = switch (this) {
            case SFT, RFT -> PolicyLossConfig.defaults();   // unused: cross entropy
            case GRPO -> PolicyLossConfig.builder().klType(ai.arbor.kernels.KlType.K3).klCoef(0.001).build();
            case GRPO_TCR, TAO_RL -> PolicyLossConfig.grpoTcr();
            case TREE_GRPO -> PolicyLossConfig.treeGrpo();
            case ARPO -> PolicyLossConfig.defaults();
            case AEPO -> PolicyLossConfig.aepo();
        };
        return base.toBuilder().temperature(temperature).build();
    }

    /** The trajectory filters, applied after the advantages (empty: keep everything). */
    public List<TrajectoryFilter> filters() {
        return this == TAO_RL ? List.of(new ToolAwareFilter(), new DegenerateGroupFilter()) : List.of();
    }

    /**
     * The reward on {@code task}.
     *
     * @param agent the agent loop's limits (the response budget sets the overlong shaping's L_max)
     */
    public RewardFunction reward(TrainingTask task, AgentConfig agent) {
        return switch (this) {
            case GRPO_TCR, TAO_RL -> ToolCallReward.grpoTcr(task.checker())
                    .plus(OverlongShaping.dapo(agent.maxResponseTokens(), Math.max(1, agent.maxResponseTokens() / 5)));
            case TREE_GRPO -> task.questionAnswering()
                    ? new QaFormatReward(QaGrader.standard(), task.wellFormed(), 1, 0.2, 0.1)
                    : OutcomeReward.of(task.checker());
            default -> OutcomeReward.of(task.checker());
        };
    }
}
