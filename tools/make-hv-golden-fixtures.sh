#!/usr/bin/env bash
# Regenerates tests/fixtures/golden-hv/ from diffusers itself (rerunnable; the tests need no
# Python): diffusers 0.42.1 (whose sources video-vae-facts.md describes) on PyPI's torch, in a
# venv of its own at .venv-golden-hv/ (GOLDEN_VENV names another).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/tools/golden/current-venv.sh"
cd "$root/tools/golden"
"$venv/bin/python" make_hv_golden.py "$root/tests/fixtures/golden-hv"
