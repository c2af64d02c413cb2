"""PyTorch eager autograd (and torch.compile) timings of Arbor's policy loss at the reference shapes of gpu-check.sh:
forward + backward of the token-mean PPO clip loss (docs/algorithms.md §2) from logits, the same math as
cuda-kernels/policy_loss.cuh (kernel names match gpu_check's 'policy_loss_fused_fwd+bwd')."""
import sys

import torch

from torch_bench import median_ms


def policy_loss_shapes():
    yield 16384, 151936, torch.bfloat16, "bf16"
    yield 4096, 32000, torch.float32, "fp32"


def ppo_token_mean(x, labels, old, adv, mask, eps_low=0.2, eps_high=0.28):
    """loss = Σ_t m_t max(-A r, -A clip(r, 1 - eps_low, 1 + eps_high)) / Σ m, r = exp(clamp(lp - old, ±20))."""
    lp = torch.log_softmax(x.float(), dim=-1).gather(-1, labels[:, None]).squeeze(-1)
    ratio = torch.exp(torch.clamp(lp - old, -20.0, 20.0))
    loss = torch.maximum(-adv * ratio, -adv * torch.clamp(ratio, 1 - eps_low, 1 + eps_high))
    return (loss * mask).sum() / mask.sum()


def bench(rows_out):
    for T, V, dt, name in policy_loss_shapes():
        shape = f"{T}x{V}"
        logits = (torch.randn(T, V, device="cuda", dtype=torch.float32) * 3).to(dt)
        labels = torch.randint(0, V, (T,), device="cuda")
        with torch.no_grad():
            lp = torch.log_softmax(logits.float(), -1).gather(-1, labels[:, None]).squeeze(-1)
        old = lp - 0.3 * torch.randn_like(lp)
        adv = torch.randn(T, device="cuda")
        mask = (torch.arange(T, device="cuda") % 10 != 9).float()
        del lp

        def fwd_bwd(x):
            x = x.detach().requires_grad_(True)
            ppo_token_mean(x, labels, old, adv, mask).backward()
            return x.grad

        impls = [("eager", fwd_bwd)]
        try:
            cfb = torch.compile(fwd_bwd)
            cfb(logits)
            impls.append(("compile", cfb))
        except Exception as e:  # noqa: BLE001 - report and continue with eager only
            print(f"torch.compile unavailable for policy_loss: {type(e).__name__}: {e}", file=sys.stderr)
        for impl, fb in impls:
            ms = median_ms(lambda: fb(logits))
            # one PyTorch timing, the baseline of both Arbor paths in the summary table
            rows_out.append(["policy_loss_fused_fwd+bwd", shape, name, impl, ms])
            rows_out.append(["policy_loss_composable_fwd+bwd", shape, name, impl, ms])
        del logits
        torch.cuda.empty_cache()
