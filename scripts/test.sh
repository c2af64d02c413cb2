#!/usr/bin/env bash
# The README's test command: OS prerequisites, then every module's build and tests (CPU kernels and,
# where nvcc exists, CUDA kernels compiled; CUDA tests skip with a reason where no GPU exists).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec mvn -B -ntp verify "$@"
