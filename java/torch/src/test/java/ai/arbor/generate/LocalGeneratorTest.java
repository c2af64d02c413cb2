package ai.arbor.generate;

import ai.arbor.kernels.SamplingParams;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.kernels.TokenStats;
import ai.arbor.rollout.CharTokenizer;
import ai.arbor.rollout.FinishReason;
import ai.arbor.rollout.Generation;
import ai.arbor.rollout.GenerationException;
import ai.arbor.rollout.GenerationLimits;
import ai.arbor.rollout.GenerationRequest;
import ai.arbor.rollout.TokenContext;
import ai.arbor.torch.model.CpuThreads;
import ai.arbor.torch.model.PolicyConfig;
import ai.arbor.torch.model.ReferencePolicy;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.Tensor;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The local generator against full recomputation with the same policy. */
@SuppressWarnings("try")
class LocalGeneratorTest {
    static final CharTokenizer TOK = CharTokenizer.ascii();
    static ReferencePolicy policy;

    @BeforeAll
    static void setUp() {
        CpuThreads.set(1);
        policy = ReferencePolicy.create(PolicyConfig.tiny(TOK.vocabSize()));
    }

    @AfterAll
    static void tearDown() {
        policy.close();
    }

    /** Full-forward logits of the next token after {@code tokens}, as floats. */
    static float[] nextLogits(int[] tokens) {
        try (NoGradGuard g = new NoGradGuard()) {
            Tensor l = policy.forward(new int[][] {tokens}).select(0, 0).select(0, tokens.length - 1).contiguous();
            float[] out = new float[(int) l.size(0)];
            new FloatPointer(l.data_ptr()).capacity(out.length).get(out);
            return out;
        }
    }

    static Generation run(LocalGenerator g, GenerationRequest r) throws Exception {
        return g.generate(r).get();
    }

    static SamplingParams temp(double t) {
        return SamplingParams.temperature((float) t);
    }

    static GenerationLimits limits(int max) {
        return GenerationLimits.defaults().withMaxNewTokens(max);
    }

    @Test
    void greedyDecodingEqualsArgmaxOfFullRecomputationWithExactLogprobAndEntropy() throws Exception {
        int[] prompt = TOK.encode("Q: 12*34\n");
        try (LocalGenerator g = new LocalGenerator(policy, TOK, LocalGenerator.Options.defaults())) {
            Generation out = run(g, new GenerationRequest(TokenContext.of(prompt), temp(0), limits(12), 7));
            assertEquals(12, out.length());
            assertEquals(FinishReason.LENGTH, out.finishReason());
            int[] seq = prompt.clone();
            for (int i = 0; i < out.length(); i++) {
                float[] z = nextLogits(seq);
                float[] v = Arrays.copyOf(z, TOK.vocabSize());  // padding ids are never sampled
                int arg = 0;
                for (int j = 1; j < v.length; j++) if (v[j] > v[arg]) arg = j;
                if (out.tokens()[i] != arg) {
                    // a near-tie between the cached and the full forward may flip: must be within round-off
                    assertEquals(v[arg], v[out.tokens()[i]], 1e-4f, "greedy token " + i);
                }
                float[] lp = new float[1], h = new float[1];
                TokenStats.forward(v, 1, v.length, new int[] {out.tokens()[i]}, 1f, lp, h);
                assertEquals(lp[0], out.logprobs()[i], 1e-4f, "logprob " + i);
                assertEquals(h[0], out.entropies()[i], 1e-4f, "entropy " + i);
                seq = Arrays.copyOf(seq, seq.length + 1);
                seq[seq.length - 1] = out.tokens()[i];
            }
        }
    }

    @Test
    void sampledTokensDependOnlyOnTheRequestNotOnTheBatch() throws Exception {
        int[] prompt = TOK.encode("Compute 2+2:");
        GenerationRequest r = new GenerationRequest(TokenContext.of(prompt), temp(1.0), limits(20), 42);
        int[] alone;
        try (LocalGenerator g = new LocalGenerator(policy, TOK, LocalGenerator.Options.defaults())) {
            alone = run(g, r).tokens();
        }
        try (LocalGenerator g = new LocalGenerator(policy, TOK, LocalGenerator.Options.defaults())) {
            List<CompletableFuture<Generation>> fs = new ArrayList<>();
            for (int i = 0; i < 9; i++)
                fs.add(g.generate(new GenerationRequest(TokenContext.of(TOK.encode("other prompt " + i)), temp(1.0), limits(5 + i), i)));
            CompletableFuture<Generation> mine = g.generate(new GenerationRequest(TokenContext.of(prompt), temp(1.0), limits(20), 42));
            for (int i = 0; i < 4; i++)  // same context: shares the prefill
                fs.add(g.generate(new GenerationRequest(TokenContext.of(prompt), temp(1.0), limits(20), 100 + i)));
            assertArrayEquals(alone, mine.get().tokens());
            for (var f : fs) f.get();
        }
    }

    @Test
    void continuationReusesTheHeldCacheAndMatchesAFreshGenerator() throws Exception {
        TokenContext root = TokenContext.of(TOK.encode("Q: 7*8\n"));
        int[] second;
        LocalGenerator.Stats st;
        Generation first;
        try (LocalGenerator g = new LocalGenerator(policy, TOK, LocalGenerator.Options.defaults())) {
            first = run(g, new GenerationRequest(root, temp(1.0), limits(10), 1));
            // the next turn: generated tokens + an observation appended (as the agent loop does)
            TokenContext next = root.extend(first.tokens()).extend(TOK.encode("<result>56</result>"));
            second = run(g, new GenerationRequest(next, temp(1.0), limits(10), 2)).tokens();
            st = g.stats();
        }
        assertTrue(st.reusedTokens() >= root.length() + first.length() - 1,
                "the second turn reused the first turn's cache: " + st);
        try (LocalGenerator fresh = new LocalGenerator(policy, TOK, new LocalGenerator.Options(8, 0, 16, 64))) {
            TokenContext next = TokenContext.of(root.extend(first.tokens()).extend(TOK.encode("<result>56</result>")).toArray());
            assertArrayEquals(second, run(fresh, new GenerationRequest(next, temp(1.0), limits(10), 2)).tokens(),
                    "cached and recomputed prefixes give the same tokens");
        }
    }

    @Test
    void stopsAndLimits() throws Exception {
        try (LocalGenerator g = new LocalGenerator(policy, TOK, LocalGenerator.Options.defaults())) {
            // stop on whatever the greedy output's 3rd token is, as a stop id and as a string
            int[] prompt = TOK.encode("abc");
            Generation free = run(g, new GenerationRequest(TokenContext.of(prompt), temp(0), limits(6), 0));
            int third = free.tokens()[2];
            Generation byId = run(g, new GenerationRequest(TokenContext.of(prompt),
                    temp(0), limits(6).withStopTokenIds(List.of(third)), 0));
            int firstAt = 0;
            while (free.tokens()[firstAt] != third) firstAt++;
            assertEquals(firstAt + 1, byId.length());
            assertEquals(FinishReason.STOP_TOKEN, byId.finishReason());
            String text = TOK.decode(free.tokens());
            String stop = text.substring(1, 3);
            Generation byString = run(g, new GenerationRequest(TokenContext.of(prompt), temp(0), limits(6).withStopStrings(List.of(stop)), 0));
            assertEquals(FinishReason.STOP_STRING, byString.finishReason());
            assertEquals(stop, byString.stopString());
            assertTrue(TOK.decode(byString.tokens()).endsWith(stop));
            // a context that leaves no room under maxSeq is refused with a clear error
            int[] tooLong = new int[policy.config().maxSeq()];
            Arrays.fill(tooLong, 10);
            ExecutionException e = assertThrows(ExecutionException.class,
                    () -> g.generate(new GenerationRequest(TokenContext.of(tooLong), temp(1), limits(4), 0)).get());
            assertInstanceOf(GenerationException.class, e.getCause());
            assertTrue(e.getCause().getMessage().contains("maxSeq"), e.getCause().getMessage());
            // generation never runs past maxSeq
            int[] nearEnd = Arrays.copyOf(tooLong, policy.config().maxSeq() - 3);
            assertEquals(3, run(g, new GenerationRequest(TokenContext.of(nearEnd), temp(1), limits(50), 0)).length());
            g.invalidate();
            assertTrue(g.heldContexts().isEmpty());
        }
    }

    @Test
    void topKEntropyIsTheReleasesEstimateWhenAsked() throws Exception {
        GenerationRequest r = new GenerationRequest(TokenContext.of(TOK.encode("Q: 3+4\n")), temp(1.0), limits(12).withTopLogprobs(5), 7);
        LocalGenerator.Detailed exact, topK;
        try (LocalGenerator g = new LocalGenerator(policy, TOK, LocalGenerator.Options.defaults())) {
            exact = g.generateDetailed(r).get();
        }
        try (LocalGenerator g = new LocalGenerator(policy, TOK, LocalGenerator.Options.defaults().withTopKEntropy(true))) {
            topK = g.generateDetailed(r).get();
        }
        assertArrayEquals(exact.generation().tokens(), topK.generation().tokens(), "the option changes what is reported, not what is sampled");
        boolean differs = false;
        for (int i = 0; i < topK.generation().length(); i++) {
            // independent reference: −Σ p log p over the 5 alternatives, plus the sampled token if it is not one of them
            double h = 0;
            boolean seen = false;
            for (int j = 0; j < 5; j++) {
                double lp = topK.topLogprobs()[i][j];
                h -= Math.exp(lp) * lp;
                seen |= topK.topIds()[i][j] == topK.generation().tokens()[i];
            }
            if (!seen) h -= Math.exp(topK.generation().logprobs()[i]) * topK.generation().logprobs()[i];
            assertEquals(h, topK.generation().entropies()[i], 1e-5, "position " + i);
            assertTrue(topK.generation().entropies()[i] <= exact.generation().entropies()[i] + 1e-4, "a truncated sum is at most the entropy");
            differs |= Math.abs(h - exact.generation().entropies()[i]) > 1e-4;
        }
        assertTrue(differs, "the estimate is not the exact entropy");
    }
}
