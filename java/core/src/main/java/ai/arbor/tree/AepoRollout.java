package ai.arbor.tree;

import ai.arbor.rollout.AgentState;
import ai.arbor.rollout.AgentStep;
import ai.arbor.rollout.Budget;
import ai.arbor.rollout.Generation;
import ai.arbor.rollout.Prompt;
import ai.arbor.rollout.RolloutContext;
import ai.arbor.rollout.RolloutStrategy;
import ai.arbor.rollout.Seeds;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;

/**
 * AEPO's dynamic entropy-balanced rollout (docs/algorithms.md §4; Dong et al. 2025, "Agentic
 * Entropy-Balanced Policy Optimization"; released code {@code AEPO/.../vllm_rollout_with_tools.py}).
 *
 * <ol>
 *   <li><b>Entropy pre-monitoring</b> (the paper's; the released runs turn it off, {@code ENABLE_DYNAMIC_ROLLOUTS=False},
 *       and start a fixed {@code initialPaths} = 8 of the 16 paths as global samples). H_root = entropy of the first k tokens of a short generation from
 *       the prompt ({@code rootProbeTokens}, code 50); H̄_tool = mean step entropy over one full probe
 *       rollout. The {@code n}-path budget splits into m global samples and n − m branch slots:
 *       paper m = n·σ(β·(H_root − H̄_tool)); code {@code int(n·σ(0.5·ΔH)) + 1} clipped to [1, n]
 *       ({@link SplitRule}). The probes' tokens and tool calls count in the cost; their trajectories are
 *       discarded (as in the code).</li>
 *   <li><b>Branching with a consecutive-branch penalty</b> (ARPO's rounds, {@link ArpoRollout}): code
 *       rule (U + 0.2·ΔH)·max(0, 1 − 0.05·l) ≥ 0.5 ({@link BranchRule.AepoCode}), l counted per prompt
 *       over consecutive rounds with new paths (code) or per path ({@link ConsecutiveScope}).</li>
 * </ol>
 * Paper vs code, exposed: {@link SplitRule}; {@link ToolEntropySource} (code averages every probe step,
 * the first one — before any tool — included; the paper's H̄_tool is the entropy after tool calls);
 * {@link ConsecutiveScope}; plus ARPO's knobs. Two named forms: {@link Config#released()} (the default: fixed
 * split, penalty on, the code's entropy timing) and {@link Config#paper()} (pre-monitoring split, entropy after
 * the observation).
 */
public final class AepoRollout implements RolloutStrategy<TreeGroup> {

    /** How the budget splits into global samples. */
    public enum SplitRule {
        /** Released code: m = int(n·σ(β·ΔH)) + 1, clipped to [1, n]. */
        CODE,
        /** Paper: m = n·σ(β·ΔH), rounded to the nearest integer and clipped to [1, n]. */
        PAPER
    }

    /** Which probe steps H̄_tool averages. */
    public enum ToolEntropySource {
        /** Released code: every step of the probe rollout (the first included). */
        ALL_STEPS,
        /** Paper: the steps that follow a tool observation (falls back to H_root when the probe made no call). */
        POST_TOOL_STEPS
    }

    /**
     * @param paths                 total trajectories per prompt n (with a budget: only an upper bound)
     * @param initialPaths          global samples when pre-monitoring is off (code {@code initial_rollouts}, 8)
     * @param premonitoring         split n by entropy pre-monitoring (paper; code {@code enable_dynamic_rollouts}) instead
     *                              of starting {@code initialPaths} global samples (the released runs: off)
     * @param branchesPerEvent      Z, new paths per branching event (code {@code beam_size − 1})
     * @param entropy               how a step's entropy is measured
     * @param rule                  branching rule (with its consecutive penalty)
     * @param timing                which step's entropy decides
     * @param inheritInitialEntropy a branch keeps its source's H_initial
     * @param freshPerRound         fresh samples per round when no path is active (0 = all at once)
     * @param scope                 what the consecutive count l counts
     * @param splitRule             the m formula (pre-monitoring)
     * @param splitBeta             β of the split (code 0.5)
     * @param rootProbeTokens       length of the H_root probe generation (code 50)
     * @param toolEntropySource     which probe steps H̄_tool averages
     * @param budget                per-prompt cost cap; with it, {@code paths} is only an upper bound
     */
    public record Config(int paths, int initialPaths, boolean premonitoring, int branchesPerEvent, StepEntropy entropy, BranchRule rule,
                         EntropyTiming timing, boolean inheritInitialEntropy, int freshPerRound, ConsecutiveScope scope, SplitRule splitRule,
                         double splitBeta, int rootProbeTokens, ToolEntropySource toolEntropySource, Budget budget) {
        public Config {
            if (paths < 1) throw new IllegalArgumentException("paths must be >= 1, got " + paths);
            if (initialPaths < 1 || initialPaths > paths)
                throw new IllegalArgumentException("initialPaths must be in [1, paths=" + paths + "], got " + initialPaths);
            if (branchesPerEvent < 0) throw new IllegalArgumentException("branchesPerEvent must be >= 0, got " + branchesPerEvent);
            if (entropy == null || rule == null || timing == null || scope == null || splitRule == null || toolEntropySource == null)
                throw new IllegalArgumentException("entropy, rule, timing, scope, splitRule and toolEntropySource are required");
            if (freshPerRound < 0) throw new IllegalArgumentException("freshPerRound must be >= 0, got " + freshPerRound);
            if (!Double.isFinite(splitBeta)) throw new IllegalArgumentException("splitBeta must be finite, got " + splitBeta);
            if (rootProbeTokens < 1) throw new IllegalArgumentException("rootProbeTokens must be >= 1, got " + rootProbeTokens);
            if (budget == null) budget = Budget.UNLIMITED;
        }

        /**
         * The released runs ({@code AEPO_Qwen25_7B_DeepResearch.sh}: {@code ENABLE_DYNAMIC_ROLLOUTS=False}): 16 paths,
         * a fixed 8 global samples, Z = 1, the code's rule with its consecutive-branch penalty (l per prompt), the
         * code's step entropy, timing (the step that ended with the call) and per-branch H_initial; no probes.
         */
        public static Config released() {
            return new Config(16, 8, false, 1, StepEntropy.code(), BranchRule.aepoCode(), EntropyTiming.STEP_BEFORE_CALL, false, 1,
                    ConsecutiveScope.PROMPT, SplitRule.CODE, 0.5, 50, ToolEntropySource.ALL_STEPS, Budget.UNLIMITED);
        }

        /**
         * The paper's rollout: entropy pre-monitoring splits the 16 paths (m = round(n·σ(β·(H_root − H̄_tool))), H̄_tool over the
         * probe's post-tool steps, β = 0.5 from the code: the paper gives none), entropy measured after the observation, a
         * branch inherits its source's H_initial; the code's branching rule (the paper gives no α, γ, τ).
         */
        public static Config paper() {
            return new Config(16, 8, true, 1, StepEntropy.code(), BranchRule.aepoCode(), EntropyTiming.AFTER_OBSERVATION, true, 1,
                    ConsecutiveScope.PROMPT, SplitRule.PAPER, 0.5, 50, ToolEntropySource.POST_TOOL_STEPS, Budget.UNLIMITED);
        }

        /** {@link #released()}. */
        public static Config defaults() {
            return released();
        }

        /** n paths, n / 2 of them global samples when pre-monitoring is off (the released ratio 8 of 16). */
        public Config withPaths(int n) {
            return withPaths(n, Math.max(1, n / 2));
        }

        public Config withPaths(int n, int initial) {
            return new Config(n, initial, premonitoring, branchesPerEvent, entropy, rule, timing, inheritInitialEntropy, freshPerRound, scope, splitRule,
                    splitBeta, rootProbeTokens, toolEntropySource, budget);
        }

        public Config withPremonitoring(boolean on) {
            return new Config(paths, initialPaths, on, branchesPerEvent, entropy, rule, timing, inheritInitialEntropy, freshPerRound, scope, splitRule,
                    splitBeta, rootProbeTokens, toolEntropySource, budget);
        }

        public Config withRule(BranchRule r) {
            return new Config(paths, initialPaths, premonitoring, branchesPerEvent, entropy, r, timing, inheritInitialEntropy, freshPerRound, scope,
                    splitRule, splitBeta, rootProbeTokens, toolEntropySource, budget);
        }

        public Config withScope(ConsecutiveScope sc) {
            return new Config(paths, initialPaths, premonitoring, branchesPerEvent, entropy, rule, timing, inheritInitialEntropy, freshPerRound, sc,
                    splitRule, splitBeta, rootProbeTokens, toolEntropySource, budget);
        }

        public Config withSplit(SplitRule r, double beta) {
            return new Config(paths, initialPaths, premonitoring, branchesPerEvent, entropy, rule, timing, inheritInitialEntropy, freshPerRound, scope,
                    r, beta, rootProbeTokens, toolEntropySource, budget);
        }

        public Config withToolEntropySource(ToolEntropySource src) {
            return new Config(paths, initialPaths, premonitoring, branchesPerEvent, entropy, rule, timing, inheritInitialEntropy, freshPerRound, scope,
                    splitRule, splitBeta, rootProbeTokens, src, budget);
        }

        public Config withTiming(EntropyTiming t) {
            return new Config(paths, initialPaths, premonitoring, branchesPerEvent, entropy, rule, t, inheritInitialEntropy, freshPerRound, scope,
                    splitRule, splitBeta, rootProbeTokens, toolEntropySource, budget);
        }

        public Config withInheritInitialEntropy(boolean inherit) {
            return new Config(paths, initialPaths, premonitoring, branchesPerEvent, entropy, rule, timing, inherit, freshPerRound, scope, splitRule,
                    splitBeta, rootProbeTokens, toolEntropySource, budget);
        }

        public Config withEntropy(StepEntropy e) {
            return new Config(paths, initialPaths, premonitoring, branchesPerEvent, e, rule, timing, inheritInitialEntropy, freshPerRound, scope,
                    splitRule, splitBeta, rootProbeTokens, toolEntropySource, budget);
        }

        public Config withBudget(Budget b) {
            return new Config(paths, initialPaths, premonitoring, branchesPerEvent, entropy, rule, timing, inheritInitialEntropy, freshPerRound, scope,
                    splitRule, splitBeta, rootProbeTokens, toolEntropySource, b);
        }
    }

    private final Config config;

    public AepoRollout(Config config) {
        if (config == null) throw new IllegalArgumentException("config must not be null");
        this.config = config;
    }

    public AepoRollout() {
        this(Config.defaults());
    }

    public Config config() {
        return config;
    }

    @Override
    public String name() {
        return "aepo(paths=" + config.paths + ", Z=" + config.branchesPerEvent + ")";
    }

    /**
     * The number of global samples m for a budget of {@code n} paths and ΔH = H_root − H̄_tool
     * (docs/algorithms.md §4).
     */
    public static int globalSamples(SplitRule rule, int n, double beta, double deltaH) {
        if (n < 1) throw new IllegalArgumentException("n must be >= 1, got " + n);
        double sigma = 1 / (1 + Math.exp(-beta * deltaH));
        long m = rule == SplitRule.CODE ? (long) Math.floor(n * sigma) + 1 : Math.round(n * sigma);
        return (int) Math.max(1, Math.min(n, m));
    }

    @Override
    public CompletableFuture<TreeGroup> rollout(Prompt prompt, RolloutContext ctx) {
        BranchingRounds.Settings s = new BranchingRounds.Settings(config.paths, config.branchesPerEvent, config.entropy, config.rule,
                config.timing, config.inheritInitialEntropy, config.freshPerRound, true, config.scope, config.budget);
        Map<String, Object> info = new HashMap<>();
        info.put("premonitoring", config.premonitoring);
        if (!config.premonitoring) return new BranchingRounds(s, prompt, ctx, new Random(ctx.strategySeed())).run(config.initialPaths, info);
        int vocab = ctx.loop().tokenizer().vocabSize();
        CompletableFuture<Double> hRoot = ctx.loop().probe(ctx.promptContext(), config.rootProbeTokens, Seeds.derive(ctx.seed(), 3, 0), ctx.meter())
                .handle((Generation g, Throwable e) -> {
                    double h = e == null ? config.entropy.of(g.entropies(), vocab) : Double.NaN;
                    return Double.isNaN(h) ? 0.0 : h;   // the code's value when no logprobs came back
                });
        AgentState probe = ctx.loop().start(prompt, ctx.promptContext(), Seeds.derive(ctx.seed(), 3, 1), ctx.meter());
        CompletableFuture<List<AgentState>> probeRun = PathRunner.run(ctx.loop(), probe);
        return hRoot.thenCombine(probeRun, (root, states) -> {
            List<AgentStep> steps = states.isEmpty() ? List.of() : states.get(states.size() - 1).steps();
            double sum = 0;
            int count = 0;
            for (AgentStep st : steps) {
                if (config.toolEntropySource == ToolEntropySource.POST_TOOL_STEPS && !st.postTool()) continue;
                double h = config.entropy.of(st.entropies(), vocab);
                sum += Double.isNaN(h) ? 0 : h;
                count++;
            }
            double tool = count == 0 ? root : sum / count;
            BranchingRounds rounds = new BranchingRounds(s, prompt, ctx, new Random(ctx.strategySeed()));
            // The probe rollout is one whole path from the prompt: with a budget its cost tells how many paths the
            // budget buys, and the split divides those (not the path bound) into global samples and branch slots.
            if (!steps.isEmpty()) rounds.pacer().finished(steps, 0);
            int n = config.paths;
            if (rounds.pacer().active() && rounds.pacer().estimable())
                n = Math.max(1, rounds.pacer().affordablePaths(ctx.meter().cost(), config.paths));
            int m = globalSamples(config.splitRule, n, config.splitBeta, root - tool);
            info.put("hRoot", root);
            info.put("hTool", tool);
            info.put("splitPaths", n);
            info.put("globalSamples", m);
            return rounds.run(m, info);
        }).thenCompose(f -> f);
    }
}
