#!/usr/bin/env bash
# Issue 45's CPU benchmark: one `unet.step` of sdxl-base (diffusers' config, seeded weights) at
# HEIGHTxWIDTH on diffusers' own UNet2DConditionModel in a current PyTorch
# (tools/bench/unet_peer.py, fp32), twinpath's reference (fp32) and its compiled emulation
# (w=f16,a=f16,acc=f32), one process after the other, ROUNDS times in turns; each makes one
# untimed call and REPEATS timed ones (the best kept), with its peak RSS, the emulation's
# planning time ("compiled in") and each output's rel L2 against PyTorch's.
# MODEL=DIR uses a model folder made before (`twinpath model init --config sdxl-base`).
# Usage: bash tools/bench-unet.sh [THREADS] [HEIGHTxWIDTH] [ROUNDS] [REPEATS] -> out/bench-unet/
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
threads=${1:-2}
res=${2:-512x512}
rounds=${3:-1}
repeats=${4:-1}
name=unet
source "$root/tools/bench/setup.sh"
model=${MODEL:-$out/sdxl-base}
[[ -f $model/config.json ]] || "$tp" model init --config sdxl-base --seed 0 --out "$model" > /dev/null
"$py" - "$out" "$res" <<'PY'
import sys, torch
from safetensors.torch import save_file
out, res = sys.argv[1], sys.argv[2]
h, w = (int(v) for v in res.split("x"))
g = torch.Generator().manual_seed(0)
save_file({"sample": torch.randn(1, 4, h // 8, w // 8, generator=g),
           "timestep": torch.tensor(500.0),
           "encoder_hidden_states": torch.randn(1, 77, 2048, generator=g),
           "text_embeds": torch.randn(1, 1280, generator=g),
           "time_ids": torch.tensor([[h, w, 0, 0, h, w]], dtype=torch.float32)},
          f"{out}/in-{res}.safetensors")
PY

run_twinpath() {  # path policy
  local tag=$res-${1//:/-} log=$out/$res-${1//:/-}.log
  /usr/bin/time -v "$tp" exec --model "$model" --pipeline unet.step --path "$1" \
    ${2:+--policy $2} --input "$out/in-$res.safetensors" --output "$out/$tag.safetensors" \
    --repeat $((repeats + 1)) > "$log" 2> "$log.time"
  local cold warm plan
  cold=$(sed -n 's/^  time *\([0-9.]*\) s$/\1/p' "$log" | tail -1)
  warm=$(sed -n 's/^  warm *\([0-9.]*\) s .*$/\1/p' "$log" | tail -1)
  plan=$(sed -n 's/.*compiled in \([0-9.]*\) s$/\1/p' "$log" | head -1)
  echo "{\"res\": \"$res\", \"path\": \"$1${2:+ $2}\", \"ms\": $(python3 -c "print(round(${warm:-$cold}*1e3,1))"), \"cold_ms\": $(python3 -c "print(round($cold*1e3,1))"), \"planning_s\": ${plan:-null}, \"threads\": $threads, \"peak_rss_mb\": $(peak "$log.time"), \"rel_l2_vs_torch\": $("$py" "$root/tools/bench/rel_l2.py" "$out/$tag.safetensors" "$out/$res-torch.safetensors")}"
}
run_torch() {
  /usr/bin/time -v "$py" "$root/tools/bench/unet_peer.py" --model "$model" \
    --input "$out/in-$res.safetensors" --output "$out/$res-torch.safetensors" \
    --threads "$threads" --name "$res" --repeats "$repeats" > "$out/$res-torch.json" \
    2> "$out/$res-torch.time"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); r['peak_rss_mb']=int(sys.argv[2]); print(json.dumps(r))" \
    "$out/$res-torch.json" "$(peak "$out/$res-torch.time")"
}

for ((round = 1; round <= rounds; ++round)); do
  echo "== round $round"
  run_torch | tee -a "$out/results.jsonl"
  run_twinpath reference "" | tee -a "$out/results.jsonl"
  run_twinpath compiled:cpu w=f16,a=f16,acc=f32 | tee -a "$out/results.jsonl"
done
