#!/usr/bin/env bash
# Regenerates tests/fixtures/golden-drawn/ (issue 43) from diffusers itself (rerunnable; the
# tests need no Python): the first SEEDS (default 20) drawn configs of each family with a config
# space, made by the built twinpath and run by diffusers 0.42.1 on PyPI's torch, in a venv of
# its own at .venv-golden-hv/ (GOLDEN_VENV names another).
#   bash tools/make-drawn-golden-fixtures.sh [SEEDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/tools/golden/current-venv.sh"
[[ -x $root/build/twinpath ]] || bash "$root/tools/build.sh"
rm -rf "$root/tests/fixtures/golden-drawn"
"$venv/bin/python" "$root/tools/golden/make_drawn_golden.py" "$root/build/twinpath" \
  "$root/tests/fixtures/golden-drawn" "${1:-20}"
