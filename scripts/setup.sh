#!/usr/bin/env bash
# Installs what Arbor needs from the OS on a fresh Debian/Ubuntu machine, once: a JDK 17 and Maven
# (normally present), bubblewrap (the Python sandbox's jail) and Debian's python3 with numpy and sympy
# (the interpreter the sandbox runs). Idempotent and quick when everything is there.
#   scripts/setup.sh --test   also what only the tests need: Debian's python3-torch and python3-jinja2 (the
#                             independent references the tests compare against), python3-requests, npm,
#                             the real Qwen3 tokenizer files (scripts/fetch-qwen3-tokenizer.sh) and the official
#                             OpenAI JavaScript client that drives `arbor serve` in its test (scripts/fetch-openai-node.sh)
set -euo pipefail

test_deps=0
[ "${1:-}" = "--test" ] && test_deps=1

need=()
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || need+=(maven)
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
[ -x /usr/bin/python3 ] || need+=(python3)
if [ -x /usr/bin/python3 ]; then
  /usr/bin/python3 -c 'import numpy' >/dev/null 2>&1 || need+=(python3-numpy)
  /usr/bin/python3 -c 'import sympy' >/dev/null 2>&1 || need+=(python3-sympy)
else
  need+=(python3-numpy python3-sympy)
fi
if [ "$test_deps" -eq 1 ]; then
  for m in torch:python3-torch jinja2:python3-jinja2 requests:python3-requests; do
    /usr/bin/python3 -c "import ${m%%:*}" >/dev/null 2>&1 || need+=("${m#*:}")
  done
  command -v npm >/dev/null 2>&1 || need+=(npm)
fi
fetch() {
  if [ "$test_deps" -eq 1 ]; then
    "$(dirname "${BASH_SOURCE[0]}")/fetch-qwen3-tokenizer.sh"
    "$(dirname "${BASH_SOURCE[0]}")/fetch-openai-node.sh"
  fi
}

if [ ${#need[@]} -eq 0 ]; then
  fetch
  exit 0
fi

echo "arbor setup: installing ${need[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "arbor setup: need root or sudo to install ${need[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fetch
