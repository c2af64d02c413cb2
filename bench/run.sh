#!/usr/bin/env bash
# Runs JMH benchmarks of the bench module: bench/run.sh [JMH args], e.g.
#   bench/run.sh TokenStatsBench -f 1 -wi 2 -i 3 -p vocab=32000
# or another main class of the module: bench/run.sh --main ai.arbor.bench.kernels.PeakMemory [args]
# Builds the module (tests skipped) when needed. Record figures in bench/RESULTS.md with the command.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
mvn -B -q -ntp -DskipTests package -pl bench -am >&2
main=org.openjdk.jmh.Main
if [ "${1:-}" = "--main" ]; then main="$2"; shift 2; fi
exec java -Dorg.bytedeco.javacpp.maxPhysicalBytes=0 ${ARBOR_JAVA_OPTS:-} \
  -cp "bench/target/classes:$(cat bench/target/classpath.txt)" "$main" "$@"
