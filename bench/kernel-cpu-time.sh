#!/usr/bin/env bash
# Before/after CPU cost of the CPU row kernels, robust on a loaded machine:
#   bench/kernel-cpu-time.sh [REV] [N]
# builds bench/native/kernel_cpu_time.cpp against this tree's native/ (every CPU path it has) and, when
# REV is given, against REV's native/ (its dispatched path), and prints thread-CPU-time minima (ms) of
# N runs (default 9) on one thread, with the sampler (T = 1; top-k 50 + top-p 0.9; top-p 0.9; min-p 0.05) and the compute floor (the
# kernels' exp from registers, G exp/s per core). Wall-clock figures (JMH, KernelFloorBench) remain the reference.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rev="${1:-}" n="${2:-9}"
. "$root/bench/native/build-pair.sh"  # (makes $tmp)
build_pair kernel_cpu_time.cpp "$rev" -DNEW
if [ -n "$rev" ]; then
  echo "== $rev (read/copy columns not available there)"
  "$tmp/oldbin" best "$n"
fi
echo "== this tree, the compute floor"
"$tmp/new" exp "$n" || true
for isa in avx512 avx2 scalar; do
  echo "== this tree, $isa"
  "$tmp/new" "$isa" "$n" || true
done
