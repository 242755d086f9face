#!/usr/bin/env bash
# Issue 40's CPU benchmarks, one run: `wan.step` on tiny-wan and one wan-1.3b block (the
# 1.3B config with num_layers 1, at 480x832 and F latent frames, 512 text tokens as the pipeline
# pads them), on twinpath's reference (fp32) and compiled emulation (bf16), and on a current
# PyTorch running diffusers' own WanTransformer3DModel (tools/bench/wan_peer.py) on the same
# folder and inputs, in turns, best of ROUNDS each; with the outputs' agreement (rel L2) and
# each process's peak RSS. Both make one untimed call and take the best of two more (twinpath:
# `exec --repeat 3`, whose first, cold call is kept as cold_ms).
# The PyTorch venv (.venv-bench) is made here, never by the build or the tests.
# Usage: bash tools/bench-wan.sh [THREADS] [ROUNDS] [FRAMES]  (defaults 2, 3, 1) -> out/bench-wan/
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
threads=${1:-2}
rounds=${2:-3}
frames=${3:-1}
name=wan
source "$root/tools/bench/setup.sh"

# The models and inputs (seeded).
"$tp" model init --config tiny-wan --seed 0 --out "$out/tiny-wan" > /dev/null
"$py" - "$out" "$frames" <<'PY'
import json, sys, torch
from safetensors.torch import save_file
out, frames = sys.argv[1], int(sys.argv[2])
from diffusers import WanTransformer3DModel  # noqa: F401 (the venv has diffusers)
g = torch.Generator().manual_seed(0)
save_file({"hidden_states": torch.randn(1, 16, 3, 8, 8, generator=g),
           "timestep": torch.tensor([500.0]),
           "encoder_hidden_states": torch.randn(1, 24, 32, generator=g)}, f"{out}/tiny-wan-in.safetensors")
save_file({"hidden_states": torch.randn(1, 16, frames, 60, 104, generator=g),
           "timestep": torch.tensor([500.0]),
           "encoder_hidden_states": torch.randn(1, 512, 4096, generator=g)}, f"{out}/block-in.safetensors")
PY
"$tp" model init --config wan-1.3b --seed 0 --out "$out/wan-1.3b-config" > /dev/null 2>&1 || true
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
c = json.load(open(f"{out}/wan-1.3b-config/config.json"))
c["num_layers"] = 1
json.dump(c, open(f"{out}/wan-1.3b-block.json", "w"), indent=1)
PY
rm -rf "$out/wan-1.3b-config"
"$tp" model init --config "$out/wan-1.3b-block.json" --seed 0 --out "$out/wan-1.3b-block" > /dev/null

run_twinpath() {  # name model input path policy
  local log=$out/$1-$4.log
  /usr/bin/time -v "$tp" exec --model "$out/$2" --pipeline wan.step --path "$4" ${5:+--policy $5} \
    --input "$out/$3" --output "$out/$1-${4//:/-}.safetensors" --repeat 3 > "$log" 2> "$log.time"
  local cold warm
  cold=$(sed -n 's/^  time *\([0-9.]*\) s$/\1/p' "$log" | tail -1)
  warm=$(sed -n 's/^  warm *\([0-9.]*\) s .*$/\1/p' "$log" | tail -1)
  echo "{\"name\": \"$1\", \"path\": \"$4${5:+ $5}\", \"ms\": $(python3 -c "print(round($warm*1e3,1))"), \"cold_ms\": $(python3 -c "print(round($cold*1e3,1))"), \"threads\": $threads, \"peak_rss_mb\": $(peak "$log.time")}"
}
run_torch() {  # name model input
  /usr/bin/time -v "$py" "$root/tools/bench/wan_peer.py" --model "$out/$2" --input "$out/$3" \
    --output "$out/$1-torch.safetensors" --threads "$threads" --name "$1" --repeats 2 \
    > "$out/$1-torch.json" 2> "$out/$1-torch.time"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); r['peak_rss_mb']=int(sys.argv[2]); print(json.dumps(r))" \
    "$out/$1-torch.json" "$(peak "$out/$1-torch.time")"
}

: > "$out/results.jsonl"
for round in $(seq "$rounds"); do
  for bench in "tiny-wan tiny-wan tiny-wan-in.safetensors" \
               "wan-1.3b-block wan-1.3b-block block-in.safetensors"; do
    set -- $bench
    run_torch "$1" "$2" "$3" | tee -a "$out/results.jsonl"
    run_twinpath "$1" "$2" "$3" reference | tee -a "$out/results.jsonl"
    run_twinpath "$1" "$2" "$3" compiled:cpu w=bf16,a=bf16,acc=f32 | tee -a "$out/results.jsonl"
  done
done
echo "== agreement (rel L2 against PyTorch's fp32 output)"
"$py" - "$out" <<'PY'
import sys, torch
from safetensors.torch import load_file
out = sys.argv[1]
for name in ("tiny-wan", "wan-1.3b-block"):
    want = load_file(f"{out}/{name}-torch.safetensors")["sample"].double()
    for path in ("reference", "compiled-cpu"):
        got = load_file(f"{out}/{name}-{path}.safetensors")["sample"].double()
        print(f"{name} {path}: rel L2 {((got - want).norm() / want.norm()).item():.3e}")
PY
echo "== best of $rounds (ms)"
python3 - "$out/results.jsonl" <<'PY'
import json, sys
best = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    key = (r["name"], r.get("path", "pytorch " + r.get("torch", "")))
    if key not in best or r["ms"] < best[key]["ms"]:
        best[key] = r
for (name, path), r in sorted(best.items()):
    cold = f"  (cold call {r['cold_ms']:.1f} ms)" if "cold_ms" in r else ""
    print(f"{name:16} {path:40} {r['ms']:10.1f} ms  peak {r['peak_rss_mb']} MB{cold}")
PY
