"""PyTorch eager (and torch.compile) timings of Arbor's token-level advantage math (docs/algorithms.md §3:
broadcast, AEPO entropy-aware, TAO-RL post-tool top-q) at the shapes of check_advantages.cu."""
import math
import sys

import torch

from torch_bench import median_ms


def broadcast(adv, seq, mask, ent, post):
    return torch.where(mask, adv[seq], torch.zeros((), device=adv.device))


def _h_hat(ent, mask):
    h = ent[mask].double()
    mu, var = h.mean(), h.var()  # unbiased, as the kernel (verl masked_whiten)
    return (ent.double() - mu) * torch.rsqrt(var + 1e-8)


def aepo(adv, seq, mask, ent, post, a=0.2):
    out = adv[seq].double() * (1 + a * _h_hat(ent, mask))
    return torch.where(mask, out.float(), torch.zeros((), device=adv.device))


def tao(adv, seq, mask, ent, post, alpha=0.01, q=0.2):
    cand = mask & post
    hc = ent[cand]
    k = max(1, math.ceil(q * hc.numel() - 1e-6))
    tau = torch.topk(hc, k).values[-1]
    a = adv[seq].double()
    shaped = a * (1 + alpha * _h_hat(ent, mask))
    out = torch.where(cand & (ent >= tau), shaped, a)
    return torch.where(mask, out.float(), torch.zeros((), device=adv.device))


def bench(rows_out):
    for n in (16384, 1 << 20, 1 << 23):
        n_seqs = max(1, n // 2048)
        adv = torch.randn(n_seqs, device="cuda")
        seq = torch.arange(n, device="cuda") * n_seqs // n  # int64: what torch indexing wants
        ent = torch.randn(n, device="cuda").abs() * 2
        mask = torch.rand(n, device="cuda") > 0.125
        post = torch.rand(n, device="cuda") < 0.25
        for name, fn in (("token_adv_broadcast", broadcast), ("token_adv_aepo", aepo), ("token_adv_tao", tao)):
            impls = [("eager", fn)]
            if n != 1 << 20:  # compile at one size only: each shape recompiles, and gpu-check has a time budget
                for impl, f in impls:
                    rows_out.append([name, str(n), "fp32", impl, median_ms(lambda: f(adv, seq, mask, ent, post))])
                continue
            try:
                cf = torch.compile(fn)
                cf(adv, seq, mask, ent, post)
                impls.append(("compile", cf))
            except Exception as e:  # noqa: BLE001 - report and continue with eager only
                print(f"torch.compile unavailable for {name}: {type(e).__name__}: {e}", file=sys.stderr)
            for impl, f in impls:
                rows_out.append([name, str(n), "fp32", impl, median_ms(lambda: f(adv, seq, mask, ent, post))])
        torch.cuda.empty_cache()
