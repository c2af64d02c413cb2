package ai.arbor.torch;

import ai.arbor.kernels.ClipMode;
import ai.arbor.kernels.Check;
import ai.arbor.kernels.DType;
import ai.arbor.kernels.Device;
import ai.arbor.kernels.KlType;
import ai.arbor.kernels.LogitsView;
import ai.arbor.kernels.LossAgg;
import ai.arbor.kernels.MemRef;
import ai.arbor.kernels.PolicyLoss;
import ai.arbor.kernels.PolicyLossConfig;
import ai.arbor.kernels.PolicyLossResult;
import java.nio.DoubleBuffer;
import java.util.List;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.ScalarOptional;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * The policy loss of {@link TorchPolicyLoss} as eager libtorch ops, differentiable by autograd: the
 * independent reference of the torch-side tests (parameter gradients through a whole model) and the
 * libtorch baseline of the benchmarks (docs/algorithms.md §1–§2).
 */
public final class EagerPolicyLoss {
    private EagerPolicyLoss() {}

    /**
     * The same loss written with plain torch ops — log_softmax, gather, exp, clamp, maximum/minimum,
     * {@code detach} for AEPO's r / sg(r), index_add for the sequence weights — differentiable by
     * libtorch autograd. The reference the tests and the benchmarks (through the test jar) compare the kernels with; it
     * materializes several [T, V] float32 temporaries. Same arguments as {@link TorchPolicyLoss#forwardBackward}
     * ({@code logits} [T, V] or [B, L, V], no padding columns); {@code aepoEntropyThreshold} selects
     * AEPO's tokens (entropy ≥ threshold; −∞ = all).
     *
     * @return the scalar loss (float32; float64 for double logits), with a graph back to {@code logits} when it requires grad
     */
    public static Tensor loss(PolicyLossConfig cfg, Tensor logits, Tensor labels, Tensor oldLogprob,
                                   Tensor advantages, Tensor mask, Tensor refLogprob, Tensor seqIds,
                                   float aepoEntropyThreshold) {
        long rows = TorchTensors.rows(logits);
        long v = logits.size(logits.dim() - 1);
        // Only the [T, V] work this configuration needs, as a careful user would write it (so the
        // benchmarks compare against a fair libtorch): no temperature division at T = 1, no entropy
        // unless the loss or AEPO's selection uses it.
        // float32, or float64 for double logits (the tests' reference: then its own rounding is far below the kernels')
        ScalarType dt = logits.scalar_type().intern() == ScalarType.Double ? ScalarType.Double : ScalarType.Float;
        Tensor x = logits.reshape(rows, v).to(dt);
        if ((float) cfg.temperature() != 1f) x = x.div(new Scalar((double) (float) cfg.temperature()));
        Tensor m = mask.reshape(rows).to(dt);
        Tensor valid = m.gt(new Scalar(0.0));
        Tensor zero = torch.zeros_like(m);
        Tensor y = labels.reshape(rows).to(ScalarType.Long).clamp_min(new Scalar(0));  // masked rows may hold -100
        Tensor lsm = torch.log_softmax(x, -1);
        Tensor lp = torch.gather(lsm, -1, y.unsqueeze(-1)).squeeze(-1);
        boolean needH = cfg.entropyCoef() != 0
                || (cfg.clipMode() == ClipMode.AEPO_STOP_GRADIENT && aepoEntropyThreshold != Float.NEGATIVE_INFINITY);
        Tensor h = needH ? lsm.exp().mul(lsm).sum(new long[] {-1}, false, new ScalarTypeOptional()).neg() : null;
        Tensor old = torch.where(valid, oldLogprob.reshape(rows).to(dt), zero);
        Tensor a = torch.where(valid, advantages.reshape(rows).to(dt), zero);

        Tensor d = torch.clamp(lp.sub(old), opt(-20.0), opt(20.0));
        if (cfg.clipMode().isGspo()) {
            // verl compute_policy_loss_gspo: mean log-ratio per sequence over its valid tokens (length clamped
            // >= 1); token form sg(log s_i) + lp − sg(lp), the sequence form log s_i itself (full gradient) with
            // the sequence's mean advantage; clamped <= 10
            Tensor idc = seqIds.reshape(rows).to(ScalarType.Long).clamp_min(new Scalar(0));
            Tensor len = torch.index_add(torch.zeros_like(m), 0, idc, m);
            Tensor seqD = torch.index_add(torch.zeros_like(m), 0, idc, m.mul(lp.sub(old))).div(len.clamp_min(new Scalar(1.0)));
            Tensor logS;
            if (cfg.clipMode() == ClipMode.GSPO_SEQUENCE) {
                logS = torch.index_select(seqD, 0, idc);
                Tensor seqA = torch.index_add(torch.zeros_like(m), 0, idc, m.mul(a)).div(len.clamp_min(new Scalar(1e-30)));
                a = torch.where(valid, torch.index_select(seqA, 0, idc), zero);
            } else {
                logS = lp.sub(lp.detach()).add(torch.index_select(seqD, 0, idc).detach());
            }
            d = torch.clamp_max(logS, new Scalar(10.0));
        }
        Tensor r = d.exp();
        double lo = 1.0f - (float) cfg.epsLow(), hi = 1.0f + (float) cfg.epsHigh();
        Tensor l1 = a.neg().mul(r);
        Tensor clipped = torch.clamp(r, opt(lo), opt(hi));
        if (cfg.clipMode() == ClipMode.AEPO_STOP_GRADIENT) {
            // upper clip value hi·r/sg(r) on the selected tokens: the value of hi, the gradient of hi·log r
            Tensor sg = r.mul(new Scalar(hi)).div(r.detach());
            Tensor top = r.gt(new Scalar(hi));
            Tensor selected = h == null ? top : h.detach().ge(new Scalar((double) aepoEntropyThreshold)).logical_and(top);
            clipped = torch.where(selected, sg, clipped);
        }
        Tensor loss = cfg.clipMode() == ClipMode.CISPO
                ? clipped.detach().mul(a).mul(lp).neg()   // verl compute_policy_loss_cispo: −sg(clip(r))·A·logπ
                : torch.maximum(l1, a.neg().mul(clipped));
        if (cfg.dualClipC() > 0) {
            Tensor cap = a.neg().mul(new Scalar((double) (float) cfg.dualClipC()));
            loss = torch.where(a.lt(new Scalar(0.0)), torch.minimum(loss, cap), loss);
        }
        if (cfg.klType() != KlType.NONE) {
            Tensor kappa = torch.where(valid, refLogprob.reshape(rows).to(dt), zero).sub(lp);
            Tensor kl = switch (cfg.klType()) {
                case K1 -> kappa.neg();
                case K2 -> kappa.mul(kappa).mul(new Scalar(0.5));
                default -> {
                    Tensor kc = torch.clamp(kappa, opt(-20.0), opt(20.0));
                    yield torch.clamp(kc.exp().sub(kc).sub(new Scalar(1.0)), opt(-10.0), opt(10.0));
                }
            };
            loss = loss.add(kl.mul(new Scalar((double) (float) cfg.klCoef())));
        }
        if (cfg.entropyCoef() != 0) loss = loss.sub(h.mul(new Scalar((double) (float) cfg.entropyCoef())));
        Tensor wts = eagerWeights(cfg, m, valid, seqIds, rows);
        return torch.where(valid, loss.mul(wts), zero).sum();
    }

    /** verl's agg_loss weights with torch ops (no gradient). */
    private static Tensor eagerWeights(PolicyLossConfig cfg, Tensor m, Tensor valid, Tensor seqIds, long rows) {
        LossAgg agg = cfg.agg();
        Tensor norm;
        Tensor len = null;
        if (agg == LossAgg.TOKEN_MEAN) {
            norm = m.sum();
        } else {
            Tensor ids = seqIds.reshape(rows).to(ScalarType.Long);
            Tensor idc = ids.clamp_min(new Scalar(0));
            Tensor has = ids.ge(new Scalar(0)).to(m.scalar_type());
            len = torch.index_add(torch.zeros_like(m), 0, idc, m);
            Tensor count = torch.index_add(torch.zeros_like(m), 0, idc, has);
            norm = agg == LossAgg.SEQ_MEAN_TOKEN_SUM_NORM ? count.max() : len.gt(new Scalar(0.0)).to(m.scalar_type()).sum();
            if (agg == LossAgg.SEQ_MEAN_TOKEN_MEAN) len = len.index_select(0, idc);
        }
        if (cfg.aggNormalizer() > 0) norm = torch.zeros_like(norm).add(new Scalar(cfg.aggNormalizer()));
        Tensor one = torch.ones_like(m);
        Tensor denom = agg == LossAgg.SEQ_MEAN_TOKEN_MEAN ? len.mul(norm) : one.mul(norm);
        return torch.where(valid, m.div(torch.where(valid, denom, one)), torch.zeros_like(m)).detach();
    }

    private static ScalarOptional opt(double v) {
        return new ScalarOptional(new Scalar(v));
    }
}
