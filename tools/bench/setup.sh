# Sourced by the CPU benchmark scripts (tools/bench-*.sh) after they set `root`, `threads` and
# `name`: the PyTorch venv (BENCH_VENV, else .venv-bench, made here and never by the build or
# the tests), the built twinpath, out/bench-NAME/, and `peak LOG` (a /usr/bin/time -v log's
# peak RSS in MB).
venv=${BENCH_VENV:-$root/.venv-bench}
if [[ ! -x $venv/bin/python ]]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q torch diffusers accelerate safetensors numpy
fi
py=$venv/bin/python
tp=$root/build/twinpath
[[ -x $tp ]] || bash "$root/tools/build.sh"
out=$root/out/bench-$name
mkdir -p "$out"
export OMP_NUM_THREADS=$threads
peak() { sed -n 's/^\tMaximum resident set size (kbytes): //p' "$1" | awk '{printf "%d", $1/1024}'; }
