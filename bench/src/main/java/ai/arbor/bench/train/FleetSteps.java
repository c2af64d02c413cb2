package ai.arbor.bench.train;

import ai.arbor.train.TrainingRun;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * RL step wall time on a local fleet, synchronous (k = 0) against asynchronous (k = 1) steps, side by side in one
 * run (docs/fleet.md): the same SFT'd reference policy, recipe and prompts, {@code arbor train --local-fleet S
 * --async-steps k}. The wall time of a step is the time between consecutive step ends (the first step, which
 * includes nothing to overlap, is left out); also the mean rollout wait of the asynchronous run.
 * <pre>bench/run.sh --main ai.arbor.bench.train.FleetSteps [servers=2] [steps=8] [prompts=8] [group=4]</pre>
 */
public final class FleetSteps {
    private FleetSteps() {}

    static TrainingRun.Setup withInit(TrainingRun.Setup s, Path init) {
        return new TrainingRun.Setup(s.task(), s.seed(), s.trainSize(), s.heldOutSize(), s.model(), init, s.microBatchTokens(), s.threads(), s.out(),
                s.modelDir(), s.tokenizer());
    }

    public static void main(String[] args) throws Exception {
        int servers = args.length > 0 ? Integer.parseInt(args[0]) : 2;
        int steps = args.length > 1 ? Integer.parseInt(args[1]) : 8;
        int prompts = args.length > 2 ? Integer.parseInt(args[2]) : 8;
        int group = args.length > 3 ? Integer.parseInt(args[3]) : 4;
        System.out.println("load before: " + Files.readString(Path.of("/proc/loadavg")).strip());
        Path dir = Files.createTempDirectory("arbor-fleet-steps");
        TrainingRun.Options base = TrainingRun.Options.defaults();
        TrainingRun.Options sft = base.withSetup(base.setup().withOut(dir.resolve("sft")))
                .withSft(TrainingRun.Sft.of(400, 40, 16, 3e-3, 1.0)).withRl(base.rl().withSteps(0)).withEval(new TrainingRun.Eval(0, 0, false, false));
        TrainingRun.run(sft, new TrainingRun.Listener() {});
        Path init = dir.resolve("sft").resolve("sft.safetensors");
        for (int k : new int[] {0, 1}) {
            List<Long> ends = new ArrayList<>();
            double[] wait = new double[1];
            TrainingRun.Options o = base.withSetup(withInit(base.setup(), init).withOut(dir.resolve("k" + k)))
                    .withRecipe(base.recipe().withTrajectoriesPerPrompt(group))
                    .withRl(new TrainingRun.Rl(steps, prompts, base.rl().budget(), 1, base.rl().oldLogprobs(), base.rl().optim())
                            .withFleet(new TrainingRun.Fleet(List.of(), servers, java.time.Duration.ofMinutes(5), k)))
                    .withEval(new TrainingRun.Eval(0, 0, false, false));
            TrainingRun.run(o, new TrainingRun.Listener() {
                @Override
                public void step(String phase, int step, int total, Map<String, Object> m) {
                    if (!phase.equals("rl")) return;
                    ends.add(System.nanoTime());
                    if (m.get("rollout_wait_seconds") instanceof Number n && step > 1) wait[0] += n.doubleValue();
                }
            });
            double total = (ends.get(ends.size() - 1) - ends.get(0)) / 1e9;
            System.out.printf(Locale.ROOT, "| k = %d | %d servers | %d steps x %d prompts x %d | %.2f s per step | rollout wait %.2f s per step |%n",
                    k, servers, steps, prompts, group, total / (ends.size() - 1), wait[0] / (ends.size() - 1));
        }
        System.out.println("load after: " + Files.readString(Path.of("/proc/loadavg")).strip());
    }
}
