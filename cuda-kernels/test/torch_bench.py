#!/usr/bin/env python3
"""PyTorch eager (and torch.compile, where it works) timings of the same math as Arbor's kernels, at
the GPU.md reference shapes, for gpu-check.sh. Writes OUTDIR/torch_times.csv:
kernel,shape,dtype,impl,ms   (median of 20 runs with CUDA events, after warm-up)

Each kernel family adds its function to BENCHES (same 'kernel' names as gpu_check's kernel_times.csv).
"""
import csv
import sys

import torch


def median_ms(fn, warmup=3, iters=20):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def token_stats_shapes():
    yield 16384, 151936, torch.bfloat16, "bf16"
    yield 4096, 32000, torch.float32, "fp32"


def bench_token_stats(rows_out):
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


BENCHES = [bench_token_stats]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "gpu-check-out"
    rows = []
    for bench in BENCHES:
        try:
            bench(rows)
        except Exception as e:  # noqa: BLE001 - one failing bench must not hide the others
            print(f"{bench.__name__} failed: {type(e).__name__}: {e}", file=sys.stderr)
    with open(f"{out}/torch_times.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["kernel", "shape", "dtype", "impl", "ms"])
        w.writerows(rows)
    for r in rows:
        print(f"  torch {r[3]:8s} {r[0]:24s} {r[1]:14s} {r[2]:5s} {r[4]:9.3f} ms")


if __name__ == "__main__":
    main()
