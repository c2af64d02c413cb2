#!/usr/bin/env bash
# The sampler's tokens and sampled log-probs hashed over 97,200 rows (bench/native/sample_hash.cpp), on the AVX2 and
# scalar paths, for this tree and (optionally) REV: equal hashes = the same draws.
#   bench/sample-hash.sh [REV]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rev="${1:-}"
. "$root/bench/native/build-pair.sh"  # (makes $tmp)
build_pair sample_hash.cpp "$rev"
if [ -n "$rev" ]; then
  for isa in avx2 scalar; do echo "$rev: $("$tmp/oldbin" "$isa")"; done
fi
for isa in avx2 scalar; do echo "this tree: $("$tmp/new" "$isa")"; done
