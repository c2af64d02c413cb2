package ai.arbor.advantage;

import ai.arbor.kernels.Check;
import java.util.Collections;
import java.util.EnumMap;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

/**
 * What to keep and why: per trajectory a loss weight in [0, 1] and the set of reasons that lowered it.
 * Invariant (checked): a weight is below 1 exactly when the trajectory has at least one reason — nothing
 * is dropped silently. Immutable.
 *
 * <p>Use: compute advantages over all trajectories (filtered ones included in their group's statistics),
 * then {@link #applyTo(float[])} scales each advantage by its weight (0 = no policy-gradient signal), and
 * {@link #tokenMask} removes the tokens of excluded trajectories from the loss mask (so they leave the
 * token-mean denominators and the KL/entropy terms too).
 */
public final class FilterResult {
    private final float[] weights;
    private final EnumSet<FilterReason>[] reasons;

    @SuppressWarnings("unchecked")
    private FilterResult(float[] weights, EnumSet<FilterReason>[] reasons) {
        this.weights = weights;
        this.reasons = reasons;
    }

    /** Every trajectory kept with weight 1. */
    @SuppressWarnings("unchecked")
    public static FilterResult keepAll(int n) {
        Check.nonNegative("n", n);
        float[] w = new float[n];
        java.util.Arrays.fill(w, 1f);
        EnumSet<FilterReason>[] r = new EnumSet[n];
        for (int i = 0; i < n; i++) r[i] = EnumSet.noneOf(FilterReason.class);
        return new FilterResult(w, r);
    }

    /** Both decisions: weights multiply, reasons are united. */
    public FilterResult and(FilterResult other) {
        Check.notNull("other", other);
        if (other.size() != size()) throw new IllegalArgumentException("filter results of " + size() + " and " + other.size() + " trajectories");
        FilterResult r = copy();
        for (int i = 0; i < weights.length; i++) {
            r.weights[i] *= other.weights[i];
            r.reasons[i].addAll(other.reasons[i]);
        }
        return r;
    }

    @SuppressWarnings("unchecked")
    private FilterResult copy() {
        EnumSet<FilterReason>[] r = new EnumSet[reasons.length];
        for (int i = 0; i < r.length; i++) r[i] = EnumSet.copyOf(reasons[i]);
        return new FilterResult(weights.clone(), r);
    }

    /** A builder over {@code n} trajectories, all starting at weight 1 with no reason. */
    public static Builder builder(int n) {
        return new Builder(n);
    }

    /** Builds a result trajectory by trajectory (what filters use). */
    public static final class Builder {
        private final FilterResult r;
        private boolean built;

        private Builder(int n) {
            r = keepAll(n);
        }

        /** Multiplies trajectory i's weight by {@code weight} in [0, 1) and records {@code reason}. */
        public Builder mark(int i, FilterReason reason, float weight) {
            if (built) throw new IllegalStateException("already built");
            Check.notNull("reason", reason);
            if (i < 0 || i >= r.weights.length)
                throw new IllegalArgumentException("trajectory " + i + " outside [0, " + r.weights.length + ")");
            if (!(weight >= 0f && weight < 1f))
                throw new IllegalArgumentException("weight for " + reason + " must be in [0, 1), got " + weight);
            r.weights[i] *= weight;
            r.reasons[i].add(reason);
            return this;
        }

        public FilterResult build() {
            built = true;
            return r;
        }
    }

    public int size() {
        return weights.length;
    }

    /** Loss weight of trajectory i in [0, 1]. */
    public float weight(int i) {
        return weights[i];
    }

    /** All weights (a copy). */
    public float[] weights() {
        return weights.clone();
    }

    /** Why trajectory i was lowered (empty = untouched). */
    public Set<FilterReason> reasons(int i) {
        return Collections.unmodifiableSet(reasons[i]);
    }

    /** Weight > 0: the trajectory stays in the loss (possibly scaled). */
    public boolean isKept(int i) {
        return weights[i] > 0f;
    }

    public int keptCount() {
        int c = 0;
        for (float w : weights) if (w > 0f) c++;
        return c;
    }

    /** Weight 0: out of the loss. */
    public int excludedCount() {
        return size() - keptCount();
    }

    /** 0 < weight < 1: kept with a scaled advantage. */
    public int scaledCount() {
        int c = 0;
        for (float w : weights) if (w > 0f && w < 1f) c++;
        return c;
    }

    /** Trajectories reason {@code r} applied to (a trajectory with two reasons counts under both). */
    public int count(FilterReason r) {
        int c = 0;
        for (EnumSet<FilterReason> s : reasons) if (s.contains(r)) c++;
        return c;
    }

    /** {@link #count} for every reason, zeros included. */
    public Map<FilterReason, Integer> counts() {
        Map<FilterReason, Integer> m = new EnumMap<>(FilterReason.class);
        for (FilterReason r : FilterReason.values()) m.put(r, count(r));
        return m;
    }

    /** Per trajectory: weight > 0. */
    public boolean[] keepMask() {
        boolean[] k = new boolean[weights.length];
        for (int i = 0; i < k.length; i++) k[i] = weights[i] > 0f;
        return k;
    }

    /** A_i · w_i: the advantages with every trajectory scaled by its weight (a new array). */
    public float[] applyTo(float[] advantages) {
        if (advantages == null) throw new IllegalArgumentException("advantages must not be null");
        if (advantages.length != size())
            throw new IllegalArgumentException("advantages.length must be " + size() + ", got " + advantages.length);
        float[] out = new float[advantages.length];
        for (int i = 0; i < out.length; i++) out[i] = weights[i] == 0f ? 0f : advantages[i] * weights[i];  // +0, not −0
        return out;
    }

    /**
     * The token loss mask without the tokens of excluded (weight 0) trajectories: {@code lossMask[t]} and
     * trajectory {@code seqIds[t]} kept. {@code lossMask} null = all tokens.
     */
    public boolean[] tokenMask(int[] seqIds, boolean[] lossMask) {
        Check.notNull("seqIds", seqIds);
        if (lossMask != null) Check.length("lossMask", lossMask, seqIds.length);
        boolean[] m = new boolean[seqIds.length];
        for (int t = 0; t < m.length; t++) {
            if (lossMask != null && !lossMask[t]) continue;
            int s = seqIds[t];
            if (s < 0 || s >= size()) throw new IllegalArgumentException("seqIds[" + t + "] = " + s + " is outside [0, " + size() + ")");
            m[t] = weights[s] > 0f;
        }
        return m;
    }

    /** Metrics: {@code prefix + "kept" | "excluded" | "scaled"} and one count per reason. */
    public Map<String, Double> metrics(String prefix) {
        Map<String, Double> m = new LinkedHashMap<>();
        m.put(prefix + "kept", (double) keptCount());
        m.put(prefix + "excluded", (double) excludedCount());
        m.put(prefix + "scaled", (double) scaledCount());
        for (FilterReason r : FilterReason.values()) m.put(prefix + r.metricName(), (double) count(r));
        return m;
    }

    @Override
    public String toString() {
        StringBuilder b = new StringBuilder("FilterResult{n=").append(size()).append(", kept=").append(keptCount())
                .append(", excluded=").append(excludedCount()).append(", scaled=").append(scaledCount());
        for (FilterReason r : FilterReason.values()) {
            int c = count(r);
            if (c > 0) b.append(", ").append(r.metricName()).append('=').append(c);
        }
        return b.append('}').toString();
    }
}
