#!/usr/bin/env bash
# The README's test command (CI runs it through .ci/run): OS prerequisites (with the test-only ones), then every module's build and
# tests, installed into the local Maven repository (CPU kernels and, where nvcc exists, CUDA kernels
# compiled; CUDA tests skip with their reason where no GPU exists), then
#   - the test-report check: a test module that ran no test, or a test skipped for anything but a missing
#     GPU, fails the run (scripts/check-test-reports.py; it prints each GPU skip and the totals);
#   - the embedding check: a Maven project outside the reactor builds and runs against the installed
#     artifacts (scripts/embed-check.sh);
#   - the launcher check: ./arbor runs its commands from a copy of the build, which a rebuild does not touch
#     (scripts/launch-check.sh).
# Extra arguments go to Maven (e.g. -Darbor.seed=42); with any, only this run's reports are checked for
# skips, and the embedding check still runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
stamp=$(mktemp)
trap 'rm -f "$stamp"' EXIT
t0=$SECONDS
status=0
mvn -B -ntp install "$@" || status=$?
if [ "$#" -eq 0 ]; then
  /usr/bin/python3 scripts/check-test-reports.py . "$stamp" --all || status=1
else
  /usr/bin/python3 scripts/check-test-reports.py . "$stamp" || status=1
fi
[ "$status" -eq 0 ] || { echo "scripts/test.sh: FAILED after $((SECONDS - t0)) s" >&2; exit "$status"; }
scripts/embed-check.sh
scripts/launch-check.sh
echo "scripts/test.sh: passed in $((SECONDS - t0)) s"
