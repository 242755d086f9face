#!/usr/bin/env bash
# Run on the GPU machine (H100/H200, sm_90), in the repository root, with .carry from
# tools/gpu-carry.sh: builds against the carried Debian packages and the machine's own LibTorch
# (PyTorch's CMake config, CUDA build), runs the GPU tests (CUDA kernels against the CPU
# emulation) and the CUDA benchmarks, and writes everything to ${OUT:-out/gpu}:
#   gpu_tests.xml, gpu_bench.json, results.md (date, device, commit, the figures).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/out/gpu}
mkdir -p "$out"
carry="$root/.carry/root"
[[ -d "$carry" ]] || { echo "gpu-run: $carry is missing; run tools/gpu-carry.sh on the build machine and carry .carry"; exit 2; }
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
export LD_LIBRARY_PATH="$carry/usr/lib/$arch:${LD_LIBRARY_PATH:-}"
cmake -S "$root" -B "$root/build-gpu" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH="$carry/usr;$carry/usr/lib/$arch/cmake;$carry/usr/share/eigen3/cmake;$torch_prefix" \
  -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DTWINPATH_NATIVE=ON 2>&1 | tee "$out/configure.log" | tail -3
cmake --build "$root/build-gpu" --parallel "$(nproc)" --target twinpath gpu_tests compiled_tests gpu_bench 2>&1 | tail -5
status=0
"$root/build-gpu/tests/gpu_tests" --gtest_output="xml:$out/gpu_tests.xml" 2>&1 | tee "$out/gpu_tests.log" | tail -40 || status=1
"$root/build-gpu/tests/gpu_bench" --benchmark_out="$out/gpu_bench.json" --benchmark_out_format=json 2>&1 | tee "$out/gpu_bench.log" || status=1
{
  echo "# GPU run $(date -u +%Y-%m-%d)"
  echo
  echo "- device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo unknown)"
  echo "- commit: $(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
  echo "- LibTorch: $(python3 -c 'import torch; print(torch.__version__)')"
  echo
  echo '```'
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests? ran" "$out/gpu_tests.log" || true
  echo
  grep -E "^BM_|^Benchmark" "$out/gpu_bench.log" || true
  echo '```'
} > "$out/results.md"
cat "$out/results.md"
exit $status
