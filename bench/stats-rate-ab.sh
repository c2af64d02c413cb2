#!/usr/bin/env bash
# The statistics forward's rate from L1 (bench/native/stats_rate.cpp: one thread, 64 rows of V columns, best of 60
# calls; bf16 at T 1 and 0.7, fp32 at T 1, and a checksum of the bf16 T 1 bits) built against REV's native/ and this
# tree's, the two binaries alternated N times on one CPU path (bench/RESULTS.md, runs 14 and 15):
#   bench/stats-rate-ab.sh REV [ISA (avx512)] [N (4)] [V (2048)]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rev="${1:?usage: bench/stats-rate-ab.sh REV [ISA] [N] [V]}" isa="${2:-avx512}" n="${3:-4}" v="${4:-2048}"
. "$root/bench/native/build-pair.sh"  # (makes $tmp)
build_pair stats_rate.cpp "$rev"
for i in $(seq "$n"); do
  echo "$rev: $("$tmp/oldbin" "$isa" "$v")"
  echo "this tree: $("$tmp/new" "$isa" "$v")"
done
