package ai.arbor.kernels;

import ai.arbor.testing.Gpu;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ai.arbor.bindings.ArborCpu;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The sampling kernel against the exact sampling distribution (the double reference
 * {@code arbor_ref_sample_probs}, a full sort), hand-written truncation properties, an independent
 * Gumbel-max re-computation from the documented noise, and {@link TokenStats}.
 *
 * <p>Distribution test (chi-square): for each of a fixed list of small-vocabulary cases, N = 100,000 draws
 * from one row (row r uses key r, a seed from a fixed list and step r mod 7 — a fixed seed set, so the test
 * is deterministic) are binned by token; tokens with q = 0 must never occur, and Pearson's statistic over
 * the rest must not exceed the χ² critical value at significance α = 0.001 (df = support − 1). A correct
 * sampler fails a given case for a fraction α of seed sets; the fixed set passes. The test fails for a
 * wrong distribution: a relative error δ in a token of probability q shifts the statistic by about
 * N·q·δ², so e.g. δ = 5% on q = 0.1 (statistic +25 against a critical value ≈ 20–30) is caught, and
 * bugs that break the Gumbel-max argument (noise reused across columns, wrong truncation, wrong
 * temperature) fail by orders of magnitude. Untruncated rows larger than one chunk of columns (2048) are
 * checked the same way on a 5000-column row ({@code multiChunkFrequenciesMatchTheExactDistribution}), binned
 * by runs of 100 columns, so a wrong chunk mass fails.
 */
class SamplerTest {

    @AfterEach
    void restore() {
        ArborCpu.arbor_cpu_sample_nucleus_widen(1.0);
        Kernels.forceCpuIsa(null);
        Kernels.setThreads(Runtime.getRuntime().availableProcessors());
    }

    // ---------------------------------------------------------------------------------------------
    // The generator
    // ---------------------------------------------------------------------------------------------

    @Test
    void philoxMatchesRandom123KnownAnswers() {
        // Random123 tests/kat_vectors: philox4x32 10 <ctr> <key> <expected>
        int[][][] kat = {
            {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
            {{-1, -1, -1, -1}, {-1, -1}, {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
            {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
                {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
        };
        for (int[][] v : kat) {
            int[] out = new int[4];
            ArborCpu.arbor_philox4x32_10(v[0], v[1], out);
            assertArrayEquals(v[2], out, "Philox4x32-10 of ctr " + Arrays.toString(v[0]));
        }
    }

    @Test
    void noiseIsBitwiseTheSameOnEveryCpuPathAndIsGumbel() {
        long[][] streams = {{0, 0, 0}, {7, 99, 3}, {-1, Long.MIN_VALUE, Sampler.MAX_STEP}, {123456789, 42, 1 << 20}};
        int n = 1000;
        for (long[] s : streams) {
            float[][] paths = new float[Kernels.cpuIsas().size()][n];
            for (int k = 0; k < paths.length; k++) {
                Kernels.forceCpuIsa(Kernels.cpuIsas().get(k));
                ArborCpu.arbor_cpu_sample_noise(s[0], s[1], s[2], n, paths[k]);
            }
            Kernels.forceCpuIsa(null);
            for (int j = 0; j < n; j++) {
                float g = Sampler.gumbel(s[0], s[1], s[2], j);
                for (int k = 0; k < paths.length; k++)
                    assertEquals(Float.floatToRawIntBits(g), Float.floatToRawIntBits(paths[k][j]),
                            Kernels.cpuIsas().get(k) + " path, column " + j);
                double u = Sampler.uniform(s[0], s[1], s[2], j);
                assertTrue(u > 0 && u < 1, "u in (0, 1): " + u);
                assertEquals(-Math.log(-Math.log(u)), g, 2e-6 * (1 + Math.abs(g)), "G = -log(-log u), column " + j);
            }
        }
        // the uniforms are uniform: mean 1/2, variance 1/12 over 200,000 columns of one stream
        double sum = 0, sq = 0;
        int m = 200_000;
        for (int j = 0; j < m; j++) {
            double u = Sampler.uniform(5, 6, 7, j);
            sum += u;
            sq += u * u;
        }
        double mean = sum / m, var = sq / m - mean * mean;
        assertEquals(0.5, mean, 5 * Math.sqrt(1.0 / 12 / m));
        assertEquals(1.0 / 12, var, 5e-4);
    }

    /**
     * Over all 2^23 possible uniforms, the fp32 noise is within 1e-5 of -log(-log u) (double). The kernels
     * skip columns that cannot win using ARBOR_SM_GUMBEL_EPS = 1e-4, ten times this bound — if the noise
     * ever got less accurate, the skipping could change a token, and this test fails first.
     */
    @Test
    void noiseErrorIsBoundedOverEveryUniform() {
        double err = ArborCpu.arbor_sample_gumbel_max_error();
        System.out.println("  max |G' - G| over all uniforms = " + err);
        assertTrue(err <= 1e-5, "noise error " + err + " exceeds 1e-5");
        assertTrue(err > 0, "an fp32 computation cannot be exact everywhere");
    }

    @Test
    void ownExpIsBitwiseTheSameOnEveryCpuPathAndAccurate() {
        Random rnd = new Random(11);
        int n = 4099;
        float[] d = new float[n];
        for (int i = 0; i < n; i++) d[i] = i < 8 ? new float[] {0f, -0f, -1e-30f, -87.3f, -87.34f, -88f, -200f,
                Float.NEGATIVE_INFINITY}[i] : (float) (-rnd.nextDouble() * 100);
        float[] a = new float[n], b = new float[n];
        for (String isa : Kernels.cpuIsas()) {
            Kernels.forceCpuIsa(isa);
            ArborCpu.arbor_cpu_sample_exp(d, n, a);
            Kernels.forceCpuIsa("scalar");
            ArborCpu.arbor_cpu_sample_exp(d, n, b);
            Kernels.forceCpuIsa(null);
            for (int i = 0; i < n; i++) {
                assertEquals(Float.floatToRawIntBits(b[i]), Float.floatToRawIntBits(a[i]), isa + " exp(" + d[i] + ")");
                double e = Math.exp(d[i]);
                if (d[i] < -87.3365447505531) assertEquals(0f, a[i], "underflow is exactly 0 at " + d[i]);
                else assertEquals(e, a[i], 2.5e-7 * e, "exp(" + d[i] + ")");
            }
        }
        assertEquals(1f, a[0]);
    }

    // ---------------------------------------------------------------------------------------------
    // Distribution
    // ---------------------------------------------------------------------------------------------

    /** A small-vocabulary case of the chi-square test. */
    record Dist(String name, float[] row, SamplingParams params) {}

    static List<Dist> distCases() {
        float[] a = {0f, 1f, 2f, 0.5f, -1f, 1.5f, -0.3f, 2.2f, 0.1f, -2f};
        float[] b = {3f, 2.9f, 1f, 1f, 0f, -1f, Float.NEGATIVE_INFINITY, 2.5f, -3f, 0.7f, 0.7f, 1.8f, -0.5f};
        List<Dist> c = new ArrayList<>();
        c.add(new Dist("T=1", a, SamplingParams.temperature(1f)));
        c.add(new Dist("T=0.6", a, SamplingParams.temperature(0.6f)));
        c.add(new Dist("T=1.7 with -inf", b, SamplingParams.temperature(1.7f)));
        c.add(new Dist("top-k 4", a, SamplingParams.temperature(1f).withTopK(4)));
        c.add(new Dist("top-k 5, tie at the 5th value (6 kept)", b, SamplingParams.temperature(1.3f).withTopK(5)));
        c.add(new Dist("top-p 0.75", a, SamplingParams.temperature(1f).withTopP(0.75f)));
        c.add(new Dist("min-p 0.2", b, SamplingParams.temperature(0.9f).withMinP(0.2f)));
        c.add(new Dist("top-k 6 + top-p 0.8 + min-p 0.05", a,
                SamplingParams.temperature(1.2f).withTopK(6).withTopP(0.8f).withMinP(0.05f)));
        return c;
    }

    @Test
    void empiricalFrequenciesMatchTheExactDistribution() {
        final int draws = 100_000;
        final double alpha = 1e-3;
        int caseNo = 0;
        for (Dist dc : distCases()) {
            int v = dc.row().length;
            double[] q = refProbs(dc.row(), 1, v, v, dc.params())[0];
            assertTopPBoundaryIsClear(dc.row(), dc.params());
            float[] x = new float[draws * v];
            long[] keys = new long[draws], steps = new long[draws];
            for (int r = 0; r < draws; r++) {
                System.arraycopy(dc.row(), 0, x, r * v, v);
                keys[r] = r;
                steps[r] = r % 7;
            }
            long seed = 20_251_129L + caseNo++;
            SampleResult res = Sampler.sample(x, draws, v, v, dc.params(), seed, keys, steps, null);
            long[] count = new long[v];
            for (int t : res.tokens()) count[t]++;
            double stat = 0;
            int support = 0;
            for (int j = 0; j < v; j++) {
                if (q[j] == 0) {
                    assertEquals(0, count[j], dc.name() + ": token " + j + " has q = 0 but was drawn");
                    continue;
                }
                support++;
                double e = draws * q[j];
                stat += (count[j] - e) * (count[j] - e) / e;
            }
            double p = chiSquareSurvival(stat, support - 1);
            System.out.printf("  chi-square %-45s df=%d stat=%.2f p=%.3f%n", dc.name(), support - 1, stat, p);
            assertTrue(p > alpha, dc.name() + ": chi-square " + stat + " with " + (support - 1) + " df, p = " + p
                    + " < " + alpha + "; counts " + Arrays.toString(count) + " expected q " + Arrays.toString(q));
        }
    }

    /**
     * Untruncated draws from a row of 5000 columns (three chunks: one holds a single finite column, one
     * starts with a run of −inf), 200,000 draws binned by runs of 100 columns, against the exact
     * probabilities (chi-square at α = 0.001, fixed seed). A wrong chunk mass moves whole bins.
     */
    @ParameterizedTest(name = "{0}")
    @CsvSource({"F32", "BF16"})
    void multiChunkFrequenciesMatchTheExactDistribution(DType dtype) {
        final int draws = 200_000, batch = 2_000, v = 5000, width = 100;
        final long seed = 20_251_202L + dtype.ordinal();
        System.out.println("multiChunkFrequenciesMatchTheExactDistribution " + dtype + " seed=" + seed);
        Random rnd = new Random(seed);
        float[] row = new float[v];
        for (int j = 0; j < v; j++) row[j] = asSeen((float) (rnd.nextGaussian() * 1.5), dtype);
        for (int j = 2048; j < 4096; j++) row[j] = Float.NEGATIVE_INFINITY;
        row[3000] = asSeen(3.5f, dtype);  // the second chunk's only mass
        for (int j = 4096; j < 4400; j++) row[j] = Float.NEGATIVE_INFINITY;
        SamplingParams params = SamplingParams.temperature(0.9f);
        double[] q = refProbs(row, 1, v, v, params)[0];
        int bins = v / width;
        double[] expected = new double[bins];
        for (int j = 0; j < v; j++) expected[j / width] += q[j];
        long[] count = new long[bins];
        float[] x = new float[batch * v];
        for (int r = 0; r < batch; r++) System.arraycopy(row, 0, x, r * v, v);
        LogitsView view = new LogitsView(MemRef.of(Logits.direct(x, dtype)), dtype, batch, v, v, v);
        ByteBuffer keys = Logits.direct(new long[batch]), steps = Logits.direct(new long[batch]),
                tok = Logits.direct(new int[batch]);
        keys.order(java.nio.ByteOrder.nativeOrder());
        steps.order(java.nio.ByteOrder.nativeOrder());
        tok.order(java.nio.ByteOrder.nativeOrder());
        for (int b0 = 0; b0 < draws; b0 += batch) {
            for (int r = 0; r < batch; r++) {
                keys.putLong(8 * r, b0 + r);
                steps.putLong(8 * r, (b0 + r) % 7);
            }
            Sampler.sample(Sampler.Batch.of(view, params, seed, 0).withKeys(MemRef.of(keys)).withSteps(MemRef.of(steps)),
                    new Sampler.Outputs(MemRef.of(tok), DType.I32, null, null, null), 0);
            for (int r = 0; r < batch; r++) {
                int y = tok.getInt(4 * r);
                assertTrue(y >= 0 && y < v && q[y] > 0, "token " + y + " has q = 0 but was drawn");
                count[y / width]++;
            }
        }
        double stat = 0;
        int support = 0;
        for (int b = 0; b < bins; b++) {
            if (expected[b] == 0) continue;
            support++;
            double e = draws * expected[b];
            stat += (count[b] - e) * (count[b] - e) / e;
        }
        double p = chiSquareSurvival(stat, support - 1);
        System.out.printf("  chi-square multi-chunk %s df=%d stat=%.2f p=%.3f (bin 30 = column 3000: %d, expected %.1f)%n",
                dtype, support - 1, stat, p, count[30], draws * expected[30]);
        assertTrue(p > 1e-3, "chi-square " + stat + " with " + (support - 1) + " df, p = " + p + "; counts "
                + Arrays.toString(count));
    }

    /**
     * Every draw lies in the truncated set, checked against definitions written out here (not the
     * reference): top-k — fewer than k tokens have a strictly larger logit; top-p — the renormalized mass
     * strictly above the token (among what top-k and min-p kept) is below p; min-p — p_y ≥ min_p·p_max.
     * logprobSampled = log q(y) from the exact distribution.
     */
    @ParameterizedTest(name = "{0}")
    @CsvSource({"F32", "BF16", "F16"})
    void drawsStayInsideTheTruncatedSet(DType dtype) {
        long seed = Logits.seed();
        System.out.println("drawsStayInsideTheTruncatedSet " + dtype + " seed=" + seed);
        Random rnd = new Random(seed);
        int[] vocabs = {2, 7, 64, 1000, 3001};
        for (int vocab : vocabs) {
            for (int c = 0; c < 6; c++) {
                int rows = vocab > 1000 ? 40 : 150;
                float t = new float[] {0.4f, 1f, 1.6f}[c % 3];
                int k = new int[] {0, 1, 3, 20, 0, 5}[c];
                float p = new float[] {1f, 1f, 0.9f, 0.6f, 0.3f, 0.95f}[c];
                float mp = c == 4 ? 0.1f : 0f;
                float[] row = new float[vocab];
                for (int j = 0; j < vocab; j++) row[j] = asSeen((float) (rnd.nextGaussian() * 2.5), dtype);
                SamplingParams params = new SamplingParams(t, k, p, mp);
                if (!topPBoundaryIsClear(row, params)) continue;  // a near-tie at the nucleus edge (rare): skip
                float[] x = new float[rows * vocab];
                long[] keys = new long[rows], steps = new long[rows];
                for (int r = 0; r < rows; r++) {
                    System.arraycopy(row, 0, x, r * vocab, vocab);
                    keys[r] = rnd.nextLong();
                    steps[r] = rnd.nextInt(1000);
                }
                float[][] out = sampleMem(x, rows, vocab, vocab, vocab, dtype, params, rnd.nextLong(), keys, steps, null);
                double[] q = refProbs(row, 1, vocab, vocab, params)[0];
                double[] z = new double[vocab];
                double zmax = Double.NEGATIVE_INFINITY;
                for (int j = 0; j < vocab; j++) zmax = Math.max(zmax, z[j] = row[j] / (double) t);
                for (int r = 0; r < rows; r++) {
                    int y = (int) out[0][r];
                    String where = dtype + " V=" + vocab + " " + params + " row " + r + " token " + y;
                    assertTrue(y >= 0 && y < vocab, where);
                    assertTrue(q[y] > 0, where + ": outside the exact support");
                    int larger = 0;
                    for (int j = 0; j < vocab; j++) if (z[j] > z[y]) larger++;
                    if (k > 0) assertTrue(larger < k, where + ": " + larger + " tokens are larger than the top-k pick");
                    if (mp > 0) assertTrue(z[y] - zmax >= Math.log(mp) - 1e-6, where + ": below min-p");
                    if (p < 1) {
                        double above = 0, all = 0;
                        double kth = k > 0 ? kthLargest(z, k) : Double.NEGATIVE_INFINITY;
                        for (int j = 0; j < vocab; j++) {
                            if (z[j] < kth || (mp > 0 && z[j] - zmax < Math.log(mp))) continue;
                            double e = Math.exp(z[j] - zmax);
                            all += e;
                            if (z[j] > z[y]) above += e;
                        }
                        assertTrue(above / all < p, where + ": mass above the pick " + above / all + " >= top-p " + p);
                    }
                    assertEquals(Math.log(q[y]), out[1][r], 2e-5 * (1 + Math.log(vocab)) + 1e-6 * Math.abs(z[y]),
                            where + ": logprobSampled");
                }
            }
        }
    }

    /**
     * A truncated row's token is argmax over the exact support of z_j + G_j, with G_j from the documented
     * stream (Sampler.gumbel = Philox of (seed, key, step, column)) — recomputed here in double. Rows whose
     * best two keys are within 1e-4 are skipped (fp32 key rounding may order them either way). Covers
     * both of the kernel's race paths: short kept lists and whole rows. (Untruncated rows draw by the
     * chunked inverse CDF: {@link #untruncatedTokenIsTheChunkedInverseCdfOfTheDocumentedUniforms}.)
     */
    @Test
    void tokenIsTheGumbelMaxOfTheDocumentedNoise() {
        long seed = Logits.seed();
        System.out.println("tokenIsTheGumbelMaxOfTheDocumentedNoise seed=" + seed);
        Random rnd = new Random(seed);
        // one per truncated path of the CPU kernel: top-k cutting (with and without top-p / min-p);
        // top-p alone (short and long nucleus); top-k too large to cut, with top-p; min-p alone
        // keeping few and many columns
        SamplingParams t1 = SamplingParams.temperature(1f);
        SamplingParams[] ps = {SamplingParams.temperature(0.7f).withTopK(10), t1.withTopK(50).withTopP(0.9f),
            t1.withTopK(30).withMinP(0.05f), SamplingParams.temperature(1.3f).withTopP(0.99f), t1.withTopP(0.5f),
            t1.withTopK(5000).withTopP(0.8f), t1.withMinP(0.5f), t1.withMinP(0.001f)};
        int[] tally = new int[3];  // checked, near-ties, rows at a truncation boundary
        for (SamplingParams params : ps) {
            int rows = 30, vocab = 2053, limit = 2049;
            checkGumbelMaxOfTheExactSet(Logits.random(rnd, rows, vocab, vocab, limit, true), rows, vocab, limit, params, rnd, "",
                    tally);
        }
        System.out.println("  checked " + tally[0] + " rows, skipped " + tally[1] + " near-ties and " + tally[2]
                + " rows at a truncation boundary");
        assertTrue(tally[0] > 200);
    }

    /**
     * Top-k over rows of many chunks, where the kernel collects its candidates during the statistics pass and
     * raises their threshold several times (k up to 700 of 20000 columns; coarse logits with many ties at the
     * k-th value): the token is still argmax of z_j + G_j over the exact kept set (double reference), on
     * every CPU path.
     */
    @Test
    void topKOverManyChunksIsTheGumbelMaxOfTheExactSet() {
        long seed = Logits.seed();
        System.out.println("topKOverManyChunksIsTheGumbelMaxOfTheExactSet seed=" + seed);
        Random rnd = new Random(seed);
        SamplingParams t1 = SamplingParams.temperature(1f);
        SamplingParams[] ps = {t1.withTopK(50), t1.withTopK(50).withTopP(0.9f), SamplingParams.temperature(0.8f).withTopK(700).withTopP(0.95f),
            t1.withTopK(3).withMinP(0.2f)};
        int[] tally = new int[3];
        int rows = 8, vocab = 20000;
        for (String isa : Kernels.cpuIsas()) {
            Kernels.forceCpuIsa(isa);
            for (SamplingParams params : ps) {
                float[] x = Logits.random(rnd, rows, vocab, vocab, vocab, false);
                for (int j = 0; j < x.length / 2; j++) x[j] = Math.round(x[j] * 4) / 4f;  // ties (first half of the rows)
                checkGumbelMaxOfTheExactSet(x, rows, vocab, vocab, params, rnd, isa, tally);
            }
        }
        Kernels.forceCpuIsa(null);
        System.out.println("  checked " + tally[0] + " rows, skipped " + (tally[1] + tally[2]));
        assertTrue(tally[0] > 60, "only " + tally[0] + " rows checked");
    }

    /**
     * The candidates' edge cases: the statistics pass marks the groups of 4 vectors whose raw values reach a bound
     * of the threshold (x &lt; bound ⇒ fl(x·(1/T)) &lt; threshold) and appends their candidates after each chunk.
     * Rows whose first chunk has fewer finite columns than k (the threshold stays unset), whole chunks of −inf,
     * the largest values in the last chunk (the threshold rises late), the largest in the first chunk but fewer than k
     * of them (the speculative first threshold fails and the row is collected again), lengths that end in a partial group and a
     * partial vector, and temperatures whose products tie on a quarter grid: the token is still the Gumbel max
     * over the exact kept set and log q(y) exact, on every CPU path.
     */
    @Test
    void topKCandidatesSurviveMaskedChunksTailsAndTemperedTies() {
        long seed = Logits.seed();
        System.out.println("topKCandidatesSurviveMaskedChunksTailsAndTemperedTies seed=" + seed);
        Random rnd = new Random(seed);
        int[] vocabs = {2048 * 2 + 37, 4096 + 5, 2048 * 3 + 1000, 700};
        SamplingParams[] ps = {SamplingParams.temperature(1f).withTopK(40), SamplingParams.temperature(0.8f).withTopK(40),
            SamplingParams.temperature(1.6f).withTopK(7).withTopP(0.9f), SamplingParams.temperature(0.37f).withTopK(100)};
        int[] tally = new int[3];
        int rows = 15;
        for (String isa : Kernels.cpuIsas()) {
            Kernels.forceCpuIsa(isa);
            for (int vocab : vocabs)
                for (SamplingParams params : ps) {
                    float[] x = new float[rows * vocab];
                    for (int r = 0; r < rows; r++) {
                        int kind = r % 5;
                        for (int j = 0; j < vocab; j++) {
                            float v = Math.round(rnd.nextGaussian() * 8) / 4f;  // a quarter grid: ties before and after 1/T
                            if (kind == 0 && j < 2048 && j % 64 != 0) v = Float.NEGATIVE_INFINITY;  // 32 finite in chunk 0
                            if (kind == 1 && j >= 2048 && j < 4096) v = Float.NEGATIVE_INFINITY;  // a whole chunk of -inf
                            if (kind == 2 && j >= vocab - 300) v += 6f;  // the top of the row in its last columns
                            // 30 columns far above the rest, in chunk 0 and in 30 distinct groups of it: the speculative
                            // first threshold (about 2.5 k · 2048 / vocab group maxima above it) lies among them where
                            // more chunks follow, and fewer than k = 40 or 100 columns of the row reach it: collected again
                            if (kind == 3 && j < 30 * 64 && j % 64 == 0) v += 20f;
                            x[r * vocab + j] = v;
                        }
                    }
                    checkGumbelMaxOfTheExactSet(x, rows, vocab, vocab, params, rnd, isa, tally);
                }
        }
        Kernels.forceCpuIsa(null);
        System.out.println("  checked " + tally[0] + " rows, skipped " + (tally[1] + tally[2]));
        assertTrue(tally[0] > 200, "only " + tally[0] + " rows checked");
    }

    /**
     * Top-p and min-p without a cutting top-k over rows of many chunks, where the statistics pass holds the candidates
     * (and, for top-p alone, bounds the rest's mass; docs/sampling.md, "4. top-p alone"): the threshold is decided from
     * them (path 0), with an exact pass for the total where the bound straddles a step of the held mass (path 1), or by
     * the binned pre-pass where the held columns do not decide it (path 2). Every path gives the same tokens and
     * log q(y) to the bit: each batch is drawn as it comes, with the bound widened 10^4 times (more rows take path 1)
     * and infinitely (every row takes path 2, the binned path alone), on every CPU path, fp32 and bf16; and the tokens
     * are the Gumbel max over the exact kept set (double reference) where the boundary is clear. Min-p: alone, keeping
     * a few columns and (at 0.001, T 1.2) a large part of the row (the race over the row, log q(y) from the integer
     * total), and with top-p. Rows: N(0, 3^2) and N(0, 9^2); a quarter grid (ties at the
     * threshold); the top in the last columns (the frame's max moves late); a chunk of -inf and every 7th column -inf;
     * eight columns far above a flat rest in the first chunk (the first chunk's threshold leaves too much of the rest's
     * mass out: path 2 on its own).
     */
    @Test
    void topPAndMinPTakeTheSameThresholdOnEveryPath() {
        long seed = Logits.seed();
        System.out.println("topPAndMinPTakeTheSameThresholdOnEveryPath seed=" + seed);
        Random rnd = new Random(seed);
        int rows = 12, vocab = 2048 * 6 + 333;
        SamplingParams t1 = SamplingParams.temperature(1f);
        SamplingParams[] ps = {t1.withTopP(0.9f), SamplingParams.temperature(0.7f).withTopP(0.95f), t1.withTopP(0.5f),
            SamplingParams.temperature(1.3f).withTopP(0.99f), t1.withMinP(0.05f),
            SamplingParams.temperature(0.8f).withTopP(0.9f).withMinP(0.01f), SamplingParams.temperature(1.2f).withMinP(0.001f)};
        long[] natural = new long[3], widened = new long[3], counts = new long[3];
        int[] tally = new int[3];
        for (DType dtype : new DType[] {DType.F32, DType.BF16}) {
            float[] x = new float[rows * vocab];
            for (int r = 0; r < rows; r++) {
                int kind = r % 6;
                for (int j = 0; j < vocab; j++) {
                    double g = rnd.nextGaussian();
                    float v = (float) (kind == 5 ? 9 * g : kind == 4 ? 0.2 * g : 3 * g);
                    if (kind == 1) v = Math.round(g * 4) / 4f;
                    if (kind == 2 && j >= vocab - 300) v += 6f;
                    if (kind == 3 && ((j >= 2048 && j < 4096) || j % 7 == 0)) v = Float.NEGATIVE_INFINITY;
                    if (kind == 4 && j < 2048 && j % 256 == 0) v += 14f;
                    x[r * vocab + j] = asSeen(v, dtype);
                }
            }
            for (String isa : Kernels.cpuIsas()) {
                Kernels.forceCpuIsa(isa);
                for (SamplingParams params : ps) {
                    long s = rnd.nextLong();
                    long[] keys = rnd.longs(rows).toArray(), steps = new long[rows];
                    for (int r = 0; r < rows; r++) steps[r] = rnd.nextInt(1 << 20);
                    float[][][] out = new float[3][][];
                    double[] widen = {1, 1e4, Double.POSITIVE_INFINITY};
                    for (int w = 0; w < 3; w++) {
                        ArborCpu.arbor_cpu_sample_nucleus_widen(widen[w]);
                        ArborCpu.arbor_cpu_sample_nucleus_paths(counts, 1);
                        out[w] = sampleMem(x, rows, vocab, vocab, vocab, dtype, params, s, keys, steps, null);
                        ArborCpu.arbor_cpu_sample_nucleus_paths(counts, 1);
                        assertEquals(rows, counts[0] + counts[1] + counts[2], "every row drawn by the nucleus path");
                        if (w == 0) for (int i = 0; i < 3; i++) natural[i] += counts[i];
                        if (w == 1) for (int i = 0; i < 3; i++) widened[i] += counts[i];
                        if (w == 2) assertEquals(rows, counts[2], "an infinite bound leaves every row to the binned path");
                    }
                    ArborCpu.arbor_cpu_sample_nucleus_widen(1.0);
                    for (int w = 1; w < 3; w++)
                        for (int r = 0; r < rows; r++) {
                            String where = isa + " " + dtype + " " + params + " row " + r + " widened " + (w == 1 ? "1e4" : "to inf");
                            assertEquals(out[w][0][r], out[0][0][r], where + ": token");
                            assertEquals(Float.floatToRawIntBits(out[w][1][r]), Float.floatToRawIntBits(out[0][1][r]),
                                    where + ": logprobSampled");
                        }
                    if (dtype == DType.F32) checkGumbelMaxOfTheExactSet(x, rows, vocab, vocab, params, rnd, isa, tally);
                }
            }
            Kernels.forceCpuIsa(null);
        }
        System.out.printf("  paths as drawn %s, widened 10^4 %s; checked %d rows against the reference, skipped %d%n",
                Arrays.toString(natural), Arrays.toString(widened), tally[0], tally[1] + tally[2]);
        assertTrue(natural[0] > 0 && natural[2] > 0, "rows decided by the held candidates, and by the binned path: " + Arrays.toString(natural));
        assertTrue(widened[1] > 0, "rows decided with the exact total: " + Arrays.toString(widened));
        assertTrue(tally[0] > 40, "only " + tally[0] + " rows checked against the reference");
    }

    /**
     * Samples x (columns [0, limit) of rows of vocab) with fresh keys, steps and seed and checks each row whose
     * top-p boundary is clear and whose best two Gumbel keys are apart: the token is argmax of z_j + G_j over the
     * exact kept set (double reference) and logprobSampled = log q(y). tally: rows checked, near-ties, rows at a
     * truncation boundary.
     */
    static void checkGumbelMaxOfTheExactSet(float[] x, int rows, int vocab, int limit, SamplingParams params, Random rnd,
                                            String where, int[] tally) {
        long[] keys = rnd.longs(rows).toArray(), steps = new long[rows];
        for (int r = 0; r < rows; r++) steps[r] = rnd.nextInt() & 0xffffffffL;
        long s = rnd.nextLong();
        SampleResult res = Sampler.sample(x, rows, vocab, limit, params, s, keys, steps, null);
        double[][] q = refProbs(x, rows, vocab, limit, params);
        float invT = 1f / params.temperature();
        for (int r = 0; r < rows; r++) {
            if (!topPBoundaryIsClear(Arrays.copyOfRange(x, r * vocab, r * vocab + limit), params)) {
                tally[2]++;
                continue;
            }
            double best = Double.NEGATIVE_INFINITY, second = Double.NEGATIVE_INFINITY;
            int arg = -1;
            for (int j = 0; j < limit; j++) {
                if (q[r][j] == 0) continue;
                double key = (double) (x[r * vocab + j] * invT) + Sampler.gumbel(s, keys[r], steps[r], j);
                if (key > best) {
                    second = best;
                    best = key;
                    arg = j;
                } else if (key > second) second = key;
            }
            if (best - second < 1e-4 * (1 + Math.abs(best))) {
                tally[1]++;
                continue;
            }
            String row = (where.isEmpty() ? "" : where + " ") + params + " V=" + vocab + " row " + r;
            assertEquals(arg, res.tokens()[r], row);
            double zy = x[r * vocab + arg] * invT;
            assertEquals(Math.log(q[r][arg]), res.logprobSampled()[r], 2e-5 * (1 + Math.log(limit)) + 1e-6 * Math.abs(zy),
                    row + ": logprobSampled");
            tally[0]++;
        }
    }

    /**
     * An untruncated row's token (T &gt; 0, no min-p / top-k / top-p) is the documented two-level inverse CDF,
     * recomputed here in double from z_j = fl(x_j·fl(1/T)) and the row's two uniforms
     * ({@link Sampler#drawUniform}): the chunk c of 2048 columns at which u1·Σ_j e^{z_j − M} falls in the
     * cumulative chunk masses, then the column of c at which u2·Σ_{j∈c} e^{z_j − m_c} falls in the cumulative
     * masses. Rows whose targets lie within 2e-6 (relative) of a cumulative boundary are skipped (the kernel's
     * fp32 exps and sums may place them on either side). Every CPU path.
     */
    @Test
    void untruncatedTokenIsTheChunkedInverseCdfOfTheDocumentedUniforms() {
        long seed = Logits.seed();
        System.out.println("untruncatedTokenIsTheChunkedInverseCdfOfTheDocumentedUniforms seed=" + seed);
        Random rnd = new Random(seed);
        int checked = 0, boundary = 0;
        for (String isa : Kernels.cpuIsas()) {
            Kernels.forceCpuIsa(isa);
            // (a top-k at least the vocabulary cuts nothing: untruncated too)
            for (SamplingParams params : new SamplingParams[] {SamplingParams.temperature(1f), SamplingParams.temperature(0.6f),
                SamplingParams.temperature(2.5f).withTopK(1 << 20)}) {
                float t = params.temperature();
                int rows = 40, vocab = 9001, limit = 8999;  // five chunks, the last one short
                float[] x = Logits.random(rnd, rows, vocab, vocab, limit, true);
                for (int j = 2048; j < 4096; j++) x[3 * vocab + j] = Float.NEGATIVE_INFINITY;  // a chunk with no mass
                x[3 * vocab + 4500] = 1f;  // (the row may have been a point mass inside that chunk)
                long[] keys = rnd.longs(rows).toArray(), steps = new long[rows];
                for (int r = 0; r < rows; r++) steps[r] = rnd.nextInt() & 0xffffffffL;
                long s = rnd.nextLong();
                SampleResult res = Sampler.sample(x, rows, vocab, limit, params, s, keys, steps, null);
                for (int r = 0; r < rows; r++) {
                    int ref = chunkedDrawReference(x, r * vocab, limit, t, Sampler.drawUniform(s, keys[r], steps[r], 0),
                            Sampler.drawUniform(s, keys[r], steps[r], 1));
                    if (ref < 0) {
                        boundary++;
                        continue;
                    }
                    assertEquals(ref, res.tokens()[r], isa + " T=" + t + " row " + r);
                    assertEquals(res.logprob()[r], res.logprobSampled()[r], isa + " row " + r + ": q = p");
                    checked++;
                }
            }
        }
        Kernels.forceCpuIsa(null);
        System.out.println("  checked " + checked + " rows, skipped " + boundary + " at a cumulative boundary");
        assertTrue(boundary < checked / 50, boundary + " rows at a boundary");
    }

    /** The double reference of the untruncated draw; -1 where a target lies within 2e-6 of a boundary. */
    static int chunkedDrawReference(float[] x, int off, int limit, float t, double u1, double u2) {
        final int chunk = 2048;
        float invT = 1f / t;
        double[] z = new double[limit];
        double zmax = Double.NEGATIVE_INFINITY;
        for (int j = 0; j < limit; j++) zmax = Math.max(zmax, z[j] = x[off + j] * invT);
        int nc = (limit + chunk - 1) / chunk;
        double[] w = new double[nc], m = new double[nc];
        double total = 0;
        for (int c = 0; c < nc; c++) {
            m[c] = Double.NEGATIVE_INFINITY;
            for (int j = c * chunk; j < Math.min(limit, (c + 1) * chunk); j++) {
                m[c] = Math.max(m[c], z[j]);
                w[c] += Math.exp(z[j] - zmax);
            }
            total += w[c];
        }
        int c = pickCumulative(w, 0, nc, u1 * total, total);
        if (c < 0) return -1;
        int lo = c * chunk, hi = Math.min(limit, (c + 1) * chunk);
        double[] e = new double[limit];
        double chunkTotal = 0;
        for (int j = lo; j < hi; j++) chunkTotal += e[j] = Math.exp(z[j] - m[c]);
        return pickCumulative(e, lo, hi, u2 * chunkTotal, chunkTotal);
    }

    /**
     * The first i in [lo, hi) with w[lo] + … + w[i] &gt; target; -1 when target is within 2e-6·total of either end
     * of that column's interval (the kernel's fp32 sums may put it on the other side).
     */
    static int pickCumulative(double[] w, int lo, int hi, double target, double total) {
        double cum = 0;
        for (int i = lo; i < hi; i++) {
            if (w[i] == 0) continue;
            if (cum + w[i] > target)
                return Math.abs(cum - target) < 2e-6 * total || Math.abs(cum + w[i] - target) < 2e-6 * total ? -1 : i;
            cum += w[i];
        }
        return -1;
    }

    @Test
    void greedyIsTheLowestIndexArgmax() {
        float ninf = Float.NEGATIVE_INFINITY;
        float[] x = {
            1f, 3f, 3f, 2f, //          tie at 1, 2 -> 1
            -0f, 0f, ninf, -1f, //      -0 == +0 -> 0
            ninf, ninf, ninf, 5f, //    point mass -> 3
            7f, 7f, 7f, 7f, //          all equal -> 0
        };
        SampleResult res = Sampler.sample(x, 4, 4, SamplingParams.greedy(), 1, 0);
        assertArrayEquals(new int[] {1, 0, 3, 0}, res.tokens());
        assertArrayEquals(new float[4], res.logprobSampled());
        float[] lp = new float[4], h = new float[4];
        TokenStats.forward(x, 4, 4, res.tokens(), 1f, lp, h);
        assertArrayEquals(lp, res.logprob(), "greedy rows report T = 1 logprobs");
        assertArrayEquals(h, res.entropy());
        // greedy does not depend on the seed, key or step, and truncation never changes the argmax
        SampleResult other = Sampler.sample(x, 4, 4, 4, new SamplingParams(0f, 1, 0.1f, 0.5f), 99,
                new long[] {5, 6, 7, 8}, new long[] {1, 2, 3, 4}, null);
        assertArrayEquals(res.tokens(), other.tokens());
    }

    // ---------------------------------------------------------------------------------------------
    // Statistics = token stats
    // ---------------------------------------------------------------------------------------------

    @ParameterizedTest(name = "{0} {1}")
    @MethodSource("ai.arbor.kernels.Logits#dtypesTimesCpuIsas")
    void logprobAndEntropyAreBitwiseTheTokenStatsValues(DType dtype, String isa) {
        Kernels.forceCpuIsa(isa);
        long seed = Logits.seed();
        System.out.println("logprobAndEntropyAreBitwiseTheTokenStatsValues " + dtype + " " + isa + " seed=" + seed);
        Random rnd = new Random(seed);
        for (int vocab : new int[] {1, 3, 100, 4099, 32000}) {
            int rows = vocab >= 32000 ? 3 : 1 + rnd.nextInt(60);
            int stride = vocab + rnd.nextInt(5), limit = Math.max(1, vocab - rnd.nextInt(Math.min(vocab, 4)));
            float t = new float[] {0f, 0.5f, 1f, 1.7f}[rnd.nextInt(4)];
            SamplingParams params = new SamplingParams(t, rnd.nextInt(3) * 5, rnd.nextBoolean() ? 1f : 0.9f, 0f);
            float[] x = Logits.random(rnd, rows, vocab, stride, limit, true);
            byte[] mask = new byte[rows];
            for (int r = 0; r < rows; r++) mask[r] = (byte) (rnd.nextInt(5) == 0 ? 0 : 1);
            long[] keys = rnd.longs(rows).toArray(), steps = new long[rows];
            float[][] out = sampleMem(x, rows, vocab, stride, limit, dtype, params, rnd.nextLong(), keys, steps, mask);
            int[] labels = new int[rows];
            for (int r = 0; r < rows; r++) labels[r] = mask[r] == 0 ? -100 : (int) out[0][r];
            LogitsView view = new LogitsView(MemRef.of(Logits.direct(x, dtype)), dtype, rows, vocab, stride, limit);
            ByteBuffer lp = Logits.directFloats(rows), h = Logits.directFloats(rows);
            TokenStats.forward(view, MemRef.of(Logits.direct(labels)), DType.I32, t == 0f ? 1f : t,
                    MemRef.of(Logits.direct(mask)), MemRef.of(lp), MemRef.of(h), null, 0);
            String where = dtype + " " + isa + " V=" + vocab + " " + params;
            assertArrayEquals(Logits.floats(lp, rows), out[2], where + ": logprob");
            assertArrayEquals(Logits.floats(h, rows), out[3], where + ": entropy");
            for (int r = 0; r < rows; r++) {
                if (mask[r] == 0) {
                    assertEquals(-1f, out[0][r], where + ": masked row token");
                    assertEquals(0f, out[1][r]);
                } else if (!params.truncates() && t > 0) {
                    assertEquals(out[2][r], out[1][r], where + ": untruncated logprobSampled = logprob");
                }
            }
        }
    }

    // ---------------------------------------------------------------------------------------------
    // Determinism
    // ---------------------------------------------------------------------------------------------

    @Test
    void tokensDependOnlyOnTheRowAndItsStream() {
        long seed = Logits.seed();
        System.out.println("tokensDependOnlyOnTheRowAndItsStream seed=" + seed);
        Random rnd = new Random(seed);
        int rows = 97, vocab = 4099;  // large enough that the kernel really splits rows over threads
        float[] x = Logits.random(rnd, rows, vocab, vocab, vocab, true);
        SamplingParams[] menu = {SamplingParams.temperature(1f), SamplingParams.temperature(0.8f).withTopK(7),
            SamplingParams.temperature(1.2f).withTopP(0.9f), SamplingParams.temperature(1f).withTopP(0.999f),
            SamplingParams.temperature(1f).withMinP(0.05f), SamplingParams.greedy(),
            new SamplingParams(0.9f, 40, 0.95f, 0.01f)};
        SamplingParams[] params = new SamplingParams[rows];
        long[] keys = new long[rows], steps = new long[rows];
        for (int r = 0; r < rows; r++) {
            params[r] = menu[rnd.nextInt(menu.length)];
            keys[r] = rnd.nextLong();
            steps[r] = rnd.nextInt() & 0xffffffffL;
        }
        long s = rnd.nextLong();
        Kernels.setThreads(1);
        int[] base = Sampler.sample(x, rows, vocab, vocab, params, s, keys, steps, null).tokens();
        Kernels.setThreads(2);
        assertArrayEquals(base, Sampler.sample(x, rows, vocab, vocab, params, s, keys, steps, null).tokens(), "1 vs 2 threads");
        Kernels.setThreads(5);
        assertArrayEquals(base, Sampler.sample(x, rows, vocab, vocab, params, s, keys, steps, null).tokens(), "1 vs 5 threads");
        for (String isa : Kernels.cpuIsas()) {
            Kernels.forceCpuIsa(isa);
            assertArrayEquals(base, Sampler.sample(x, rows, vocab, vocab, params, s, keys, steps, null).tokens(),
                    isa + " vs the dispatched path");
        }
        Kernels.forceCpuIsa(null);

        // reversed row order (each row keeps its logits, parameters, key and step)
        int[] perm = new int[rows];
        for (int i = 0; i < rows; i++) perm[i] = rows - 1 - i;
        for (int i = rows - 1; i > 0; i--) {  // and shuffled
            int j = rnd.nextInt(i + 1), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        float[] xp = new float[x.length];
        SamplingParams[] pp = new SamplingParams[rows];
        long[] kp = new long[rows], sp = new long[rows];
        for (int i = 0; i < rows; i++) {
            System.arraycopy(x, perm[i] * vocab, xp, i * vocab, vocab);
            pp[i] = params[perm[i]];
            kp[i] = keys[perm[i]];
            sp[i] = steps[perm[i]];
        }
        int[] permuted = Sampler.sample(xp, rows, vocab, vocab, pp, s, kp, sp, null).tokens();
        for (int i = 0; i < rows; i++) assertEquals(base[perm[i]], permuted[i], "row " + perm[i] + " moved to " + i);

        // other batch compositions: each row alone, and a batch of every third row with new neighbours
        for (int r = 0; r < rows; r += 11) {
            int[] one = Sampler.sample(Arrays.copyOfRange(x, r * vocab, (r + 1) * vocab), 1, vocab, vocab,
                    new SamplingParams[] {params[r]}, s, new long[] {keys[r]}, new long[] {steps[r]}, null).tokens();
            assertEquals(base[r], one[0], "row " + r + " alone");
        }
        int m = (rows + 2) / 3 + 5;
        float[] xb = Logits.random(rnd, m, vocab, vocab, vocab, true);
        SamplingParams[] pb = new SamplingParams[m];
        long[] kb = new long[m], sb = new long[m];
        Arrays.fill(pb, SamplingParams.temperature(1f));
        for (int i = 0; i < m; i++) {
            kb[i] = rnd.nextLong();
            sb[i] = rnd.nextInt(100);
        }
        for (int i = 0, r = 0; r < rows; i++, r += 3) {
            System.arraycopy(x, r * vocab, xb, (i + 5) * vocab, vocab);
            pb[i + 5] = params[r];
            kb[i + 5] = keys[r];
            sb[i + 5] = steps[r];
        }
        int[] mixed = Sampler.sample(xb, m, vocab, vocab, pb, s, kb, sb, null).tokens();
        for (int i = 0, r = 0; r < rows; i++, r += 3) assertEquals(base[r], mixed[i + 5], "row " + r + " in another batch");

        // a different step, key or seed gives a different draw (on rows with real randomness)
        int changed = 0;
        long[] steps2 = steps.clone();
        for (int r = 0; r < rows; r++) steps2[r] = (steps[r] + 1) & 0xffffffffL;
        int[] next = Sampler.sample(x, rows, vocab, vocab, SamplingParams.temperature(3f), s, keys, steps2, null).tokens();
        int[] same = Sampler.sample(x, rows, vocab, vocab, SamplingParams.temperature(3f), s, keys, steps, null).tokens();
        for (int r = 0; r < rows; r++) changed += next[r] != same[r] ? 1 : 0;
        assertTrue(changed > rows / 4, "the step must change the draw: only " + changed + " of " + rows + " rows changed");
    }

    @Test
    void memoryFormEqualsArrayFormAndTakesInt64Tokens() {
        long seed = Logits.seed();
        System.out.println("memoryFormEqualsArrayForm seed=" + seed);
        Random rnd = new Random(seed);
        int rows = 37, vocab = 1001;
        float[] x = Logits.random(rnd, rows, vocab, vocab, vocab, true);
        SamplingParams params = SamplingParams.temperature(0.9f).withTopP(0.95f);
        SampleResult a = Sampler.sample(x, rows, vocab, params, 17, 3);
        ByteBuffer tok = Logits.direct(new long[rows]), lps = Logits.directFloats(rows), lp = Logits.directFloats(rows),
                h = Logits.directFloats(rows);
        Sampler.sample(Sampler.Batch.of(LogitsView.of(MemRef.of(Logits.direct(x, DType.F32)), DType.F32, rows, vocab),
                params, 17, 3), new Sampler.Outputs(MemRef.of(tok), DType.I64, MemRef.of(lps), MemRef.of(lp), MemRef.of(h)), 0);
        long[] t64 = new long[rows];
        tok.duplicate().order(java.nio.ByteOrder.nativeOrder()).asLongBuffer().get(t64);
        for (int r = 0; r < rows; r++) assertEquals(a.tokens()[r], t64[r], "row " + r);
        assertArrayEquals(a.logprobSampled(), Logits.floats(lps, rows));
        assertArrayEquals(a.logprob(), Logits.floats(lp, rows));
        assertArrayEquals(a.entropy(), Logits.floats(h, rows));
    }

    // ---------------------------------------------------------------------------------------------
    // Edge cases and errors
    // ---------------------------------------------------------------------------------------------

    /** The README's example, as written there, and what it promises. */
    @Test
    void readmeExampleWorksAsWritten() {
        float[] logits = {2.0f, 1.0f, 0.5f, -1.0f,    // trajectory 17, its position 5
                          0.0f, 3.0f, 0.0f, 0.0f};    // trajectory 42, its position 0
        SampleResult s = Sampler.sample(logits, 2, 4, 4, SamplingParams.temperature(0.8f).withTopP(0.95f),
                1234L, new long[] {17, 42}, new long[] {5, 0}, null);
        int[] next = s.tokens();                // one token per row
        float[] oldLogprob = s.logprob();       // the PPO/GRPO behaviour logprob (tempered, untruncated)
        float[] entropy = s.entropy();          // what ARPO/AEPO branch on

        float[] lp = new float[2], h = new float[2];
        TokenStats.forward(logits, 2, 4, next, 0.8f, lp, h);
        assertArrayEquals(lp, oldLogprob);
        assertArrayEquals(h, entropy);
        // the same trajectory at the same position draws the same token in another batch
        SampleResult alone = Sampler.sample(Arrays.copyOfRange(logits, 4, 8), 1, 4, 4,
                SamplingParams.temperature(0.8f).withTopP(0.95f), 1234L, new long[] {42}, new long[] {0}, null);
        assertEquals(next[1], alone.tokens()[0]);
    }

    @Test
    void edgeCases() {
        // vocab 1: always token 0, a point mass
        SampleResult one = Sampler.sample(new float[] {3f, -1e4f}, 2, 1, SamplingParams.temperature(1f), 5, 0);
        assertArrayEquals(new int[] {0, 0}, one.tokens());
        assertArrayEquals(new float[2], one.logprob());
        assertArrayEquals(new float[2], one.entropy());
        assertArrayEquals(new float[2], one.logprobSampled());
        // all -inf but one: that token, whatever the parameters, with logprob 0 and entropy 0
        float ninf = Float.NEGATIVE_INFINITY;
        float[] pm = {ninf, ninf, 2f, ninf, ninf};
        for (SamplingParams p : new SamplingParams[] {SamplingParams.temperature(1f), SamplingParams.temperature(0.1f).withTopK(3),
            SamplingParams.temperature(2f).withTopP(0.2f).withMinP(0.9f), SamplingParams.greedy()}) {
            for (long s = 0; s < 20; s++) {
                SampleResult r = Sampler.sample(pm, 1, 5, p, s, s);
                assertEquals(2, r.tokens()[0], p + " seed " + s);
                assertEquals(0f, r.logprob()[0]);
                assertEquals(0f, r.entropy()[0]);
                assertEquals(0f, r.logprobSampled()[0]);
            }
        }
        // padding columns [vocabLimit, vocab) are never sampled, even when huge, +inf or NaN
        float[] pad = {0f, 0f, 0f, 1e30f, Float.POSITIVE_INFINITY, Float.NaN};
        long[] keys = new long[200], steps = new long[200];
        float[] many = new float[200 * 6];
        for (int r = 0; r < 200; r++) {
            keys[r] = r;
            System.arraycopy(pad, 0, many, r * 6, 6);
        }
        SampleResult pr = Sampler.sample(many, 200, 6, 3, SamplingParams.temperature(1f), 1, keys, steps, null);
        int[] seen = new int[6];
        for (int t : pr.tokens()) seen[t]++;
        assertEquals(0, seen[3] + seen[4] + seen[5], "padding never sampled");
        assertTrue(seen[0] > 40 && seen[1] > 40 && seen[2] > 40, "uniform over the 3 real tokens: " + Arrays.toString(seen));
        // masked rows: token -1, zeros, and their (NaN) logits are not an error
        SampleResult masked = Sampler.sample(new float[] {Float.NaN, 1f, 0f, 1f}, 2, 2, 2, SamplingParams.temperature(1f),
                3, new long[] {0, 1}, new long[] {0, 0}, new boolean[] {false, true});
        assertEquals(-1, masked.tokens()[0]);
        assertEquals(0f, masked.logprob()[0]);
        assertTrue(masked.tokens()[1] == 0 || masked.tokens()[1] == 1);
    }

    @Test
    void rowsWithoutADistributionThrowNamingTheRow() {
        float[] x = {0f, 1f, 2f, 0f, Float.NaN, 1f, 0f, 1f, 2f};
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Sampler.sample(x, 3, 3, SamplingParams.temperature(1f), 1, 0));
        assertTrue(e.getMessage().contains("row 1") && e.getMessage().contains("logits[1, 1] is NaN"), e.getMessage());
        float ninf = Float.NEGATIVE_INFINITY;
        e = assertThrows(IllegalArgumentException.class,
                () -> Sampler.sample(new float[] {0f, 1f, ninf, ninf}, 2, 2, SamplingParams.greedy(), 1, 0));
        assertTrue(e.getMessage().contains("row 1") && e.getMessage().contains("no finite logit"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> Sampler.sample(new float[] {0f, Float.POSITIVE_INFINITY}, 1, 2, SamplingParams.temperature(1f), 1, 0));
        assertTrue(e.getMessage().contains("row 0") && e.getMessage().contains("+inf"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class,
                () -> Sampler.sample(new float[] {0f, 3e38f}, 1, 2, SamplingParams.temperature(0.01f), 1, 0));
        assertTrue(e.getMessage().contains("overflow"), e.getMessage());
        // the memory form names the row too (bf16 NaN in row 2)
        float[] y = {0f, 1f, 2f, 3f, 4f, 5f, 1f, Float.NaN};
        ByteBuffer tok = Logits.direct(new int[4]);
        e = assertThrows(IllegalArgumentException.class, () -> Sampler.sample(
                Sampler.Batch.of(LogitsView.of(MemRef.of(Logits.direct(y, DType.BF16)), DType.BF16, 4, 2),
                        SamplingParams.temperature(1f), 1, 0),
                new Sampler.Outputs(MemRef.of(tok), DType.I32, null, null, null), 0));
        assertTrue(e.getMessage().contains("row 3"), e.getMessage());
    }

    @Test
    void badArgumentsAreRejectedWithTheValue() {
        float[] x = {0f, 1f, 2f, 3f};
        assertMessage("temperature", () -> SamplingParams.temperature(-1f));
        assertMessage("NaN", () -> SamplingParams.temperature(Float.NaN));
        assertMessage("Infinity", () -> SamplingParams.temperature(Float.POSITIVE_INFINITY));
        assertMessage("topP", () -> SamplingParams.temperature(1f).withTopP(0f));
        assertMessage("1.5", () -> SamplingParams.temperature(1f).withTopP(1.5f));
        assertMessage("minP", () -> SamplingParams.temperature(1f).withMinP(-0.1f));
        assertMessage("topK", () -> SamplingParams.temperature(1f).withTopK(-1));
        SamplingParams ok = SamplingParams.temperature(1f);
        assertMessage("4294967296", () -> Sampler.sample(x, 2, 2, ok, 1, 1L << 32));
        assertMessage("-1", () -> Sampler.sample(x, 2, 2, ok, 1, -1));
        assertMessage("logits.length", () -> Sampler.sample(x, 3, 2, ok, 1, 0));
        assertMessage("vocabLimit", () -> Sampler.sample(x, 2, 2, 3, ok, 1, new long[2], new long[2], null));
        assertMessage("keys.length", () -> Sampler.sample(x, 2, 2, 2, ok, 1, new long[3], new long[2], null));
        assertMessage("steps[1]", () -> Sampler.sample(x, 2, 2, 2, ok, 1, new long[2], new long[] {0, 1L << 33}, null));
        assertMessage("rowParams[1]", () -> Sampler.sample(x, 2, 2, 2, new SamplingParams[] {ok, null}, 1, new long[2],
                new long[2], null));
        assertMessage("rowMask.length", () -> Sampler.sample(x, 2, 2, 2, ok, 1, new long[2], new long[2], new boolean[1]));
        // memory form: sizes, token type, per-row values in host memory named by row
        LogitsView v = LogitsView.of(MemRef.of(Logits.direct(x, DType.F32)), DType.F32, 2, 2);
        MemRef tok = MemRef.of(Logits.direct(new int[2]));
        assertMessage("tokenType", () -> new Sampler.Outputs(tok, DType.F32, null, null, null));
        assertMessage("tokens needs 16 bytes", () -> Sampler.sample(Sampler.Batch.of(v, ok, 1, 0),
                new Sampler.Outputs(tok, DType.I64, null, null, null), 0));
        MemRef temps = MemRef.of(Logits.direct(new float[] {1f, -2f}, DType.F32));
        assertMessage("row 1: temperature", () -> Sampler.sample(Sampler.Batch.of(v, ok, 1, 0).withRowParams(temps, null, null, null),
                new Sampler.Outputs(tok, DType.I32, null, null, null), 0));
        MemRef steps = MemRef.of(Logits.direct(new long[] {0, -5}));
        assertMessage("steps[1]", () -> Sampler.sample(Sampler.Batch.of(v, ok, 1, 0).withSteps(steps),
                new Sampler.Outputs(tok, DType.I32, null, null, null), 0));
        // native code re-checks what it is given (a per-row top-p of 0 in a raw call)
        assertEquals(ArborCpu.ERR_ARG, ArborCpu.arbor_cpu_sample_f32(x, 2, 2, 2, 2, 1f, null, 0, null, 1f,
                new float[] {0.5f, 0f}, 0f, null, 1, null, null, 0, null, null, new int[2], ArborCpu.I32, null, null, null, 1));
    }

    @Test
    void cudaTokensEqualCpuTokens() {
        Gpu.assume(Backend.CUDA.isAvailable(), () -> Backend.CUDA.unavailableReason()
                + " (the GPU check cuda-kernels/gpu-check.sh covers the CUDA kernel)");
        long seed = Logits.seed();
        System.out.println("cudaTokensEqualCpuTokens seed=" + seed);
        Random rnd = new Random(seed);
        int rows = 64, vocab = 32000;
        float[] x = Logits.random(rnd, rows, vocab, vocab, vocab, true);
        // (untruncated rows draw by the chunked inverse CDF on the CPU and by the Gumbel race on CUDA: the same
        // distribution, not the same tokens — docs/sampling.md; truncated and greedy rows must agree exactly)
        for (SamplingParams p : new SamplingParams[] {new SamplingParams(0.8f, 50, 0.9f, 0.02f), SamplingParams.temperature(1f).withTopK(5000),
            SamplingParams.greedy()}) {
            SampleResult cpu = Sampler.sample(x, rows, vocab, p, 42, 7);
            try (CudaBuffer dx = CudaBuffer.of(x, 0); CudaBuffer tok = CudaBuffer.allocate(4L * rows, 0);
                 CudaBuffer lp = CudaBuffer.allocate(4L * rows, 0)) {
                Sampler.sample(Sampler.Batch.of(LogitsView.of(dx.ref(), DType.F32, rows, vocab), p, 42, 7),
                        new Sampler.Outputs(tok.ref(), DType.I32, null, lp.ref(), null), 0);
                float[] t = new float[rows], l = new float[rows];
                tok.copyTo(t);
                lp.copyTo(l);
                for (int r = 0; r < rows; r++) {
                    assertEquals(cpu.tokens()[r], Float.floatToRawIntBits(t[r]), p + " row " + r);
                    assertEquals(cpu.logprob()[r], l[r], 1e-4 * (1 + Math.abs(cpu.logprob()[r])), p + " row " + r);
                }
            }
        }
    }

    // ---------------------------------------------------------------------------------------------
    // helpers
    // ---------------------------------------------------------------------------------------------

    /** Samples through the memory form with logits of {@code dtype}: {tokens, logprobSampled, logprob, entropy}. */
    static float[][] sampleMem(float[] x, int rows, int vocab, int stride, int limit, DType dtype, SamplingParams params,
                               long seed, long[] keys, long[] steps, byte[] mask) {
        LogitsView view = new LogitsView(MemRef.of(Logits.direct(x, dtype)), dtype, rows, vocab, stride, limit);
        ByteBuffer tok = Logits.direct(new int[rows]), lps = Logits.directFloats(rows), lp = Logits.directFloats(rows),
                h = Logits.directFloats(rows);
        Sampler.Batch b = Sampler.Batch.of(view, params, seed, 0).withKeys(MemRef.of(Logits.direct(keys)))
                .withSteps(MemRef.of(Logits.direct(steps)));
        if (mask != null) b = b.withRowMask(MemRef.of(Logits.direct(mask)));
        Sampler.sample(b, new Sampler.Outputs(MemRef.of(tok), DType.I32, MemRef.of(lps), MemRef.of(lp), MemRef.of(h)), 0);
        float[] t = new float[rows];
        for (int r = 0; r < rows; r++) t[r] = tok.duplicate().order(java.nio.ByteOrder.nativeOrder()).getInt(4 * r);
        return new float[][] {t, Logits.floats(lps, rows), Logits.floats(lp, rows), Logits.floats(h, rows)};
    }

    /** The exact sampling distribution of each row (double reference). */
    static double[][] refProbs(float[] x, int rows, int vocab, int limit, SamplingParams p) {
        double[] xd = new double[x.length];
        for (int i = 0; i < x.length; i++) xd[i] = x[i];
        double[] probs = new double[rows * vocab];
        ArborCpu.arbor_ref_sample_probs(xd, rows, vocab, vocab, limit, p.temperature(), null, p.topK(), null, p.topP(),
                null, p.minP(), null, null, probs);
        double[][] out = new double[rows][];
        for (int r = 0; r < rows; r++) out[r] = Arrays.copyOfRange(probs, r * vocab, r * vocab + limit);
        return out;
    }

    static float asSeen(float v, DType t) {
        if (t == DType.BF16) return ArborCpu.arbor_bf16_to_f32(ArborCpu.arbor_f32_to_bf16(v));
        if (t == DType.F16) return ArborCpu.arbor_f16_to_f32(ArborCpu.arbor_f32_to_f16(v));
        return v;
    }

    static double kthLargest(double[] z, int k) {
        double[] s = z.clone();
        Arrays.sort(s);
        return s[Math.max(0, s.length - k)];
    }

    /**
     * False when top-p's or min-p's cut is within 2e-6 of a boundary: there the kernel (z = x·fl(1/T) in
     * fp32, masses exact in units of 2^-40) and the double reference (x / T) may legitimately disagree
     * about the last kept value.
     */
    static boolean topPBoundaryIsClear(float[] row, SamplingParams p) {
        if (p.temperature() == 0f) return true;
        int v = row.length;
        double[] z = new double[v];
        double zmax = Double.NEGATIVE_INFINITY;
        for (int j = 0; j < v; j++) zmax = Math.max(zmax, z[j] = row[j] / (double) p.temperature());
        if (p.minP() > 0)
            for (int j = 0; j < v; j++) if (Math.abs(z[j] - zmax - Math.log(p.minP())) < 2e-6 * (1 + Math.abs(z[j]))) return false;
        if (p.topP() >= 1f) return true;
        double kth = p.topK() > 0 ? kthLargest(z, Math.min(p.topK(), v)) : Double.NEGATIVE_INFINITY;
        Integer[] order = new Integer[v];
        for (int j = 0; j < v; j++) order[j] = j;
        Arrays.sort(order, (a, b) -> Double.compare(z[b], z[a]));
        double total = 0;
        for (int j = 0; j < v; j++)
            if (z[j] >= kth && !(p.minP() > 0 && z[j] - zmax < Math.log(p.minP()))) total += Math.exp(z[j] - zmax);
        double cum = 0;
        for (int i = 0; i < v; i++) {
            int j = order[i];
            if (z[j] < kth || (p.minP() > 0 && z[j] - zmax < Math.log(p.minP())) || z[j] == Double.NEGATIVE_INFINITY)
                continue;
            cum += Math.exp(z[j] - zmax);
            if (Math.abs(cum / total - p.topP()) < 2e-6) return false;
        }
        return true;
    }

    static void assertTopPBoundaryIsClear(float[] row, SamplingParams p) {
        assertTrue(topPBoundaryIsClear(row, p), "test case " + p + " sits on a truncation boundary");
    }

    static void assertMessage(String fragment, org.junit.jupiter.api.function.Executable call) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, call);
        assertTrue(e.getMessage().contains(fragment), "message should name " + fragment + ": " + e.getMessage());
    }

    /** Upper tail P(X > x) of the chi-square distribution with df degrees of freedom: Q(df/2, x/2). */
    static double chiSquareSurvival(double x, int df) {
        if (df <= 0) return 1.0;
        double a = df / 2.0, z = x / 2.0;
        if (z <= 0) return 1.0;
        double lnPre = a * Math.log(z) - z - lnGamma(a);
        if (z < a + 1) {  // series for P, Q = 1 - P
            double sum = 1.0 / a, term = sum;
            for (int n = 1; n < 1000 && Math.abs(term) > 1e-16 * Math.abs(sum); n++) {
                term *= z / (a + n);
                sum += term;
            }
            return 1.0 - Math.exp(lnPre) * sum;
        }
        // continued fraction for Q (modified Lentz)
        double b = z + 1 - a, c = 1e300, d = 1 / b, h = d;
        for (int i = 1; i < 1000; i++) {
            double an = -i * (i - a);
            b += 2;
            d = an * d + b;
            if (Math.abs(d) < 1e-300) d = 1e-300;
            c = b + an / c;
            if (Math.abs(c) < 1e-300) c = 1e-300;
            d = 1 / d;
            double del = d * c;
            h *= del;
            if (Math.abs(del - 1) < 1e-15) break;
        }
        return Math.exp(lnPre) * h;
    }

    static double lnGamma(double x) {  // Lanczos, g = 7
        double[] g = {0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7};
        if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - lnGamma(1 - x);
        x -= 1;
        double a = g[0], t = x + 7.5;
        for (int i = 1; i < 9; i++) a += g[i] / (x + i);
        return 0.5 * Math.log(2 * Math.PI) + (x + 0.5) * Math.log(t) - t + Math.log(a);
    }

    @Test
    void chiSquareTailIsRight() {
        // known values: P(X > 3.841) = 0.05 for df 1; P(X > 18.307) = 0.05 for df 10; P(X > 29.588) = 0.001 for df 10
        assertEquals(0.05, chiSquareSurvival(3.841458820694124, 1), 1e-9);
        assertEquals(0.05, chiSquareSurvival(18.307038053275146, 10), 1e-9);
        assertEquals(0.001, chiSquareSurvival(29.58829844507442, 10), 1e-9);
        assertEquals(0.5, chiSquareSurvival(1.3862943611198906, 2), 1e-12);  // df 2: e^{-x/2}
    }
}
