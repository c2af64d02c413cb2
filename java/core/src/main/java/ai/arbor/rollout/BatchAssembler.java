package ai.arbor.rollout;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Turns trajectories into {@link TrainingBatch} arrays: padded (one sequence per row, right-padded to
 * the longest) or packed (sequences concatenated into rows of a fixed capacity, in order, a new row
 * when the next does not fit; position ids restart per sequence so a varlen attention kernel can use
 * {@code sequenceIds} / offsets).
 *
 * <p>Shared tree prefixes are duplicated per leaf here; see {@code ai.arbor.tree.RolloutTree} for where
 * a prefix-sharing (tree-attention) layout would hook in.
 */
public final class BatchAssembler {
    /** Row layout. */
    public enum Layout {
        PADDED,
        PACKED
    }

    private final Layout layout;
    private final int padId;
    private final int rowCapacity;
    private final int padToMultipleOf;

    private BatchAssembler(Layout layout, int padId, int rowCapacity, int padToMultipleOf) {
        if (padId < 0) throw new IllegalArgumentException("padId must be >= 0, got " + padId);
        if (padToMultipleOf < 1) throw new IllegalArgumentException("padToMultipleOf must be >= 1, got " + padToMultipleOf);
        this.layout = layout;
        this.padId = padId;
        this.rowCapacity = rowCapacity;
        this.padToMultipleOf = padToMultipleOf;
    }

    /** One sequence per row; {@code padId} &lt; 0 (a tokenizer without padding) pads with 0. */
    public static BatchAssembler padded(int padId) {
        return new BatchAssembler(Layout.PADDED, Math.max(0, padId), 0, 1);
    }

    /** Sequences packed into rows of {@code rowCapacity} positions. */
    public static BatchAssembler packed(int padId, int rowCapacity) {
        if (rowCapacity < 1) throw new IllegalArgumentException("rowCapacity must be >= 1, got " + rowCapacity);
        return new BatchAssembler(Layout.PACKED, Math.max(0, padId), rowCapacity, 1);
    }

    /** Rounds a padded batch's width up to a multiple of {@code m} (e.g. 8 for tensor cores). */
    public BatchAssembler padToMultipleOf(int m) {
        return new BatchAssembler(layout, padId, rowCapacity, m);
    }

    public TrainingBatch assemble(List<Trajectory> trajectories) {
        if (trajectories == null || trajectories.isEmpty()) throw new IllegalArgumentException("trajectories must not be empty");
        int n = trajectories.size();
        int[] row = new int[n], offset = new int[n], pl = new int[n], rl = new int[n], group = new int[n], tree = new int[n];
        Map<String, Integer> groups = new HashMap<>();
        Map<String, Integer> trees = new HashMap<>();
        int rows, width;
        if (layout == Layout.PADDED) {
            int max = 0;
            for (int i = 0; i < n; i++) {
                Trajectory t = trajectories.get(i);
                max = Math.max(max, t.prompt().tokens().length + t.length());
                row[i] = i;
            }
            width = ((max + padToMultipleOf - 1) / padToMultipleOf) * padToMultipleOf;
            rows = n;
        } else {
            width = rowCapacity;
            int r = 0, used = 0;
            for (int i = 0; i < n; i++) {
                Trajectory t = trajectories.get(i);
                int len = t.prompt().tokens().length + t.length();
                if (len > width)
                    throw new IllegalArgumentException("trajectory " + i + " (prompt " + t.prompt().id() + ") has " + len
                            + " tokens, more than the row capacity " + width);
                if (used + len > width) {
                    r++;
                    used = 0;
                }
                row[i] = r;
                offset[i] = used;
                used += len;
            }
            rows = r + 1;
        }
        if ((long) rows * width > Integer.MAX_VALUE - 8) throw new IllegalArgumentException("batch of " + rows + " x " + width + " is too large");
        int size = rows * width;
        int[] tokens = new int[size], pos = new int[size], seq = new int[size], turn = new int[size];
        byte[] attn = new byte[size], post = new byte[size];
        float[] mask = new float[size], lp = new float[size], ent = new float[size];
        Arrays.fill(tokens, padId);
        Arrays.fill(seq, -1);
        Arrays.fill(turn, -1);
        Arrays.fill(ent, Float.NaN);
        for (int i = 0; i < n; i++) {
            Trajectory t = trajectories.get(i);
            int[] p = t.prompt().tokens();
            pl[i] = p.length;
            rl[i] = t.length();
            group[i] = groups.computeIfAbsent(t.prompt().id(), k -> groups.size());
            tree[i] = trees.computeIfAbsent(t.prompt().id() + "\u0000" + t.treeIndex(), k -> trees.size());
            int base = row[i] * width + offset[i];
            System.arraycopy(p, 0, tokens, base, p.length);
            for (int j = 0; j < p.length; j++) {
                pos[base + j] = j;
                seq[base + j] = i;
                attn[base + j] = 1;
            }
            int rb = base + p.length;
            System.arraycopy(t.tokens(), 0, tokens, rb, t.length());
            for (int j = 0; j < t.length(); j++) {
                int at = rb + j;
                pos[at] = p.length + j;
                seq[at] = i;
                attn[at] = 1;
                turn[at] = t.turnIndex()[j];
                if (t.lossMask()[j]) {
                    mask[at] = 1f;
                    lp[at] = t.logprobs()[j];
                    ent[at] = t.entropies()[j];
                    if (t.postTool()[j]) post[at] = 1;
                }
            }
        }
        return new TrainingBatch(layout, rows, width, tokens, attn, mask, lp, ent, pos, seq, turn, post, row, offset, pl, rl, group, tree,
                List.copyOf(new ArrayList<>(trajectories)));
    }
}
