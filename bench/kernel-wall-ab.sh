#!/usr/bin/env bash
# Before/after wall-clock of the CPU row kernels on 2 threads (512 rows, vocab 151936, fp32 and bf16), the two
# builds alternated K times so that a noisy machine's drift falls on both:
#   bench/kernel-wall-ab.sh REV [K] [N] [ISA]
# builds bench/native/kernel_wall_time.cpp against REV's native/ and this tree's, runs each K times per dtype
# (N calls per kernel, default 9), and prints per build and dtype the median over the K runs of each kernel's
# minimum and of its ratio to the copy floor of the same run. JMH (KernelFloorBench) remains the reference.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rev="$1" k="${2:-6}" n="${3:-9}" isa="${4:-best}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/old"
git -C "$root" archive "$rev" native | tar -x -C "$tmp/old"
g++ -O3 -std=c++17 -I"$tmp/old/native/include" -I"$tmp/old/native/src" "$root/bench/native/kernel_wall_time.cpp" -o "$tmp/base" -lpthread
g++ -O3 -std=c++17 -I"$root/native/include" -I"$root/native/src" "$root/bench/native/kernel_wall_time.cpp" -o "$tmp/new" -lpthread
for i in $(seq "$k"); do
  for v in base new; do
    for bf in 0 1; do echo "$v bf=$bf $("$tmp/$v" "$isa" "$n" 151936 $bf floor,bwd,loss | head -1)"; done
  done
done | tee "$tmp/runs.txt"
/usr/bin/python3 - "$tmp/runs.txt" "$rev" <<'PY'
import re, sys, collections, statistics as st
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    m = re.match(r'(\w+) bf=(\d) read min ([\d.]+) .*copy min ([\d.]+) .*bwd min ([\d.]+) .*loss min ([\d.]+)', l)
    if m: d[(m.group(1), m.group(2))].append(tuple(map(float, m.groups()[2:])))
for (v, bf), a in sorted(d.items()):
    name = sys.argv[2] if v == 'base' else 'this tree'
    print('%-10s %s read %.2f copy %.2f | bwd %.2f (%.2fx copy) | loss fwd+bwd %.2f (%.2fx copy)' % (
        name, 'bf16' if bf == '1' else 'fp32', st.median(x[0] for x in a), st.median(x[1] for x in a),
        st.median(x[2] for x in a), st.median(x[2] / x[1] for x in a), st.median(x[3] for x in a),
        st.median(x[3] / x[1] for x in a)))
PY
