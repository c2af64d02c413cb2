package ai.arbor.reward;

/** Seeds of randomized tests: {@code -Darbor.seed=N}, else the clock; the caller prints it. */
final class TestSeeds {
    private TestSeeds() {}

    static long seed() {
        String s = System.getProperty("arbor.seed");
        return s == null || s.isBlank() ? System.nanoTime() : Long.parseLong(s.trim());
    }
}
