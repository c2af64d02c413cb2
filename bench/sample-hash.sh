#!/usr/bin/env bash
# The sampler's tokens and sampled log-probs hashed over 97,200 rows (bench/native/sample_hash.cpp), on the AVX2 and
# scalar paths, for this tree and (optionally) REV: equal hashes = the same draws.
#   bench/sample-hash.sh [REV]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rev="${1:-}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
g++ -O2 -std=c++17 -I"$root/native/include" -I"$root/native/src" "$root/bench/native/sample_hash.cpp" -o "$tmp/new" -lpthread
if [ -n "$rev" ]; then
  mkdir -p "$tmp/old"
  git -C "$root" archive "$rev" native | tar -x -C "$tmp/old"
  g++ -O2 -std=c++17 -I"$tmp/old/native/include" -I"$tmp/old/native/src" "$root/bench/native/sample_hash.cpp" -o "$tmp/oldbin" -lpthread
  for isa in avx2 scalar; do echo "$rev: $("$tmp/oldbin" "$isa")"; done
fi
for isa in avx2 scalar; do echo "this tree: $("$tmp/new" "$isa")"; done
