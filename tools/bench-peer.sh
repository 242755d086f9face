#!/usr/bin/env bash
# Issue 16's benchmarks in one run, on one machine, with one thread count: the C++ benchmarks
# (the reference, Debian's LibTorch 1.13, the compiled path's CPU emulation) and a current
# PyTorch from PyPI (tools/bench/peer_torch.py) doing the same work, one after the other, plus
# each decode's relative L2 from the same decode in fp64 on the same latent.
# The PyTorch venv (.venv-bench: torch, diffusers) is made here, never by the build or the tests.
# Usage: bash tools/bench-peer.sh [THREADS]   (default 2) -> out/bench/*.json, *.jsonl, summary
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
threads=${1:-2}
venv=$root/.venv-bench
if [[ ! -x $venv/bin/python ]]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch diffusers safetensors numpy
fi
build=$root/build
[[ -x $build/tests/reference_bench ]] || bash "$root/tools/build.sh"
out=$root/out/bench
mkdir -p "$out"
[[ -f $out/sd-kl/config.json ]] ||
  "$build/twinpath" model init --config sd-kl --seed 0 --out "$out/sd-kl"
export OMP_NUM_THREADS=$threads

echo "== PyTorch $("$venv/bin/python" -c 'import torch; print(torch.__version__)') ($threads threads)"
"$venv/bin/python" "$root/tools/bench/peer_torch.py" --model "$out/sd-kl" --out "$out" \
  --threads "$threads" | tee "$out/peer_torch.jsonl"

echo "== twinpath reference_bench ($threads threads)"
"$build/tests/reference_bench" \
  --benchmark_filter='Sgemm|ConvReferenceOp|ConvTorch|Linear|DecodeSdKl256' \
  --benchmark_out="$out/reference_bench.json" --benchmark_out_format=json

echo "== relative L2 from fp64 of the decode on PyTorch's latent"
for path in reference reference:fp64; do
  "$build/twinpath" exec --model "$out/sd-kl" --pipeline vae.decode --path "$path" \
    --input "$out/latent.npy" --output "$out/decode_${path/:/_}.npy" >/dev/null
done
"$venv/bin/python" - "$out" <<'PY'
import sys, numpy as np
out = sys.argv[1]
torch64 = np.load(f"{out}/decode_f64.npy").astype(np.float64)
ours64 = np.load(f"{out}/decode_reference_fp64.npy").astype(np.float64)
ref32 = np.load(f"{out}/decode_reference.npy").astype(np.float64)
rel = lambda a, b: float(np.linalg.norm(a - b) / np.linalg.norm(b))
print(f"reference f32 vs twinpath fp64: {rel(ref32, ours64):.3e}")
print(f"reference f32 vs PyTorch fp64:  {rel(ref32, torch64):.3e}")
print(f"twinpath fp64 vs PyTorch fp64:  {rel(ours64, torch64):.3e}")
PY
