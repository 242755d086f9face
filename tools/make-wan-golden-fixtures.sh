#!/usr/bin/env bash
# Regenerates tests/fixtures/golden-wan/ from diffusers itself (rerunnable; the tests need no
# Python): diffusers 0.42.1 (whose sources dit-facts.md describes) on PyPI's torch, with
# transformers (WanPipeline needs it importable; the text encoder is bypassed) and accelerate
# (from_pretrained's keep-in-fp32 path), in a venv of its own at .venv-golden-wan/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv-golden-wan"
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch diffusers==0.42.1 transformers accelerate safetensors numpy
fi
cd "$root/tools/golden"
"$venv/bin/python" make_wan_golden.py "$root/tests/fixtures/golden-wan"
