#!/usr/bin/env python3
"""Final table of gpu-check.sh: every timed kernel as ms, GB/s, fraction of the measured copy
bandwidth, and speed-up over PyTorch eager / torch.compile at the same kernel, shape and dtype."""
import csv
import sys

out = sys.argv[1]


def rows(name, fields):
    """The well-formed rows of a CSV (a run killed mid-write leaves a short last line); [] if absent."""
    try:
        with open(f"{out}/{name}") as f:
            result = []
            for r in csv.DictReader(f):
                try:
                    for k in fields:
                        float(r[k])
                    result.append(r)
                except (KeyError, TypeError, ValueError):
                    pass
            return result
    except FileNotFoundError:
        print(f"(no {name})")
        return []


kt = rows("kernel_times.csv", ("ms", "gbps", "frac_copy"))
tt = rows("torch_times.csv", ("ms",))
torch_ms = {(r["kernel"], r["shape"], r["dtype"], r["impl"]): float(r["ms"]) for r in tt}
copy = next((float(r["gbps"]) for r in kt if r["kernel"] == "copy"), float("nan"))
lines = [f"copy bandwidth (device-to-device, read+write): {copy:.1f} GB/s",
         f"{'kernel':26s} {'shape':14s} {'dtype':5s} {'ms':>9s} {'GB/s':>8s} {'%copy':>6s} {'vs eager':>9s} {'vs compile':>10s}"]
for r in kt:
    if r["kernel"] == "copy":
        continue
    ms = float(r["ms"])
    key = (r["kernel"], r["shape"], r["dtype"])
    eager = torch_ms.get(key + ("eager",))
    comp = torch_ms.get(key + ("compile",))
    lines.append(f"{r['kernel']:26s} {r['shape']:14s} {r['dtype']:5s} {ms:9.3f} {float(r['gbps']):8.1f} "
                 f"{100 * float(r['frac_copy']):5.1f}% "
                 f"{(f'{eager / ms:8.2f}x' if eager else '       -'):>9s} {(f'{comp / ms:9.2f}x' if comp else '        -'):>10s}")
text = "\n".join(lines)
print(text)
open(f"{out}/summary.txt", "w").write(text + "\n")
