#!/usr/bin/env bash
# Checks that `./arbor` runs its commands from a copy of the build (java/torch/target/run/KEY), so that a rebuild while
# a command runs (a source edited, a branch checked out, another ./arbor that builds) cannot replace classes or natives
# under it:
#   1. `./arbor sandbox serve` is started; its JVM's class path names no jar of the build directories, only the copy's;
#   2. the build's jars are then replaced by empty files (a rebuild caught in the middle of writing them); the server
#      still answers a SandboxFusion /run_code request (print(6*7) -> 42);
#   3. the jars are put back with new times, as a rebuild leaves them; the next command gets a copy of its own and the
#      running server's copy stays.
# Run after the build (scripts/test.sh runs it after `mvn install`). Exit status 0 when every check passes.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
fail() { echo "launch-check: FAIL: $*" >&2; exit 1; }
./arbor --version >/dev/null   # builds when the sources are newer than the build, and makes the run copy
cp="$(tr ':' '\n' < java/torch/target/classpath.txt | grep "^$root/" || true)"
jars=(java/torch/target/arbor-torch-0.1.0-SNAPSHOT.jar $cp)
tmp="$(mktemp -d)"
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  for f in "${jars[@]}"; do [ -f "$tmp/$(basename "$f")" ] && cp -p "$tmp/$(basename "$f")" "$f"; done
  rm -rf "$tmp"
}
trap cleanup EXIT
for f in "${jars[@]}"; do cp -p "$f" "$tmp/$(basename "$f")"; done
port="$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
./arbor sandbox serve --port "$port" --workers 1 > "$tmp/server.log" 2>&1 &
server=$!
/usr/bin/python3 - "$port" <<'PY' || { cat "$tmp/server.log" >&2; fail "the server did not start"; }
import socket, sys, time
for _ in range(600):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close(); sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit(1)
PY
# 1. the running JVM's class path
jvm="$(pgrep -f "ai.arbor.cli.Arbor sandbox serve --port $port" | head -1)"
[ -n "$jvm" ] || fail "no JVM for the server"
jcp="$(tr '\0' '\n' < /proc/"$jvm"/cmdline | grep -A1 '^-cp$' | tail -1)"
first="$(echo "$jcp" | tr ':' '\n' | grep "^$root/" | grep -o 'java/torch/target/run/[0-9a-f]*' | sort -u)"
[ "$(echo "$first" | wc -l)" -eq 1 ] && [ -n "$first" ] || fail "the class path's repository jars are not one run copy: $jcp"
if echo "$jcp" | tr ':' '\n' | grep "^$root/" | grep -v '/target/run/' | grep -q .; then
  fail "the class path names a jar of the build directories: $jcp"
fi
echo "launch-check: the server runs from $first"
# 2. the build's jars emptied under it
for f in "${jars[@]}"; do : > "$f"; done
out="$(/usr/bin/python3 - "$port" <<'PY'
import json, sys, urllib.request
req = urllib.request.Request("http://127.0.0.1:%s/run_code" % sys.argv[1],
                             data=json.dumps({"code": "print(6*7)", "language": "python"}).encode(),
                             headers={"Content-Type": "application/json"})
print(json.load(urllib.request.urlopen(req, timeout=60))["run_result"]["stdout"].strip())
PY
)" || fail "the server did not answer after the build's jars were emptied"
[ "$out" = "42" ] || fail "print(6*7) gave '$out'"
echo "launch-check: with the build's jars emptied, /run_code still answers 42"
# 3. a rebuild's new jars: a copy of their own, the old one kept
for f in "${jars[@]}"; do cp "$tmp/$(basename "$f")" "$f"; done
touch "${jars[@]}"
[ "$(./arbor --version)" = "arbor 0.1.0" ] || fail "./arbor --version after the jars changed"
n="$(ls -1d java/torch/target/run/*/ | wc -l)"
[ -d "$first" ] || fail "the running server's copy $first was removed"
[ "$n" -ge 2 ] || fail "the changed jars did not get a copy of their own"
echo "launch-check: passed ($n run copies)"
