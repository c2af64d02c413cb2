package ai.arbor.bench.train;

import ai.arbor.generate.LocalGenerator;
import ai.arbor.kernels.PolicyLossConfig;
import ai.arbor.rl.Recipe;
import ai.arbor.rl.StepPipeline;
import ai.arbor.rl.TokenBatch;
import ai.arbor.rollout.CharTokenizer;
import ai.arbor.rollout.Tokenizer;
import ai.arbor.task.Problem;
import ai.arbor.task.TrainingTask;
import ai.arbor.torch.model.CpuThreads;
import ai.arbor.torch.model.ReferencePolicy;
import ai.arbor.train.OptimConfig;
import ai.arbor.train.RlTrainer;
import ai.arbor.train.Trainer;
import ai.arbor.train.TrainingRun;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * Tree-packed against unpacked update (docs/training.md "Tree packing"), per RL step of real rollouts: the tokens
 * the policy forward computes (packed: the unique tokens of the packs; unpacked: every trajectory's tokens), the
 * ideal ratio (unique tokens of each prompt's group over all of its tokens: perfect sharing, no pack limits), and
 * the wall time of the update's passes — the old-log-prob pass (no gradient) and the optimizer steps — packed and
 * unpacked (the fastest of {@value #REPS} alternating runs each; the whole-batch steps start from identical weights). The update is timed twice: as {@link RlTrainer} runs it (the recipe's shuffled
 * mini-batches, each one optimizer step) and over the whole batch as one mini-batch.
 *
 * <pre>
 * java -cp … ai.arbor.bench.train.PackingBench TASK INIT RECIPES STEPS PROMPTS [SEED]
 *   TASK     arith | kb
 *   INIT     a policy checkpoint (e.g. an SFT cold start), or "random" for the default model's initialisation
 *   RECIPES  comma-separated, e.g. tree-grpo,aepo,grpo (grpo is run with n = 8)
 * </pre>
 */
public final class PackingBench {
    /** Each timing is the fastest of this many runs per path (alternating), against the load of a shared machine. */
    static final int REPS = 2;

    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("synthetic")) {
            synthetic(args);
            return;
        }
        String taskName = args.length > 0 ? args[0] : "arith";
        String init = args.length > 1 ? args[1] : "random";
        String[] recipes = (args.length > 2 ? args[2] : "tree-grpo,aepo,grpo").split(",");
        int steps = args.length > 3 ? Integer.parseInt(args[3]) : 3, prompts = args.length > 4 ? Integer.parseInt(args[4]) : 4;
        long seed = args.length > 5 ? Long.parseLong(args[5]) : 1;
        CpuThreads.set(1);
        Tokenizer tok = CharTokenizer.ascii();
        int budget = TrainingRun.Setup.defaults().microBatchTokens();
        try (TrainingTask task = TrainingTask.create(taskName, seed, 1000, 10);
             ReferencePolicy start = init.equals("random") ? ReferencePolicy.create(TrainingRun.Setup.defaults().model())
                     : ReferencePolicy.load(Path.of(init), "cpu", ScalarType.Float)) {
            System.out.printf(Locale.ROOT, "task %s, init %s, %d steps x %d prompts, micro-batch %d tokens, model %s%n", taskName, init, steps, prompts,
                    budget, start.config());
            System.out.println("| recipe | step | trajectories | trained tokens | tokens unpacked | packed (mini-batches) | packed (whole batch) | ideal "
                    + "| rollout s | old pass s unpacked / packed | update s unpacked / packed (mini-batches) | update s unpacked / packed (whole batch) |");
            System.out.println("|---|---|---|---|---|---|---|---|---|---|---|---|");
            for (String name : recipes) run(Recipe.byName(name.trim()), task, tok, start, steps, prompts, seed, budget);
        }
    }

    /**
     * {@code synthetic D LAYERS PROMPT RESPONSE N GROUPS}: GROUPS groups of N chains (a shared prompt of PROMPT
     * random tokens, then RESPONSE random trained tokens each) on a random model of width D (4 query / 2 KV heads,
     * SwiGLU 4·D... 8/3·D); one whole-batch policy step and one old-log-prob pass, packed and unpacked, fastest of
     * {@value #REPS} alternating runs.
     */
    private static void synthetic(String[] args) {
        int d = Integer.parseInt(args[1]), layers = Integer.parseInt(args[2]), prompt = Integer.parseInt(args[3]), resp = Integer.parseInt(args[4]);
        int n = Integer.parseInt(args[5]), groups = Integer.parseInt(args[6]);
        CpuThreads.set(1);
        ai.arbor.torch.model.PolicyConfig cfg = new ai.arbor.torch.model.PolicyConfig(101, d, layers, 4, 2, (d * 8 / 3 + 7) / 8 * 8, prompt + resp + 1,
                10_000.0, 1e-6, true, 3);
        Random rnd = new Random(1);
        List<int[]> seqs = new ArrayList<>();
        List<Integer> sid = new ArrayList<>(), pos = new ArrayList<>();
        for (int g = 0; g < groups; g++) {
            int[] p = new int[prompt];
            for (int i = 0; i < prompt; i++) p[i] = 1 + rnd.nextInt(100);
            for (int c = 0; c < n; c++) {
                int[] t = java.util.Arrays.copyOf(p, prompt + resp);
                for (int i = prompt; i < t.length; i++) {
                    t[i] = 1 + rnd.nextInt(100);
                    sid.add(seqs.size());
                    pos.add(i);
                }
                seqs.add(t);
            }
        }
        int rows = sid.size();
        int[] label = new int[rows], src = new int[seqs.size()], seqId = sid.stream().mapToInt(Integer::intValue).toArray(),
                position = pos.stream().mapToInt(Integer::intValue).toArray();
        for (int k = 0; k < rows; k++) label[k] = seqs.get(seqId[k])[position[k]];
        for (int i = 0; i < src.length; i++) src[i] = i;
        float[] w = new float[rows], adv = new float[rows], old = new float[rows];
        for (int k = 0; k < rows; k++) {
            w[k] = 1;
            adv[k] = (seqId[k] % 2 == 0 ? 1 : -1);
            old[k] = -4.6f;
        }
        TokenBatch batch = new TokenBatch(seqs, src, seqId, position, label, null, old, null, adv, w, null, null);
        PolicyLossConfig loss = Recipe.GRPO.loss().toBuilder().klType(ai.arbor.kernels.KlType.NONE).klCoef(0).build();
        int budget = TrainingRun.Setup.defaults().microBatchTokens();
        try (ReferencePolicy a = ReferencePolicy.create(cfg); ReferencePolicy b = ReferencePolicy.create(cfg);
             Trainer packed = new Trainer(a, OptimConfig.adamW(1e-4), 100, budget, 101).packing(true);
             Trainer plain = new Trainer(b, OptimConfig.adamW(1e-4), 100, budget, 101).packing(false)) {
            Map<String, Object> m = packed.packingMetrics(batch);
            double[] step = {Double.MAX_VALUE, Double.MAX_VALUE}, score = {Double.MAX_VALUE, Double.MAX_VALUE};
            for (int k = 0; k < 2 * REPS + 2; k++) {   // the first pair warms up
                boolean pack = k % 2 == 0;
                long t0 = System.nanoTime();
                (pack ? packed : plain).policyStep(batch, loss);
                double st = (System.nanoTime() - t0) / 1e9;
                t0 = System.nanoTime();
                Trainer.score(pack ? a : b, batch, 1f, budget, 101, pack);
                double sc = (System.nanoTime() - t0) / 1e9;
                if (k >= 2) {
                    step[pack ? 1 : 0] = Math.min(step[pack ? 1 : 0], st);
                    score[pack ? 1 : 0] = Math.min(score[pack ? 1 : 0], sc);
                }
            }
            System.out.printf(Locale.ROOT, "| d %d, %d layers | %d x %d chains, prompt %d, response %d | %s / %s (%.2f) | %.3f / %.3f (%.2fx) | %.3f / %.3f (%.2fx) |%n",
                    d, layers, groups, n, prompt, resp, m.get("pack/unique_tokens"), m.get("pack/total_tokens"), (double) m.get("pack/ratio"),
                    score[0], score[1], score[0] / score[1], step[0], step[1], step[0] / step[1]);
        }
    }

    private static void run(Recipe recipe, TrainingTask task, Tokenizer tok, ReferencePolicy start, int steps, int prompts, long seed, int budget)
            throws Exception {
        Recipe r = recipe.name().equals("grpo") ? recipe.withTrajectoriesPerPrompt(8) : recipe;
        PolicyLossConfig loss = r.loss();
        int mbs = r.miniBatches();
        long optSteps = (long) steps * (mbs + 1);
        try (ReferencePolicy a = copy(start); ReferencePolicy b = copy(start);
             ReferencePolicy ref = r.needsReference() ? copy(start) : null;
             Trainer packed = new Trainer(a, OptimConfig.adamW(1e-4), optSteps, budget, tok.vocabSize()).packing(true);
             Trainer plain = new Trainer(b, OptimConfig.adamW(1e-4), optSteps, budget, tok.vocabSize()).packing(false);
             LocalGenerator gen = new LocalGenerator(a, tok, LocalGenerator.Options.defaults());
             RlTrainer rl = new RlTrainer(task, tok, packed, gen, ref, RlTrainer.Config.of(r), budget, 2)) {
            Random rnd = new Random(seed);
            for (int s = 0; s < steps; s++) {
                List<Problem> problems = task.train().subList(s * prompts, (s + 1) * prompts);
                RlTrainer.Rollout ro = rl.rollout(problems, seed * 1000 + s);
                StepPipeline.Prepared prep = rl.prepare(ro.scored());
                TokenBatch batch = prep.batch();
                if (batch.sequenceCount() == 0) {
                    System.out.printf(Locale.ROOT, "| %s | %d | nothing trained |%n", r.name(), s + 1);
                    continue;
                }
                float temperature = (float) loss.temperature();
                if (ref != null) batch = batch.withRefLogprobs(Trainer.score(ref, batch, temperature, budget, tok.vocabSize(), true).logprobs());
                if (s == 0) {   // warm-up of both paths (first-call allocations, JIT), untimed
                    packed.policyStep(batch, loss);
                    plain.policyStep(batch, loss);
                    Trainer.score(a, batch, temperature, budget, tok.vocabSize(), true);
                    Trainer.score(b, batch, temperature, budget, tok.vocabSize(), false);
                }
                b.loadParameters(a.namedParameters());   // identical weights for both timings
                // the old-log-prob pass, both ways (order alternates by step: the machine's load drifts)
                double[] old = {Double.MAX_VALUE, Double.MAX_VALUE};
                for (int k = 0; k < 2 * REPS; k++) {
                    boolean pack = (k + s) % 2 == 0;
                    long t0 = System.nanoTime();
                    Trainer.score(pack ? a : b, batch, temperature, budget, tok.vocabSize(), pack);
                    old[pack ? 1 : 0] = Math.min(old[pack ? 1 : 0], (System.nanoTime() - t0) / 1e9);
                }
                // the recipe's mini-batches, shuffled as RlTrainer does, then the whole batch at once
                List<Integer> order = new ArrayList<>();
                for (int i = 0; i < batch.sequenceCount(); i++) order.add(i);
                if (mbs > 1) Collections.shuffle(order, rnd);
                int parts = Math.min(mbs, batch.sequenceCount());
                List<TokenBatch> minis = new ArrayList<>();
                for (int m = 0; m < parts; m++) {
                    List<Integer> part = new ArrayList<>();
                    for (int i = m; i < order.size(); i += parts) part.add(order.get(i));
                    minis.add(batch.select(part.stream().mapToInt(Integer::intValue).toArray()));
                }
                long uniqueMini = 0;
                for (TokenBatch mb : minis) uniqueMini += ((Number) packed.packingMetrics(mb).get("pack/unique_tokens")).longValue();
                Map<String, Object> whole = packed.packingMetrics(batch);
                double[] upd = {Double.MAX_VALUE, Double.MAX_VALUE}, updWhole = {Double.MAX_VALUE, Double.MAX_VALUE};
                for (int k = 0; k < 2 * REPS; k++) {
                    boolean pack = (k + s) % 2 == 0;
                    Trainer t = pack ? packed : plain;
                    long t0 = System.nanoTime();
                    for (TokenBatch mb : minis) t.policyStep(mb, loss);
                    upd[pack ? 1 : 0] = Math.min(upd[pack ? 1 : 0], (System.nanoTime() - t0) / 1e9);
                }
                b.loadParameters(a.namedParameters());
                double gradPacked = 0, gradPlain = 0;
                for (int k = 0; k < 2 * REPS; k++) {
                    boolean pack = (k + s) % 2 == 0;
                    Trainer t = pack ? packed : plain;
                    long t0 = System.nanoTime();
                    double g = t.policyStep(batch, loss).gradNorm();
                    updWhole[pack ? 1 : 0] = Math.min(updWhole[pack ? 1 : 0], (System.nanoTime() - t0) / 1e9);
                    if (k < 2 && pack) gradPacked = g;
                    else if (k < 2) gradPlain = g;
                }
                gen.invalidate();
                long total = ((Number) whole.get("pack/total_tokens")).longValue();
                System.out.printf(Locale.ROOT, "| %s | %d | %d | %d | %d | %d (%.2f) | %d (%.2f) | %.2f | %.1f | %.2f / %.2f | %.2f / %.2f | %.2f / %.2f |%n",
                        r.name(), s + 1, batch.sequenceCount(), batch.rows(), total, uniqueMini, (double) uniqueMini / total,
                        ((Number) whole.get("pack/unique_tokens")).longValue(), (double) whole.get("pack/ratio"), ideal(batch, ro), ro.seconds(),
                        old[0], old[1], upd[0], upd[1], updWhole[0], updWhole[1]);
                System.out.printf(Locale.ROOT, "  (whole-batch step on identical weights: grad norm unpacked %.6g, packed %.6g)%n", gradPlain, gradPacked);
            }
        }
    }

    /** Nodes of each group's prefix trie over all its tokens (perfect sharing, no pack limit): sorted, Σ (length − common prefix with the previous). */
    private static double ideal(TokenBatch batch, RlTrainer.Rollout ro) {
        long total = 0, unique = 0;
        Map<Integer, List<int[]>> seqs = new java.util.HashMap<>();
        for (int s = 0; s < batch.sequenceCount(); s++)
            seqs.computeIfAbsent(ro.scored().get(batch.source()[s]).group(), g -> new ArrayList<>()).add(batch.sequences().get(s));
        for (List<int[]> g : seqs.values()) {
            g.sort(java.util.Arrays::compare);
            int[] prev = null;
            for (int[] t : g) {
                int shared = 0;
                if (prev != null) while (shared < Math.min(prev.length, t.length) && prev[shared] == t[shared]) shared++;
                total += t.length;
                unique += t.length - shared;
                prev = t;
            }
        }
        return (double) unique / total;
    }

    private static ReferencePolicy copy(ReferencePolicy p) {
        ReferencePolicy c = ReferencePolicy.create(p.config());
        c.loadParameters(p.namedParameters());
        return c;
    }
}
