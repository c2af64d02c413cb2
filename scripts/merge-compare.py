#!/usr/bin/env python3
"""Merge `arbor compare` outputs run per seed (or per recipe) into one table, with paired differences.

usage: merge-compare.py OUT_DIR [--evals DIR] [--prompts N] [--steps N] [--samples N] SPEC...
  SPEC = path/to/compare.json[:recipe=label]   (rename a recipe of that file, e.g. :tao-rl=tao-rl (shrink))
  --evals DIR: `arbor eval --out DIR/T1-<compare dir>-<recipe>.md` tables at one sampling, added as a column
Writes OUT_DIR/compare.md and OUT_DIR/compare.json. Paired differences: per seed d = a - b, mean and its
standard error sd(d)/sqrt(seeds); '**' marks |mean| > 2 SE.
"""
import json, math, os, re, sys
from itertools import combinations

args = sys.argv[1:]
out = args.pop(0)
evals, prompts, steps, samples = None, 12, 20, 4
specs = []
while args:
    a = args.pop(0)
    if a == "--evals": evals = args.pop(0)
    elif a == "--prompts": prompts = int(args.pop(0))
    elif a == "--steps": steps = int(args.pop(0))
    elif a == "--samples": samples = int(args.pop(0))   # evaluation samples per problem (arith 4, kb 2)
    else: specs.append(a)

runs, commands = {}, []
for spec in specs:
    path, _, ren = spec.partition(":")
    rename = dict([ren.split("=", 1)]) if ren else {}
    d = json.load(open(path))
    commands.append((d["command"], d["minutes"], rename))
    cdir = os.path.basename(os.path.dirname(path))
    for r in d["runs"]:
        label = rename.get(r["recipe"], r["recipe"])
        key = (label, r["seed"])
        if key in runs: continue          # the start's evaluation repeats in every file of a seed
        r = dict(r); r["label"] = label; r["dir"] = cdir
        if evals:
            for prefix, col in (("T1", "t1"), ("P95", "p95")):
                f = os.path.join(evals, "%s-%s-%s.md" % (prefix, cdir, r["recipe"]))
                if os.path.exists(f):
                    m = re.search(r"\| τ=[0-9.]+, [0-9]+ samples \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \|", open(f).read())
                    if m: r[col + "_accuracy"], r[col + "_tool_use"] = float(m.group(1)), float(m.group(2))
        if "gen_tokens" in r:
            r["tokens_per_prompt"] = r["gen_tokens"] / (steps * prompts)
            r["calls_per_prompt"] = r["tool_calls"] / (steps * prompts)
        runs[key] = r

labels = []
for (l, s) in runs:
    if l not in labels: labels.append(l)
ORDER = ["sft", "grpo", "grpo-tcr", "tree-grpo", "arpo", "aepo", "tao-rl", "tao-rl (shrink)", "cort"]
labels.sort(key=lambda l: ORDER.index(l) if l in ORDER else len(ORDER))
seeds = sorted({s for (_, s) in runs})

def vals(label, k):
    return [runs[(label, s)][k] for s in seeds if (label, s) in runs and isinstance(runs[(label, s)].get(k), (int, float))]

def ms(v, dec):
    if not v: return "–"
    m = sum(v) / len(v)
    if len(v) < 2: return ("%." + str(dec) + "f") % m
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1))
    return ("%." + str(dec) + "f ± %." + str(dec) + "f") % (m, sd)

L = []
for c, mins, ren in commands:
    L.append("`%s` (%.0f min)%s" % (c, mins, (" — recipe renamed: " + ", ".join("%s → %s" % kv for kv in ren.items())) if ren else ""))
    L.append("")
L.append("Mean ± standard deviation over seeds %s. sampled = pass@1 of %d samples per problem at the recipe's own sampling "
         "(cort τ 0.6 / top-p 0.95, tree-grpo top-p 0.95, the others τ 1); sampled τ 1 = the same policies re-evaluated at τ 1, "
         "top-p 1 (`arbor eval`), and at τ 0.6, top-p 0.95 (CoRT's), two samplings common to all; greedy = greedy decoding; 100 held-out problems. Spend: "
         "generated tokens and tool calls per rolled-out prompt (%d steps × %d prompts)." % (", ".join(map(str, seeds)), samples, steps, prompts))
L.append("")
L.append("| policy | held-out acc. (sampled) | held-out acc. (sampled τ 1) | held-out acc. (τ 0.6, top-p 0.95) | held-out acc. (greedy) | tool use (sampled) | train acc. (last 5 steps) | generated tokens / prompt | tool calls / prompt | seconds | seeds |")
L.append("|---|---|---|---|---|---|---|---|---|---|---|")
for l in labels:
    name = "SFT (start)" if l == "sft" else l
    L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |" % (name, ms(vals(l, "sampled_accuracy"), 3), ms(vals(l, "t1_accuracy"), 3),
             ms(vals(l, "p95_accuracy"), 3),
             ms(vals(l, "greedy_accuracy"), 3), ms(vals(l, "sampled_tool_use"), 3), ms(vals(l, "train_accuracy_last5"), 3),
             ms(vals(l, "tokens_per_prompt"), 0), ms(vals(l, "calls_per_prompt"), 1), ms(vals(l, "seconds"), 0), len(vals(l, "seconds"))))
L.append("")
L.append("Per seed (sampled / sampled τ 1 / τ 0.6, top-p 0.95 / greedy):")
L.append("")
L.append("| policy | " + " | ".join("seed %d" % s for s in seeds) + " |")
L.append("|---|" + "---|" * len(seeds))
for l in labels:
    cells = []
    for s in seeds:
        r = runs.get((l, s))
        cells.append("–" if r is None else "%.3f / %s / %s / %.3f" % (r["sampled_accuracy"], "%.3f" % r["t1_accuracy"] if "t1_accuracy" in r else "–",
                     "%.3f" % r["p95_accuracy"] if "p95_accuracy" in r else "–", r["greedy_accuracy"]))
    L.append("| %s | %s |" % ("SFT (start)" if l == "sft" else l, " | ".join(cells)))
L.append("")

pairs_out = []
def paired(a, b, k):
    d = [runs[(a, s)][k] - runs[(b, s)][k] for s in seeds if (a, s) in runs and (b, s) in runs and k in runs[(a, s)] and k in runs[(b, s)]]
    if len(d) < 2: return None
    m = sum(d) / len(d)
    sd = math.sqrt(sum((x - m) ** 2 for x in d) / (len(d) - 1))
    return m, sd / math.sqrt(len(d)), len(d), d

answers = 100 * samples   # 100 held-out problems
L.append("Paired differences (row − column, per seed, mean ± standard error over %d seeds; ** = |mean| > 2 SE). "
         "Eval noise alone: one accuracy of %d sampled answers has SE ≤ %.3f, the mean of %d seeds ≤ %.3f."
         % (len(seeds), answers, 0.5 / math.sqrt(answers), len(seeds), 0.5 / math.sqrt(answers * len(seeds))))
L.append("")
rl = [l for l in labels if l != "sft"]
for k, title in (("sampled_accuracy", "sampled (own sampling)"), ("t1_accuracy", "sampled τ 1"), ("p95_accuracy", "sampled τ 0.6, top-p 0.95"),
                 ("greedy_accuracy", "greedy (100 answers per seed: a difference of 0.01 is one problem)")):
    L.append("**%s**" % title)
    L.append("")
    L.append("| | " + " | ".join(rl) + " |")
    L.append("|---|" + "---|" * len(rl))
    for a in ["sft"] + rl:
        cells = []
        for b in rl:
            p = paired(a, b, k) if a != b else None
            if p is None: cells.append("")
            else:
                m, se, n, d = p
                star = "**" if abs(m) > 2 * se and se > 0 else ""
                cells.append("%s%+.3f ± %.3f%s" % (star, m, se, star))
                if a < b or a == "sft": pairs_out.append({"metric": k, "a": a, "b": b, "mean": m, "se": se, "n": n, "d": d})
        L.append("| %s | %s |" % ("SFT (start)" if a == "sft" else a, " | ".join(cells)))
    L.append("")

os.makedirs(out, exist_ok=True)
open(os.path.join(out, "compare.md"), "w").write("\n".join(L) + "\n")
json.dump({"commands": [c for c, _, _ in commands], "runs": list(runs.values()), "paired": pairs_out},
          open(os.path.join(out, "compare.json"), "w"), indent=1)
print("\n".join(L))
