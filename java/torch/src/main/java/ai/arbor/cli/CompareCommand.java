package ai.arbor.cli;

import ai.arbor.rl.Recipe;
import ai.arbor.task.Evaluator;
import ai.arbor.train.TrainingRun;
import ai.arbor.train.report.LinePlot;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code arbor compare}: several RL recipes from the same SFT checkpoint at an equal per-prompt rollout
 * budget (generated tokens and tool calls), over several seeds; a table (held-out accuracy mean ± standard
 * deviation, tool use, spent budget) and a plot of the training curves.
 */
@Command(name = "compare", mixinStandardHelpOptions = true, sortOptions = false,
        description = {"Run RL recipes at an equal rollout budget from the same SFT cold start, over several seeds;",
                "writes compare.md (table), compare.json and compare.png (curves, mean over seeds) to --out."})
public final class CompareCommand implements Callable<Integer> {

    @Mixin
    TrainCommand.RunOptions run = new TrainCommand.RunOptions();

    @Option(names = "--recipes", defaultValue = "grpo,tree-grpo,aepo,tao-rl", split = ",",
            description = "RL recipes to compare (default ${DEFAULT-VALUE}).")
    List<String> recipes;

    @Option(names = "--seeds", defaultValue = "3", description = "Seeds --seed, --seed+1, … (default ${DEFAULT-VALUE}).")
    int seeds;

    @Option(names = "--out", description = "Output directory (default results/compare-<task>).")
    Path out;

    @Spec
    CommandSpec spec;

    @Override
    public Integer call() throws Exception {
        if (seeds < 1) throw new IllegalArgumentException("--seeds must be >= 1, got " + seeds);
        if (run.budgetTokens <= 0 && run.budgetTools <= 0)
            throw new IllegalArgumentException("compare needs an equal budget: --budget TOKENS (and/or --tool-budget CALLS) per prompt");
        List<Recipe> rs = new ArrayList<>();
        for (String r : recipes) {
            Recipe recipe = Recipe.byName(r);
            if (recipe.kind() != Recipe.Kind.POLICY_GRADIENT)
                throw new IllegalArgumentException("compare runs policy-gradient recipes; got " + recipe.name());
            rs.add(recipe);
        }
        Path dir = out != null ? out : Path.of("results", "compare-" + run.task);
        Files.createDirectories(dir);
        // originalArgs() are the whole command line's (they start with the subcommand's name when run through `arbor`)
        java.util.List<String> args = new java.util.ArrayList<>(spec.commandLine().getParseResult().originalArgs());
        if (!args.isEmpty() && args.get(0).equals(spec.name())) args.remove(0);
        String command = "arbor compare " + String.join(" ", args);
        String startFrom = run.init == null ? null : run.init.toString();
        List<Map<String, Object>> runs = new ArrayList<>();
        long t0 = System.nanoTime();
        for (int k = 0; k < seeds; k++) {
            long seed = run.seed + k;
            Path seedDir = dir.resolve("seed" + seed);
            Path sft = seedDir.resolve("sft");
            TrainingRun.Options so;
            if (startFrom == null) {
                so = run.options(Recipe.SFT, seed, null, sft);
                System.out.printf(Locale.ROOT, "== seed %d: SFT cold start (%d steps)%n", seed, so.sft().steps());
            } else {
                // a given start (e.g. the SFT checkpoints of earlier `arbor train` runs): evaluate it, no training
                Path start = Path.of(startFrom.replace("{seed}", Long.toString(seed)));
                if (!Files.isRegularFile(start)) throw new IllegalArgumentException("--init: no checkpoint at " + start);
                so = run.options(Recipe.GRPO, seed, start, sft);
                so = so.withRl(so.rl().withSteps(0)).withEval(so.eval().withBefore(true));
                System.out.printf(Locale.ROOT, "== seed %d: start from %s%n", seed, start);
            }
            TrainingRun.Result sr = TrainingRun.run(so, new ProgressBar(System.out));
            runs.add(row("sft", seed, sr, null));
            for (Recipe recipe : rs) {
                TrainingRun.Options o = equalCost(run.options(recipe, seed, sft.resolve("policy.safetensors"), seedDir.resolve(recipe.name())));
                o = o.withEval(o.eval().withBefore(false));
                System.out.printf(Locale.ROOT, "== seed %d: %s, %d steps × %d prompts%s, budget %s per prompt%n", seed, recipe.name(),
                        o.rl().steps(), o.rl().promptsPerStep(), o.recipe().oversample() > 1
                                ? " (" + rolledOutPrompts(o) + " rolled out: over-sampling ×" + o.recipe().oversample() + ")" : "",
                        o.rl().budget());
                TrainingRun.Result r = TrainingRun.run(o, new ProgressBar(System.out));
                Map<String, Object> row = row(recipe.name(), seed, r, r.metrics());
                if (row.get("gen_tokens") instanceof Number g)
                    row.put("gen_tokens_per_prompt", g.doubleValue() / ((double) o.rl().steps() * rolledOutPrompts(o)));
                runs.add(row);
            }
        }
        double minutes = (System.nanoTime() - t0) / 60e9;
        String table = table(command, runs, rs, minutes);
        Files.writeString(dir.resolve("compare.md"), table, StandardCharsets.UTF_8);
        Map<String, Object> json = new LinkedHashMap<>();
        json.put("command", command);
        json.put("minutes", minutes);
        json.put("runs", runs);
        Files.writeString(dir.resolve("compare.json"), new ObjectMapper().writerWithDefaultPrettyPrinter().writeValueAsString(json),
                StandardCharsets.UTF_8);
        plot(runs, rs, run.task, dir.resolve("compare.png"));
        System.out.println();
        System.out.print(table);
        System.out.println("Wrote " + dir.resolve("compare.md") + ", compare.json, compare.png");
        return 0;
    }

    /**
     * The run at the same rollout cost as the others: a recipe with DAPO dynamic sampling (over-sampling ×k, tao-rl)
     * rolls out k× its prompts per step and trains on the informative groups among them, so it gets
     * {@code --prompts / k} target groups and rolls out {@code --prompts}, as every other recipe does, each at the
     * per-prompt budget. {@code --prompts} must be a multiple of k.
     */
    static TrainingRun.Options equalCost(TrainingRun.Options o) {
        int k = o.recipe().kind() == Recipe.Kind.POLICY_GRADIENT ? o.recipe().oversample() : 1;
        if (k <= 1) return o;
        int prompts = o.rl().promptsPerStep();
        if (prompts % k != 0)
            throw new IllegalArgumentException("--prompts " + prompts + " is not a multiple of " + o.recipe().name() + "'s over-sampling ×" + k
                    + ": at an equal budget it trains on --prompts / " + k + " groups drawn from --prompts rolled out");
        return o.withRl(o.rl().withPromptsPerStep(prompts / k));
    }

    /** Prompts a run rolls out per step: its prompts per step times the recipe's over-sampling. */
    static int rolledOutPrompts(TrainingRun.Options o) {
        return o.rl().promptsPerStep() * (o.recipe().kind() == Recipe.Kind.POLICY_GRADIENT ? o.recipe().oversample() : 1);
    }

    /** One run's summary: final evaluations, spent budget, the per-step curves. */
    static Map<String, Object> row(String recipe, long seed, TrainingRun.Result r, Path metrics) throws IOException {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("recipe", recipe);
        m.put("seed", seed);
        List<Evaluator.Result> evals = recipe.equals("sft") ? r.before() : r.after();
        for (Evaluator.Result e : evals) {
            String k = e.decoding().startsWith("greedy") ? "greedy" : "sampled";
            m.put(k + "_accuracy", e.accuracy());
            m.put(k + "_tool_use", e.toolUse());
            m.put(k + "_tool_calls", e.toolCalls());
        }
        m.put("seconds", r.seconds());
        if (metrics != null) {
            List<Map<String, Object>> steps = new ArrayList<>();
            ObjectMapper json = new ObjectMapper();
            for (String line : Files.readAllLines(metrics, StandardCharsets.UTF_8)) {
                @SuppressWarnings("unchecked")
                Map<String, Object> s = json.readValue(line, Map.class);
                if ("rl".equals(s.get("phase"))) steps.add(s);
            }
            long gen = 0, tools = 0;
            for (Map<String, Object> s : steps) {
                gen += ((Number) s.get("gen_tokens")).longValue();
                tools += ((Number) s.get("tool_calls_total")).longValue();
            }
            m.put("gen_tokens", gen);
            m.put("tool_calls", tools);
            for (String key : List.of("accuracy", "reward", "tool_calls", "entropy", "gen_tokens")) {
                double[] v = new double[steps.size()];
                for (int i = 0; i < v.length; i++) v[i] = steps.get(i).get(key) instanceof Number n ? n.doubleValue() : Double.NaN;
                m.put("curve_" + key, v);
            }
            int tail = Math.min(5, steps.size());
            double acc = 0;
            for (int i = steps.size() - tail; i < steps.size(); i++) acc += ((Number) steps.get(i).get("accuracy")).doubleValue();
            m.put("train_accuracy_last5", tail == 0 ? Double.NaN : acc / tail);
        }
        return m;
    }

    static String table(String command, List<Map<String, Object>> runs, List<Recipe> recipes, double minutes) {
        StringBuilder sb = new StringBuilder();
        sb.append("`").append(command).append("` (").append(String.format(Locale.ROOT, "%.0f", minutes)).append(" min)\n\n");
        sb.append("Held-out accuracy: mean ± standard deviation over seeds (n = seeds); sampled = τ-sampled answers (pass@1), greedy = greedy decoding. ")
                .append("Spent budget: generated tokens and tool calls of all RL rollouts, mean per run; tokens / prompt: per prompt rolled out ")
                .append("(a recipe that over-samples ×k trains on --prompts / k groups of --prompts rolled out).\n\n");
        sb.append("| policy | held-out acc. (sampled) | held-out acc. (greedy) | tool use (sampled) | train acc. (last 5 steps) | generated tokens | tokens / prompt | tool calls | seconds | seeds |\n");
        sb.append("|---|---|---|---|---|---|---|---|---|---|\n");
        List<String> names = new ArrayList<>();
        names.add("sft");
        for (Recipe r : recipes) names.add(r.name());
        for (String name : names) {
            List<Map<String, Object>> rs = runs.stream().filter(r -> name.equals(r.get("recipe"))).toList();
            if (rs.isEmpty()) continue;
            sb.append(String.format(Locale.ROOT, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |%n", name.equals("sft") ? "SFT (start)" : name,
                    meanStd(rs, "sampled_accuracy", 3), meanStd(rs, "greedy_accuracy", 3), meanStd(rs, "sampled_tool_use", 3),
                    meanStd(rs, "train_accuracy_last5", 3), meanStd(rs, "gen_tokens", 0), meanStd(rs, "gen_tokens_per_prompt", 0),
                    meanStd(rs, "tool_calls", 0), meanStd(rs, "seconds", 0),
                    rs.size()));
        }
        return sb.toString();
    }

    static String meanStd(List<Map<String, Object>> rows, String key, int decimals) {
        List<Double> v = new ArrayList<>();
        for (Map<String, Object> r : rows) if (r.get(key) instanceof Number n && Double.isFinite(n.doubleValue())) v.add(n.doubleValue());
        if (v.isEmpty()) return "–";
        double mean = v.stream().mapToDouble(Double::doubleValue).average().orElse(Double.NaN);
        String f = "%." + decimals + "f";
        if (v.size() < 2) return String.format(Locale.ROOT, f, mean);
        double ss = 0;
        for (double x : v) ss += (x - mean) * (x - mean);
        return String.format(Locale.ROOT, f + " ± " + f, mean, Math.sqrt(ss / (v.size() - 1)));
    }

    static void plot(List<Map<String, Object>> runs, List<Recipe> recipes, String task, Path png) throws IOException {
        LinePlot plot = new LinePlot("arbor compare: " + task + " (training curves, mean over seeds)");
        for (String key : List.of("accuracy", "tool_calls", "entropy", "gen_tokens")) {
            for (Recipe r : recipes) {
                List<double[]> curves = new ArrayList<>();
                for (Map<String, Object> run : runs)
                    if (r.name().equals(run.get("recipe")) && run.get("curve_" + key) instanceof double[] c) curves.add(c);
                if (curves.isEmpty()) continue;
                int n = curves.stream().mapToInt(c -> c.length).min().orElse(0);
                double[] x = new double[n], y = new double[n];
                for (int i = 0; i < n; i++) {
                    x[i] = i + 1;
                    for (double[] c : curves) y[i] += c[i] / curves.size();
                }
                plot.add("train " + key.replace('_', ' '), new LinePlot.Series(r.name(), x, y));
            }
        }
        plot.write(png);
    }
}
