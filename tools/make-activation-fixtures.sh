#!/usr/bin/env bash
# Remakes tests/fixtures/activations/*.safetensors (the dumps `twinpath triage --activations` is
# tested on) by running diffusers itself through tools/dump_activations.py, in the dump venv
# (tools/dump-venv.sh). The model folders are `twinpath model init`'s, as the tests write them
# (tests/activation_triage_test.cpp keeps the same configs, seeds and scaled layers).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tp="$root/build/twinpath"
py="$root/.venv-dump/bin/python"
fx="$root/tests/fixtures/activations"
[[ -x $tp ]] || { echo "make-activation-fixtures: build twinpath first (bash tools/build.sh)" >&2; exit 2; }
[[ -x $py ]] || { echo "make-activation-fixtures: make the dump venv first (bash tools/dump-venv.sh)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$tp" model init --config "$fx/kl-small.json" --seed 3 --out "$work/kl"
"$tp" model init --config "$fx/kl-small.json" --seed 3 \
  --scale-layer 'decoder.up_blocks.0.resnets.0.conv2*300000' --out "$work/kl-overflow"
"$tp" model init --config "$fx/unet-small.json" --seed 5 --out "$work/unet"
"$tp" model init --config "$fx/unet-small.json" --seed 5 \
  --scale-layer 'down_blocks.0.attentions.0.proj_in*10000' --out "$work/unet-fp8-clipped"
"$tp" model init --config "$fx/wan-tiny.json" --seed 7 --out "$work/wan"
"$tp" model init --config "$fx/wan-tiny.json" --seed 7 \
  --scale-layer 'blocks.1.ffn.net.0.proj*60000' --out "$work/wan-overflow"
"$py" "$root/tools/make_activation_fixtures.py" "$work" "$fx"
du -sh "$fx"
