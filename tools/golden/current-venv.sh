# Sourced by the fixture scripts that run a current diffusers (tools/make-hv-golden-fixtures.sh,
# tools/make-drawn-golden-fixtures.sh) after they set `root`: `venv`, diffusers 0.42.1 (whose
# sources ../shared/docs/reference describes) on PyPI's torch, at .venv-golden-hv/ unless
# GOLDEN_VENV names another; made here on first use.
venv=${GOLDEN_VENV:-$root/.venv-golden-hv}
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch diffusers==0.42.1 safetensors numpy
fi
