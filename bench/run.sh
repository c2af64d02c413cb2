#!/usr/bin/env bash
# Runs JMH benchmarks of the bench module: bench/run.sh [JMH args], e.g.
#   bench/run.sh TokenStatsBench -f 1 -wi 2 -i 3 -p vocab=32000
# or another main class of the module: bench/run.sh --main ai.arbor.bench.kernels.PeakMemory [args]
# Builds the module (tests skipped) when needed. Record figures in bench/RESULTS.md with the command.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# Recompile the JNI libraries only when a native source is newer than them.
skip=""
lib=bindings/target/classes/ai/arbor/bindings/linux-x86_64/libjniArborCpu.so
if [ -f "$lib" ] && [ -z "$(find native cuda-kernels bindings/src -newer "$lib" -type f -print -quit)" ]; then
  skip="-Djavacpp.skip=true"
fi
mvn -B -q -ntp -DskipTests $skip package -pl bench -am >&2
main=org.openjdk.jmh.Main
if [ "${1:-}" = "--main" ]; then main="$2"; shift 2; fi
exec java -Dorg.bytedeco.javacpp.maxPhysicalBytes=0 ${ARBOR_JAVA_OPTS:-} \
  -cp "bench/target/classes:$(cat bench/target/classpath.txt)" "$main" "$@"
