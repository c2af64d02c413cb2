#!/usr/bin/env python3
"""PyTorch eager (and torch.compile, where it works) timings of the same math as Arbor's kernels, at
the reference shapes listed in gpu-check.sh, for gpu-check.sh. Writes OUTDIR/torch_times.csv:
kernel,shape,dtype,impl,ms   (median of 20 runs with CUDA events, after warm-up)

Each kernel family has a module bench_<kernel>.py here with a function bench(rows_out) that appends
[kernel, shape, dtype, impl, ms] rows, using the same 'kernel' names as gpu_check's kernel_times.csv.
"""
import csv
import glob
import importlib
import os
import sys
import time

import torch

# torch.compile costs tens of seconds per graph on a cold machine; past this many seconds of the run no
# new compile starts (the bench modules catch the error and keep eager only), so gpu-check.sh stays
# within its 5-minute budget. ARBOR_TORCH_COMPILE_BUDGET_S=0 disables torch.compile.
COMPILE_BUDGET_S = float(os.environ.get("ARBOR_TORCH_COMPILE_BUDGET_S", "90"))
# the headline comparisons first, so they get the compile budget
FIRST = ["bench_token_stats", "bench_policy_loss", "bench_sampling"]
_START = time.monotonic()
_compile = torch.compile


def _budgeted_compile(*args, **kwargs):
    spent = time.monotonic() - _START
    if spent >= COMPILE_BUDGET_S:
        raise RuntimeError(f"skipped: {spent:.0f} s into the run, "
                           f"over ARBOR_TORCH_COMPILE_BUDGET_S={COMPILE_BUDGET_S:.0f}")
    return _compile(*args, **kwargs)


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


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "gpu-check-out"
    rows = []
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    torch.compile = _budgeted_compile  # the bench modules look torch.compile up at call time
    names = sorted(os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(here, "bench_*.py")))
    for name in sorted(names, key=lambda n: FIRST.index(n) if n in FIRST else len(FIRST)):
        try:
            importlib.import_module(name).bench(rows)
        except Exception as e:  # noqa: BLE001 - one failing bench must not hide the others
            print(f"{name} failed: {type(e).__name__}: {e}", file=sys.stderr)
        torch.cuda.empty_cache()
    with open(f"{out}/torch_times.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["kernel", "shape", "dtype", "impl", "ms"])
        w.writerows(rows)
    for r in rows:
        print(f"  torch {r[3]:8s} {r[0]:24s} {r[1]:14s} {r[2]:5s} {r[4]:9.3f} ms")


if __name__ == "__main__":
    main()
