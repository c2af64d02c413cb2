package ai.arbor.bench.kernels;

import ai.arbor.kernels.DType;
import ai.arbor.kernels.FusedLinear;
import ai.arbor.kernels.Kernels;
import ai.arbor.kernels.LogitsView;
import ai.arbor.kernels.MemRef;
import ai.arbor.kernels.PolicyLoss;
import ai.arbor.kernels.PolicyLossConfig;
import ai.arbor.kernels.PolicyLossResult;
import ai.arbor.torch.EagerPolicyLoss;
import ai.arbor.torch.model.CpuThreads;
import java.io.IOException;
import java.util.Arrays;
import java.util.Locale;
import java.util.Random;
import org.bytedeco.javacpp.FloatPointer;
import org.bytedeco.javacpp.IntPointer;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.javacpp.ShortPointer;
import org.bytedeco.openblas.global.openblas_nolapack;
import org.bytedeco.pytorch.Tensor;

/**
 * The policy loss from hidden states, three ways side by side in one run (interleaved repetitions):
 * <ul>
 *   <li>{@code fused}: {@link FusedLinear} — tiles of rows × vocabulary, never the [T, V] logits — on Java arrays
 *       (whose h, W, dh and dW JNI copies in and out), and {@code fused-mem} on native memory (no copy);</li>
 *   <li>{@code unfused}: cblas_sgemm → logits [T, V] → {@link PolicyLoss#forwardBackward} (in place) →
 *       cblas_sgemm for dh and dW (the same kernels, with the logits materialised) on Java arrays, and
 *       {@code unfused-mem} the same on native memory;</li>
 *   <li>{@code libtorch}: eager {@code h.matmul(W.t())}, log_softmax, gather, the clip loss
 *       ({@code EagerPolicyLoss}), autograd backward to h and W.</li>
 * </ul>
 * Prints the median time of each and the peak extra resident memory of one call (VmHWM reset through
 * /proc/self/clear_refs; inputs and gradient outputs are allocated before). Token-mean PPO clip, fp32.
 * Run: {@code MALLOC_MMAP_THRESHOLD_=131072 ARBOR_JAVA_OPTS='-Xms3g -Xmx3g -XX:+AlwaysPreTouch'
 * bench/run.sh --main ai.arbor.bench.kernels.FusedLinearBench [T d V reps threads [tileRows tileVocab [variants [wholeRows]]]]}
 * ({@code variants}: a comma list of the names above; the tile is fused-mem's, default {@link FusedLinear.Chunks#cpu()}),
 * and {@code fused-whole}: fused-mem with tiles of {@code wholeRows} (default 128) × the whole vocabulary, where pass 2
 * reuses pass 1's tile (three products). With bf16 {@code h} and {@code W} (the fp32 ones rounded): {@code fused-bf16}
 * and {@code fused-whole-bf16} (the kernel widens them a block at a time; gradients fp32) and {@code libtorch-bf16}
 * (bf16 leaves and matmul, the loss on the logits cast to fp32, as autocast runs it).
 */
public final class FusedLinearBench {
    private FusedLinearBench() {}

    public static void main(String[] args) throws IOException {
        int t = args.length > 0 ? Integer.parseInt(args[0]) : 1024;
        int d = args.length > 1 ? Integer.parseInt(args[1]) : 512;
        int v = args.length > 2 ? Integer.parseInt(args[2]) : 151936;
        int reps = args.length > 3 ? Integer.parseInt(args[3]) : 3;
        int threads = args.length > 4 ? Integer.parseInt(args[4]) : 2;
        // fused-mem's tile (default the CPU's, FusedLinear.Chunks.cpu()) and which variants to run (default all)
        FusedLinear.Chunks tile = args.length > 6 ? new FusedLinear.Chunks(Long.parseLong(args[5]), Long.parseLong(args[6]))
                : FusedLinear.Chunks.cpu();
        java.util.Set<String> only = args.length > 7 ? java.util.Set.of(args[7].split(",")) : null;
        FusedLinear.Chunks whole = FusedLinear.Chunks.wholeVocabulary(args.length > 8 ? Long.parseLong(args[8]) : 128, v);
        Kernels.setThreads(threads);
        CpuThreads.set(threads);  // libtorch's intra-op pool and OpenBLAS's
        Random rnd = new Random(42);
        float[] h = new float[t * d], w = new float[v * d];
        for (int i = 0; i < h.length; i++) h[i] = (float) rnd.nextGaussian();
        for (int i = 0; i < w.length; i++) w[i] = (float) (rnd.nextGaussian() * 2 / Math.sqrt(d));
        int[] labels = new int[t];
        float[] old = new float[t], adv = new float[t], mask = new float[t];
        for (int r = 0; r < t; r++) {
            labels[r] = rnd.nextInt(v);
            old[r] = (float) (-Math.log(v) + rnd.nextGaussian());
            adv[r] = (float) rnd.nextGaussian();
            mask[r] = r % 10 == 9 ? 0f : 1f;
        }
        PolicyLossConfig cfg = PolicyLossConfig.defaults();
        float[] dh = new float[t * d], dw = new float[v * d];
        float[] logits = new float[t * v];  // the unfused path's [T, V] buffer, allocated up front (counted below)
        long[] lab64 = new long[t];
        for (int r = 0; r < t; r++) lab64[r] = labels[r];
        Tensor hT = Tensor.create(h, t, d), wT = Tensor.create(w, v, d), labT = Tensor.create(lab64, t),
                oldT = Tensor.create(old, t), advT = Tensor.create(adv, t), maskT = Tensor.create(mask, t);
        double matrixMb = 4.0 * t * v / (1 << 20);
        System.out.printf(Locale.ROOT, "T %d, d %d, V %d fp32, %d threads; one [T, V] fp32 matrix = %.0f MiB; fused tile %s%n",
                t, d, v, threads, matrixMb, FusedLinear.Chunks.cpu());
        Runnable fused = () -> FusedLinear.forwardBackward(cfg, h, t, d, w, v, labels, old, adv, mask, null, null, dh, dw);
        Runnable unfused = () -> {
            openblas_nolapack.cblas_sgemm(openblas_nolapack.CblasRowMajor, openblas_nolapack.CblasNoTrans,
                    openblas_nolapack.CblasTrans, t, v, d, 1f, h, d, w, d, 0f, logits, v);
            PolicyLoss.forwardBackward(cfg, logits, t, v, labels, old, adv, mask, null, null, logits);
            openblas_nolapack.cblas_sgemm(openblas_nolapack.CblasRowMajor, openblas_nolapack.CblasNoTrans,
                    openblas_nolapack.CblasNoTrans, t, d, v, 1f, logits, v, w, d, 0f, dh, d);
            openblas_nolapack.cblas_sgemm(openblas_nolapack.CblasRowMajor, openblas_nolapack.CblasTrans,
                    openblas_nolapack.CblasNoTrans, v, d, t, 1f, logits, v, h, d, 0f, dw, d);
        };
        // the same two paths on native memory: no JNI copy of h, W, the logits or the gradients
        FloatPointer hP = new FloatPointer(h), wP = new FloatPointer(w), dhP = new FloatPointer((long) t * d),
                dwP = new FloatPointer((long) v * d), logitsP = new FloatPointer((long) t * v);
        FloatPointer oldP = new FloatPointer(old), advP = new FloatPointer(adv), maskP = new FloatPointer(mask);
        IntPointer labP = new IntPointer(labels);
        PolicyLoss.Inputs in = PolicyLoss.Inputs.of(MemRef.of(labP), DType.I32, MemRef.of(oldP), MemRef.of(advP),
                MemRef.of(maskP), null);
        FusedLinear.Linear lin = FusedLinear.Linear.of(MemRef.of(hP), MemRef.of(wP), DType.F32, t, d, v);
        LogitsView logitsView = new LogitsView(MemRef.of(logitsP), DType.F32, t, v, v, v);
        Runnable fusedMem = () -> FusedLinear.forwardBackward(cfg, lin, in, MemRef.of(dhP), d, MemRef.of(dwP), d, false,
                null, tile, 0);
        Runnable fusedWhole = () -> FusedLinear.forwardBackward(cfg, lin, in, MemRef.of(dhP), d, MemRef.of(dwP), d, false,
                null, whole, 0);
        Runnable unfusedMem = () -> {
            openblas_nolapack.cblas_sgemm(openblas_nolapack.CblasRowMajor, openblas_nolapack.CblasNoTrans,
                    openblas_nolapack.CblasTrans, t, v, d, 1f, hP, d, wP, d, 0f, logitsP, v);
            PolicyLoss.forwardBackward(cfg, logitsView, in, MemRef.of(logitsP), DType.F32, v, null, null, 0);
            openblas_nolapack.cblas_sgemm(openblas_nolapack.CblasRowMajor, openblas_nolapack.CblasNoTrans,
                    openblas_nolapack.CblasNoTrans, t, d, v, 1f, logitsP, v, wP, d, 0f, dhP, d);
            openblas_nolapack.cblas_sgemm(openblas_nolapack.CblasRowMajor, openblas_nolapack.CblasTrans,
                    openblas_nolapack.CblasNoTrans, v, d, t, 1f, logitsP, v, hP, d, 0f, dwP, d);
        };
        // bf16 h and W (h and w rounded to bf16): the fused path on them (the kernel widens a block at a time), and
        // libtorch eager with bf16 leaves (bf16 matmul, the loss on the logits in fp32, as autocast does)
        ShortPointer h16 = bf16(h), w16 = bf16(w);
        FusedLinear.Linear lin16 = FusedLinear.Linear.of(MemRef.of(h16), MemRef.of(w16), DType.BF16, t, d, v);
        Runnable fusedBf16 = () -> FusedLinear.forwardBackward(cfg, lin16, in, MemRef.of(dhP), d, MemRef.of(dwP), d, false,
                null, tile, 0);
        Runnable fusedWholeBf16 = () -> FusedLinear.forwardBackward(cfg, lin16, in, MemRef.of(dhP), d, MemRef.of(dwP), d,
                false, null, whole, 0);
        Tensor hT16 = hT.to(org.bytedeco.pytorch.global.torch.ScalarType.BFloat16),
                wT16 = wT.to(org.bytedeco.pytorch.global.torch.ScalarType.BFloat16);
        Runnable libtorchBf16 = () -> {
            try (PointerScope scope = new PointerScope()) {
                Tensor hg = hT16.detach().set_requires_grad(true), wg = wT16.detach().set_requires_grad(true);
                Tensor loss = EagerPolicyLoss.loss(cfg, hg.matmul(wg.t()).to(org.bytedeco.pytorch.global.torch.ScalarType.Float),
                        labT, oldT, advT, maskT, null, null, Float.NEGATIVE_INFINITY);
                loss.backward();
                hg.grad().numel();
                wg.grad().numel();
            }
        };
        Runnable libtorch = () -> {
            try (PointerScope scope = new PointerScope()) {
                Tensor hg = hT.detach().set_requires_grad(true), wg = wT.detach().set_requires_grad(true);
                Tensor loss = EagerPolicyLoss.loss(cfg, hg.matmul(wg.t()), labT, oldT, advT, maskT, null, null,
                        Float.NEGATIVE_INFINITY);
                loss.backward();
                hg.grad().numel();
                wg.grad().numel();
            }
        };
        String[] allNames = {"fused", "fused-mem", "fused-whole", "unfused", "unfused-mem", "libtorch", "fused-bf16",
            "fused-whole-bf16", "libtorch-bf16"};
        Runnable[] allOps = {fused, fusedMem, fusedWhole, unfused, unfusedMem, libtorch, fusedBf16, fusedWholeBf16, libtorchBf16};
        java.util.List<String> nl = new java.util.ArrayList<>();
        java.util.List<Runnable> ol = new java.util.ArrayList<>();
        for (int i = 0; i < allNames.length; i++)
            if (only == null || only.contains(allNames[i])) { nl.add(allNames[i]); ol.add(allOps[i]); }
        if (nl.isEmpty()) throw new IllegalArgumentException("no variant named in " + args[7] + "; the variants: " + Arrays.toString(allNames));
        String[] names = nl.toArray(new String[0]);
        Runnable[] ops = ol.toArray(new Runnable[0]);
        int n = ops.length;
        // agreement (the unit tests assert it; printed here so a benchmark of a wrong result shows)
        PolicyLossResult a = FusedLinear.forwardBackward(cfg, h, t, d, w, v, labels, old, adv, mask, null, null, dh, dw);
        PolicyLossResult am = FusedLinear.forwardBackward(cfg, lin, in, MemRef.of(dhP), d, MemRef.of(dwP), d, false, null, tile, 0);
        System.out.printf(Locale.ROOT, "fused loss %.7f (arrays), %.7f (memory, tile %d x %d)%n", a.loss(), am.loss(), tile.rows(), tile.vocab());
        double gflop = 2.0 * t * (double) v * d / 1e9;
        double[] mem = new double[n];
        for (int i = 0; i < n; i++) {  // printed as measured: a crash of one variant keeps the others' figures
            ops[i].run();  // warm-up
            mem[i] = peakExtraMb(ops[i]);
            System.out.printf(Locale.ROOT, "  %-11s peak extra RSS %7.1f MiB = %5.2f x [T, V]%s%n", names[i], mem[i],
                    mem[i] / matrixMb, names[i].startsWith("unfused") ? " (+ the preallocated logits buffer, " + Math.round(matrixMb) + " MiB)" : "");
        }
        double[][] ms = new double[n][reps];
        for (int k = 0; k < reps; k++)
            for (int i = 0; i < n; i++) {  // interleaved, so a change of the machine's load hits every variant
                long t0 = System.nanoTime();
                ops[i].run();
                ms[i][k] = (System.nanoTime() - t0) / 1e6;
                System.out.printf(Locale.ROOT, "    rep %d %-11s %9.1f ms%n", k, names[i], ms[i][k]);
            }
        for (int i = 0; i < n; i++) {
            Arrays.sort(ms[i]);
            double med = ms[i][reps / 2];
            System.out.printf(Locale.ROOT, "  %-11s median %9.1f ms (min %9.1f, max %9.1f)  %5.1f GFLOP/s (3 products' worth)%n",
                    names[i], med, ms[i][0], ms[i][reps - 1], 3 * gflop / (med / 1e3));
        }
    }

    /** x rounded to bf16 by the library's own conversion (to nearest, ties to even), in native memory. */
    private static ShortPointer bf16(float[] x) {
        ShortPointer p = new ShortPointer(x.length);
        for (int i = 0; i < x.length; i++) p.put(i, ai.arbor.bindings.ArborCpu.arbor_f32_to_bf16(x[i]));
        return p;
    }

    private static double peakExtraMb(Runnable op) throws IOException {
        System.gc();
        java.nio.file.Files.writeString(java.nio.file.Path.of("/proc/self/clear_refs"), "5");
        long before = PeakMemory.kb("VmRSS");
        op.run();
        return (PeakMemory.kb("VmHWM") - before) / 1024.0;
    }
}
