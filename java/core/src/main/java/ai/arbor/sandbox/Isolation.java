package ai.arbor.sandbox;

/**
 * How Python workers are isolated from the host. Requested with
 * {@link PythonSandbox.Builder#isolation}; the level in use is {@link PythonSandbox#isolation()}
 * ({@link #JAIL} or {@link #RLIMITS_ONLY}, never {@link #AUTO}). Details: docs/sandbox.md.
 */
public enum Isolation {
    /**
     * Request only: probe at start and use {@link #JAIL} where the host allows it, otherwise fall back
     * to {@link #RLIMITS_ONLY} with one warning.
     */
    AUTO,
    /**
     * bubblewrap with every namespace unshared (user, pid, network, ipc, uts, mount, cgroup), nested
     * user namespaces disabled, a non-root uid, capabilities dropped, {@code --die-with-parent} and
     * {@code --new-session}; read-only {@code /usr}, no {@code /etc} beyond the dynamic-linker cache and
     * Debian alternatives, a read-only root, size-limited tmpfs {@code /tmp}, {@code /scratch} and
     * {@code /dev/shm}; an empty environment; resource limits. Protects the host and the JVM from
     * anything the code does: no network, no view of host processes or files, no signals to the JVM,
     * no writes outside the tmpfs mounts, no leaked environment variables, bounded memory, processes,
     * files and CPU, and killing the worker kills every process it started. As a request, failing to
     * set it up is an error ({@link SandboxException}).
     */
    JAIL,
    /**
     * Fallback where namespaces are unavailable: an empty environment ({@code env -i}), resource limits
     * (address space, open files, file size, CPU; processes only when the JVM runs as root, which also
     * drops the worker to an unprivileged uid), a private scratch directory as working directory, and
     * the worker as subreaper so its orphans can be killed. Does NOT protect against network access,
     * reading host files the JVM's user can read, or signals to the JVM's other processes; for trusted
     * or test code only.
     */
    RLIMITS_ONLY
}
