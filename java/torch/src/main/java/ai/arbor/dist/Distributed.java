package ai.arbor.dist;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.time.Duration;
import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.javacpp.SizeTPointer;
import org.bytedeco.javacpp.chrono.Milliseconds;
import org.bytedeco.pytorch.AllreduceOptions;
import org.bytedeco.pytorch.Backend;
import org.bytedeco.pytorch.BroadcastOptions;
import org.bytedeco.pytorch.GlooDeviceVector;
import org.bytedeco.pytorch.PrefixStore;
import org.bytedeco.pytorch.ProcessGroupGloo;
import org.bytedeco.pytorch.ReduceOp;
import org.bytedeco.pytorch.Store;
import org.bytedeco.pytorch.TCPStore;
import org.bytedeco.pytorch.TCPStoreOptions;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.Work;
import org.bytedeco.pytorch.global.torch;

/**
 * One process of a data-parallel job over torch.distributed's c10d, from the PyTorch preset: a
 * {@link TCPStore} rendezvous (rank 0 serves it at {@code MASTER_ADDR:MASTER_PORT}), then a process group —
 * {@link ProcessGroupGloo} for CPU tensors, {@code ProcessGroupNCCL} for CUDA tensors (the preset's GPU build;
 * {@link Backend#NCCL}) — and the collectives the trainer needs: in-place sum / max all-reduce, broadcast from a
 * root, barrier. Nothing here is a protocol of its own: the store, the keys Gloo and NCCL exchange and the
 * wire are c10d's; the rendezvous only adds a check that every rank was started with the same world size
 * (c10d's store does not check it) and that no rank joined twice.
 *
 * <p>Failures are {@link DistributedException}s naming what failed and where, never a hang: the store's
 * connect and get time out after {@link Config#timeout()} (an unreachable master, a rank that never came),
 * binding a port already in use fails at once, and every collective times out after the same duration — a peer
 * that died mid-collective is reported at once by Gloo ("connection closed by peer") or at the timeout.
 *
 * <p>Not thread-safe: one thread issues the collectives, in the same order on every rank.
 */
@SuppressWarnings("try")
public final class Distributed implements AutoCloseable {

    /** The process group's implementation. */
    public enum Backend {
        /** Gloo: CPU tensors, TCP between processes (also works on one machine over loopback). */
        GLOO,
        /** NCCL: CUDA tensors, one GPU per rank; needs the preset's GPU build ({@code -Pgpu}). */
        NCCL;

        /** Gloo for a CPU device, NCCL for a CUDA one (torch.distributed's usual choice). */
        public static Backend forDevice(org.bytedeco.pytorch.Device device) {
            return device.is_cuda() ? NCCL : GLOO;
        }
    }

    /**
     * Where this process is in the job and how to find the others.
     *
     * @param rank       this process, 0 ≤ rank < worldSize; rank 0 serves the store
     * @param worldSize  processes in the job
     * @param localRank  this process on its machine (its GPU index with NCCL)
     * @param masterAddr the host of rank 0's store
     * @param masterPort the store's TCP port
     * @param timeout    the store's connect and wait timeout and every collective's
     */
    public record Config(int rank, int worldSize, int localRank, String masterAddr, int masterPort, Duration timeout) {
        /** torch.distributed's default port. */
        public static final int DEFAULT_PORT = 29500;
        /** Default {@link #timeout}: long enough for a slow step, short enough to notice a dead peer. */
        public static final Duration DEFAULT_TIMEOUT = Duration.ofMinutes(5);

        public Config {
            if (worldSize < 1) throw new IllegalArgumentException("the world size must be >= 1, got " + worldSize);
            if (rank < 0 || rank >= worldSize) throw new IllegalArgumentException("the rank must be in [0, " + worldSize + "), got " + rank);
            if (localRank < 0) throw new IllegalArgumentException("the local rank must be >= 0, got " + localRank);
            if (masterAddr == null || masterAddr.isBlank()) throw new IllegalArgumentException("the master address must not be empty");
            if (masterPort < 1 || masterPort > 65535) throw new IllegalArgumentException("the master port must be in [1, 65535], got " + masterPort);
            if (timeout == null || timeout.toMillis() < 1) throw new IllegalArgumentException("the timeout must be positive, got " + timeout);
        }

        /**
         * From torchrun's environment variables: {@code RANK}, {@code WORLD_SIZE} (both required), {@code LOCAL_RANK}
         * (default: RANK), {@code MASTER_ADDR} (default 127.0.0.1), {@code MASTER_PORT} (default 29500) and
         * {@code ARBOR_DIST_TIMEOUT} (seconds, default 300).
         */
        public static Config fromEnv(Map<String, String> env) {
            int rank = intVar(env, "RANK", null), world = intVar(env, "WORLD_SIZE", null);
            return new Config(rank, world, intVar(env, "LOCAL_RANK", rank), env.getOrDefault("MASTER_ADDR", "127.0.0.1"),
                    intVar(env, "MASTER_PORT", DEFAULT_PORT), Duration.ofMillis(Math.round(1000 * doubleVar(env, "ARBOR_DIST_TIMEOUT",
                    DEFAULT_TIMEOUT.toMillis() / 1000.0))));
        }

        /** True when the environment names a job of more than one process ({@code WORLD_SIZE} > 1). */
        public static boolean inEnv(Map<String, String> env) {
            return env.containsKey("WORLD_SIZE") && intVar(env, "WORLD_SIZE", null) > 1;
        }

        public Config withTimeout(Duration t) {
            return new Config(rank, worldSize, localRank, masterAddr, masterPort, t);
        }

        private static int intVar(Map<String, String> env, String name, Integer dflt) {
            String v = env.get(name);
            if (v == null || v.isBlank()) {
                if (dflt == null) throw new IllegalArgumentException("environment variable " + name + " is not set (a distributed run needs RANK and WORLD_SIZE)");
                return dflt;
            }
            try {
                return Integer.parseInt(v.trim());
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("environment variable " + name + " must be an integer, got '" + v + "'");
            }
        }

        private static double doubleVar(Map<String, String> env, String name, double dflt) {
            String v = env.get(name);
            if (v == null || v.isBlank()) return dflt;
            try {
                return Double.parseDouble(v.trim());
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException("environment variable " + name + " must be a number of seconds, got '" + v + "'");
            }
        }
    }

    private final Config config;
    private final Backend backend;
    private final TCPStore store;
    private final PrefixStore groupStore;
    private final org.bytedeco.pytorch.Backend group;
    /** Where this rank's tensors are: the CPU with Gloo, its GPU with NCCL. */
    private final org.bytedeco.pytorch.Device device;
    private boolean closed;

    private Distributed(Config config, Backend backend, org.bytedeco.pytorch.Device device, TCPStore store, PrefixStore groupStore,
                        org.bytedeco.pytorch.Backend group) {
        this.config = config;
        this.backend = backend;
        this.device = device;
        this.store = store;
        this.groupStore = groupStore;
        this.group = group;
    }

    /**
     * Joins the job: connects to (rank 0: serves) the store, checks the world size against rank 0's and that this rank
     * joined once, and creates the process group. Blocks until every rank has joined, at most {@link Config#timeout()}.
     */
    public static Distributed init(Config c, Backend backend) {
        if (backend == null) throw new IllegalArgumentException("backend must not be null");
        return init(c, backend, backend == Backend.NCCL ? new org.bytedeco.pytorch.Device(torch.DeviceType.CUDA, (byte) c.localRank())
                : new org.bytedeco.pytorch.Device(torch.DeviceType.CPU));
    }

    /** {@link #init(Config, Backend)} for tensors on {@code device}: NCCL for a CUDA device, else Gloo. */
    public static Distributed init(Config c, org.bytedeco.pytorch.Device device) {
        if (device == null) throw new IllegalArgumentException("device must not be null");
        return init(c, Backend.forDevice(device), device);
    }

    private static Distributed init(Config c, Backend backend, org.bytedeco.pytorch.Device device) {
        String where = "rank " + c.rank() + " of " + c.worldSize();
        TCPStore store;
        try {
            TCPStoreOptions o = new TCPStoreOptions();
            o.port((short) c.masterPort());
            o.isServer(c.rank() == 0);
            o.numWorkers(new SizeTPointer(1).put(c.worldSize()));
            o.waitWorkers(false);   // the world-size check below waits, and names a rank that never came
            o.timeout(new Milliseconds(c.timeout().toMillis()));
            o.useLibUV(false);
            store = new TCPStore(c.masterAddr(), o);
        } catch (RuntimeException e) {
            String msg = firstLine(e);
            if (c.rank() == 0 && (msg.contains("Address already in use") || msg.contains("failed to listen") || msg.contains("errno: 98")))
                throw new DistributedException(where + ": cannot serve the rendezvous store on port " + c.masterPort()
                        + ": the port is already in use (another job? choose another MASTER_PORT / --master-port): " + msg, e);
            if (c.rank() == 0) throw new DistributedException(where + ": cannot serve the rendezvous store on port " + c.masterPort() + ": " + msg, e);
            throw new DistributedException(where + ": cannot reach the rendezvous store of rank 0 at " + c.masterAddr() + ":" + c.masterPort()
                    + " within " + seconds(c.timeout()) + " (is rank 0 running there? MASTER_ADDR / MASTER_PORT): " + msg, e);
        }
        try {
            checkWorld(store, c, where);
            PrefixStore prefixed = new PrefixStore("arbor/" + backend.name().toLowerCase(java.util.Locale.ROOT), store);
            org.bytedeco.pytorch.Backend group;
            try {
                group = backend == Backend.GLOO ? gloo(prefixed, c) : Nccl.create(prefixed, c);
            } catch (RuntimeException e) {
                throw new DistributedException(where + ": creating the " + backend + " process group failed: " + firstLine(e), e);
            }
            return new Distributed(c, backend, device, store, prefixed, group);
        } catch (RuntimeException e) {
            store.close();
            throw e;
        }
    }

    /**
     * Each rank joins once and records its world size; rank 0 compares every rank's with its own, every other rank
     * rank 0's (read before it records its own, so that rank 0 cannot stop serving the store in between).
     */
    private static void checkWorld(Store store, Config c, String where) {
        long joined;
        String mine = Integer.toString(c.worldSize());
        try {
            joined = store.add("arbor/joined/" + c.rank(), 1);
            if (c.rank() == 0) store.set("arbor/world/0", mine);
        } catch (RuntimeException e) {
            throw new DistributedException(where + ": the rendezvous store failed: " + firstLine(e), e);
        }
        if (joined > 1) throw new DistributedException(where + ": rank " + c.rank() + " has already joined this job (two processes with RANK=" + c.rank() + "?)");
        int[] ranks = c.rank() == 0 ? java.util.stream.IntStream.range(1, c.worldSize()).toArray() : new int[] {0};
        for (int r : ranks) {
            String theirs;
            try {
                theirs = store.get_to_str("arbor/world/" + r);
                if (c.rank() != 0) store.set("arbor/world/" + c.rank(), mine);
            } catch (RuntimeException e) {
                throw new DistributedException(where + ": rank " + r + " did not join within " + seconds(c.timeout())
                        + " (fewer processes than WORLD_SIZE=" + c.worldSize() + "? a rank that failed to start?): " + firstLine(e), e);
            }
            if (!theirs.equals(mine))
                throw new DistributedException("world size mismatch: rank " + c.rank() + " was started with WORLD_SIZE=" + c.worldSize() + ", rank " + r
                        + " with WORLD_SIZE=" + theirs);
        }
    }

    private static org.bytedeco.pytorch.Backend gloo(Store store, Config c) {
        ProcessGroupGloo.Options go = ProcessGroupGloo.Options.create(new Milliseconds(c.timeout().toMillis()));
        go.devices(new GlooDeviceVector(glooDevice(c)));
        go.threads(2);
        return new ProcessGroupGloo(store, c.rank(), c.worldSize(), go);
    }

    /**
     * Gloo's TCP device: the interface named by {@code GLOO_SOCKET_IFNAME} (as torch.distributed), else loopback when
     * the master is on this machine's loopback (a single-machine job), else the address this host's name resolves to.
     */
    private static org.bytedeco.pytorch.gloo.Device glooDevice(Config c) {
        String ifname = System.getenv("GLOO_SOCKET_IFNAME");
        if (ifname != null && !ifname.isBlank()) return ProcessGroupGloo.createDeviceForInterface(ifname.split(",")[0].trim());
        try {
            if (InetAddress.getByName(c.masterAddr()).isLoopbackAddress()) return ProcessGroupGloo.createDeviceForHostname("127.0.0.1");
        } catch (UnknownHostException e) {
            // the store connected to it, so it resolves; fall through to the default device
        }
        return ProcessGroupGloo.createDefaultDevice();
    }

    /** ProcessGroupNCCL, apart so that a CPU-only build never loads its natives until it is asked for. */
    private static final class Nccl {
        static org.bytedeco.pytorch.Backend create(Store store, Config c) {
            try {
                org.bytedeco.pytorch.nccl.ProcessGroupNCCL.Options o = org.bytedeco.pytorch.nccl.ProcessGroupNCCL.Options.create();
                o.timeout(new Milliseconds(c.timeout().toMillis()));
                return new org.bytedeco.pytorch.nccl.ProcessGroupNCCL(store, c.rank(), c.worldSize(), o);
            } catch (LinkageError e) {
                throw new DistributedException("the NCCL backend is not in this build of the PyTorch preset (CUDA tensors need the GPU build, mvn -Pgpu; "
                        + "CPU tensors use Gloo): " + e, e);
            }
        }
    }

    public int rank() {
        return config.rank();
    }

    public int worldSize() {
        return config.worldSize();
    }

    public int localRank() {
        return config.localRank();
    }

    /** Rank 0: the one that writes checkpoints and metrics. */
    public boolean isMain() {
        return config.rank() == 0;
    }

    public Config config() {
        return config;
    }

    public Backend backend() {
        return backend;
    }

    /** Σ over the ranks of {@code t}, in place (every rank gets the same bits). */
    public void allReduceSum(Tensor t) {
        allReduce(t, ReduceOp.RedOpType.SUM);
    }

    /** The element-wise max over the ranks of {@code t}, in place. */
    public void allReduceMax(Tensor t) {
        allReduce(t, ReduceOp.RedOpType.MAX);
    }

    private void allReduce(Tensor t, ReduceOp.RedOpType op) {
        checkOpen();
        try (PointerScope scope = new PointerScope()) {
            AllreduceOptions o = new AllreduceOptions();
            o.reduceOp(new ReduceOp(op));
            o.timeout(new Milliseconds(config.timeout().toMillis()));
            run("all-reduce (" + op + ", " + t.numel() + " elements)", group.allreduce(new TensorVector(t), o));
        }
    }

    /** Σ over the ranks of each value (float64 on the host: counts up to 2^53 are exact). */
    public double[] sum(double... v) {
        return hostReduce(v, ReduceOp.RedOpType.SUM);
    }

    /** The max over the ranks of each value. */
    public double[] max(double... v) {
        return hostReduce(v, ReduceOp.RedOpType.MAX);
    }

    private double[] hostReduce(double[] v, ReduceOp.RedOpType op) {
        if (v.length == 0) return v;
        try (PointerScope scope = new PointerScope()) {
            Tensor t = Tensor.create(v.clone(), v.length);
            if (backend == Backend.NCCL) t = t.to(device, t.scalar_type());
            allReduce(t, op);
            Tensor h = t.cpu().contiguous();
            double[] out = new double[v.length];
            h.data_ptr_double().get(out);
            return out;
        }
    }

    /** Rank {@code root}'s {@code t} into every rank's {@code t}, in place. */
    public void broadcast(Tensor t, int root) {
        checkOpen();
        if (root < 0 || root >= worldSize()) throw new IllegalArgumentException("root must be in [0, " + worldSize() + "), got " + root);
        try (PointerScope scope = new PointerScope()) {
            BroadcastOptions o = new BroadcastOptions();
            o.rootRank(root);
            o.timeout(new Milliseconds(config.timeout().toMillis()));
            run("broadcast from rank " + root + " (" + t.numel() + " elements)", group.broadcast(new TensorVector(t), o));
        }
    }

    /** Returns when every rank has called it (at most the timeout). */
    public void barrier() {
        checkOpen();
        // an all-reduce of one number: the same on both backends (NCCL's barrier needs a device id)
        sum(0.0);
    }

    private void run(String what, Work w) {
        try {
            w._wait();
        } catch (RuntimeException e) {
            throw new DistributedException("rank " + rank() + " of " + worldSize() + ": " + what + " failed (a peer died, or did not reach it within "
                    + seconds(config.timeout()) + "): " + firstLine(e), e);
        }
    }

    private void checkOpen() {
        if (closed) throw new IllegalStateException("this Distributed is closed");
    }

    private static String firstLine(Throwable e) {
        String m = String.valueOf(e.getMessage());
        int nl = m.indexOf('\n');
        String line = nl < 0 ? m : m.substring(0, nl);
        int raised = line.indexOf("Exception raised from");
        return (raised > 0 ? line.substring(0, raised) : line).trim();
    }

    private static String seconds(Duration d) {
        return d.toMillis() % 1000 == 0 ? d.toSeconds() + " s" : d.toMillis() / 1000.0 + " s";
    }

    /** Releases the process group and the store (rank 0 stops serving it: call after every rank's last collective). */
    @Override
    public void close() {
        if (closed) return;
        closed = true;
        group.close();
        groupStore.close();
        store.close();
    }
}
