#!/usr/bin/env bash
# The top-k sampler's cost split (bench/native/topk_share.cpp: the statistics pass alone, with the top-k sink, the whole
# sampler with top-k 50 + top-p 0.9; one thread, 64 rows of V N(0, 3^2) logits, thread CPU time, best of 30) built
# against REV's native/ and this tree's, the two binaries alternated N times for each CPU path and dtype; prints the
# medians per build (bench/RESULTS.md, run 16; the draw = the sampler minus the pass with the sink):
#   bench/topk-share-ab.sh REV [N (3)] [V (32000)]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rev="${1:?usage: bench/topk-share-ab.sh REV [N] [V]}" n="${2:-3}" v="${3:-32000}"
. "$root/bench/native/build-pair.sh"  # (makes $tmp)
build_pair topk_share.cpp "$rev"
isas="avx2"
if grep -qw avx512bw /proc/cpuinfo; then isas="avx512 avx2"; fi
for i in $(seq "$n"); do
  for isa in $isas; do
    for bf in 0 1; do
      echo "base $isa $("$tmp/oldbin" "$isa" "$v" 30 50 "$bf")"
      echo "new $isa $("$tmp/new" "$isa" "$v" 30 50 "$bf")"
    done
  done
done | tee "$tmp/runs.txt"
/usr/bin/python3 - "$tmp/runs.txt" "$rev" <<'PY'
import re, sys, collections, statistics as st
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    m = re.match(r'(\w+) (\w+) V \d+ (\w+): statistics ([\d.]+) ms, with the top-k sink ([\d.]+) ms \(x([\d.]+)\), '
                 r'sampler top-k \d+ \+ top-p [\d.]+ ([\d.]+) ms \(x([\d.]+)\)', l)
    if m:
        stats, sink, sinkx, samp, sampx = map(float, m.groups()[3:])
        d[(m.group(2), m.group(3), m.group(1))].append((stats, sink, sinkx, samp - sink, sampx))
for (isa, dt, b), a in sorted(d.items()):
    med = [st.median(x[i] for x in a) for i in range(5)]
    print('%-9s %-6s %-4s statistics %.4f  with the sink %.4f (x%.3f)  draw %.4f  sampler x%.3f' %
          (sys.argv[2] if b == 'base' else 'this tree', isa, dt, *med))
PY
