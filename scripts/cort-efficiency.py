#!/usr/bin/env python3
"""CoRT's efficiency claim from `arbor eval` tables: generated tokens per correct answer, accuracy and response
length of the tool-using and the tool-free policy, per seed and mean ± std.

usage: cort-efficiency.py EVAL_DIR [SEEDS, e.g. 1,3,4]   (reads cort-tool-s<N>.md, cort-notool-s<N>.md, sft-tool-s<N>.md, sft-notool-s<N>.md)
"""
import glob, math, os, re, sys

d = sys.argv[1]
only = set(int(x) for x in sys.argv[2].split(",")) if len(sys.argv) > 2 else None
row = re.compile(r"^\| (τ=[^|]+|greedy) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.–]+|Infinity) \| (\d+) \|$")
data = {}
for f in sorted(glob.glob(os.path.join(d, "*-s*.md"))):
    m = re.match(r"(cort|sft)-(tool|notool)-s(\d+)\.md", os.path.basename(f))
    if not m or (only and int(m.group(3)) not in only): continue
    for line in open(f):
        r = row.match(line.strip())
        if not r: continue
        dec = "greedy" if r.group(1) == "greedy" else "sampled"
        acc, gen, resp, n = float(r.group(2)), float(r.group(7)), float(r.group(6)), int(r.group(9))
        data.setdefault((m.group(1), m.group(2), dec), {})[int(m.group(3))] = dict(
            acc=acc, calls=float(r.group(4)), resp=resp, gen=gen, n=n, per_correct=gen / acc if acc > 0 else float("inf"))

def ms(v, f="%.1f"):
    v = [x for x in v if math.isfinite(x)]
    if not v: return "–"
    m = sum(v) / len(v)
    if len(v) < 2: return f % m
    return (f + " ± " + f) % (m, math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1)))

print("| policy | decoding | accuracy | tool calls / answer | generated tokens / answer | response tokens / answer | generated tokens / correct answer | per seed (tokens / correct) |")
print("|---|---|---|---|---|---|---|---|")
for who in ("sft", "cort"):
    for tool in ("tool", "notool"):
        for dec in ("sampled", "greedy"):
            k = (who, tool, dec)
            if k not in data: continue
            s = data[k]; seeds = sorted(s)
            name = ("SFT" if who == "sft" else "after cort") + (", with the tool" if tool == "tool" else ", no tool")
            print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (name, "τ 0.6, top-p 0.95, 4 samples" if dec == "sampled" else "greedy",
                  ms([s[i]["acc"] for i in seeds], "%.3f"), ms([s[i]["calls"] for i in seeds], "%.2f"), ms([s[i]["gen"] for i in seeds]),
                  ms([s[i]["resp"] for i in seeds]), ms([s[i]["per_correct"] for i in seeds]),
                  " / ".join("%.1f" % s[i]["per_correct"] for i in seeds)))
