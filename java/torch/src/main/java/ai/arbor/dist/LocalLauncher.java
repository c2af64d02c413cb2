package ai.arbor.dist;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Starts the ranks of one machine as child JVMs, as torchrun does: rank {@code nodeRank · nproc + i} of
 * {@code nnodes · nproc}, with {@code RANK}, {@code WORLD_SIZE}, {@code LOCAL_RANK}, {@code LOCAL_WORLD_SIZE},
 * {@code MASTER_ADDR}, {@code MASTER_PORT} and {@code ARBOR_DIST_TIMEOUT} set ({@link Distributed.Config#fromEnv}).
 * The first local rank's output is this process's; every other rank's goes to {@code logDir/rank-N.log}. Waits for
 * all of them; when one fails the others are stopped after a grace period (they usually fail on their own first, at
 * their next collective) and its exit code is returned. Killing the launcher (Ctrl-C) stops the children.
 *
 * <p>On a machine with at least {@code nproc} GPUs and no {@code CUDA_VISIBLE_DEVICES}, each child sees only the GPU
 * of its local rank (so {@code cuda:0} is a different device in each, as NCCL needs).
 */
public final class LocalLauncher {
    /** How long the other ranks get to end on their own after one failed. */
    static final Duration GRACE = Duration.ofSeconds(10);

    /**
     * @param command   the child's command line (e.g. {@link #javaCommand} + the program's arguments)
     * @param nproc     ranks on this machine
     * @param nnodes    machines
     * @param nodeRank  this machine, 0 ≤ nodeRank < nnodes (0 serves the store)
     * @param gpus      GPUs of this machine (0: none)
     */
    public record Job(List<String> command, int nproc, int nnodes, int nodeRank, String masterAddr, int masterPort, Duration timeout, Path logDir,
                      int gpus) {
        public Job {
            if (command == null || command.isEmpty()) throw new IllegalArgumentException("command must not be empty");
            if (nproc < 1) throw new IllegalArgumentException("--nproc must be >= 1, got " + nproc);
            if (nnodes < 1) throw new IllegalArgumentException("--nnodes must be >= 1, got " + nnodes);
            if (nodeRank < 0 || nodeRank >= nnodes) throw new IllegalArgumentException("--node-rank must be in [0, " + nnodes + "), got " + nodeRank);
            if (masterAddr == null || masterAddr.isBlank()) throw new IllegalArgumentException("the master address must not be empty");
            if (masterPort < 1 || masterPort > 65535) throw new IllegalArgumentException("the master port must be in [1, 65535], got " + masterPort);
            if (timeout == null || timeout.toMillis() < 1) throw new IllegalArgumentException("the timeout must be positive, got " + timeout);
            if (logDir == null) throw new IllegalArgumentException("logDir must not be null");
        }
    }

    private LocalLauncher() {}

    /** Runs the job's local ranks to their end; 0 when every one succeeded, else the first failure's exit code. */
    public static int run(Job job) throws IOException, InterruptedException {
        Files.createDirectories(job.logDir());
        ai.arbor.torch.NativeCache.fill();   // the ranks start at once: extract the libraries before them
        int world = job.nproc() * job.nnodes();
        List<Process> ps = new ArrayList<>();
        Thread stopAll = new Thread(() -> ps.forEach(Process::destroyForcibly));
        Runtime.getRuntime().addShutdownHook(stopAll);
        try {
            for (int i = 0; i < job.nproc(); i++) {
                int rank = job.nodeRank() * job.nproc() + i;
                ProcessBuilder pb = new ProcessBuilder(job.command());
                Map<String, String> env = pb.environment();
                env.put("RANK", Integer.toString(rank));
                env.put("WORLD_SIZE", Integer.toString(world));
                env.put("LOCAL_RANK", Integer.toString(i));
                env.put("LOCAL_WORLD_SIZE", Integer.toString(job.nproc()));
                env.put("MASTER_ADDR", job.masterAddr());
                env.put("MASTER_PORT", Integer.toString(job.masterPort()));
                env.put("ARBOR_DIST_TIMEOUT", Double.toString(job.timeout().toMillis() / 1000.0));
                if (job.gpus() >= job.nproc() && !env.containsKey("CUDA_VISIBLE_DEVICES")) env.put("CUDA_VISIBLE_DEVICES", Integer.toString(i));
                if (i == 0) pb.inheritIO();
                else pb.redirectErrorStream(true).redirectOutput(job.logDir().resolve("rank-" + rank + ".log").toFile());
                ps.add(pb.start());
            }
            int failed = -1;
            long stopAt = Long.MAX_VALUE;
            while (true) {
                boolean alive = false;
                for (int i = 0; i < ps.size(); i++) {
                    Process p = ps.get(i);
                    if (p.isAlive()) alive = true;
                    else if (p.exitValue() != 0 && failed < 0) {
                        failed = i;
                        stopAt = System.nanoTime() + GRACE.toNanos();
                        System.err.printf("arbor: rank %d exited with code %d%s; stopping the other ranks%n", job.nodeRank() * job.nproc() + i,
                                p.exitValue(), i == 0 ? "" : " (its output: " + job.logDir().resolve("rank-" + (job.nodeRank() * job.nproc() + i) + ".log") + ")");
                    }
                }
                if (!alive) break;
                if (System.nanoTime() > stopAt) ps.forEach(Process::destroyForcibly);
                Thread.sleep(50);
            }
            if (failed >= 0) return ps.get(failed).exitValue();
            for (Process p : ps) if (p.exitValue() != 0) return p.exitValue();
            return 0;
        } finally {
            for (Process p : ps) {
                p.destroyForcibly();
                p.waitFor(10, TimeUnit.SECONDS);
            }
            try {
                Runtime.getRuntime().removeShutdownHook(stopAll);
            } catch (IllegalStateException e) {
                // shutting down: the hook runs
            }
        }
    }

    /** This JVM's command up to its main class: the java binary, the JVM options it was started with and its class path. */
    public static List<String> javaCommand(Class<?> main) {
        List<String> cmd = new ArrayList<>();
        cmd.add(ProcessHandle.current().info().command().orElse(Path.of(System.getProperty("java.home"), "bin", "java").toString()));
        cmd.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments());
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(main.getName());
        return cmd;
    }

    /** A TCP port free on this machine now (for a single-machine job's store). */
    public static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }
}
