#!/usr/bin/env bash
# A venv for tools/dump_activations.py at .venv-dump/ (PyPI's torch, a current diffusers,
# safetensors, numpy); twinpath's build and tests do not use it.
#   bash tools/dump-venv.sh && .venv-dump/bin/python tools/dump_activations.py --help
# DUMP_VENV=DIR puts it elsewhere (a fresh one, to try the tool as a new user would).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="${DUMP_VENV:-$root/.venv-dump}"
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q torch diffusers safetensors numpy
"$venv/bin/python" -c "import torch, diffusers; print('dump venv: torch', torch.__version__, 'diffusers', diffusers.__version__)"
