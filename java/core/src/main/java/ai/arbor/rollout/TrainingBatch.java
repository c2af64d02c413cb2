package ai.arbor.rollout;

import java.util.List;

/**
 * Trajectories laid out as training arrays: {@code rows × width} row-major arrays over token positions,
 * plus per-sequence arrays. Built by {@link BatchAssembler}.
 *
 * <p>Alignment: every per-position value describes the token <em>at</em> that position.
 * {@code behaviourLogprobs[p]} = log π_old(tokens[p] | tokens[&lt;p]); a trainer that computes
 * log-probs from the logits at position p − 1 compares them with {@code behaviourLogprobs[p]}.
 *
 * @param layout            padded (one sequence per row, right padding) or packed (several per row)
 * @param rows              number of rows
 * @param width             positions per row
 * @param tokens            ids; padding = the assembler's pad id
 * @param attentionMask     1 on real tokens (prompt and response), 0 on padding
 * @param lossMask          1.0 on generated tokens, 0.0 on prompt, observation and padding tokens
 * @param behaviourLogprobs behaviour log-prob on generated tokens, 0 elsewhere
 * @param entropies         behaviour entropy on generated tokens where the backend gave it, NaN elsewhere
 * @param positionIds       position within its own sequence (restarting at 0 per packed sequence); 0 on padding
 * @param sequenceIds       index of the sequence at each position, −1 on padding
 * @param turnIndex         turn of each response token, −1 on prompt and padding
 * @param postToolMask      1 on TAO-RL's M_post tokens (generated tokens of a turn right after a tool observation)
 * @param sequenceRow       per sequence: its row
 * @param sequenceOffset    per sequence: its first position in the row (the prompt's first token)
 * @param promptLengths     per sequence: prompt tokens
 * @param responseLengths   per sequence: response tokens (generated + observation)
 * @param groupIds          per sequence: index of its prompt (GRPO group; Tree-GRPO inter-tree group)
 * @param treeIds           per sequence: a batch-wide id of its (prompt, tree) (Tree-GRPO intra-tree group)
 * @param trajectories      the source trajectories, in sequence order (node paths, tool records, …)
 */
public record TrainingBatch(BatchAssembler.Layout layout, int rows, int width, int[] tokens, byte[] attentionMask, float[] lossMask,
                            float[] behaviourLogprobs, float[] entropies, int[] positionIds, int[] sequenceIds, int[] turnIndex,
                            byte[] postToolMask, int[] sequenceRow, int[] sequenceOffset, int[] promptLengths, int[] responseLengths,
                            int[] groupIds, int[] treeIds, List<Trajectory> trajectories) {

    /** Number of sequences (trajectories). */
    public int sequences() {
        return trajectories.size();
    }

    /** Index into the row-major arrays of (row, position). */
    public int index(int row, int position) {
        return row * width + position;
    }

    /** Number of positions with loss mask 1. */
    public long trainedTokens() {
        long c = 0;
        for (float m : lossMask) if (m != 0) c++;
        return c;
    }
}
