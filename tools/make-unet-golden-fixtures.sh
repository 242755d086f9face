#!/usr/bin/env bash
# Regenerates tests/fixtures/golden-unet/ from diffusers itself (rerunnable; the tests need no
# Python): a current diffusers (0.42.1, whose sources unet-facts.md describes) on PyPI's torch,
# in a venv of its own at .venv-golden-unet/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv-golden-unet"
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch diffusers==0.42.1 safetensors numpy
fi
"$venv/bin/python" "$root/tools/golden/make_unet_golden.py" "$root/tests/fixtures/golden-unet"
