package ai.arbor.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.generate.CompletionServer;
import ai.arbor.generate.LocalGenerator;
import ai.arbor.kernels.SamplingParams;
import ai.arbor.rollout.CharTokenizer;
import ai.arbor.rollout.Generation;
import ai.arbor.rollout.GenerationLimits;
import ai.arbor.rollout.GenerationRequest;
import ai.arbor.rollout.OpenAiCompatibleGenerator;
import ai.arbor.rollout.TokenContext;
import ai.arbor.testing.Seeds;
import ai.arbor.torch.model.CpuThreads;
import ai.arbor.torch.model.HfCheckpoint;
import ai.arbor.torch.model.PolicyConfig;
import ai.arbor.torch.model.ReferencePolicy;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Weight sync over real {@code arbor serve} servers (in process, loopback HTTP): after a publication every
 * server reports the new version and its sampled tokens' log-probs equal the trainer's own training-forward
 * log-probs of the published policy (issue 19, item 7's proof); a server that is down leaves the generator's
 * rotation and rejoins when a later publication reaches it; a publication no server loads is an error naming
 * each; old versions are pruned.
 */
class WeightPublisherTest {
    static final CharTokenizer TOK = CharTokenizer.ascii();

    @TempDir
    Path dir;

    @BeforeAll
    static void threads() {
        CpuThreads.set(1);
    }

    static PolicyConfig config(long seed) {
        return HfCheckpoint.Family.QWEN3.config(TOK.vocabSize(), 32, 2, 4, 2, 8, 64, 256, 1e6, 1e-6, false, false, seed);
    }

    /** A served checkpoint: policy, batched generator, HTTP server (closing twice is a no-op). */
    static final class Served implements AutoCloseable {
        final ReferencePolicy policy;
        final LocalGenerator local;
        final CompletionServer server;
        boolean closed;

        Served(ReferencePolicy policy, LocalGenerator local, CompletionServer server) {
            this.policy = policy;
            this.local = local;
            this.server = server;
        }

        LocalGenerator local() { return local; }
        CompletionServer server() { return server; }

        static Served start(Path init, int port) throws IOException {
            ReferencePolicy p = ReferencePolicy.load(init, "cpu", ScalarType.Float);
            LocalGenerator g = new LocalGenerator(p, TOK, LocalGenerator.Options.defaults());
            CompletionServer.Options o = CompletionServer.Options.basic("m", 256, 4, Duration.ofMinutes(1))
                    .withWeights(CompletionServer.weightLoader(p, TOK, "cpu"));
            return new Served(p, g, CompletionServer.start(g, TOK, o, "127.0.0.1", port));
        }

        @Override
        public void close() {
            if (closed) return;
            closed = true;
            server.close();
            local.close();
            policy.close();
        }
    }

    /** The trainer's log-prob of each generated token: the training forward over prompt + generation, log-softmax. */
    static double[] trainerLogprobs(ReferencePolicy p, int[] prompt, int[] generated) {
        int[] full = new int[prompt.length + generated.length];
        System.arraycopy(prompt, 0, full, 0, prompt.length);
        System.arraycopy(generated, 0, full, prompt.length, generated.length);
        double[] out = new double[generated.length];
        try (PointerScope scope = new PointerScope()) {
            Tensor logits = p.forward(new int[][] {full}).select(0, 0).to(ScalarType.Double);
            for (int i = 0; i < generated.length; i++) {
                Tensor row = torch.log_softmax(logits.select(0, prompt.length + i - 1).narrow(0, 0, TOK.vocabSize()), 0);
                out[i] = row.select(0, generated[i]).item_double();
            }
        }
        return out;
    }

    @Test
    void serversLoadEachVersionAndSampleWithTheTrainersLogprobs() throws Exception {
        long seed = Seeds.seed("WeightPublisherTest");
        Path init = dir.resolve("init");
        try (ReferencePolicy p0 = ReferencePolicy.create(config(seed))) {
            HfCheckpoint.save(p0, init, HfCheckpoint.SaveOptions.defaults().withStoreAs(ScalarType.Float));
        }
        Served a = Served.start(init, 0), b = Served.start(init, 0);
        int portB = b.server().port();
        String urlA = a.server().baseUrl(), urlB = b.server().baseUrl();
        try (ReferencePolicy trained = ReferencePolicy.create(config(seed + 1));
             OpenAiCompatibleGenerator fleet = OpenAiCompatibleGenerator.builder().baseUrls(List.of(urlA, urlB))
                     .vocabSize(TOK.vocabSize()).maxRetries(1).backoff(Duration.ofMillis(10), Duration.ofMillis(50)).build()) {
            WeightPublisher pub = new WeightPublisher(dir.resolve("weights"), fleet, Duration.ofSeconds(30), 2, null);

            WeightPublisher.Report r1 = pub.publish(trained, 1);
            assertEquals(List.of(urlA, urlB), r1.loaded(), "both servers loaded version 1: " + r1.failed());
            assertEquals("1", pub.currentVersion());
            assertTrue(Files.isRegularFile(r1.dir().resolve(HfCheckpoint.CONFIG)));
            // the proof: sampled tokens carry version 1 and the trainer's own log-probs of the published weights
            double worst = 0;
            for (int k = 0; k < 6; k++) {
                int[] prompt = TOK.encode("prompt " + k + ": ");
                Generation g = fleet.generate(new GenerationRequest(TokenContext.of(prompt), SamplingParams.temperature(1f),
                        GenerationLimits.defaults().withMaxNewTokens(10), seed + k)).get();
                assertEquals("1", g.weightVersion(), "the server reports the version it sampled with");
                double[] want = trainerLogprobs(trained, prompt, g.tokens());
                for (int i = 0; i < want.length; i++) {
                    assertEquals(want[i], g.logprobs()[i], 1e-5, "prompt " + k + " token " + i);
                    worst = Math.max(worst, Math.abs(want[i] - g.logprobs()[i]));
                }
            }
            System.out.printf("WeightPublisherTest: server vs trainer log-probs, worst |diff| %.3g%n", worst);

            // server B goes down: out of rotation, every request goes to A
            b.close();
            WeightPublisher.Report r2 = pub.publish(trained, 2);
            assertEquals(List.of(urlA), r2.loaded());
            assertTrue(r2.failed().get(urlB).contains("refused") || r2.failed().get(urlB).contains("Connect"), r2.failed().toString());
            assertFalse(fleet.inRotation(urlB));
            long before = a.local().stats().requests();
            for (int k = 0; k < 4; k++)
                assertEquals("2", fleet.generate(new GenerationRequest(TokenContext.of(TOK.encode("q" + k)), SamplingParams.temperature(1f),
                        GenerationLimits.defaults().withMaxNewTokens(4), k)).get().weightVersion());
            assertEquals(4, a.local().stats().requests() - before, "all four went to the server in rotation");

            // B restarts (on its old port, with the old weights) and rejoins at the next publication
            b = Served.start(init, portB);
            WeightPublisher.Report r3 = pub.publish(trained, 3);
            assertEquals(List.of(urlA, urlB), r3.loaded());
            assertTrue(fleet.inRotation(urlB));
            assertEquals("3", b.local().weightVersion());
            List<String> kept = new ArrayList<>();
            try (var s = Files.list(dir.resolve("weights"))) {
                s.forEach(x -> kept.add(x.getFileName().toString()));
            }
            kept.sort(null);
            assertEquals(List.of("step-000002", "step-000003"), kept, "keep = 2 versions");

            // nobody loads: an error naming both servers
            a.close();
            b.close();
            IOException e = assertThrows(IOException.class, () -> pub.publish(trained, 4));
            assertTrue(e.getMessage().contains(urlA) && e.getMessage().contains(urlB), e.getMessage());
            assertEquals("3", pub.currentVersion(), "the failed publication is not current");
        } finally {
            a.close();
            b.close();
        }
    }

    @Test
    void aServerOfAnotherModelOrNoServerAtAllIsAnErrorNamingIt() throws Exception {
        long seed = Seeds.seed("WeightPublisherTest.anotherModel");
        Path init = dir.resolve("other");
        PolicyConfig other = HfCheckpoint.Family.QWEN3.config(TOK.vocabSize(), 32, 3, 4, 2, 8, 64, 256, 1e6, 1e-6, false, false, seed);
        try (ReferencePolicy p = ReferencePolicy.create(other)) {
            HfCheckpoint.save(p, init, HfCheckpoint.SaveOptions.defaults().withStoreAs(ScalarType.Float));
        }
        int dead;
        try (java.net.ServerSocket s = new java.net.ServerSocket(0)) {
            dead = s.getLocalPort();   // nothing listens there once closed
        }
        try (Served srv = Served.start(init, 0); ReferencePolicy trained = ReferencePolicy.create(config(seed));
             OpenAiCompatibleGenerator fleet = OpenAiCompatibleGenerator.builder()
                     .baseUrls(List.of(srv.server().baseUrl(), "http://127.0.0.1:" + dead)).vocabSize(TOK.vocabSize()).build()) {
            WeightPublisher pub = new WeightPublisher(dir.resolve("w"), fleet, Duration.ofSeconds(30), 2, null);
            IOException e = assertThrows(IOException.class, () -> pub.publish(trained, 0));
            assertTrue(e.getMessage().contains("num_hidden_layers"), "the served model's differing field: " + e.getMessage());
            assertTrue(e.getMessage().contains("127.0.0.1:" + dead) && e.getMessage().contains("refused"), e.getMessage());
            assertFalse(fleet.inRotation(srv.server().baseUrl()));
            assertEquals("0", srv.local().weightVersion(), "the served weights are unchanged");
        }
    }
}
