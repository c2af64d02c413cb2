package ai.arbor.reward;

/** Seeds of randomized tests: {@code -Darbor.seed=N}, else the clock; the caller prints it. */
final class TestSeeds {
    private TestSeeds() {}

    static long seed() {
        return ai.arbor.testing.Seeds.seed();
    }
}
