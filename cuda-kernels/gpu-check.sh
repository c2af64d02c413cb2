#!/usr/bin/env bash
# JVM-free GPU check of Arbor's CUDA kernels (../shared/design/GPU.md). On an NVIDIA machine:
#   1. builds the CUDA kernels, the CPU reference (native/) and the harness with nvcc (sm_90 + PTX),
#   2. checks every CUDA kernel against the scalar double-precision reference on random inputs,
#   3. times each kernel with CUDA events at the reference shapes, and the same math in PyTorch eager
#      (and torch.compile where it works),
#   4. prints a table (ms, GB/s, % of measured copy bandwidth, speed-up vs PyTorch) and writes the
#      full log and CSVs into OUTDIR.
# Usage: cuda-kernels/gpu-check.sh [OUTDIR] [--quick]     (--quick: correctness only, no timing)
# Exit status: 0 all checks passed, 1 a check failed, 2 build or device problem.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
out="$root/gpu-check-out"
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then out="$1"; shift; fi  # `gpu-check.sh --quick` keeps the default OUTDIR
mkdir -p "$out"
out="$(cd "$out" && pwd)"
log="$out/gpu-check.log"
exec > >(tee "$log") 2>&1

NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
ARCH="${ARBOR_CUDA_ARCH:--gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90}"
build="$out/build"
mkdir -p "$build"
echo "== build ($("$NVCC" --version | tail -1))"
start=$(date +%s)
# One compiler process per source, in parallel (a single nvcc command compiles its inputs one after
# another: ~2x the wall time), then one link.
pids=() objs=()
g++ -std=c++17 -O3 -march=x86-64 -fPIC -I"$root/native/include" -I"$root/native/src" \
    -c "$root/native/src/arbor_cpu.cpp" -o "$build/arbor_cpu.o" &
pids+=($!) objs+=("$build/arbor_cpu.o")
for src in "$here/arbor_cuda.cu" "$here"/test/gpu_check.cu "$here"/test/check_*.cu; do
  obj="$build/$(basename "$src" .cu).o"
  "$NVCC" -std=c++17 -O3 $ARCH -I"$root/native/include" -I"$root/native/src" -I"$here" -c "$src" -o "$obj" &
  pids+=($!) objs+=("$obj")
done
failed=0
for p in "${pids[@]}"; do wait "$p" || failed=1; done
[ $failed -eq 0 ] || exit 2
"$NVCC" $ARCH "${objs[@]}" -o "$build/gpu_check" -lpthread || exit 2
echo "built in $(( $(date +%s) - start )) s"

echo "== kernels vs reference, and timings"
"$build/gpu_check" "$out" "$@"
status=$?
[ $status -eq 2 ] && exit 2

if [ "${1:-}" != "--quick" ]; then
  echo "== PyTorch eager / torch.compile on the same shapes"
  python3 "$here/test/torch_bench.py" "$out" || echo "(PyTorch timings failed; kernel results above stand)"
  echo "== summary"
  python3 "$here/test/report.py" "$out"
fi
echo "results in $out (gpu-check.log, checks.csv, kernel_times.csv, torch_times.csv, summary.txt)"
exit $status
