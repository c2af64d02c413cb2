package ai.arbor.torch.model;

import static ai.arbor.torch.model.NaiveTransformer.concat;
import static ai.arbor.torch.model.NaiveTransformer.randomTokens;
import static ai.arbor.torch.model.NaiveTransformer.randomize;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Cached decoding against full recomputation: the reference for "the logits after tokens x₀…x_t" is
 * the training forward over x₀…x_t (itself checked against {@link NaiveTransformer}), read at t.
 */
@SuppressWarnings("try") // PointerScope and NoGradGuard act through their try blocks
class DecodeBatchTest {

    private static final double TOL = 1e-10;
    private static long seed;
    private static ReferencePolicy policy;
    private static PolicyConfig config;

    @BeforeAll
    static void setUp() {
        NaiveTransformer.singleThreaded();
        seed = NaiveTransformer.seed();
        System.out.println("DecodeBatchTest seed " + seed);
        config = NaiveTransformer.gqa(seed);
        policy = ReferencePolicy.create(config, "cpu", ScalarType.Double);
        randomize(policy, new Random(seed), 0.4);
    }

    @AfterAll
    static void tearDown() {
        policy.close();
    }

    /** Next-token logits after {@code tokens}, by full recomputation. */
    private static double[] recompute(int[] tokens) {
        try (PointerScope scope = new PointerScope()) {
            double[] all = Tensors.toDoubles(policy.forward(new int[][] {tokens}));
            return Arrays.copyOfRange(all, (tokens.length - 1) * config.vocab(), tokens.length * config.vocab());
        }
    }

    private static double[] row(Tensor logits, int i) {
        double[] all = Tensors.toDoubles(logits);
        int v = config.vocab();
        assertEquals((long) v, logits.size(1));
        return Arrays.copyOfRange(all, i * v, (i + 1) * v);
    }

    /** Checks every live sequence's row of {@code logits} (rows in {@code ids} order) against recomputation. */
    private static void checkRows(DecodeBatch batch, int[] ids, Tensor logits) {
        assertEquals(ids.length, logits.size(0));
        for (int i = 0; i < ids.length; i++)
            assertArrayEquals(recompute(batch.tokens(ids[i])), row(logits, i), TOL, "sequence " + ids[i] + " at length " + batch.length(ids[i]));
    }

    @ParameterizedTest
    @ValueSource(ints = {1, 4, 16})
    void stepByStepDecodingEqualsRecomputation(int blockSize) {
        Random rnd = new Random(seed + blockSize);
        try (DecodeBatch batch = policy.newDecodeBatch(blockSize, 2)) {
            int[] ids = batch.prefill(List.of(randomTokens(rnd, 5, config.vocab())));
            checkRows(batch, ids, batch.logits());
            for (int s = 0; s < 14; s++) {
                Tensor logits = batch.step(ids, new int[] {rnd.nextInt(config.vocab())});
                assertArrayEquals(new long[] {1, config.vocab()}, Tensors.shape(logits));
                assertTrue(logits.is_contiguous());
                checkRows(batch, ids, logits);
            }
            assertEquals(19, batch.length(ids[0]));
        }
    }

    @Test
    void raggedBatchEqualsEachSequenceDecodedAlone() {
        Random rnd = new Random(seed + 7);
        List<int[]> prompts = List.of(randomTokens(rnd, 1, config.vocab()), randomTokens(rnd, 3, config.vocab()),
                randomTokens(rnd, 7, config.vocab()), randomTokens(rnd, 10, config.vocab()));
        // the same schedule applied to one batch of four and to four batches of one
        List<int[][]> rounds = new ArrayList<>();
        for (int r = 0; r < 6; r++) {
            int[][] add = new int[prompts.size()][];
            for (int i = 0; i < add.length; i++) {
                int kind = rnd.nextInt(4); // 0: idle this round, 1-2: one token, 3: several (tool output)
                add[i] = kind == 0 ? null : randomTokens(rnd, kind == 3 ? 1 + rnd.nextInt(5) : 1, config.vocab());
            }
            rounds.add(add);
        }
        try (DecodeBatch together = policy.newDecodeBatch(4, 4); PointerScope scope = new PointerScope()) {
            int[] ids = together.prefill(prompts);
            checkRows(together, ids, together.logits());
            List<DecodeBatch> alone = new ArrayList<>();
            int[] aloneIds = new int[prompts.size()];
            try {
                for (int i = 0; i < prompts.size(); i++) {
                    DecodeBatch b = policy.newDecodeBatch(4, 1);
                    alone.add(b);
                    aloneIds[i] = b.prefill(List.of(prompts.get(i)))[0];
                    assertArrayEquals(row(together.logits(), i), row(b.logits(), 0), 1e-12);
                }
                for (int[][] add : rounds) {
                    List<Integer> who = new ArrayList<>();
                    List<int[]> what = new ArrayList<>();
                    for (int i = 0; i < add.length; i++)
                        if (add[i] != null) {
                            who.add(i);
                            what.add(add[i]);
                        }
                    if (who.isEmpty()) continue;
                    int[] sel = who.stream().mapToInt(i -> ids[i]).toArray();
                    Tensor logits = together.extend(sel, what);
                    checkRows(together, sel, logits);
                    for (int k = 0; k < sel.length; k++) {
                        int i = who.get(k);
                        Tensor own = alone.get(i).extend(new int[] {aloneIds[i]}, List.of(add[i]));
                        assertArrayEquals(row(own, 0), row(logits, k), 1e-12, "sequence " + i);
                    }
                }
            } finally {
                for (DecodeBatch b : alone) b.close();
            }
        }
    }

    @Test
    void forkedSequencesContinueExactlyAsRecomputationFromTheForkPoint() {
        Random rnd = new Random(seed + 11);
        try (DecodeBatch batch = policy.newDecodeBatch(4, 2)) {
            int parent = batch.prefill(List.of(randomTokens(rnd, 7, config.vocab())))[0];
            for (int s = 0; s < 3; s++) batch.step(new int[] {parent}, new int[] {rnd.nextInt(config.vocab())});
            assertEquals(10, batch.length(parent));
            int[] parentPrefix = batch.tokens(parent);
            // whole context, a block boundary, the middle of a block, the start
            Map<Integer, Integer> forkedAt = new HashMap<>();
            List<Integer> children = new ArrayList<>();
            for (int position : new int[] {10, 8, 6, 1}) {
                for (int c : batch.fork(parent, position, 3)) {
                    forkedAt.put(c, position);
                    children.add(c);
                    assertArrayEquals(Arrays.copyOf(parentPrefix, position), batch.tokens(c));
                }
            }
            int grandChild = -1;
            for (int s = 0; s < 6; s++) {
                int[] ids = batch.sequences();
                int[] next = new int[ids.length];
                for (int i = 0; i < ids.length; i++) next[i] = rnd.nextInt(config.vocab());
                Tensor logits = batch.step(ids, next);
                checkRows(batch, ids, logits);
                if (s == 2) grandChild = batch.fork(children.get(4), 9, 2)[1]; // a fork of a fork, mid-block
            }
            for (int c : children) {
                int p = forkedAt.get(c);
                assertArrayEquals(Arrays.copyOf(parentPrefix, p), Arrays.copyOf(batch.tokens(c), p), "prefix of " + c);
            }
            assertTrue(batch.length(grandChild) > 9);
        }
    }

    @Test
    void forksShareThePrefixBlocksAndCopyOnlyTheSharedPartialBlock() {
        Random rnd = new Random(seed + 13);
        try (DecodeBatch batch = policy.newDecodeBatch(4, 8)) {
            KvCache cache = batch.cache();
            int parent = batch.prefill(List.of(randomTokens(rnd, 10, config.vocab())))[0];
            assertEquals(3, cache.usedBlocks()); // positions 0-3, 4-7, 8-9
            int[] kids = batch.fork(parent, 3);
            assertEquals(3, cache.usedBlocks(), "forking copies nothing");
            Tensor logits = batch.step(kids, new int[] {1, 2, 3});
            checkRows(batch, kids, logits);
            // each child wrote position 10 into the shared block 8-11: one copy each, the full blocks stay shared
            assertEquals(6, cache.usedBlocks());
            batch.step(new int[] {parent}, new int[] {4});
            assertEquals(6, cache.usedBlocks(), "the parent owns its last block alone again: written in place");
            int[] atBoundary = batch.fork(parent, 8, 2);
            assertEquals(6, cache.usedBlocks());
            batch.step(atBoundary, new int[] {5, 6});
            assertEquals(8, cache.usedBlocks(), "a fresh block each, nothing copied");
            checkRows(batch, batch.sequences(), batch.step(new int[] {1, 2, 3, 4, 5, 6}));
            for (int id : batch.sequences()) if (id != parent) batch.release(id);
            assertEquals(3, cache.usedBlocks());
            batch.release(parent);
            assertEquals(0, cache.usedBlocks());
            assertEquals(0, batch.size());
        }
    }

    @Test
    void releasedBlocksAreReusedAndThePoolGrows() {
        Random rnd = new Random(seed + 17);
        try (DecodeBatch batch = policy.newDecodeBatch(2, 1)) {
            int[] ids = batch.prefill(List.of(randomTokens(rnd, 9, config.vocab()), randomTokens(rnd, 4, config.vocab())));
            assertTrue(batch.cache().capacityBlocks() >= 7, "grew from 1 block to " + batch.cache().capacityBlocks());
            checkRows(batch, ids, batch.logits());
            int capacity = batch.cache().capacityBlocks();
            batch.release(ids[0]);
            int[] again = batch.prefill(List.of(randomTokens(rnd, 8, config.vocab())));
            assertEquals(capacity, batch.cache().capacityBlocks(), "recycled, not grown");
            // recycled blocks hold the released sequence's keys: masking and overwriting must hide them
            checkRows(batch, new int[] {ids[1], again[0]}, batch.step(new int[] {ids[1], again[0]}, new int[] {3, 4}));
        }
    }

    @Test
    void prefillSharedGivesAGroupOfIdenticalRows() {
        Random rnd = new Random(seed + 19);
        int[] prompt = randomTokens(rnd, 6, config.vocab());
        try (DecodeBatch batch = policy.newDecodeBatch(4, 4)) {
            int[] group = batch.prefillShared(prompt, 5);
            assertEquals(5, group.length);
            assertEquals(2, batch.cache().usedBlocks());
            double[] want = recompute(prompt);
            for (int i = 0; i < group.length; i++) assertArrayEquals(want, row(batch.logits(), i), TOL);
            int[] next = {0, 1, 2, 3, 4};
            checkRows(batch, group, batch.step(group, next));
        }
    }

    @Test
    void float32DecodingMatchesFloat32Recomputation() {
        Random rnd = new Random(seed + 23);
        try (ReferencePolicy f32 = ReferencePolicy.create(config); DecodeBatch batch = f32.newDecodeBatch(4, 4);
             PointerScope scope = new PointerScope()) {
            randomize(f32, rnd, 0.4);
            int[] prompt = randomTokens(rnd, 6, config.vocab());
            int id = batch.prefill(List.of(prompt))[0];
            int[] kid = batch.fork(id, 5, 1);
            int[] tail = {3, 7, 1};
            batch.extend(kid, List.of(tail));
            double[] got = row(batch.logits(), 0);
            double[] all = Tensors.toDoubles(f32.forward(new int[][] {concat(Arrays.copyOf(prompt, 5), tail)}));
            double[] want = Arrays.copyOfRange(all, 7 * config.vocab(), 8 * config.vocab());
            assertArrayEquals(want, got, 1e-4);
            assertEquals(ScalarType.Float, batch.logits().scalar_type().intern());
        }
    }

    @Test
    void badCallsAreRejected() {
        try (DecodeBatch batch = policy.newDecodeBatch(4, 2)) {
            int id = batch.prefill(List.of(new int[] {1, 2, 3}))[0];
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> batch.step(new int[] {id + 5}, new int[] {1}));
            assertTrue(e.getMessage().contains(String.valueOf(id + 5)), e.getMessage());
            assertThrows(IllegalArgumentException.class, () -> batch.step(new int[] {id, id}, new int[] {1, 2}));
            e = assertThrows(IllegalArgumentException.class, () -> batch.step(new int[] {id}, new int[] {config.vocab()}));
            assertTrue(e.getMessage().contains(String.valueOf(config.vocab())), e.getMessage());
            assertThrows(IllegalArgumentException.class, () -> batch.step(new int[] {id}, new int[] {1, 2}));
            assertThrows(IllegalArgumentException.class, () -> batch.prefill(List.of(new int[0])));
            assertThrows(IllegalArgumentException.class, () -> batch.extend(new int[] {id}, List.of(new int[config.maxSeq()])));
            assertThrows(IllegalArgumentException.class, () -> batch.fork(id, 4, 1));
            assertThrows(IllegalArgumentException.class, () -> batch.fork(id, -1, 1));
            assertThrows(IllegalArgumentException.class, () -> batch.fork(id, 0));
            // a rejected call changed nothing
            assertEquals(3, batch.length(id));
            checkRows(batch, new int[] {id}, batch.step(new int[] {id}, new int[] {4}));
            batch.release(id);
            assertThrows(IllegalArgumentException.class, () -> batch.release(id));
            batch.close();
            assertThrows(IllegalStateException.class, () -> batch.prefill(List.of(new int[] {1})));
        }
    }
}
