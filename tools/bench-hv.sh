#!/usr/bin/env bash
# Issue 41's CPU benchmark: the HunyuanVideo VAE's decode of seeded latents (hunyuan-video,
# seeded weights) at HEIGHTxWIDTH and LATENT_FRAMES (default 256x256, 5 latent frames = 17
# video frames), untiled and tiled (diffusers' enable_tiling at TILE = MIN:STRIDE px, default
# 128:96, with framewise decoding on: every 5-latent temporal tile cut in tiles), each on diffusers' own
# AutoencoderKLHunyuanVideo in a current PyTorch (tools/bench/hv_peer.py), twinpath's
# reference (fp32) and its compiled emulation (bf16), one call each (a decode is minutes on
# two cores), with each process's peak RSS and the outputs' rel L2 against PyTorch's.
# MODES="tiled" (or "untiled") runs one of the two (default both).
# Usage: bash tools/bench-hv.sh [THREADS] [HEIGHTxWIDTH] [LATENT_FRAMES] [TILE]  -> out/bench-hv/
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
threads=${1:-2}
res=${2:-256x256}
frames=${3:-5}
tile=${4:-128:96}
modes=${MODES:-untiled tiled}
name=hv
source "$root/tools/bench/setup.sh"
[[ -f $out/hunyuan-video/config.json ]] ||
  "$tp" model init --config hunyuan-video --seed 0 --out "$out/hunyuan-video" > /dev/null
"$py" - "$out" "$res" "$frames" <<'PY'
import sys, torch
from safetensors.torch import save_file
out, res, frames = sys.argv[1], sys.argv[2], int(sys.argv[3])
h, w = (int(v) // 8 for v in res.split("x"))
g = torch.Generator().manual_seed(0)
save_file({"latents": torch.randn(1, 16, frames, h, w, generator=g)}, f"{out}/latents.safetensors")
PY

# name path policy exec-tiling-flags
run_twinpath() {
  local tag=$1-${2//:/-} log=$out/$1-${2//:/-}.log
  /usr/bin/time -v "$tp" exec --model "$out/hunyuan-video" --pipeline video.decode --path "$2" \
    ${3:+--policy $3} --input "$out/latents.safetensors" --output "$out/$tag.safetensors" \
    $4 > "$log" 2> "$log.time"
  local s
  s=$(sed -n 's/^  time *\([0-9.]*\) s$/\1/p' "$log" | tail -1)
  echo "{\"name\": \"$1\", \"path\": \"$2${3:+ $3}\", \"ms\": $(python3 -c "print(round($s*1e3,1))"), \"threads\": $threads, \"peak_rss_mb\": $(peak "$log.time")}"
}
run_torch() {  # name peer-flags
  /usr/bin/time -v "$py" "$root/tools/bench/hv_peer.py" --model "$out/hunyuan-video" \
    --input "$out/latents.safetensors" --output "$out/$1-torch.safetensors" --threads "$threads" \
    --name "$1" $2 > "$out/$1-torch.json" 2> "$out/$1-torch.time"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); r['peak_rss_mb']=int(sys.argv[2]); print(json.dumps(r))" \
    "$out/$1-torch.json" "$(peak "$out/$1-torch.time")"
}

: > "$out/results.jsonl"
for bench in "untiled|--framewise off|--framewise off" \
             "tiled|--tile $tile --framewise on|--tiling on --tile-min ${tile%:*} --tile-stride ${tile#*:}"; do
  IFS='|' read -r name peer flags <<< "$bench"
  [[ " $modes " == *" $name "* ]] || continue
  run_torch "$name" "$peer" | tee -a "$out/results.jsonl"
  run_twinpath "$name" reference "" "$flags" | tee -a "$out/results.jsonl"
  run_twinpath "$name" compiled:cpu w=bf16,a=bf16,acc=f32 "$flags" | tee -a "$out/results.jsonl"
done
echo "== agreement (rel L2 against PyTorch's fp32 output of the same tiling)"
for name in $modes; do
  for path in reference compiled-cpu; do
    echo "$name $path: $("$py" "$root/tools/bench/rel_l2.py" "$out/$name-$path.safetensors" "$out/$name-torch.safetensors")"
  done
done
