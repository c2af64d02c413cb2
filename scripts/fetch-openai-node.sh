#!/usr/bin/env bash
# Fetches the official OpenAI JavaScript client (the npm package `openai`, Apache-2.0, no dependencies) into
# third_party/openai-node/ (git-ignored): OpenAiClientTest drives `arbor serve` with it through node, as an
# RL client would drive vLLM. Pinned version, SHA-256 of the archive checked; nothing is installed globally.
# Idempotent: quick when the files are there.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$root/third_party/openai-node"
spec="openai@5.23.2"
want=a2aa74ff8be1a80a215af201a3d2228e999464d166c1eaec2c9ca313395fbef1

ok() {
  [ -f "$dest/package.json" ] && [ -f "$dest/index.js" ] && grep -q '"version": "5.23.2"' "$dest/package.json"
}
ok && exit 0

command -v npm >/dev/null 2>&1 || { echo "fetch-openai-node: npm is needed (Debian: apt-get install npm)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch-openai-node: npm pack $spec -> $dest" >&2
(cd "$tmp" && npm pack --silent "$spec" >/dev/null)
file=$(ls -t "$tmp"/*.tgz | head -1)
got=$(sha256sum "$file" | cut -d' ' -f1)
[ "$got" = "$want" ] || { echo "fetch-openai-node: $spec has SHA-256 $got, expected $want: refusing it" >&2; exit 1; }
tar xzf "$file" -C "$tmp"
rm -rf "$dest.partial" "$dest"
mv "$tmp/package" "$dest.partial"
mv "$dest.partial" "$dest"
ok || { echo "fetch-openai-node: $dest is incomplete after unpacking" >&2; exit 1; }
