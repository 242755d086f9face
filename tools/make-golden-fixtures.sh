#!/usr/bin/env bash
# Regenerates tests/fixtures/golden/ from diffusers itself (rerunnable; the tests need no Python).
# Uses Debian's python3-torch (1.13) and a pinned diffusers in a venv at .venv-golden/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/tools/install-deps.sh" --fixtures
venv="$root/.venv-golden"
if [[ ! -x "$venv/bin/python" ]]; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  "$venv/bin/pip" install -q diffusers==0.21.4 huggingface_hub==0.19.4 safetensors
fi
"$venv/bin/python" "$root/tools/golden/make_golden.py" "$root/tests/fixtures/golden"
