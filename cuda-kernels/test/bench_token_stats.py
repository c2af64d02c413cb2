"""PyTorch eager (and torch.compile) timings of Arbor's token-statistics math at the reference shapes of gpu-check.sh."""
import sys

import torch

from torch_bench import median_ms


def token_stats_shapes():
    yield 16384, 151936, torch.bfloat16, "bf16"
    yield 4096, 32000, torch.float32, "fp32"


def bench(rows_out):
    for T, V, dt, name in token_stats_shapes():
        shape = f"{T}x{V}"
        logits = (torch.randn(T, V, device="cuda", dtype=torch.float32) * 3).to(dt)
        labels = torch.randint(0, V, (T,), device="cuda")

        def fwd(x):
            lp = torch.log_softmax(x.float(), dim=-1)
            logprob = lp.gather(-1, labels[:, None]).squeeze(-1)
            entropy = -(lp.exp() * lp).sum(-1)
            return logprob, entropy

        def fwd_bwd(x):
            x = x.detach().requires_grad_(True)
            logprob, entropy = fwd(x)
            (logprob.sum() + entropy.sum()).backward()
            return x.grad

        impls = [("eager", fwd, fwd_bwd)]
        try:
            cf = torch.compile(fwd)
            cfb = torch.compile(fwd_bwd)
            cf(logits)
            cfb(logits)
            impls.append(("compile", cf, cfb))
        except Exception as e:  # noqa: BLE001 - report and continue with eager only
            print(f"torch.compile unavailable for token_stats: {type(e).__name__}: {e}", file=sys.stderr)
        for impl, f, fb in impls:
            rows_out.append(["token_stats_fwd", shape, name, impl, median_ms(lambda: f(logits))])
            rows_out.append(["token_stats_fwd+bwd", shape, name, impl, median_ms(lambda: fb(logits))])
        del logits
        torch.cuda.empty_cache()
