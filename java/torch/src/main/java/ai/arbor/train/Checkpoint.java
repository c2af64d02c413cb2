package ai.arbor.train;

import ai.arbor.rl.Recipe;
import ai.arbor.rl.Sequence;
import ai.arbor.task.Evaluator;
import ai.arbor.torch.model.ReferencePolicy;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * A crash-safe checkpoint of a {@link TrainingRun} ({@code arbor train --checkpoint-every K}, {@code --resume DIR}):
 * a directory {@code checkpoint-NNNNNN} in the run's output directory with everything the run needs to go on as
 * if it had not stopped.
 *
 * <ul>
 *   <li>{@code policy.safetensors}: the weights (float32, bit for bit);</li>
 *   <li>{@code optimizer.pt}: AdamW's moments and step counts (libtorch's archive), when the phase has taken an
 *       optimizer step;</li>
 *   <li>{@code demos.bin}: the rendered SFT demonstrations (during SFT; rendering runs the tools, whose
 *       output a resumed run must not depend on);</li>
 *   <li>{@code reference.safetensors}: the frozen KL reference (during RL, when the recipe has a KL term);</li>
 *   <li>{@code metrics.jsonl}: the log's lines up to this step, which a resumed run's log starts from;</li>
 *   <li>{@code state.json}: the phase ({@link Phase}) and its steps done, the optimizer steps taken, the held-out
 *       evaluation of the starting point once it is done, the seconds spent so far, and a fingerprint of the
 *       run's options (a run with other options refuses to resume from it).</li>
 * </ul>
 *
 * <p>No random-number generator state is stored because none is carried between steps: every draw of a run is a
 * function of its seed and the step — the data order is replayed from its seed up to the checkpoint's step, the
 * rollouts of step s are seeded with {@code derive(seed, 1000 + s)} and the sampler's Philox stream is keyed per
 * request, the mini-batch shuffle of a step is seeded by the step's seed, and the policy has no dropout.
 *
 * <p>Written atomically: every file goes into a temporary directory {@code .checkpoint-NNNNNN.tmp} next to the
 * final one and is synced; the directory is synced, renamed to its final name, and the output directory synced;
 * only then are older checkpoints deleted. Files that do not change within a run (the demonstrations, the
 * reference) are hard links to the previous checkpoint's. A {@code kill -9} at any moment leaves the previous
 * complete checkpoint or the new one, never a partial one under a final name; {@link #latest} reads the newest.
 */
public final class Checkpoint {
    /** The phase a checkpoint is in: {@link #SFT} (its steps done), or {@link #RL} (SFT and the first evaluation done; RL steps done). */
    public enum Phase { SFT, RL }

    /**
     * How a run checkpoints.
     *
     * @param every  a checkpoint after every {@code every} steps of a phase and at its last step (0: none)
     * @param resume continue from the newest complete checkpoint in the output directory (from the start if it has none)
     */
    public record Policy(int every, boolean resume) {
        /** Steps between checkpoints of {@code arbor train}. */
        public static final int DEFAULT_EVERY = 20;

        public Policy {
            if (every < 0) throw new IllegalArgumentException("checkpoint interval must be >= 0 steps (0: no checkpoints), got " + every);
        }

        /** No checkpoints, no resume (what {@link TrainingRun#run(TrainingRun.Options, TrainingRun.Listener)} does). */
        public static Policy none() {
            return new Policy(0, false);
        }

        /** Whether a checkpoint is due after {@code done} of a phase's {@code steps} steps. */
        boolean due(int done, int steps) {
            return every > 0 && (done % every == 0 || done == steps);
        }
    }

    /** What a checkpoint records beside its tensors (the JSON of {@code state.json}). */
    record State(int version, String fingerprint, Phase phase, int step, long optimizerSteps, int sequence, double sftSeconds,
                 double rlSeconds, List<Evaluator.Result> before) {}

    static final int VERSION = 1;
    static final String POLICY = "policy.safetensors", OPTIMIZER = "optimizer.pt", DEMOS = "demos.bin", REFERENCE = "reference.safetensors",
            METRICS = "metrics.jsonl", STATE = "state.json";
    private static final Pattern NAME = Pattern.compile("checkpoint-(\\d{6,})");
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final byte[] DEMOS_MAGIC = "ARBDEMO1".getBytes(StandardCharsets.US_ASCII);

    private final Path dir;
    private final State state;

    private Checkpoint(Path dir, State state) {
        this.dir = dir;
        this.state = state;
    }

    public Path dir() {
        return dir;
    }

    State state() {
        return state;
    }

    Path file(String name) {
        return dir.resolve(name);
    }

    boolean has(String name) {
        return Files.exists(dir.resolve(name));
    }

    /** The metrics lines up to this checkpoint. */
    List<String> metricsLines() throws IOException {
        return Files.readAllLines(file(METRICS), StandardCharsets.UTF_8);
    }

    /** The SFT demonstrations (an SFT checkpoint's). */
    List<Sequence> demos() throws IOException {
        return readDemos(file(DEMOS));
    }

    // ---------------------------------------------------------------------------------------------
    // reading
    // ---------------------------------------------------------------------------------------------

    /**
     * The newest complete checkpoint in {@code out}, or null when there is none; one written by a run with other
     * options than {@code fingerprint} describes is an error naming the first difference.
     */
    static Checkpoint latest(Path out, String fingerprint) throws IOException {
        Path best = null;
        long bestSeq = -1;
        if (!Files.isDirectory(out)) return null;
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(out)) {
            for (Path p : ds) {
                Matcher m = NAME.matcher(p.getFileName().toString());
                if (m.matches() && Files.isDirectory(p) && Long.parseLong(m.group(1)) > bestSeq) {
                    best = p;
                    bestSeq = Long.parseLong(m.group(1));
                }
            }
        }
        if (best == null) return null;
        State st = JSON.readValue(best.resolve(STATE).toFile(), State.class);
        if (st.version() != VERSION)
            throw new IllegalArgumentException(best + " has checkpoint format version " + st.version() + "; this build reads " + VERSION);
        if (!st.fingerprint().equals(fingerprint)) {
            String[] a = st.fingerprint().split("\n", -1), b = fingerprint.split("\n", -1);
            int i = 0;
            while (i < Math.min(a.length, b.length) && a[i].equals(b[i])) i++;
            throw new IllegalArgumentException(best + " was written by a run with other options; resume with the same ones.\n  checkpoint: "
                    + (i < a.length ? a[i] : "") + "\n  this run:   " + (i < b.length ? b[i] : ""));
        }
        return new Checkpoint(best, st);
    }

    /**
     * What must equal between a run and the checkpoint it resumes: the recipe's name and the values a command line
     * replaces in it, and the setup (but its output directory, so a run may be moved), SFT, RL and evaluation options.
     */
    static String fingerprint(TrainingRun.Options o) {
        Recipe r = o.recipe();
        return String.join("\n", "recipe " + r.name() + ", n " + r.trajectoriesPerPrompt() + ", mini-batches " + r.miniBatches() + ", keep "
                + r.keepPerPrompt() + ", " + r.sampling() + ", " + r.loss() + ", " + r.shaping(),
                o.setup().withOut(Path.of(".")).toString(), o.sft().toString(), o.rl().toString(), o.eval().toString());
    }

    // ---------------------------------------------------------------------------------------------
    // writing
    // ---------------------------------------------------------------------------------------------

    /**
     * Writes checkpoint {@code state.sequence()} of the run in {@code out} (see the class comment for how) and deletes
     * the older ones.
     *
     * @param previous  the run's previous checkpoint (its unchanging files are linked), or null
     * @param trainer   the phase's trainer whose optimizer state is saved, or null before the phase's first step
     * @param demos     the SFT demonstrations, or null
     * @param reference the KL reference, or null
     */
    static Checkpoint write(Path out, Checkpoint previous, State state, ReferencePolicy policy, Trainer trainer, List<Sequence> demos,
                            ReferencePolicy reference, List<String> metricsLines) throws IOException {
        String name = String.format(Locale.ROOT, "checkpoint-%06d", state.sequence());
        Path tmp = out.resolve("." + name + ".tmp"), dir = out.resolve(name);
        deleteTree(tmp);
        Files.createDirectories(tmp);
        policy.save(tmp.resolve(POLICY));   // Safetensors syncs it
        if (trainer != null) {
            trainer.saveOptimizer(tmp.resolve(OPTIMIZER));
            sync(tmp.resolve(OPTIMIZER));
        }
        if (demos != null && !link(previous, DEMOS, tmp)) writeDemos(tmp.resolve(DEMOS), demos);
        if (reference != null && !link(previous, REFERENCE, tmp)) reference.save(tmp.resolve(REFERENCE));
        StringBuilder lines = new StringBuilder();
        for (String l : metricsLines) lines.append(l).append('\n');
        writeSynced(tmp.resolve(METRICS), lines.toString().getBytes(StandardCharsets.UTF_8));
        writeSynced(tmp.resolve(STATE), JSON.writerWithDefaultPrettyPrinter().writeValueAsBytes(state));
        sync(tmp);
        deleteTree(dir);   // only if an earlier run of this sequence number was renamed but not recorded (never in practice)
        Files.move(tmp, dir, StandardCopyOption.ATOMIC_MOVE);
        sync(out);
        deleteOthers(out, name);
        return new Checkpoint(dir, state);
    }

    /** Deletes every checkpoint and temporary checkpoint directory in {@code out} (a fresh run's start). */
    static void clear(Path out) throws IOException {
        deleteOthers(out, null);
    }

    private static void deleteOthers(Path out, String keep) throws IOException {
        if (!Files.isDirectory(out)) return;
        List<Path> doomed = new ArrayList<>();
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(out)) {
            for (Path p : ds) {
                String n = p.getFileName().toString();
                boolean ours = NAME.matcher(n).matches() || (n.startsWith(".checkpoint-") && n.endsWith(".tmp"));
                if (ours && !n.equals(keep)) doomed.add(p);
            }
        }
        for (Path p : doomed) deleteTree(p);
    }

    /** Hard-links {@code previous}'s file {@code name} into {@code dir}; false when there is none or links are not supported. */
    private static boolean link(Checkpoint previous, String name, Path dir) {
        if (previous == null || !previous.has(name)) return false;
        try {
            Files.createLink(dir.resolve(name), previous.file(name));
            return true;
        } catch (IOException | UnsupportedOperationException e) {
            return false;
        }
    }

    /**
     * Replaces {@code file} by {@code bytes} atomically: a synced temporary file next to it is renamed over it and the
     * directory synced, so a crash leaves the old content or the new, never a part.
     */
    public static void writeAtomically(Path file, byte[] bytes) throws IOException {
        Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
        writeSynced(tmp, bytes);
        Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        sync(file.toAbsolutePath().getParent());
    }

    private static void writeSynced(Path file, byte[] bytes) throws IOException {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.TRUNCATE_EXISTING, StandardOpenOption.WRITE)) {
            ByteBuffer buf = ByteBuffer.wrap(bytes);
            while (buf.hasRemaining()) ch.write(buf);
            ch.force(true);
        }
    }

    /** fsync of a file or a directory (Linux lets a read-only descriptor of either be synced). */
    static void sync(Path p) throws IOException {
        try (FileChannel ch = FileChannel.open(p, StandardOpenOption.READ)) {
            ch.force(true);
        }
    }

    /** Deletes {@code p} and everything below it (nothing when it does not exist). */
    static void deleteTree(Path p) throws IOException {
        if (!Files.exists(p)) return;
        try (Stream<Path> s = Files.walk(p)) {
            for (Path q : s.sorted(Comparator.reverseOrder()).toList()) Files.delete(q);
        }
    }

    // demonstrations: magic, count, then per sequence its length, tokens (int32) and mask (one byte each), big-endian

    static void writeDemos(Path file, List<Sequence> demos) throws IOException {
        try (FileOutputStream fos = new FileOutputStream(file.toFile());
             DataOutputStream out = new DataOutputStream(new BufferedOutputStream(fos, 1 << 16))) {
            out.write(DEMOS_MAGIC);
            out.writeInt(demos.size());
            for (Sequence s : demos) {
                out.writeInt(s.length());
                for (int t : s.tokens()) out.writeInt(t);
                for (boolean m : s.mask()) out.writeByte(m ? 1 : 0);
            }
            out.flush();
            fos.getFD().sync();
        }
    }

    static List<Sequence> readDemos(Path file) throws IOException {
        try (InputStream raw = Files.newInputStream(file); DataInputStream in = new DataInputStream(new BufferedInputStream(raw, 1 << 16))) {
            byte[] magic = in.readNBytes(DEMOS_MAGIC.length);
            if (!java.util.Arrays.equals(magic, DEMOS_MAGIC)) throw new IOException(file + " is not a demonstrations file");
            int n = in.readInt();
            if (n < 0) throw new IOException(file + ": negative count " + n);
            List<Sequence> out = new ArrayList<>(Math.min(n, 1 << 16));
            for (int i = 0; i < n; i++) {
                int len = in.readInt();
                if (len < 2 || len > 1 << 24) throw new IOException(file + ": sequence " + i + " has length " + len);
                int[] tokens = new int[len];
                boolean[] mask = new boolean[len];
                for (int k = 0; k < len; k++) tokens[k] = in.readInt();
                for (int k = 0; k < len; k++) mask[k] = in.readByte() != 0;
                out.add(new Sequence(tokens, mask));
            }
            if (in.read() != -1) throw new IOException(file + " has bytes after its " + n + " sequences");
            return out;
        }
    }
}
