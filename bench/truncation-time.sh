#!/usr/bin/env bash
# The sampler's truncations without a cutting top-k (top-p, min-p, both) in thread CPU time, at N(0, 3^2) and
# N(0, 9^2) logits (bench/native/truncation_time.cpp), for this tree and (optionally) REV, on the AVX2 path:
#   bench/truncation-time.sh [REV] [N]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rev="${1:-}" n="${2:-7}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
g++ -O2 -std=c++17 -I"$root/native/include" -I"$root/native/src" "$root/bench/native/truncation_time.cpp" -o "$tmp/new" -lpthread
if [ -n "$rev" ]; then
  mkdir -p "$tmp/old"
  git -C "$root" archive "$rev" native | tar -x -C "$tmp/old"
  g++ -O2 -std=c++17 -I"$tmp/old/native/include" -I"$tmp/old/native/src" "$root/bench/native/truncation_time.cpp" -o "$tmp/oldbin" -lpthread
  echo "== $rev"
  "$tmp/oldbin" "$n"
fi
echo "== this tree"
"$tmp/new" "$n"
