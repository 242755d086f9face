#!/usr/bin/env bash
# The main job: install, build, then run the built-in tiny model on the reference path (fp32
# and fp64), on LibTorch, and on the compiled path's CPU emulation in f16. (The harness and suites turn this into `twinpath run`, the ci suite.)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/tools/build.sh"
tp="$root/build/twinpath"
out="$root/out/quickstart"
mkdir -p "$out"
"$tp" model init --config tiny-kl --seed 0 --out "$out/tiny-kl"
image="$root/tests/fixtures/golden/tiny-kl/io.safetensors"   # holds an image-like "image" tensor
for path in reference reference:fp64 torch compiled:cpu; do
  "$tp" exec --model "$out/tiny-kl" --pipeline vae.roundtrip --path "$path" \
    --input "$image" --output "$out/roundtrip.${path/:/-}.safetensors"
done
echo "quickstart: outputs in $out"
