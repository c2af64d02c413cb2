#!/usr/bin/env python3
"""Mean and spread over seeds of `arbor train` runs: reads each RUN_DIR/eval.json and prints a markdown table.

    scripts/summarize-runs.py runs/arith-grpo-seed1 runs/arith-grpo-seed2 runs/arith-grpo-seed3

Per (when, decoding): held-out accuracy, tool use and tool calls per answer as mean ± sample standard
deviation over the runs, with the min–max range of accuracy; and the wall time of SFT and RL.
"""
import json
import statistics
import sys


def fmt(values, digits=3):
    m = statistics.mean(values)
    s = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{m:.{digits}f} ± {s:.{digits}f}"


def main(dirs):
    if not dirs:
        sys.exit(__doc__)
    runs = []
    for d in dirs:
        with open(f"{d}/eval.json") as f:
            runs.append(json.load(f))
    keys = []
    for r in runs:
        for e in r["evaluations"]:
            k = (e["when"], e["decoding"])
            if k not in keys:
                keys.append(k)
    seeds = ", ".join(str(r["seed"]) for r in runs)
    print(f"task {runs[0]['task']}, recipe {runs[0]['recipe']}, seeds {seeds} (mean ± std over {len(runs)} runs)\n")
    print("| policy | decoding | accuracy | accuracy min–max | tool use | tool calls / answer |")
    print("|---|---|---|---|---|---|")
    for when, dec in keys:
        rows = [e for r in runs for e in r["evaluations"] if (e["when"], e["decoding"]) == (when, dec)]
        acc = [e["accuracy"] for e in rows]
        who = "SFT cold start" if when == "before" else f"after {runs[0]['recipe']}"
        print(f"| {who} | {dec} | {fmt(acc)} | {min(acc):.3f}–{max(acc):.3f} | {fmt([e['tool_use'] for e in rows])} "
              f"| {fmt([e['tool_calls'] for e in rows], 2)} |")
    sft = [r["sft_seconds"] for r in runs]
    rl = [r["rl_seconds"] for r in runs]
    print(f"\nwall time: SFT {fmt(sft, 0)} s, RL {fmt(rl, 0)} s")


if __name__ == "__main__":
    main(sys.argv[1:])
