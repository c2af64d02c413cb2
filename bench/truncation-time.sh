#!/usr/bin/env bash
# The sampler's truncations without a cutting top-k (top-p, min-p, both) in thread CPU time, at N(0, 3^2) and
# N(0, 9^2) logits (bench/native/truncation_time.cpp), for this tree and (optionally) REV, on the AVX2 path or ISA
# (avx512, scalar):
#   bench/truncation-time.sh [REV] [N] [ISA]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rev="${1:-}" n="${2:-7}" isa="${3:-avx2}"
. "$root/bench/native/build-pair.sh"  # (makes $tmp)
build_pair truncation_time.cpp "$rev"
if [ -n "$rev" ]; then
  echo "== $rev"
  "$tmp/oldbin" "$n" "$isa"
fi
echo "== this tree"
"$tmp/new" "$n" "$isa"
