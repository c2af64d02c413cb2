#!/usr/bin/env bash
# The sampler's tokens and sampled log-probs hashed over 97,200 rows (bench/native/sample_hash.cpp), on every CPU path
# this machine has (avx512 where the CPU has AVX-512 — avx512-bf16 differs only in bf16 stores, which the sampler has
# none of —, avx2, scalar), for this tree and (optionally) REV:
# equal hashes on the same path = the same draws (untruncated draws may differ between paths: each has its own exp).
#   bench/sample-hash.sh [REV]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rev="${1:-}"
. "$root/bench/native/build-pair.sh"  # (makes $tmp)
build_pair sample_hash.cpp "$rev"
isas="avx2 scalar"
if grep -qw avx512bw /proc/cpuinfo; then isas="avx512 $isas"; fi
for isa in $isas; do
  if [ -n "$rev" ]; then echo "$rev: $("$tmp/oldbin" "$isa")"; fi
  echo "this tree: $("$tmp/new" "$isa")"
done
