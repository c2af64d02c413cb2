package ai.arbor.testing;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

/**
 * Files of this repository that tests read (the README, the shipped data): found by walking up from the
 * working directory to the directory that holds {@code README.md} and {@code java/core}. A missing file
 * fails the test with its path; it never skips it.
 */
public final class Repository {
    private Repository() {}

    /** The repository's root directory. */
    public static Path root() {
        Path start = Paths.get("").toAbsolutePath();
        for (Path p = start; p != null; p = p.getParent()) {
            if (Files.isRegularFile(p.resolve("README.md")) && Files.isDirectory(p.resolve("java/core"))) return p;
        }
        throw new IllegalStateException("the repository's root (README.md beside java/core) is not above " + start);
    }

    /** {@code relative} under the root; fails when it does not exist. */
    public static Path file(String relative) {
        Path f = root().resolve(relative);
        if (!Files.exists(f)) throw new IllegalStateException(f + " is missing: it is part of the repository");
        return f;
    }
}
