#!/usr/bin/env bash
# Runs the sandbox's timing-dependent test classes N times in a row while two busy loops keep both cores
# busy (the situation of a CI machine running a parallel build): scripts/sandbox-under-load.sh [N] [TESTS].
# Prints one line per run and the failure count; exits non-zero when any run failed. Builds nothing: run
# `mvn install -DskipTests` (or scripts/test.sh) first.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-20}
tests=${2:-SandboxAdversarialTest}
busy=()
for _ in 1 2; do (while :; do :; done) & busy+=($!); done
trap 'kill "${busy[@]}" 2>/dev/null || true' EXIT
failed=0
log=$(mktemp -d)/runs
mkdir -p "$log"
for i in $(seq 1 "$runs"); do
  t0=$(date +%s)
  if mvn -B -ntp -o -q -pl java/core surefire:test -Dtest="$tests" -Dsurefire.failIfNoSpecifiedTests=false \
       >"$log/run$i.log" 2>&1; then
    verdict=ok
  else
    verdict=FAILED; failed=$((failed + 1))
    grep -E "FAIL|Tests run:.*Fail|expected|status=" "$log/run$i.log" | head -n 5 || true
  fi
  echo "run $i/$runs: $verdict ($(( $(date +%s) - t0 )) s, load $(cut -d' ' -f1 /proc/loadavg))"
done
echo "$runs runs of $tests under load: $failed failed (logs: $log)"
[ "$failed" -eq 0 ]
