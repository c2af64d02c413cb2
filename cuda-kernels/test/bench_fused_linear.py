"""PyTorch eager timings and peak extra memory of the policy loss from hidden states, the math of
cuda-kernels/fused_linear.cuh (kernel name 'fused_linear_unfused_fwd+bwd' in gpu_check's table, which
times Arbor's unfused path; Arbor's fused kernel rows are 'fused_linear_fwd+bwd'): logits = h Wᵀ,
log_softmax, gather, token-mean PPO clip, backward to h and W, at T 16384, d 1024, V 151936 bf16."""
import torch

from torch_bench import median_ms


def bench(rows_out):
    T, d, V = 16384, 1024, 151936
    shape = f"{T}x{d}x{V}"
    h = torch.randn(T, d, device="cuda").to(torch.bfloat16)
    w = (torch.randn(V, d, device="cuda") * 0.1).to(torch.bfloat16)
    labels = torch.randint(0, V, (T,), device="cuda")
    old = -12.0 + torch.randn(T, device="cuda")
    adv = torch.randn(T, device="cuda")
    mask = (torch.arange(T, device="cuda") % 10 != 9).float()

    def fwd_bwd():
        hh = h.detach().requires_grad_(True)
        ww = w.detach().requires_grad_(True)
        logits = hh @ ww.t()
        lp = torch.log_softmax(logits.float(), dim=-1).gather(-1, labels[:, None]).squeeze(-1)
        ratio = torch.exp(torch.clamp(lp - old, -20.0, 20.0))
        loss = torch.maximum(-adv * ratio, -adv * torch.clamp(ratio, 0.8, 1.28))
        ((loss * mask).sum() / mask.sum()).backward()
        return hh.grad, ww.grad

    fwd_bwd()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fwd_bwd()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    ms = median_ms(fwd_bwd, warmup=2, iters=10)
    print(f"  torch eager fused_linear {shape}: {ms:.3f} ms, peak extra memory {peak / 2**20:.0f} MiB")
    rows_out.append(["fused_linear_unfused_fwd+bwd", shape, "bf16", "eager", ms])
