package ai.arbor.torch.model;

import java.util.Arrays;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * A paged key/value cache (the block layout of vLLM's PagedAttention, Kwon et al. 2023): per layer,
 * one pool of {@code capacity × blockSize} token slots, each slot holding the keys (or values) of all
 * KV heads, {@code [capacity · blockSize, kvHeads, headDim]}. A sequence owns a list of block ids
 * (its block table); token position {@code p} lives in slot {@code table[p / blockSize] · blockSize
 * + p % blockSize}.
 *
 * <p>Blocks are reference counted so that forked sequences share their common prefix without
 * copying or recomputing it; a shared block is copied (copy-on-write) only when one of its owners
 * writes into it, which can only happen to the partly filled last block of a prefix. Freed blocks
 * go back on a free list; when none is free the pools double (existing block ids stay valid).
 *
 * <p>Fresh pools are zero-filled: attention gathers whole blocks and masks the slots beyond a
 * sequence's length, and a masked slot must hold a finite number (0 · NaN would poison the output).
 *
 * <p>Owned by one {@link DecodeBatch}; not thread-safe.
 */
@SuppressWarnings("try") // PointerScope and NoGradGuard act through their try blocks
public final class KvCache implements AutoCloseable {

    private final int layers;
    private final int kvHeads;
    private final int headDim;
    private final int blockSize;
    private final ScalarType dtype;
    private final Device device;
    private final Tensor[] keys;
    private final Tensor[] values;
    private int capacity;
    private int[] refs;
    private int[] free;
    private int freeCount;
    private boolean closed;

    KvCache(PolicyConfig config, Device device, ScalarType dtype, int blockSize, int initialBlocks) {
        if (blockSize < 1) throw new IllegalArgumentException("blockSize must be >= 1, got " + blockSize);
        if (initialBlocks < 1) throw new IllegalArgumentException("initialBlocks must be >= 1, got " + initialBlocks);
        this.layers = config.layers();
        this.kvHeads = config.kvHeads();
        this.headDim = config.headDim();
        this.blockSize = blockSize;
        this.dtype = dtype;
        this.device = device;
        this.keys = new Tensor[layers];
        this.values = new Tensor[layers];
        this.capacity = 0;
        this.refs = new int[0];
        this.free = new int[0];
        grow(initialBlocks);
    }

    public int blockSize() {
        return blockSize;
    }

    /** Blocks the pools hold now (used + free). */
    public int capacityBlocks() {
        return capacity;
    }

    /** Blocks referenced by at least one sequence. */
    public int usedBlocks() {
        return capacity - freeCount;
    }

    /** Bytes of the key and value pools over all layers. */
    public long bytes() {
        long elem = keys[0].element_size();
        return 2L * layers * capacity * blockSize * kvHeads * headDim * elem;
    }

    /** How many sequences reference {@code block}. */
    public int refCount(int block) {
        checkBlock(block);
        return refs[block];
    }

    Tensor keys(int layer) {
        return keys[layer];
    }

    Tensor values(int layer) {
        return values[layer];
    }

    /**
     * The slots of {@code blocks} (int64, [n · maxBlocks], each sequence's table padded) from
     * {@code pool}, as {@code [n, keyLength, kvHeads, headDim]} with keyLength = maxBlocks · blockSize.
     */
    Tensor gather(Tensor pool, Tensor blocks, long n, long keyLength) {
        return pool.view(capacity, blockSize, kvHeads, headDim).index_select(0, blocks).view(n, keyLength, kvHeads, headDim);
    }

    /** A block with reference count 1 (the pools grow when none is free). */
    int allocate() {
        ensureOpen();
        if (freeCount == 0) grow(capacity * 2);
        int b = free[--freeCount];
        refs[b] = 1;
        return b;
    }

    void retain(int block) {
        checkBlock(block);
        if (refs[block] <= 0) throw new IllegalStateException("block " + block + " is free");
        refs[block]++;
    }

    void release(int block) {
        checkBlock(block);
        if (refs[block] <= 0) throw new IllegalStateException("block " + block + " released more often than retained");
        if (--refs[block] == 0) free[freeCount++] = block;
    }

    /**
     * Copy-on-write: a new block holding {@code block}'s keys and values in every layer; the caller's
     * reference moves from {@code block} to the copy.
     */
    int copyOnWrite(int block) {
        checkBlock(block);
        int copy = allocate();
        try (NoGradGuard guard = new NoGradGuard(); PointerScope scope = new PointerScope()) {
            for (int l = 0; l < layers; l++) {
                for (Tensor pool : new Tensor[] {keys[l], values[l]}) {
                    Tensor blocks = pool.view(capacity, blockSize, kvHeads, headDim);
                    blocks.select(0, copy).copy_(blocks.select(0, block));
                }
            }
        }
        release(block);
        return copy;
    }

    private void grow(int newCapacity) {
        try (NoGradGuard guard = new NoGradGuard(); PointerScope scope = new PointerScope()) {
            long slots = (long) newCapacity * blockSize;
            for (int l = 0; l < layers; l++) {
                Tensor k = Tensors.own(torch.zeros(new long[] {slots, kvHeads, headDim}, Tensors.options(dtype, device)));
                Tensor v = Tensors.own(torch.zeros(new long[] {slots, kvHeads, headDim}, Tensors.options(dtype, device)));
                if (capacity > 0) {
                    long old = (long) capacity * blockSize;
                    k.narrow(0, 0, old).copy_(keys[l]);
                    v.narrow(0, 0, old).copy_(values[l]);
                    keys[l].close();
                    values[l].close();
                }
                keys[l] = k;
                values[l] = v;
            }
        }
        int[] newFree = Arrays.copyOf(free, newCapacity);
        // hand out low ids first: push the new ids in descending order
        for (int b = newCapacity - 1; b >= capacity; b--) newFree[freeCount++] = b;
        free = newFree;
        refs = Arrays.copyOf(refs, newCapacity);
        capacity = newCapacity;
    }

    private void checkBlock(int block) {
        if (block < 0 || block >= capacity) throw new IllegalArgumentException("block " + block + " outside [0, " + capacity + ")");
    }

    private void ensureOpen() {
        if (closed) throw new IllegalStateException("KV cache is closed");
    }

    @Override
    public void close() {
        if (closed) return;
        closed = true;
        for (int l = 0; l < layers; l++) {
            keys[l].close();
            values[l].close();
        }
    }
}
