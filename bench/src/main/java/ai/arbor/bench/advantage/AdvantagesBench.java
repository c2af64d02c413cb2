package ai.arbor.bench.advantage;

import ai.arbor.advantage.Advantages;
import ai.arbor.kernels.NativeExit;
import ai.arbor.kernels.TokenAdvantages;
import ai.arbor.kernels.TokenAdvantagesReference;
import ai.arbor.kernels.TokenShaping;
import ai.arbor.kernels.DType;
import ai.arbor.kernels.Kernels;
import ai.arbor.kernels.MemRef;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;

/**
 * Token-level advantages (docs/algorithms.md §3) per call over T tokens of 2048-token trajectories (flat layout,
 * 7/8 of the tokens valid, 1/4 flagged post-tool): the native CPU kernel (array and direct-buffer entry),
 * the pure-Java double reference, libtorch eager on CPU tensors (the same AEPO math a trainer would write
 * with torch ops), and a copy of the kernel's minimal traffic (one pass: id 4 B, mask 1 B, entropy 4 B,
 * post flag 1 B read, output 4 B written = 14 B/token) as the machine's memory limit. Plus sequence-level
 * GRPO over B = 4096 rewards in groups of 8.
 *
 * <p>Run: {@code bench/run.sh AdvantagesBench -f 1 -wi 2 -i 3}
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class AdvantagesBench {

    @Param({"16384", "1048576"})
    public int tokens;

    float[] adv, h, out;
    int[] ids;
    boolean[] mask, post;
    MemRef dAdv, dIds, dMask, dH, dPost, dOut, dStats;
    byte[] copySrc, copyDst;
    Tensor tAdv, tIds, tMask, tH;
    float[] rewards;
    int[] groups;
    double[] advD, hD;

    @Setup
    public void setup() {
        NativeExit.install(); // the fork's exit must not crash a thread still inside libtorch
        Random rnd = new Random(1);
        int nSeqs = Math.max(1, tokens / 2048);
        adv = new float[nSeqs];
        for (int s = 0; s < nSeqs; s++) adv[s] = (float) rnd.nextGaussian();
        ids = new int[tokens];
        h = new float[tokens];
        mask = new boolean[tokens];
        post = new boolean[tokens];
        out = new float[tokens];
        for (int t = 0; t < tokens; t++) {
            ids[t] = (int) ((long) t * nSeqs / tokens);
            h[t] = (float) Math.abs(rnd.nextGaussian() * 2);
            mask[t] = rnd.nextInt(8) != 0;
            post[t] = rnd.nextInt(4) == 0;
        }
        dAdv = MemRef.of(floats(adv));
        dH = MemRef.of(floats(h));
        dOut = MemRef.of(floats(new float[tokens]));
        ByteBuffer bi = ByteBuffer.allocateDirect(4 * tokens).order(ByteOrder.nativeOrder());
        for (int id : ids) bi.putInt(id);
        dIds = MemRef.of(bi.clear());
        dMask = MemRef.of(bytes(mask));
        dPost = MemRef.of(bytes(post));
        dStats = MemRef.of(ByteBuffer.allocateDirect(64).order(ByteOrder.nativeOrder()));
        copySrc = new byte[7 * tokens];
        copyDst = new byte[7 * tokens];
        tAdv = Tensor.create(adv, nSeqs);
        long[] lid = new long[tokens];
        for (int t = 0; t < tokens; t++) lid[t] = ids[t];
        tIds = Tensor.create(lid, tokens);
        int[] m = new int[tokens];
        for (int t = 0; t < tokens; t++) m[t] = mask[t] ? 1 : 0;
        tMask = Tensor.create(m, tokens).to(ScalarType.Bool);
        tH = Tensor.create(h, tokens);
        advD = new double[nSeqs];
        for (int s = 0; s < nSeqs; s++) advD[s] = adv[s];
        hD = new double[tokens];
        for (int t = 0; t < tokens; t++) hD[t] = h[t];
        rewards = new float[4096];
        groups = new int[4096];
        for (int i = 0; i < rewards.length; i++) {
            rewards[i] = rnd.nextInt(2);
            groups[i] = i / 8;
        }
    }

    @Benchmark
    public float[] aepoArrays() {
        TokenAdvantages.computeInto(adv, ids, mask, h, post, TokenShaping.aepo(), out);
        return out;
    }

    @Benchmark
    public MemRef aepoDirect() {
        TokenAdvantages.compute(dAdv, adv.length, dIds, DType.I32, tokens, 0, dMask, dH, dPost, TokenShaping.aepo(), dOut, dStats, 0);
        return dOut;
    }

    /** The same on one thread (the others use {@code Kernels.threads()}, all processors by default). */
    @Benchmark
    public MemRef aepoDirect1Thread() {
        int t = Kernels.threads();
        Kernels.setThreads(1);
        try {
            return aepoDirect();
        } finally {
            Kernels.setThreads(t);
        }
    }

    @Benchmark
    public MemRef taoRlDirect() {
        TokenAdvantages.compute(dAdv, adv.length, dIds, DType.I32, tokens, 0, dMask, dH, dPost, TokenShaping.taoRl(), dOut, dStats, 0);
        return dOut;
    }

    @Benchmark
    public MemRef broadcastDirect() {
        TokenAdvantages.compute(dAdv, adv.length, dIds, DType.I32, tokens, 0, dMask, null, null, TokenShaping.broadcast(), dOut, null, 0);
        return dOut;
    }

    @Benchmark
    public double[] aepoJavaReference() {
        return TokenAdvantagesReference.compute(advD, ids, 0, mask, hD, post, TokenShaping.aepo()).advantages();
    }

    /** AEPO with libtorch eager ops on CPU tensors (fp32), as a trainer would write it. */
    @Benchmark
    public Tensor aepoLibtorch() {
        Tensor hv = tH.masked_select(tMask);
        Tensor hHat = tH.sub(hv.mean()).mul(hv.var().add(new Scalar(1e-8)).rsqrt());
        Tensor a = tAdv.index_select(0, tIds);
        return a.mul(hHat.mul(new Scalar(0.2)).add(new Scalar(1.0))).where(tMask, new Scalar(0.0));
    }

    /** The memory limit: read + write 14 bytes per token (one pass of the kernel's minimal traffic). */
    @Benchmark
    public byte[] copyBaseline() {
        System.arraycopy(copySrc, 0, copyDst, 0, copySrc.length);
        return copyDst;
    }

    @Benchmark
    public float[] grpo4096() {
        return Advantages.grpo(rewards, groups, true);
    }

    static ByteBuffer floats(float[] a) {
        ByteBuffer b = ByteBuffer.allocateDirect(4 * a.length).order(ByteOrder.nativeOrder());
        for (float v : a) b.putFloat(v);
        return b.clear();
    }

    static ByteBuffer bytes(boolean[] a) {
        ByteBuffer b = ByteBuffer.allocateDirect(a.length);
        for (boolean v : a) b.put((byte) (v ? 1 : 0));
        return b.clear();
    }
}
