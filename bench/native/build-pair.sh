# Sourced by the before/after drivers (bench/kernel-cpu-time.sh, sample-hash.sh, truncation-time.sh):
#   build_pair SOURCE REV [FLAGS...]
# compiles bench/native/SOURCE against this tree's native/ into $tmp/new (with FLAGS) and, when REV is not empty,
# against REV's native/ into $tmp/oldbin (without them). Needs $root set by the caller; sourcing it makes $tmp, a
# directory removed on exit.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
build_pair() {
  local src="$root/bench/native/$1" rev="$2"
  shift 2
  g++ -O2 -std=c++17 "$@" -I"$root/native/include" -I"$root/native/src" "$src" -o "$tmp/new" -lpthread
  if [ -n "$rev" ]; then
    mkdir -p "$tmp/old"
    git -C "$root" archive "$rev" native | tar -x -C "$tmp/old"
    g++ -O2 -std=c++17 -I"$tmp/old/native/include" -I"$tmp/old/native/src" "$src" -o "$tmp/oldbin" -lpthread
  fi
}
