"""PyTorch eager (and torch.compile) timings of Arbor's sampling math at the reference shape of gpu-check.sh, B = 256,
V = 151936: tempered softmax + multinomial + the token's logprob + the row entropy, the same outputs
as arbor_cuda_sample_*. Kernel names match check_sampling.cu's kernel_times.csv rows."""
import sys

import torch

from torch_bench import median_ms


def sampling_shapes():
    yield 256, 151936, torch.bfloat16, "bf16"
    yield 256, 151936, torch.float32, "fp32"


def sample_eager(x, temperature=1.0, top_k=0, top_p=1.0):
    """Token, logprob under the sampling distribution, untruncated tempered logprob, entropy."""
    z = x.float() / temperature
    lp = torch.log_softmax(z, dim=-1)
    entropy = -(lp.exp() * lp).sum(-1)
    zs = z
    if top_k > 0 or top_p < 1.0:  # vLLM-style sort-based truncation: top-k, then top-p
        zs, idx = z.sort(dim=-1, descending=True)
        if top_k > 0:
            kth = zs[:, top_k - 1 : top_k]
            zs = zs.masked_fill(zs < kth, float("-inf"))
        if top_p < 1.0:
            ps = zs.softmax(-1)
            cum = ps.cumsum(-1) - ps  # mass strictly before each token
            zs = zs.masked_fill(cum >= top_p, float("-inf"))
        zs = torch.full_like(z, float("-inf")).scatter(-1, idx, zs)
    q = torch.softmax(zs, dim=-1)
    token = torch.multinomial(q, 1)
    logprob_sampled = torch.log(q.gather(-1, token)).squeeze(-1)
    logprob = lp.gather(-1, token).squeeze(-1)
    return token.squeeze(-1), logprob_sampled, logprob, entropy


def greedy_eager(x):
    lp = torch.log_softmax(x.float(), dim=-1)
    token = x.argmax(-1, keepdim=True)
    return token.squeeze(-1), lp.gather(-1, token).squeeze(-1), -(lp.exp() * lp).sum(-1)


def bench(rows_out):
    modes = [
        ("sample", lambda x: sample_eager(x)),
        ("sample_topk_topp", lambda x: sample_eager(x, top_k=50, top_p=0.9)),
        ("sample_topp", lambda x: sample_eager(x, top_p=0.9)),
        ("sample_greedy", greedy_eager),
    ]
    for B, V, dt, name in sampling_shapes():
        shape = f"{B}x{V}"
        logits = (torch.randn(B, V, device="cuda", dtype=torch.float32) * 3).to(dt)
        for kernel, fn in modes:
            rows_out.append([kernel, shape, name, "eager", median_ms(lambda: fn(logits))])
            if kernel != "sample":  # compile the main mode only: gpu-check.sh must stay under 5 minutes
                continue
            try:
                cf = torch.compile(fn)
                cf(logits)
                rows_out.append([kernel, shape, name, "compile", median_ms(lambda: cf(logits))])
            except Exception as e:  # noqa: BLE001 - report and continue with eager only
                print(f"torch.compile unavailable for {kernel}: {type(e).__name__}: {e}", file=sys.stderr)
        del logits
        torch.cuda.empty_cache()
