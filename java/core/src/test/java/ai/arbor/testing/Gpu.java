package ai.arbor.testing;

import java.util.function.Supplier;
import org.junit.jupiter.api.Assumptions;

/**
 * The one way a test may skip: the GPU it needs is not here. The reason is printed with the test's name
 * and starts with {@value #SKIP_PREFIX}, so that {@code .ci/run} can tell a GPU skip from any other skip
 * (which fails the run).
 */
public final class Gpu {
    private Gpu() {}

    /** Every skip message of this class starts with this. */
    public static final String SKIP_PREFIX = "no GPU: ";

    /** Skips the calling test, printing why, unless {@code available}. */
    public static void assume(boolean available, Supplier<String> why) {
        if (available) return;
        String message = SKIP_PREFIX + why.get();
        String test = StackWalker.getInstance().walk(s -> s.filter(f -> !f.getClassName().equals(Gpu.class.getName())).findFirst()
                .map(f -> f.getClassName().substring(f.getClassName().lastIndexOf('.') + 1) + "." + f.getMethodName())
                .orElse("?"));
        System.out.println(test + ": skipped (" + message + ")");
        Assumptions.abort(message);
    }

    /** Skips unless {@code available}; the reason is a fixed string. */
    public static void assume(boolean available, String why) {
        assume(available, () -> why);
    }
}
