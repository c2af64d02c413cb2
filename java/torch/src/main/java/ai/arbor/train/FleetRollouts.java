package ai.arbor.train;

import ai.arbor.generate.LocalFleet;
import ai.arbor.rl.Scored;
import ai.arbor.rollout.Generator;
import ai.arbor.rollout.OpenAiCompatibleGenerator;
import ai.arbor.torch.model.HfCheckpoint;
import ai.arbor.torch.model.ReferencePolicy;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * The RL phase's rollouts on a generation fleet ({@link TrainingRun.Fleet}; docs/fleet.md): the servers (started
 * here for a local fleet, from the policy the phase starts with), the HTTP generator over them, and the policy's
 * publication — version N = the policy after N RL steps — with its per-step metrics.
 */
final class FleetRollouts implements AutoCloseable {
    private final LocalFleet local;
    private final OpenAiCompatibleGenerator generator;
    private final WeightPublisher publisher;
    private final ReferencePolicy policy;
    private long version;
    private WeightPublisher.Report last;

    private FleetRollouts(LocalFleet local, OpenAiCompatibleGenerator generator, WeightPublisher publisher, ReferencePolicy policy, long version) {
        this.local = local;
        this.generator = generator;
        this.publisher = publisher;
        this.policy = policy;
        this.version = version;
    }

    /**
     * Starts the fleet's servers when it is local, and publishes {@code policy} as version {@code startVersion} to
     * every server before the first rollout.
     *
     * @param weights      where the versions are written ({@code OUT/weights})
     * @param tokenizerDir the tokenizer files copied beside the weights, or null
     */
    static FleetRollouts start(TrainingRun.Fleet fleet, Path weights, ReferencePolicy policy, Path tokenizerDir, int vocab,
                               long startVersion, TrainingRun.Listener listener) throws IOException {
        LocalFleet local = null;
        OpenAiCompatibleGenerator generator = null;
        try {
            if (fleet.localServers() > 0) {
                Path boot = weights.resolve("boot");
                HfCheckpoint.save(policy, boot, HfCheckpoint.SaveOptions.defaults().withStoreAs(ScalarType.Float).withTokenizer(tokenizerDir));
                listener.message("starting a local fleet of " + fleet.localServers() + " arbor serve processes ...");
                local = LocalFleet.start(fleet.localServers(), boot, Duration.ofMinutes(3));
                listener.message("local fleet: " + local.urls());
            }
            generator = OpenAiCompatibleGenerator.builder().baseUrls(local != null ? local.urls() : fleet.generators()).vocabSize(vocab).build();
            FleetRollouts f = new FleetRollouts(local, generator, new WeightPublisher(weights, generator, fleet.updateTimeout(), 2, tokenizerDir),
                    policy, startVersion);
            f.publish();   // every server on the policy this phase starts from
            listener.message("fleet: weight version " + startVersion + " loaded by " + f.last.loaded()
                    + (f.last.failed().isEmpty() ? "" : "; failed: " + f.last.failed()));
            return f;
        } catch (IOException | RuntimeException e) {
            if (generator != null) generator.close();
            if (local != null) local.close();
            throw e;
        }
    }

    /** The generator over the servers in rotation. */
    Generator generator() {
        return generator;
    }

    /** After an optimizer step: publishes the next version (an {@link UncheckedIOException} when no server loads it). */
    synchronized void publishNext() {
        version++;
        try {
            publish();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private void publish() throws IOException {
        last = publisher.publish(policy, version);
    }

    /** The last publication's metrics into {@code m} (once per publication); says which servers left the rotation. */
    synchronized void metrics(Map<String, Object> m, int step, TrainingRun.Listener listener) {
        WeightPublisher.Report r = last;
        last = null;
        if (r == null) return;
        m.put("weight_version", r.version());
        m.put("publish_write_seconds", r.writeSeconds());
        m.put("publish_reload_seconds", r.reloadSeconds());
        m.put("fleet_loaded", r.loaded().size());
        m.put("fleet_failed", r.failed().size());
        if (!r.failed().isEmpty()) listener.message("fleet: out of rotation after step " + step + ": " + r.failed());
    }

    /**
     * How many versions older than {@code trained} (the version being trained) the oldest weights that sampled
     * {@code rollout} were; versions that are not ours (an external server's own labels) are ignored.
     */
    static int staleness(RlTrainer.Rollout rollout, int trained) {
        int oldest = trained;
        for (Scored x : rollout.scored())
            for (String v : x.trajectory().policyVersions()) {
                try {
                    oldest = Math.min(oldest, Integer.parseInt(v));
                } catch (NumberFormatException ignored) {
                    // not a version this run published
                }
            }
        return trained - oldest;
    }

    @Override
    public void close() {
        generator.close();
        if (local != null) local.close();
    }
}
