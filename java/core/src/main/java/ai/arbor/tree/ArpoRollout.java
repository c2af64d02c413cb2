package ai.arbor.tree;

import ai.arbor.rollout.Budget;
import ai.arbor.rollout.Prompt;
import ai.arbor.rollout.RolloutContext;
import ai.arbor.rollout.RolloutStrategy;
import java.util.HashMap;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;

/**
 * ARPO's entropy-adaptive rollout (docs/algorithms.md §4; Dong et al. 2025; released code
 * {@code ARPO/verl_arpo_entropy/.../vllm_rollout_with_tools.py}). Per prompt, a budget of {@code paths}
 * trajectories: start {@code initialPaths} global samples; after each tool call, measure the step
 * entropy H over the first k tokens ({@link StepEntropy}), ΔH = H − H_initial (H_initial = the path's
 * first step), and branch up to Z = {@code branchesPerEvent} new paths from the point after the
 * observation when the {@link BranchRule} says so (code: U + 0.2·ΔH ≥ 0.5), while the group has free
 * slots. When no path is active and slots remain, the leftover budget goes to fresh samples.
 *
 * <p>Paper vs released code, exposed: the branching rule ({@link BranchRule}, default the code's); the
 * entropy timing ({@link EntropyTiming}: the code's, the step that ended with the call, by default; the
 * paper's, the tokens after the observation, in {@link Config#paper()}); whether a branch measures its own
 * H_initial on its first step (code, default; a branch's first ΔH is then zero) or inherits its source's
 * (paper); fresh samples one per round (code, default) or all at once. Not
 * replicated: the code keeps its initial-entropy table across batches (indices collide between steps).
 *
 * <p>Output: one {@link RolloutTree} per prompt (root = prompt; global samples are root children;
 * branches are siblings of the step they branch beside); trajectories in creation order, at most
 * {@code paths} of them.
 */
public final class ArpoRollout implements RolloutStrategy<TreeGroup> {

    /**
     * @param paths                 total trajectories per prompt (code {@code rollout.n}, 16)
     * @param initialPaths          global samples started from the prompt (code {@code initial_rollouts}, 8)
     * @param branchesPerEvent      Z, new paths per branching event (code {@code beam_size − 1}, 1)
     * @param entropy               how a step's entropy is measured
     * @param rule                  the branching rule
     * @param timing                which step's entropy decides
     * @param inheritInitialEntropy a branch keeps its source's H_initial (paper) instead of measuring its own (code)
     * @param freshPerRound         fresh samples added per round when no path is active (code 1); 0 = all remaining at once
     * @param budget                per-prompt cost cap; with it, {@code paths} is only an upper bound
     */
    public record Config(int paths, int initialPaths, int branchesPerEvent, StepEntropy entropy, BranchRule rule, EntropyTiming timing,
                         boolean inheritInitialEntropy, int freshPerRound, Budget budget) {
        public Config {
            if (paths < 1) throw new IllegalArgumentException("paths must be >= 1, got " + paths);
            if (initialPaths < 1 || initialPaths > paths)
                throw new IllegalArgumentException("initialPaths must be in [1, paths=" + paths + "], got " + initialPaths);
            if (branchesPerEvent < 0) throw new IllegalArgumentException("branchesPerEvent must be >= 0, got " + branchesPerEvent);
            if (entropy == null || rule == null || timing == null) throw new IllegalArgumentException("entropy, rule and timing are required");
            if (freshPerRound < 0) throw new IllegalArgumentException("freshPerRound must be >= 0, got " + freshPerRound);
            if (budget == null) budget = Budget.UNLIMITED;
        }

        /**
         * The released run ({@code ARPO_7B_Reasoning_1node.sh}): 16 paths, 8 initial, Z = 1 ({@code beam_size} 2), the code's
         * step entropy and rule (τ = {@code branch_probability} 0.5, β = {@code entropy_weight} 0.2), ΔH of the step that
         * ended with the call against the path's own first step (a branch measures its own), one fresh sample per round.
         */
        public static Config released() {
            return new Config(16, 8, 1, StepEntropy.code(), BranchRule.arpoCode(), EntropyTiming.STEP_BEFORE_CALL, false, 1, Budget.UNLIMITED);
        }

        /** The paper's reading: as {@link #released()} but ΔH of the tokens after the observation, a branch inheriting H_initial. */
        public static Config paper() {
            return new Config(16, 8, 1, StepEntropy.code(), BranchRule.arpoCode(), EntropyTiming.AFTER_OBSERVATION, true, 1, Budget.UNLIMITED);
        }

        /** {@link #released()}. */
        public static Config defaults() {
            return released();
        }

        public Config withPaths(int paths, int initialPaths) {
            return new Config(paths, initialPaths, branchesPerEvent, entropy, rule, timing, inheritInitialEntropy, freshPerRound, budget);
        }

        public Config withRule(BranchRule r) {
            return new Config(paths, initialPaths, branchesPerEvent, entropy, r, timing, inheritInitialEntropy, freshPerRound, budget);
        }

        public Config withTiming(EntropyTiming t) {
            return new Config(paths, initialPaths, branchesPerEvent, entropy, rule, t, inheritInitialEntropy, freshPerRound, budget);
        }

        public Config withEntropy(StepEntropy e) {
            return new Config(paths, initialPaths, branchesPerEvent, e, rule, timing, inheritInitialEntropy, freshPerRound, budget);
        }

        public Config withBranchesPerEvent(int z) {
            return new Config(paths, initialPaths, z, entropy, rule, timing, inheritInitialEntropy, freshPerRound, budget);
        }

        public Config withInheritInitialEntropy(boolean inherit) {
            return new Config(paths, initialPaths, branchesPerEvent, entropy, rule, timing, inherit, freshPerRound, budget);
        }

        public Config withFreshPerRound(int n) {
            return new Config(paths, initialPaths, branchesPerEvent, entropy, rule, timing, inheritInitialEntropy, n, budget);
        }

        public Config withBudget(Budget b) {
            return new Config(paths, initialPaths, branchesPerEvent, entropy, rule, timing, inheritInitialEntropy, freshPerRound, b);
        }
    }

    private final Config config;

    public ArpoRollout(Config config) {
        if (config == null) throw new IllegalArgumentException("config must not be null");
        this.config = config;
    }

    public ArpoRollout() {
        this(Config.defaults());
    }

    public Config config() {
        return config;
    }

    @Override
    public String name() {
        return "arpo(paths=" + config.paths + ", initial=" + config.initialPaths + ", Z=" + config.branchesPerEvent + ")";
    }

    @Override
    public CompletableFuture<TreeGroup> rollout(Prompt prompt, RolloutContext ctx) {
        BranchingRounds.Settings s = new BranchingRounds.Settings(config.paths, config.branchesPerEvent, config.entropy, config.rule,
                config.timing, config.inheritInitialEntropy, config.freshPerRound, false, ConsecutiveScope.PROMPT, config.budget);
        Map<String, Object> info = new HashMap<>();
        return new BranchingRounds(s, prompt, ctx, new Random(ctx.strategySeed())).run(config.initialPaths, info);
    }
}
