package ai.arbor.bench.kernels;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;

/**
 * Peak extra resident memory of one call of each token-statistics implementation, measured from the
 * kernel's outside: the process's peak RSS (VmHWM) is reset through /proc/self/clear_refs, the call
 * runs once, and the new peak minus the RSS before the call is what the call needed beyond its inputs
 * and preallocated outputs. Run: {@code bench/run.sh --main ai.arbor.bench.kernels.PeakMemory [rows] [vocab]}.
 */
public final class PeakMemory {
    private PeakMemory() {}

    public static void main(String[] args) throws IOException {
        TokenStatsBench b = new TokenStatsBench();
        b.rows = args.length > 0 ? Integer.parseInt(args[0]) : 512;
        b.vocab = args.length > 1 ? Integer.parseInt(args[1]) : 151936;
        b.setup();
        double matrixMb = 4.0 * b.rows * b.vocab / (1 << 20);
        System.out.printf(Locale.ROOT, "rows=%d vocab=%d: one fp32 [rows, vocab] matrix = %.1f MiB%n", b.rows, b.vocab, matrixMb);
        org.openjdk.jmh.infra.Blackhole bh = new org.openjdk.jmh.infra.Blackhole(
                "Today's password is swordfish. I understand instantiating Blackholes directly is dangerous.");
        // warm every path once so one-time allocations (JIT, libtorch's thread pool) are not counted
        b.forwardNative2Threads();
        b.backwardNative2Threads();
        b.forwardLibtorchEager(bh);
        b.forwardBackwardLibtorchEager(bh);
        report("native forward (2 threads)", matrixMb, b::forwardNative2Threads);
        report("native backward (2 threads, into preallocated grad)", matrixMb, b::backwardNative2Threads);
        report("libtorch eager forward", matrixMb, () -> b.forwardLibtorchEager(bh));
        report("libtorch eager forward+backward (autograd)", matrixMb, () -> b.forwardBackwardLibtorchEager(bh));
    }

    static void report(String what, double matrixMb, Runnable call) throws IOException {
        System.gc();
        Files.writeString(Path.of("/proc/self/clear_refs"), "5");  // reset VmHWM to the current RSS
        long before = kb("VmRSS");
        call.run();
        long peak = kb("VmHWM");
        double extraMb = (peak - before) / 1024.0;
        System.out.printf(Locale.ROOT, "  %-52s peak extra %8.1f MiB = %5.2f x [rows, vocab]%n", what, extraMb, extraMb / matrixMb);
    }

    static long kb(String field) throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/self/status")))
            if (line.startsWith(field + ":")) return Long.parseLong(line.replaceAll("[^0-9]", ""));
        throw new IllegalStateException(field + " not in /proc/self/status");
    }
}
