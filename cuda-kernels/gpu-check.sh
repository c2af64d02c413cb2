#!/usr/bin/env bash
# JVM-free GPU check of Arbor's CUDA kernels (docs/kernels.md, "GPU check without a JVM"). On an NVIDIA
# machine (it needs nvcc and Python with PyTorch, no JVM and no network):
#   1. builds the CUDA kernels, the CPU reference (native/) and the harness with nvcc (sm_90 + PTX),
#   2. checks every CUDA kernel against the scalar double-precision reference on random inputs,
#   3. times each kernel with CUDA events at the reference shapes, and the same math in PyTorch eager
#      (and torch.compile where it works),
#   4. prints a table (ms, GB/s, % of measured copy bandwidth, speed-up vs PyTorch) and writes the
#      full log and CSVs into OUTDIR.
# Reference shapes (an RL micro-batch of a Qwen-family policy): T = 16384 rows × V = 151936 bf16
# (forward floor ≈ 4.98 GB / 4.3 TB/s ≈ 1.16 ms, forward + backward ≈ 3.5 ms); T = 4096 × V = 32000
# fp32; sampling B = 256 × V = 151936. Timings: CUDA events, warm-up, median of 20, inputs larger than
# L2, each kernel as a fraction of the device-to-device copy bandwidth measured in the same run.
# Budget: under 5 minutes on one H200, build included, so it can be run twice.
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
"$NVCC" $ARCH "${objs[@]}" -o "$build/gpu_check" -lpthread -ldl || exit 2
echo "built in $(( $(date +%s) - start )) s"

# The fused linear kernels load cuBLAS at run time (ARBOR_CUBLAS, else libcublas.so.13/.12 on the loader
# path); where only PyTorch's pip wheels carry it, point ARBOR_CUBLAS at theirs. (grep reads all of ldconfig's
# output, not -q: under pipefail an early exit would make ldconfig's SIGPIPE read as "not found".)
if [ -z "${ARBOR_CUBLAS:-}" ] && ! ldconfig -p 2>/dev/null | grep 'libcublas\.so' >/dev/null; then
  ARBOR_CUBLAS="$(python3 - <<'PY' 2>/dev/null
import glob, os, site, sys
dirs = site.getsitepackages() + [site.getusersitepackages()]
try:
    import torch
    dirs.insert(0, os.path.dirname(torch.__file__))
except Exception:
    pass
for d in dirs:
    for p in sorted(glob.glob(os.path.join(d, "**", "libcublas.so*"), recursive=True)):
        if "Lt" not in os.path.basename(p):
            print(p); sys.exit(0)
PY
)"
  [ -n "$ARBOR_CUBLAS" ] && export ARBOR_CUBLAS && echo "cuBLAS: $ARBOR_CUBLAS"
fi

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
