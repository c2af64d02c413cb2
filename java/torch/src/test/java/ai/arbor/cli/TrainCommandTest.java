package ai.arbor.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.rl.Recipe;
import ai.arbor.train.OptimConfig;
import ai.arbor.train.RlTrainer;
import ai.arbor.train.TrainingRun;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.awt.image.BufferedImage;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * {@code arbor train}, {@code eval} and {@code compare} end to end with a tiny model and a few steps: the
 * files they write and what is in them (metrics rows, the plot's panels, the tables' numbers).
 */
class TrainCommandTest {
    static final String[] TINY = {"--model", "16,1,2,1,32", "--sft-steps", "3", "--sft-demos", "16", "--sft-batch", "4", "--steps", "2",
        "--prompts", "2", "--group-size", "2", "--eval-problems", "3", "--eval-samples", "1", "--train-size", "40"};

    static String run(String... args) {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        PrintStream old = System.out;
        int code;
        try (PrintStream ps = new PrintStream(buf, true, StandardCharsets.UTF_8)) {
            System.setOut(ps);
            code = new CommandLine(new Arbor()).execute(args);
        } finally {
            System.setOut(old);
        }
        String out = buf.toString(StandardCharsets.UTF_8);
        System.out.println(out);
        assertEquals(0, code, "exit code of arbor " + String.join(" ", args));
        return out;
    }

    static String[] concat(String[] a, String... b) {
        List<String> l = new ArrayList<>(List.of(a));
        l.addAll(List.of(b));
        return l.toArray(new String[0]);
    }

    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> jsonl(Path p) throws Exception {
        ObjectMapper json = new ObjectMapper();
        List<Map<String, Object>> rows = new ArrayList<>();
        for (String line : Files.readAllLines(p)) rows.add(json.readValue(line, Map.class));
        return rows;
    }

    static double num(Map<String, Object> m, String k) {
        assertTrue(m.get(k) instanceof Number, k + " in " + m);
        return ((Number) m.get(k)).doubleValue();
    }

    /** Non-white pixels in the plot area of each panel (a panel with a drawn line has many). */
    static int inked(BufferedImage img, int x0, int y0, int w, int h) {
        int n = 0;
        for (int y = y0 + 30; y < y0 + h - 50; y++)
            for (int x = x0 + 62; x < x0 + w - 17; x++) {
                int rgb = img.getRGB(x, y) & 0xffffff;
                int r = rgb >> 16, g = (rgb >> 8) & 0xff, b = rgb & 0xff;
                if (Math.max(r, Math.max(g, b)) - Math.min(r, Math.min(g, b)) > 60) n++;   // coloured (a series), not grey grid
            }
        return n;
    }

    /** The run {@code arbor train args} would start, without starting it. */
    static TrainingRun.Options parsed(String... args) {
        TrainCommand cmd = new TrainCommand();
        new CommandLine(cmd).parseArgs(args);
        return cmd.run.options(Recipe.byName(cmd.recipe), cmd.run.seed, cmd.run.init, cmd.out);
    }

    @Test
    void noToolsDropsTheToolAndNothingElse() {
        TrainingRun.Options with = parsed("--recipe", "cort"), without = parsed("--recipe", "cort", "--no-tools");
        assertTrue(without.setup().noTools());
        assertTrue(!with.setup().noTools(), "the tool is on by default");
        assertEquals(with.setup().withNoTools(true), without.setup(), "only the tool differs");
        assertEquals(with.sft(), without.sft(), "the same SFT budget");
        assertEquals(with.rl(), without.rl(), "the same RL steps, prompts and budget");
        assertEquals(with.recipe(), without.recipe());
    }

    /** compare at an equal rollout cost: tao-rl (over-sampling ×3) trains on a third of --prompts, drawn from --prompts rolled out. */
    @Test
    void compareGivesAnOverSamplingRecipeTheSameRolledOutPrompts() {
        TrainingRun.Options tao = parsed("--recipe", "tao-rl", "--prompts", "12", "--budget", "900");
        assertEquals(3, tao.recipe().oversample());
        TrainingRun.Options eq = CompareCommand.equalCost(tao);
        assertEquals(4, eq.rl().promptsPerStep(), "12 / 3 target groups");
        assertEquals(12, CompareCommand.rolledOutPrompts(eq), "12 prompts rolled out, as for every other recipe");
        assertEquals(tao.rl().withPromptsPerStep(4), eq.rl(), "nothing else changes");
        for (String r : List.of("grpo", "grpo-tcr", "tree-grpo", "arpo", "aepo", "cort")) {
            TrainingRun.Options o = parsed("--recipe", r, "--prompts", "12", "--budget", "900");
            assertEquals(o, CompareCommand.equalCost(o), r + " does not over-sample");
            assertEquals(12, CompareCommand.rolledOutPrompts(o));
        }
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> CompareCommand.equalCost(parsed("--recipe", "tao-rl", "--prompts", "10", "--budget", "900")));
        assertTrue(e.getMessage().contains("--prompts 10") && e.getMessage().contains("×3"), e.getMessage());
    }

    /** --threads sizes libtorch's pool and OpenBLAS stays at one thread unless --blas-threads says otherwise (docs/policy.md). */
    @Test
    void threadsSizeLibtorchAndOpenBlasStaysAtOne() {
        assertEquals(1, parsed().setup().threads());
        assertEquals(1, parsed().setup().blasThreads());
        // kb's default gives libtorch two threads where there are two cores (its cold start inside 10 minutes)
        int cores = Runtime.getRuntime().availableProcessors();
        assertEquals(Math.min(2, cores), parsed("--task", "kb").setup().threads());
        assertEquals(1, parsed("--task", "kb").setup().blasThreads());
        assertEquals(1, parsed("--task", "kb", "--threads", "1").setup().threads());
        TrainingRun.Setup two = parsed("--threads", "2").setup();
        assertEquals(2, two.threads());
        assertEquals(1, two.blasThreads(), "two spinning pools of 2 oversubscribe 2 cores");
        TrainingRun.Setup blas = parsed("--blas-threads", "2").setup();
        assertEquals(1, blas.threads());
        assertEquals(2, blas.blasThreads());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> parsed("--blas-threads", "0"));
        assertTrue(e.getMessage().contains("blasThreads") && e.getMessage().contains("got 0"), e.getMessage());
    }

    @Test
    void tokenizerOptionNamesADirectoryOrTheFetchedQwen3(@TempDir Path dir) {
        assertEquals(null, parsed().setup().tokenizer());
        assertEquals(dir, parsed("--tokenizer", dir.toString()).setup().tokenizer());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> parsed("--tokenizer", dir.resolve("nope").toString()));
        assertTrue(e.getMessage().contains("neither qwen3 nor a directory"), e.getMessage());
    }

    @Test
    void eachOptionOverridesOneValueAndTheRestAreTheLibrarysDefaults() {
        TrainingRun.Options d = TrainingRun.Options.defaults(), o = parsed();
        assertEquals(d.sft(), o.sft());
        assertEquals(d.rl(), o.rl());
        assertEquals(d.eval(), o.eval());
        assertEquals(d.setup().withOut(o.setup().out()), o.setup());
        assertEquals(Path.of("runs", "arith-grpo-seed1"), o.setup().out());
        assertEquals(50, o.sft().optim().warmupSteps(), "SFT warms up over a tenth of its 1000 steps, at most 50");
        // kb's cold start is longer (2500 steps of 40) at lr 5e-3, the rest of it the same; --sft-steps still wins
        TrainingRun.Sft kb = parsed("--task", "kb").sft();
        assertEquals(2500, kb.steps());
        assertEquals(TrainingRun.Sft.of(4000, 2500, 40, 5e-3, 1.0), kb);
        assertEquals(32, parsed("--task", "kb", "--sft-batch", "32").sft().batch());
        assertEquals(1000, d.sft().steps());
        assertEquals(300, parsed("--task", "kb", "--sft-steps", "300").sft().steps());
        assertEquals(1.0f, o.recipe().sampling().temperature());

        // without --group-size / --mini-batches every recipe keeps its own n and mini-batch count
        for (Recipe rec : Recipe.values()) {
            TrainingRun.Options own = parsed("--recipe", rec.name());
            assertEquals(rec.trajectoriesPerPrompt(), own.recipe().trajectoriesPerPrompt(), rec + " n");
            assertEquals(rec.miniBatches(), own.recipe().miniBatches(), rec + " mini-batches");
            assertEquals(rec.loss(), own.recipe().loss(), rec + " loss");
        }
        assertEquals(16, parsed("--recipe", "aepo").recipe().trajectoriesPerPrompt());
        assertEquals(6, parsed("--recipe", "tree-grpo").recipe().trajectoriesPerPrompt());
        assertEquals(4, parsed("--recipe", "tree-grpo", "--group-size", "4").recipe().trajectoriesPerPrompt());
        assertEquals(Recipe.TREE_GRPO.miniBatches(), parsed("--recipe", "tree-grpo", "--group-size", "4").recipe().miniBatches(),
                "--group-size replaces n only");

        // a recipe flag replaces that value only: the rest of the recipe is the paper's
        TrainingRun.Options t = parsed("--recipe", "tao-rl", "--temperature", "0.7", "--mini-batches", "3");
        assertEquals(0.7f, t.recipe().sampling().temperature());
        assertEquals(0.7f, (float) t.recipe().loss().temperature(), "the loss follows the sampler");
        assertEquals(3, t.recipe().miniBatches());
        assertEquals(Recipe.TAO_RL.loss().epsHigh(), t.recipe().loss().epsHigh());
        assertEquals(Recipe.TAO_RL.filters(), t.recipe().filters());
        // --temperature keeps the recipe's top-p, --top-p its temperature; the recipe's agent loop stays
        TrainingRun.Options c = parsed("--recipe", "cort", "--temperature", "0.8");
        assertEquals(new ai.arbor.kernels.SamplingParams(0.8f, 0, 0.95f, 0f), c.recipe().sampling());
        assertEquals(Recipe.CORT.agent(), c.recipe().agent());
        assertEquals(new ai.arbor.kernels.SamplingParams(1f, 0, 0.9f, 0f), parsed("--recipe", "tree-grpo", "--top-p", "0.9").recipe().sampling());
        assertEquals(new ai.arbor.kernels.SamplingParams(0.6f, 0, 1f, 0f), parsed("--recipe", "cort", "--top-p", "1").recipe().sampling());
        IllegalArgumentException tp = assertThrows(IllegalArgumentException.class, () -> parsed("--top-p", "1.5"));
        assertTrue(tp.getMessage().contains("1.5"), tp.getMessage());

        TrainingRun.Options f = parsed("--sft-steps", "100", "--max-grad-norm", "0.5", "--lr", "2e-4", "--schedule", "cosine", "--warmup", "3",
                "--old-logprobs", "recompute", "--steps", "7", "--budget", "500");
        assertEquals(10, f.sft().optim().warmupSteps());
        assertEquals(0.5, f.sft().optim().maxGradNorm());
        assertEquals(new OptimConfig(2e-4, 0.01, 1e-8, 0.5, 3, OptimConfig.Schedule.COSINE, 0.1), f.rl().optim());
        assertEquals(RlTrainer.OldLogprobs.RECOMPUTE, f.rl().oldLogprobs());
        assertEquals(7, f.rl().steps());
        assertEquals(500, f.rl().budget().generatedTokens());
        assertEquals(0, parsed("--recipe", "sft").rl().steps(), "sft samples no rollouts");
        assertEquals(ai.arbor.rl.RolloutCorrection.NONE, f.rl().correction(), "no off-policy correction by default");
        assertEquals(ai.arbor.rl.RolloutCorrection.tokenIs(3).withRejection(ai.arbor.rl.RolloutCorrection.RejectLevel.GEOMETRIC, Double.NaN, 1.5),
                parsed("--rollout-correction", "is=token,is-threshold=3,reject=geometric,reject-high=1.5").rl().correction());

        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> parsed("--group-size", "-1"));
        assertTrue(e.getMessage().contains("-1"), e.getMessage());
        TrainingRun.Options est = parsed("--recipe", "grpo", "--estimator", "rloo", "--policy-loss", "gspo");
        assertEquals(ai.arbor.advantage.AdvantageEstimator.RLOO, est.recipe().estimator());
        assertEquals(ai.arbor.kernels.ClipMode.GSPO_TOKEN, est.recipe().loss().clipMode());
        assertEquals(Recipe.GRPO.loss().klCoef(), est.recipe().loss().klCoef(), "the recipe's KL is kept");
        assertEquals(3e-4, est.recipe().loss().epsLow(), 0);
        e = assertThrows(IllegalArgumentException.class, () -> parsed("--policy-loss", "ppo2"));
        assertTrue(e.getMessage().contains("ppo2"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> parsed("--group-size", "0"));
        assertTrue(e.getMessage().contains("got 0"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> parsed("--temperature", "0"));
        assertTrue(e.getMessage().contains("0.0"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> parsed("--old-logprobs", "later"));
        assertTrue(e.getMessage().contains("later"), e.getMessage());
    }

    @Test
    void taoRlOversamplesAndCortTrainsEndToEnd(@TempDir Path dir) throws Exception {
        // tao-rl rolls out 3× the prompts (2 → 6 groups) and trains on at most 2 informative ones, filled up to 2 by copies;
        // groups of 4, the fewest its release's overlong rule (min_n = 4) trains, where 2 is refused by name
        Path tao = dir.resolve("tao");
        String[] tiny4 = TINY.clone();
        tiny4[java.util.Arrays.asList(tiny4).indexOf("--group-size") + 1] = "4";
        var e = assertThrows(IllegalArgumentException.class, () -> parsed("--recipe", "tao-rl", "--group-size", "2"));
        assertTrue(e.getMessage().contains("2 responses per prompt"), e.getMessage());
        run(concat(concat(new String[] {"train"}, tiny4), "--recipe", "tao-rl", "--out", tao.toString()));
        List<Map<String, Object>> rl = jsonl(tao.resolve("metrics.jsonl")).stream().filter(r -> "rl".equals(r.get("phase"))).toList();
        assertEquals(2, rl.size());
        for (Map<String, Object> r : rl) {
            assertEquals(6, ((Number) r.get("dynamic/offered_groups")).intValue(), r.toString());
            assertEquals(2, ((Number) r.get("dynamic/target_groups")).intValue(), r.toString());
            int kept = ((Number) r.get("dynamic/kept_groups")).intValue();
            assertTrue(kept >= 0 && kept <= 2, r.toString());
            assertEquals(kept == 0 ? 0 : 2, ((Number) r.get("dynamic/trained_groups")).intValue(), "a short batch is filled with copies: " + r);
        }
        // cort samples at T 0.6 / top-p 0.95 and trains with its KL and entropy terms
        Path cort = dir.resolve("cort");
        String text = run(concat(concat(new String[] {"train"}, TINY), "--recipe", "cort", "--out", cort.toString()));
        assertTrue(text.contains("recipe cort"), text);
        assertEquals(2, jsonl(cort.resolve("metrics.jsonl")).stream().filter(r -> "rl".equals(r.get("phase"))).count());
    }

    @Test
    void trainWritesMetricsPlotTableAndCheckpointThenEvalAndCompare(@TempDir Path dir) throws Exception {
        Path out = dir.resolve("run");
        String text = run(concat(concat(new String[] {"train"}, TINY), "--recipe", "grpo", "--out", out.toString()));
        assertTrue(text.contains("Held-out evaluation: task arith, recipe grpo"), text);

        List<Map<String, Object>> rows = jsonl(out.resolve("metrics.jsonl"));
        List<Map<String, Object>> sft = rows.stream().filter(r -> "sft".equals(r.get("phase"))).toList();
        List<Map<String, Object>> rl = rows.stream().filter(r -> "rl".equals(r.get("phase"))).toList();
        List<Map<String, Object>> ev = rows.stream().filter(r -> "eval".equals(r.get("phase"))).toList();
        assertEquals(3, sft.size());
        for (int i = 0; i < 3; i++) {
            assertEquals(i + 1, num(sft.get(i), "step"));
            assertTrue(num(sft.get(i), "loss") > 0 && num(sft.get(i), "loss") < 10, "SFT cross entropy in nats: " + sft.get(i));
        }
        assertEquals(2, rl.size());
        for (Map<String, Object> r : rl) {
            assertEquals("grpo", r.get("recipe"));
            assertEquals(4, num(r, "trajectories"), "2 prompts × 2 chains");
            for (String k : List.of("accuracy", "tool_use", "tool_failure_rate")) assertTrue(num(r, k) >= 0 && num(r, k) <= 1, k);
            assertTrue(num(r, "entropy") > 0 && num(r, "entropy") < Math.log(101) + 1e-6, "rollout entropy in (0, ln V]");
            assertTrue(num(r, "gen_tokens") > 0 && num(r, "seconds") > 0 && num(r, "tool_calls") >= 0);
            assertTrue(Double.isFinite(num(r, "reward")) && Double.isFinite(num(r, "approx_kl")) && num(r, "clip_frac_high") >= 0);
            assertTrue(num(r, "kl_ref") >= 0, "GRPO's k3 KL to the reference is reported");
        }
        assertEquals(4, ev.size(), "before/after × sampled/greedy");

        BufferedImage png = ImageIO.read(out.resolve("training.png").toFile());
        assertEquals(1040, png.getWidth(), "two panels per row");
        assertEquals(40 + 3 * 320, png.getHeight(), "reward, accuracy, entropy, tool calls, sft loss: three rows of panels");
        assertTrue(inked(png, 0, 40, 520, 320) > 0 || inked(png, 520, 360, 520, 320) > 0, "the curves are drawn");
        assertTrue(inked(png, 0, 680, 520, 320) > 20, "the SFT loss curve is drawn");

        // the table's numbers are the logged evaluations
        String table = Files.readString(out.resolve("eval.md"));
        Matcher m = Pattern.compile("\\| (SFT cold start|after grpo) \\| ([^|]+) \\| ([0-9.]+) \\| ([0-9.]+) \\|").matcher(table);
        int matched = 0;
        while (m.find()) {
            Map<String, Object> e = ev.get(matched++);
            assertEquals(m.group(1).startsWith("SFT") ? "before" : "after", e.get("when"));
            assertEquals(e.get("decoding"), m.group(2).trim());
            assertEquals(String.format(Locale.ROOT, "%.3f", num(e, "accuracy")), m.group(3));
            assertEquals(String.format(Locale.ROOT, "%.3f", num(e, "tool_use")), m.group(4));
        }
        assertEquals(4, matched, table);
        assertTrue(Files.size(out.resolve("policy.safetensors")) > 1000 && Files.exists(out.resolve("sft.safetensors")));

        // eval of the checkpoint
        String evalOut = run("eval", "--checkpoint", out.resolve("policy.safetensors").toString(), "--train-size", "40", "--problems", "3",
                "--samples", "2", "--out", dir.resolve("e.md").toString());
        String etable = Files.readString(dir.resolve("e.md"));
        assertTrue(etable.contains("| τ=1.0, 2 samples |") && etable.matches("(?s).*\\| 6 \\|\\n.*\\| greedy \\|.*\\| 3 \\|\\n"), etable);
        assertTrue(evalOut.contains(etable.strip().lines().findFirst().orElseThrow()));

        // compare at an equal budget, one seed
        Path cmp = dir.resolve("cmp");
        run(concat(concat(new String[] {"compare"}, TINY), "--recipes", "grpo,tree-grpo", "--seeds", "1", "--budget", "60",
                "--out", cmp.toString()));
        String ctable = Files.readString(cmp.resolve("compare.md"));
        assertTrue(ctable.startsWith("`arbor compare --model 16,1,2,1,32"), ctable);
        for (String who : List.of("| SFT (start) |", "| grpo |", "| tree-grpo |")) assertTrue(ctable.contains(who), who + " in\n" + ctable);
        Map<?, ?> cj = new ObjectMapper().readValue(cmp.resolve("compare.json").toFile(), Map.class);
        List<?> runs = (List<?>) cj.get("runs");
        assertEquals(3, runs.size());
        for (Object o : runs) {
            Map<?, ?> r = (Map<?, ?>) o;
            if (r.get("recipe").equals("sft")) continue;
            // a 60-token budget per prompt: each of the 2 prompts stops adding work once it is spent
            long spent = ((Number) r.get("gen_tokens")).longValue();
            assertTrue(spent >= 2 * 60, r.get("recipe") + " spent its budget: " + spent);
        }
        assertEquals(1040, ImageIO.read(cmp.resolve("compare.png").toFile()).getWidth());
        assertTrue(Files.exists(cmp.resolve("seed1/sft/policy.safetensors")) && Files.exists(cmp.resolve("seed1/tree-grpo/metrics.jsonl")));

        // compare from existing cold starts: {seed} picks each seed's checkpoint, no SFT is trained
        Path cmp2 = dir.resolve("cmp2");
        String out2 = run(concat(concat(new String[] {"compare"}, TINY), "--recipes", "grpo", "--seeds", "1", "--budget", "60",
                "--init", cmp.toString() + "/seed{seed}/sft/policy.safetensors", "--out", cmp2.toString()));
        assertTrue(out2.contains("start from " + cmp.resolve("seed1/sft/policy.safetensors")), out2);
        Map<?, ?> cj2 = new ObjectMapper().readValue(cmp2.resolve("compare.json").toFile(), Map.class);
        assertEquals(2, ((List<?>) cj2.get("runs")).size(), "the start's evaluation and grpo");
        assertTrue(jsonl(cmp2.resolve("seed1/sft/metrics.jsonl")).stream().noneMatch(r -> "sft".equals(r.get("phase"))), "no SFT step");
    }
}
