#!/usr/bin/env bash
# Issue 16's benchmarks in one run, on one machine, with one thread count: the C++ benchmarks
# (the reference, Debian's LibTorch 1.13, the compiled path's CPU emulation) and a current
# PyTorch from PyPI (tools/bench/peer_torch.py) doing the same work, one after the other, plus
# each decode's relative L2 from the same decode in fp64 on the same latent; then rounds of the
# decode alone, PyTorch and twinpath in turn, for ratios a busy host moves less (each round's
# pair minutes apart at most; the median round reported).
# The PyTorch venv (.venv-bench: torch, diffusers) is made here, never by the build or the tests.
# Usage: bash tools/bench-peer.sh [THREADS] [ROUNDS]   (defaults 2, 3) -> out/bench/*.json, *.jsonl
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
threads=${1:-2}
rounds=${2:-3}
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

echo "== paired decode rounds ($rounds): PyTorch, then the reference and the emulation (f16)"
: >"$out/paired_torch.jsonl"
for round in $(seq "$rounds"); do
  "$venv/bin/python" "$root/tools/bench/peer_torch.py" --model "$out/sd-kl" --out "$out" \
    --threads "$threads" --only decode-time >>"$out/paired_torch.jsonl"
  "$build/tests/reference_bench" --benchmark_filter='DecodeSdKl256(Reference|Compiled/1)' \
    --benchmark_out="$out/paired_twinpath_$round.json" --benchmark_out_format=json >/dev/null
done
"$venv/bin/python" - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
torch_ms = [json.loads(line)["ms"] for line in open(f"{out}/paired_torch.jsonl")]
rows = []
for r in range(rounds):
    runs = json.load(open(f"{out}/paired_twinpath_{r + 1}.json"))["benchmarks"]
    ms = lambda key: next(b["real_time"] for b in runs if key in b["name"])
    rows.append((torch_ms[r], ms("Reference"), ms("Compiled/1")))
print("round  PyTorch ms  reference ms  emulation f16 ms  ref/PyTorch  emu/ref")
for i, (t, ref, emu) in enumerate(rows):
    print(f"{i + 1:5d}  {t:10.1f}  {ref:12.1f}  {emu:16.1f}  {ref / t:11.3f}  {emu / ref:7.3f}")
print(f"median ref/PyTorch {statistics.median(r / t for t, r, _ in rows):.3f}, "
      f"median emu/ref {statistics.median(e / r for _, r, e in rows):.3f}")
PY
