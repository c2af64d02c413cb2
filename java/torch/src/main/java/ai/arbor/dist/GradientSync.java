package ai.arbor.dist;

import ai.arbor.kernels.LossAgg;
import ai.arbor.rl.TokenBatch;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;

/**
 * What data-parallel training adds to a gradient step (the trainer calls it at three points, docs/distributed.md):
 *
 * <ol>
 *   <li>{@link #normalizer}: the loss's aggregation normalizer over the <em>global</em> batch — trained tokens and
 *       sequences summed over the ranks, the longest span their max (docs/algorithms.md §2) — so each rank's loss is
 *       its share of the one-process loss and the shares add up to it;</li>
 *   <li>{@link #allReduceGradients}: the gradients summed over the ranks (not averaged: each rank's already carries
 *       the global normalizer), in buckets of at most {@link #bucketBytes} — the gradients of consecutive parameters
 *       are copied into one flat buffer, all-reduced, and copied back — after the backward of the whole local batch;</li>
 *   <li>{@link #broadcastParameters}: rank 0's weights to every rank, once before training.</li>
 * </ol>
 *
 * <p>Then every rank clips the same global gradient and takes the same AdamW step: the optimizer state is
 * replicated, not sharded (each rank holds all of AdamW's moments), and the ranks' weights stay equal bit for bit
 * (every rank receives the same reduced bits).
 */
@SuppressWarnings("try")
public final class GradientSync {
    /** Default bucket: 25 MiB of fp32 gradients, DDP's default {@code bucket_cap_mb}. */
    public static final long DEFAULT_BUCKET_BYTES = 25L << 20;

    private final Distributed dist;
    private final long bucketBytes;

    public GradientSync(Distributed dist) {
        this(dist, DEFAULT_BUCKET_BYTES);
    }

    public GradientSync(Distributed dist, long bucketBytes) {
        if (dist == null) throw new IllegalArgumentException("dist must not be null");
        if (bucketBytes < 1) throw new IllegalArgumentException("bucketBytes must be >= 1, got " + bucketBytes);
        this.dist = dist;
        this.bucketBytes = bucketBytes;
    }

    public Distributed distributed() {
        return dist;
    }

    public long bucketBytes() {
        return bucketBytes;
    }

    /**
     * {@link TokenBatch#normalizer} of the union of the ranks' batches: Σ trained tokens (token-mean), Σ sequences
     * with a trained token (the sequence means), max of the longest trained spans (token-sum-norm); at least 1.
     */
    public double normalizer(TokenBatch local, LossAgg agg) {
        // a batch with no row of weight > 0 (empty, or every row rejected) counts nothing; normalizer() would say 1
        double live = 0;
        for (float w : local.weight()) live += w;
        double mine = live > 0 ? local.normalizer(agg) : 0;
        double g = agg == LossAgg.SEQ_MEAN_TOKEN_SUM_NORM ? dist.max(mine)[0] : dist.sum(mine)[0];
        return Math.max(1, g);
    }

    /** Σ over the ranks (counts, loss sums). */
    public double[] sum(double... v) {
        return dist.sum(v);
    }

    /** The max over the ranks. */
    public double max(double v) {
        return dist.max(v)[0];
    }

    /**
     * Sums every parameter's gradient over the ranks, in place, in buckets. A parameter without a gradient on this
     * rank (its local batch was empty, or did not reach it) gets zeros first, so every rank reduces the same buckets.
     */
    public void allReduceGradients(TensorVector params) {
        if (dist.worldSize() == 1) return;
        List<Tensor> grads = new ArrayList<>();
        try (NoGradGuard g = new NoGradGuard()) {
            for (long i = 0; i < params.size(); i++) {
                Tensor p = params.get(i);
                if (!p.requires_grad()) continue;
                if (!p.grad().defined()) p.mutable_grad().put(torch.zeros_like(p));
                grads.add(p.grad());
            }
            forEachBucket(grads, bucket -> {
                Tensor flat = flatten(bucket);
                dist.allReduceSum(flat);
                unflatten(flat, bucket);
            });
        }
    }

    /** Rank 0's values of {@code params} into every rank's, in buckets (before the first step). */
    public void broadcastParameters(TensorVector params) {
        if (dist.worldSize() == 1) return;
        List<Tensor> ps = new ArrayList<>();
        for (long i = 0; i < params.size(); i++) ps.add(params.get(i));
        try (NoGradGuard g = new NoGradGuard()) {
            forEachBucket(ps, bucket -> {
                Tensor flat = flatten(bucket);
                dist.broadcast(flat, 0);
                unflatten(flat, bucket);
            });
        }
    }

    /** Consecutive tensors of one dtype and device, at most {@link #bucketBytes} together (a larger tensor alone). */
    private void forEachBucket(List<Tensor> ts, java.util.function.Consumer<List<Tensor>> f) {
        List<Tensor> cur = new ArrayList<>();
        long bytes = 0;
        for (Tensor t : ts) {
            long b = t.numel() * t.element_size();
            boolean sameKind = cur.isEmpty() || (cur.get(0).scalar_type().value == t.scalar_type().value && sameDevice(cur.get(0), t));
            if (!cur.isEmpty() && (bytes + b > bucketBytes || !sameKind)) {
                run(f, cur);
                cur = new ArrayList<>();
                bytes = 0;
            }
            cur.add(t);
            bytes += b;
        }
        if (!cur.isEmpty()) run(f, cur);
    }

    private static boolean sameDevice(Tensor a, Tensor b) {
        org.bytedeco.pytorch.Device x = a.device(), y = b.device();
        return x.type().value == y.type().value && x.index() == y.index();   // the preset's enums are not interned: compare values
    }

    /** The buckets {@link #allReduceGradients} reduces {@code params}' gradients in: their sizes in elements. */
    List<Long> bucketSizes(TensorVector params) {
        List<Tensor> ps = new ArrayList<>();
        for (long i = 0; i < params.size(); i++) if (params.get(i).requires_grad()) ps.add(params.get(i));
        List<Long> out = new ArrayList<>();
        forEachBucket(ps, bucket -> out.add(bucket.stream().mapToLong(Tensor::numel).sum()));
        return out;
    }

    private static void run(java.util.function.Consumer<List<Tensor>> f, List<Tensor> bucket) {
        try (PointerScope scope = new PointerScope()) {
            f.accept(bucket);
        }
    }

    private static Tensor flatten(List<Tensor> bucket) {
        if (bucket.size() == 1) return bucket.get(0).reshape(-1).contiguous().clone();
        TensorVector v = new TensorVector();
        for (Tensor t : bucket) v.push_back(t.reshape(-1));
        return torch.cat(v);
    }

    private static void unflatten(Tensor flat, List<Tensor> bucket) {
        long at = 0;
        for (Tensor t : bucket) {
            long n = t.numel();
            t.copy_(flat.narrow(0, at, n).view_as(t));
            at += n;
        }
    }
}
