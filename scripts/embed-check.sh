#!/usr/bin/env bash
# Checks that Arbor works from another build (README "Using Arbor from another build"): copies the example
# projects examples/embedding/{core,torch} to a temporary directory outside the reactor, where they see
# Arbor only through the local Maven repository, compiles them against the installed ai.arbor:arbor-core
# and ai.arbor:arbor-torch, runs them and checks their output:
#   - token statistics of logits {2, 1, 0.1} label 0 and {0, 0, 0} label 2, on Java arrays (arbor-core)
#     and on PyTorch-preset tensors (arbor-torch);
#   - one call of the jailed Python sandbox, print(6*7) -> 42 (arbor-core; needs bubblewrap and Debian's
#     /usr/bin/python3: scripts/setup.sh);
#   - the dependencies an embedder gets: no libtorch through arbor-core, the libtorch natives through
#     arbor-torch, and no SLF4J provider through either (the CLI's slf4j-simple is optional).
#
# The artifacts must be installed first (CI: `mvn -B -ntp install`, then this script). Options:
#   --install    run `mvn -B -ntp -q install -DskipTests` of what is needed first (or EMBED_CHECK_INSTALL=1)
#   --core-only  check arbor-core only (no libtorch download or extraction)
#   --keep       keep the temporary directory and print its path
# Environment: MVN (default mvn), JAVA (default java), EMBED_CHECK_MVN_ARGS (extra Maven arguments for every
# Maven call, e.g. "-o" or "-Dmaven.repo.local=/path"). Exit status 0 when every check passes.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
install="${EMBED_CHECK_INSTALL:-0}"
core_only=0
keep=0
for arg in "$@"; do
  case "$arg" in
    --install) install=1 ;;
    --core-only) core_only=1 ;;
    --keep) keep=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "embed-check: unknown option $arg (see --help)" >&2; exit 2 ;;
  esac
done

MVN="${MVN:-mvn}"
JAVA="${JAVA:-java}"
read -r -a extra <<< "${EMBED_CHECK_MVN_ARGS:-}"
mvn_q() { "$MVN" -B -ntp -q ${extra[@]+"${extra[@]}"} "$@"; }

start=$SECONDS
fail() {
  echo "embed-check: FAIL: $*" >&2
  exit 1
}
note() { echo "embed-check: $*"; }

# The version the reactor builds: the <version> right after <artifactId>arbor-parent</artifactId>.
version="$(awk '/<artifactId>arbor-parent<\/artifactId>/ {p = 1; next}
                p && /<version>/ {sub(/.*<version>/, ""); sub(/<\/version>.*/, ""); print; exit}' "$root/pom.xml")"
[ -n "$version" ] || fail "cannot read the project version from $root/pom.xml"

if [ "$install" = 1 ]; then
  modules="java/torch"
  [ "$core_only" = 1 ] && modules="java/core"
  note "installing $modules and what it needs ($version, tests skipped) ..."
  (cd "$root" && mvn_q install -DskipTests -pl "$modules" -am)
fi

# The README's example is this file, line for line (once the README has the section).
example="$root/examples/embedding/core/src/main/java/example/EmbedExample.java"
readme_block() {
  awk '/^## Using Arbor from another build/ {s = 1; next}
       s && /^## / {exit}
       s && /^```java$/ {j = 1; next}
       j && /^```$/ {exit}
       j {print}' "$root/README.md"
}
if grep -q '^## Using Arbor from another build' "$root/README.md"; then
  if ! diff <(readme_block) "$example" > /dev/null; then
    diff <(readme_block) "$example" >&2 || true
    fail "README.md \"Using Arbor from another build\": its java block differs from $example (above: < README, > file)"
  fi
else
  note "note: README.md has no \"Using Arbor from another build\" section; its example is not compared"
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/arbor-embed.XXXXXX")"
if [ "$keep" = 1 ]; then
  trap 'echo "embed-check: kept $tmp"' EXIT
else
  trap 'rm -rf "$tmp"' EXIT
fi

# Compiles one example project (a copy outside the reactor) and writes its runtime classpath to target/cp.txt.
build() {
  local name=$1 dir="$tmp/$1"
  cp -R "$root/examples/embedding/$name" "$dir"
  rm -rf "$dir/target"   # the example may have been run in place
  if ! (cd "$dir" && mvn_q -Darbor.version="$version" compile dependency:build-classpath \
          -Dmdep.outputFile=target/cp.txt -Dmdep.includeScope=runtime) > "$dir/mvn.log" 2>&1; then
    cat "$dir/mvn.log" >&2
    fail "examples/embedding/$name does not build against the installed ai.arbor:arbor-$name:$version" \
         "(install it first: mvn -B -ntp install [-DskipTests] in $root, or run with --install)"
  fi
}

# Runs one example's main class; its stdout goes to out.txt, stderr to err.txt.
run() {
  local name=$1 main=$2 dir="$tmp/$1" rc=0
  (cd "$dir" && timeout 300 "$JAVA" -Dorg.bytedeco.javacpp.maxPhysicalBytes=0 \
      -cp "target/classes:$(cat target/cp.txt)" "$main" > out.txt 2> err.txt) || rc=$?
  if [ "$rc" != 0 ]; then
    cat "$dir/out.txt" "$dir/err.txt" >&2
    fail "$main (examples/embedding/$name) exited with status $rc"
  fi
}

# The rest of the first line of out.txt that starts with "<key> ".
field() { sed -n "s/^$2 //p" "$tmp/$1/out.txt" | head -n 1; }

# check_floats <what> <printed array, e.g. "[-0.41703, -1.0986123]"> <expected values...>: equal within 1e-4.
check_floats() {
  local what=$1 line=$2
  shift 2
  awk -v got="$(tr -d '[],' <<< "$line")" -v want="$*" 'BEGIN {
        ng = split(got, g, " "); nw = split(want, w, " ")
        if (ng != nw) exit 1
        for (i = 1; i <= nw; i++) {
          if (g[i] !~ /^-?[0-9]+(\.[0-9]+)?(E-?[0-9]+)?$/) exit 1
          d = g[i] - w[i]; if (d < 0) d = -d
          if (!(d <= 1e-4)) exit 1
        }
      }' || fail "$what: printed '$line', expected [$*] (within 1e-4)"
}

# Row 0: z = {2, 1, 0.1}, lse = ln(e^2 + e + e^0.1) = 2.417030; logprob = 2 - lse = -0.417030;
#   p = {0.659001, 0.242433, 0.098566}, entropy = lse - sum p z = 2.417030 - 1.570292 = 0.846738.
# Row 1: z = {0, 0, 0}: uniform over V = 3, logprob = -ln 3 = -1.098612, entropy = ln 3 = 1.098612.
want_logprob="-0.41703 -1.09861"
want_entropy="0.84674 1.09861"
want_sandbox="OK 42"

# arbor-core alone --------------------------------------------------------------------------------------
build core
cp_core="$(tr ':' '\n' < "$tmp/core/target/cp.txt")"
grep -q "/arbor-core-$version\.jar$" <<< "$cp_core" || fail "arbor-core-$version.jar is not on the example's classpath"
if grep -q '/pytorch-[^/]*\.jar$' <<< "$cp_core"; then fail "arbor-core brings the PyTorch preset (it must not)"; fi
run core example.EmbedExample
check_floats "arbor-core TokenStats.forward logprob" "$(field core logprob)" $want_logprob
check_floats "arbor-core TokenStats.forward entropy" "$(field core entropy)" $want_entropy
cuda="$(field core cuda)"
[ -n "$cuda" ] || fail "the example printed no Backend.CUDA line"
sandbox="$(field core sandbox)"
[ "$sandbox" = "$want_sandbox" ] || { cat "$tmp/core/err.txt" >&2; fail "sandbox print(6*7): got '$sandbox', expected '$want_sandbox'"; }
isolation="$(field core isolation)"
note "arbor-core $version: token statistics ok, sandbox print(6*7) -> 42 (isolation $isolation), CUDA: $cuda"
[ "$isolation" = JAIL ] || note "note: the sandbox ran without its bubblewrap jail here (isolation $isolation)"

# A logging provider reaching an embedder would take over its logging.
no_provider() {
  if tr ':' '\n' < "$tmp/$1/target/cp.txt" | grep -E '/(slf4j-(simple|nop|jdk14|reload4j)|logback-classic|log4j-slf4j2?-impl)-[^/]*\.jar$'; then
    fail "an SLF4J provider reached the build depending on arbor-$1 (above); the CLI's must stay optional"
  fi
}
no_provider core

# Stale artifacts: say so when the installed jar is not the one this checkout built last.
built="$root/java/core/target/arbor-core-$version.jar"
installed="$(grep "/arbor-core-$version\.jar$" <<< "$cp_core" | head -n 1)"
if [ -f "$built" ] && ! cmp -s "$built" "$installed"; then
  note "note: $installed differs from $built (installed by another build? run with --install)"
fi

# arbor-torch ---------------------------------------------------------------------------------------------
if [ "$core_only" = 0 ]; then
  build torch
  grep -q '/pytorch-[^/]*-linux-x86_64[^/]*\.jar$' <(tr ':' '\n' < "$tmp/torch/target/cp.txt") \
    || fail "arbor-torch did not bring the PyTorch preset's natives (pytorch-*-linux-x86_64*.jar)"
  no_provider torch
  run torch example.TorchEmbedExample
  check_floats "arbor-torch TorchTokenStats.forward logprob" "$(field torch logprob)" $want_logprob
  check_floats "arbor-torch TorchTokenStats.forward entropy" "$(field torch entropy)" $want_entropy
  note "arbor-torch $version: TorchTokenStats on tensors ok; no SLF4J provider passed on"
fi

note "PASS ($((SECONDS - start)) s)"
