package ai.arbor.testing;

/**
 * Seeds of randomized tests, one convention for every module: {@code -Darbor.seed=N} (passed through by
 * surefire) reproduces a run; without it the seed comes from the clock. Tests print the seed they use.
 */
public final class Seeds {
    private Seeds() {}

    /** The seed to use: {@code -Darbor.seed} or the clock. */
    public static long seed() {
        String s = System.getProperty("arbor.seed");
        return s != null && !s.isBlank() ? Long.parseLong(s.trim()) : System.nanoTime();
    }

    /** {@link #seed()}, printed with the test's name so a failure can be rerun with {@code -Darbor.seed}. */
    public static long seed(String test) {
        long s = seed();
        System.out.println(test + ": seed " + s + " (rerun with -Darbor.seed=" + s + ")");
        return s;
    }
}
