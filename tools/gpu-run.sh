#!/usr/bin/env bash
# Run on the GPU machine (H100/H200, sm_90), in the repository root, with .carry from
# tools/gpu-carry.sh: builds against the carried Debian packages and the machine's own LibTorch
# (PyTorch's CMake config, CUDA build), runs the GPU tests (CUDA kernels against the CPU
# emulation), the CUDA benchmarks, and, when the full build succeeded, `twinpath run --device
# cuda` on the ci and field-reports suites, `twinpath tradeoff --device cuda`, and one Wan-1.3B
# block on the CUDA kernels beside diffusers' own transformer on PyTorch CUDA (step wan).
#
# Every step runs even when one before it failed; every log is kept. Results go to
# out/gpu/ (results.md: date, device, commit, LibTorch, the figures) and, when $OUT is set (the
# device tool), results.md, gpu_tests.xml and logs.tar.gz (every log, each benchmark family's
# JSON) to $OUT, with reports under 15 MB.
#   GPU_RUN_STEPS   which steps, in that order, default "tests bench suites tradeoff"; also
#                   "wan" (needs diffusers importable by python3: carry .whl, see README) and
#                   "selftest" (`twinpath selftest --device cuda`, its summary.md to $OUT)
#   GPU_TESTS_LIMIT seconds gpu_tests may take at most (default: what the budget leaves)
#   GPU_TESTS_FILTER a --gtest_filter for gpu_tests (default all)
#   GPU_RUN_BUDGET  seconds after which the remaining steps are skipped, default 540
#   GPU_BENCH_FAMILIES  which gpu_bench families (a family may name arguments too:
#                   "BM_DecodeSdKlCuda/1024"), default all four
#   GPU_BENCH_LIMIT seconds each gpu_bench family may take at most (default: what the budget leaves)
#   GPU_SUITES      which suites, default "ci field-reports"
#   GPU_KERNELS     the CUDA kernel sets the suites run on (TWINPATH_CUDA_KERNELS), default
#                   "per-op fused" (gpu_tests and gpu_bench always run both)
#   GPU_TRADEOFF_KERNELS  the kernel sets tradeoff runs on, default "fused"
#   GPU_TRADEOFF    extra tradeoff options, e.g. "--policy w=f16,a=f16,acc=f32 --repeats 5"
#   GPU_SUITE_FILTER a run --filter for the suites (e.g. "wan")
#   GPU_INJECT      the suites once per entry: none (as they are) or a fault list for --inject,
#                   default "none"
#   GPU_WAN_FRAMES  latent frames of the Wan block's input (480x832), default 1
set -uo pipefail
start=$SECONDS
root=$(cd "$(dirname "$0")/.." && pwd)
work="$root/out/gpu"
rm -rf "$work" && mkdir -p "$work"
steps=" ${GPU_RUN_STEPS:-tests bench suites tradeoff} "
budget=${GPU_RUN_BUDGET:-540}
say() { echo "gpu-run [$((SECONDS - start)) s]: $*" | tee -a "$work/steps.log"; }
left() { echo $((budget - (SECONDS - start))); }
finish() {
  {
    echo "# GPU run $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
    echo "- device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo unknown)"
    echo "- commit: $(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "- nvcc: $(/usr/local/cuda/bin/nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' || echo unknown)"
    echo "- LibTorch: $torch_version"
    echo "- build: $build_kind"
    echo
    echo '```'
    cat "$work/steps.log"
    echo
    grep -h -E "^\[  (PASSED|FAILED|SKIPPED) |tests? ran|^\[  FAILED  \]" "$work/gpu_tests.log" 2>/dev/null || true
    echo
    grep -h -E "^BM_|^Benchmark|^---" "$work/gpu_bench.log" 2>/dev/null || true
    echo '```'
    echo
    grep -h -E "^\|" "$work/gpu_bench.log" 2>/dev/null || true  # per-group tables
  } > "$work/results.md"
  if [[ -n "${OUT:-}" ]]; then
    cp "$work/results.md" "$OUT/"
    [[ -f "$work/gpu_tests.xml" ]] && cp "$work/gpu_tests.xml" "$OUT/"
    tar czf "$OUT/logs.tar.gz" -C "$work" --exclude='*.h5' --exclude='*.safetensors' . 2>/dev/null
    for f in "$work"/*.h5; do [[ -f $f && $(stat -c %s "$f") -lt 15000000 ]] && cp "$f" "$OUT/"; done 2>/dev/null
  fi
  cat "$work/results.md"
}

carry="$root/.carry/root"
runtime="$root/.carry/runtime"
arch=x86_64-linux-gnu
torch_version=$(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null || echo "not found")
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null || echo "")
build_kind="none"
nvidia-smi > "$work/nvidia-smi.log" 2>&1 || say "nvidia-smi failed (see nvidia-smi.log)"
if [[ ! -d "$carry" ]]; then
  say "$carry is missing: run tools/gpu-carry.sh on the build machine and carry .carry"
  finish
  exit 2
fi
say "LibTorch: $torch_version${torch_prefix:+ at $torch_prefix}"

common=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90
  -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DTWINPATH_NATIVE=ON
  -DCMAKE_PREFIX_PATH="$carry/usr;$carry/usr/lib/$arch/cmake;$carry/usr/share/eigen3/cmake;$torch_prefix"
  "-DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags,-rpath,$runtime,-rpath-link,$runtime")
full=(-DHDF5_C_COMPILER_EXECUTABLE="$carry/no-h5cc" -DHDF5_C_INCLUDE_DIR="$carry/usr/include/hdf5/serial"
  -DHDF5_hdf5_LIBRARY_RELEASE="$carry/usr/lib/$arch/hdf5/serial/libhdf5.so"
  -DPNG_PNG_INCLUDE_DIR="$carry/usr/include/libpng16" -DPNG_LIBRARY_RELEASE="$carry/usr/lib/$arch/libpng16.so"
  -DZLIB_INCLUDE_DIR="$carry/usr/include" -DZLIB_LIBRARY_RELEASE="$carry/usr/lib/$arch/libz.so")
build="$root/build-gpu"
if cmake -S "$root" -B "$build" "${common[@]}" "${full[@]}" > "$work/configure.log" 2>&1; then
  build_kind="full"
else
  say "the full configure failed (configure.log); building TWINPATH_GPU_ONLY (no HDF5, no PNG)"
  build="$root/build-gpu-only"
  if cmake -S "$root" -B "$build" "${common[@]}" -DTWINPATH_GPU_ONLY=ON > "$work/configure-gpu-only.log" 2>&1; then
    build_kind="gpu-only"
  else
    say "the GPU-only configure failed too: configure-gpu-only.log"
    finish
    exit 1
  fi
fi
grep -h "twinpath:" "$work"/configure*.log | tee -a "$work/steps.log"
grep -q "LibTorch ON" "$work"/configure*.log || say "LibTorch NOT FOUND: no gpu_bench and no torch path (python3's torch: $torch_version)"
targets=(gpu_tests)
[[ $build_kind == full ]] && targets+=(twinpath)
grep -q "LibTorch ON" "$work"/configure*.log && targets+=(gpu_bench)
if cmake --build "$build" --parallel "$(nproc)" --target "${targets[@]}" > "$work/build.log" 2>&1; then
  say "built ${targets[*]} ($build_kind)"
else
  say "the build failed: build.log ends:"
  grep -E "error|Error|FAILED" "$work/build.log" | head -20 | tee -a "$work/steps.log"
fi
status=0
export OMP_WAIT_POLICY=passive
step_tests() {
  [[ -x "$build/tests/gpu_tests" ]] || return
  local limit=$(left)
  [[ -n ${GPU_TESTS_LIMIT:-} && $GPU_TESTS_LIMIT -lt $limit ]] && limit=$GPU_TESTS_LIMIT
  timeout "$limit" "$build/tests/gpu_tests" ${GPU_TESTS_FILTER:+--gtest_filter="$GPU_TESTS_FILTER"} --gtest_output="xml:$work/gpu_tests.xml" > "$work/gpu_tests.log" 2>&1 || status=1
  say "gpu_tests: $(grep -E '^\[  PASSED  \]|^\[  FAILED  \] [0-9]+ test' "$work/gpu_tests.log" | tr '\n' ' ')"
  grep -E "^\[  FAILED  \] [A-Z]" "$work/gpu_tests.log" | sort -u | head -20 | tee -a "$work/steps.log"
}
step_bench() {
  [[ -x "$build/tests/gpu_bench" ]] || return
  # One process per family, so a crash in one leaves the others' figures; a crash gets a
  # backtrace from cuda-gdb.
  # A family may name arguments too ("BM_DecodeSdKlCuda/1024"): the filter is "^FAMILY/".
  for family in ${GPU_BENCH_FAMILIES:-BM_DecodeSdKlTorchCuda BM_DecodeSdKlCudaGroups BM_DecodeSdKlCuda BM_GroupCuda}; do
    [[ $(left) -gt 60 ]] || { say "no time left for $family"; continue; }
    local name=${family//\//_}
    local limit=$(left)
    [[ -n ${GPU_BENCH_LIMIT:-} && $GPU_BENCH_LIMIT -lt $limit ]] && limit=$GPU_BENCH_LIMIT
    timeout "$limit" "$build/tests/gpu_bench" --benchmark_filter="^$family/" \
      --benchmark_out="$work/$name.json" --benchmark_out_format=json > "$work/$name.log" 2>&1
    local rc=$?
    say "gpu_bench $family: rc $rc"
    cat "$work/$name.log" >> "$work/gpu_bench.log"
    if [[ $rc -ne 0 && $rc -ne 124 ]]; then
      status=1
      timeout 120 cuda-gdb -batch -ex run -ex bt --args "$build/tests/gpu_bench" \
        --benchmark_filter="^$family/" > "$work/$name.backtrace.log" 2>&1
      grep -E "^#[0-9]+" "$work/$name.backtrace.log" | head -12 | tee -a "$work/steps.log"
    fi
  done
}
tp="$build/twinpath"
step_suites() {
  [[ -x $tp ]] || return
  for kernels in ${GPU_KERNELS:-per-op fused}; do
    for suite in ${GPU_SUITES:-ci field-reports}; do
      for inject in ${GPU_INJECT:-none}; do
        [[ $(left) -gt 60 ]] || { say "no time left for the $suite suite ($kernels, $inject)"; continue; }
        name="$suite-cuda-$kernels"
        [[ $inject == none ]] || name+="-$inject"
        local faults=()
        [[ $inject == none ]] || faults=(--inject "$inject")
        TWINPATH_CUDA_KERNELS=$kernels timeout "$(left)" "$tp" run --device cuda --suite "$suite" \
          ${GPU_SUITE_FILTER:+--filter "$GPU_SUITE_FILTER"} "${faults[@]}" \
          --report "$work/$name.h5" > "$work/$name.log" 2>&1
        local rc=$?
        say "run --device cuda --suite $suite, $kernels kernels, faults $inject: rc $rc ($(tail -1 "$work/$name.log"))"
        [[ -f "$work/$name.h5" ]] && python3 "$root/tools/contract_totals.py" "$work/$name.h5" 2>&1 | tee -a "$work/steps.log"
      done
    done
  done
}
step_tradeoff() {
  [[ -x $tp ]] || return
  for kernels in ${GPU_TRADEOFF_KERNELS:-fused}; do
    for res in 512x512 1024x1024; do
      [[ $(left) -gt 60 ]] || { say "no time left for tradeoff at $res ($kernels)"; continue; }
      name="tradeoff-$res-$kernels"
      TWINPATH_CUDA_KERNELS=$kernels timeout "$(left)" "$tp" tradeoff --device cuda --model sd-kl --res "$res" ${GPU_TRADEOFF:-} --out "$work/$name" > "$work/$name.log" 2>&1
      say "tradeoff --device cuda sd-kl $res, $kernels kernels: rc $?"
    done
  done
}
# One Wan-1.3B block (the 1.3B config with num_layers 1, seeded) at 480x832, GPU_WAN_FRAMES
# latent frames, 512 text tokens: `exec --path compiled:cuda --repeat 6` per policy and the fp32
# reference on the CPU, diffusers'
# WanTransformer3DModel on PyTorch CUDA in bf16, f16 and f32 (tools/bench/wan_peer.py, best of 5
# after one untimed call), and each output's rel L2 against PyTorch's f32 (tools/bench/rel_l2.py).
step_wan() {
  [[ -x $tp ]] || return
  local w=$work/wan frames=${GPU_WAN_FRAMES:-1}
  mkdir -p "$w"
  python3 - "$w" "$frames" <<'PY'
import json, sys, torch
from safetensors.torch import save_file
w, frames = sys.argv[1], int(sys.argv[2])
json.dump({"_class_name": "WanTransformer3DModel", "added_kv_proj_dim": None,
           "attention_head_dim": 128, "cross_attn_norm": True, "eps": 1e-06, "ffn_dim": 8960,
           "freq_dim": 256, "image_dim": None, "in_channels": 16, "num_attention_heads": 12,
           "num_layers": 1, "out_channels": 16, "patch_size": [1, 2, 2],
           "qk_norm": "rms_norm_across_heads", "rope_max_seq_len": 1024, "text_dim": 4096},
          open(f"{w}/wan-1.3b-block.json", "w"))
g = torch.Generator().manual_seed(0)
save_file({"hidden_states": torch.randn(1, 16, frames, 60, 104, generator=g),
           "timestep": torch.tensor([500.0]),
           "encoder_hidden_states": torch.randn(1, 512, 4096, generator=g)}, f"{w}/in.safetensors")
PY
  "$tp" model init --config "$w/wan-1.3b-block.json" --seed 0 --out "$w/block" > "$w/init.log" 2>&1 ||
    { say "wan: model init failed: $(tail -1 "$w/init.log")"; return; }
  if python3 -c "import diffusers" 2> /dev/null; then
    for dtype in f32 bf16 f16; do
      timeout "$(left)" python3 "$root/tools/bench/wan_peer.py" --model "$w/block" --input "$w/in.safetensors" \
        --output "$w/torch-$dtype.safetensors" --device cuda --dtype "$dtype" --repeats 5 \
        --name wan-1.3b-block > "$w/torch-$dtype.json" 2> "$w/torch-$dtype.log"
      local rc=$?
      say "wan: PyTorch CUDA $dtype: rc $rc $(cat "$w/torch-$dtype.json") $(tail -1 "$w/torch-$dtype.log")"
    done
  else
    say "wan: python3 has no diffusers (carry .whl): no PyTorch peer"
  fi
  for policy in reference w=bf16,a=bf16,acc=f32 w=f16,a=f16,acc=f32 \
    w=f8e4m3,a=bf16,acc=f32,cast=layerwise w=bf16,a=bf16,acc=f32,attn=act; do
    local name=${policy//[=,]/-} path=(--path compiled:cuda --policy "$policy" --repeat 6)
    [[ $policy == reference ]] && path=(--path reference --repeat 2)  # fp32 on the CPU
    timeout "$(left)" "$tp" exec --model "$w/block" --pipeline wan.step "${path[@]}" \
      --input "$w/in.safetensors" --output "$w/$name.safetensors" > "$w/$name.log" 2>&1
    local rc=$?
    say "wan: ${path[1]} $policy: rc $rc $(grep -E '^  (time|warm) ' "$w/$name.log" | tr -s ' \n' ' ')"
    [[ $rc -eq 0 ]] || say "wan:   $(tail -2 "$w/$name.log" | tr '\n' ' ')"
    [[ -f $w/torch-f32.safetensors && -f $w/$name.safetensors ]] &&
      say "wan:   rel L2 against PyTorch CUDA f32: $(python3 "$root/tools/bench/rel_l2.py" "$w/$name.safetensors" "$w/torch-f32.safetensors")"
  done
  for dtype in bf16 f16; do
    [[ -f $w/torch-$dtype.safetensors && -f $w/torch-f32.safetensors ]] &&
      say "wan:   PyTorch CUDA $dtype rel L2 against its f32: $(python3 "$root/tools/bench/rel_l2.py" "$w/torch-$dtype.safetensors" "$w/torch-f32.safetensors")"
  done
}
step_selftest() {
  [[ -x $tp ]] || return
  timeout "$(left)" "$tp" selftest --device cuda --out "$work/selftest" > "$work/selftest.log" 2>&1
  local rc=$?
  say "selftest --device cuda: rc $rc ($(grep -v '^summary:' "$work/selftest.log" | tail -1))"
  [[ -f $work/selftest/summary.md ]] && cp "$work/selftest/summary.md" "$work/selftest-summary.md"
  [[ -n ${OUT:-} && -f $work/selftest/summary.md ]] && cp "$work/selftest/summary.md" "$OUT/selftest-summary.md"
}
# The steps in the order GPU_RUN_STEPS names them.
for step in $steps; do
  case $step in
    tests | bench | suites | tradeoff | wan | selftest) "step_$step" ;;
    *) say "no step called $step (tests, bench, suites, tradeoff, wan, selftest)" ;;
  esac
done
finish
exit $status
