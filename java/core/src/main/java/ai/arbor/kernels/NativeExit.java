package ai.arbor.kernels;

import ai.arbor.bindings.ArborCpu;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Makes the JVM's exit skip the C++ destructors of native libraries' globals, so that exiting while a
 * thread is inside libtorch (a backward, a forward over a large vocabulary) cannot crash the JVM.
 *
 * <p>Why: however the JVM exits — {@code System.exit}, SIGTERM or SIGINT, the end of {@code main} —
 * it ends with the C library's {@code exit()}, and threads inside a native call are not stopped
 * before that (the JVM waits at most about 300 ms for them). {@code exit()} runs the destructors of the
 * globals of every loaded library, libtorch's among them, while such a thread still uses them: a run
 * stopped by SIGTERM in the middle of a backward died with SIGSEGV in
 * {@code at::accelerator::getAccelerator} reading a destroyed singleton (docs/training.md, "Stopping a run").
 *
 * <p>{@link #install()} adds a shutdown hook that calls {@code arbor_exit_skip_destructors}
 * ({@code native/include/arbor/arbor.h}): the hook runs after the JVM has decided to exit and before
 * its {@code exit()}, so the handler it registers is the last one and runs first: it flushes C stdio
 * and ends the process with {@code _exit} and the same status. Java shutdown hooks still all run, and
 * the exit status is unchanged (143 after SIGTERM, {@code System.exit}'s argument otherwise). What is
 * skipped is only native cleanup the kernel does anyway at process end (memory, CUDA contexts).
 * Installed by the classes that start libtorch work ({@code ReferencePolicy}, {@code TorchTensors},
 * {@code CpuThreads}; the benchmarks that call libtorch without them call it in their set-up); idempotent. {@code -Darbor.skipNativeDestructors=false} leaves the exit as it is
 * (for tools that report at exit from native code: LeakSanitizer, some profilers), with the crash risk
 * above. docs/training.md, "Stopping a run".
 */
public final class NativeExit {

    private static final AtomicBoolean INSTALLED = new AtomicBoolean();
    private static final AtomicBoolean HOOK_ADDED = new AtomicBoolean();

    private NativeExit() {}

    /** Adds the shutdown hook once per JVM (unless {@code arbor.skipNativeDestructors} is false); later calls do nothing. */
    public static void install() {
        if (!INSTALLED.compareAndSet(false, true)) return;
        if ("false".equals(System.getProperty("arbor.skipNativeDestructors"))) return;
        // Load the library now: the hook must not load native code while the JVM shuts down.
        ArborCpu.arbor_cpu_isa();
        try {
            Runtime.getRuntime().addShutdownHook(new Thread(NativeExit::arm, "arbor-native-exit"));
            HOOK_ADDED.set(true);
        } catch (IllegalStateException shuttingDown) {
            arm(); // the JVM is already exiting: register the handler before its exit() runs
            HOOK_ADDED.set(true);
        }
    }

    /** True once {@link #install()} has added its hook in this JVM. */
    public static boolean installed() {
        return HOOK_ADDED.get();
    }

    private static void arm() {
        int rc = ArborCpu.arbor_exit_skip_destructors();
        if (rc != ArborCpu.OK)
            System.err.println("arbor: arbor_exit_skip_destructors returned " + rc
                    + "; native destructors will run at exit (a thread still inside libtorch may crash the JVM)");
    }
}
