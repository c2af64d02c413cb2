package ai.arbor.rollout;

/**
 * Deterministic seed derivation (SplitMix64 finalizer): every path, turn and strategy decision gets a
 * seed that depends only on the run's seed and its position (prompt index, path index, turn), never on
 * thread scheduling — which makes rollouts reproducible with a deterministic generator.
 */
public final class Seeds {
    private Seeds() {}

    /** SplitMix64's output function: a bijective, well-mixed map of {@code z}. */
    public static long mix64(long z) {
        z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
        z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
        return z ^ (z >>> 31);
    }

    /** A seed for child {@code index} of {@code seed}. */
    public static long derive(long seed, long index) {
        return mix64(mix64(seed + 0x9e3779b97f4a7c15L) ^ (index * 0xd1b54a32d192ed03L + 0x2545f4914f6cdd1dL));
    }

    /** {@code derive(derive(seed, a), b)}. */
    public static long derive(long seed, long a, long b) {
        return derive(derive(seed, a), b);
    }
}
