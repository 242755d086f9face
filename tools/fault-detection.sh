#!/usr/bin/env bash
# Runs a suite (default ci) once clean and once per injectable fault, and prints the detection
# table: fault -> failing cases -> the first failing case and its reason (checkpoint or check).
# docs/fault-detection.md records its output.
#   tools/fault-detection.sh [suite] [build-dir]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
suite=${1:-ci}
build=${2:-$root/build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
faults=$("$build/twinpath" exec --help | sed -n 's/^ *\([a-z0-9-]*\): .*/\1/p' | grep -v '^$' | grep -- '-' )
summarize() {  # report label
  /usr/bin/python3 - "$1" "$2" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    cases = [f["cases"][k] for k in sorted(f["cases"])]
    failed = [c for c in cases if c.attrs["outcome"] == "FAILED"]
    first = failed[0] if failed else None
    where = (first.attrs["id"] + " | " + first.attrs["reason"][:160]) if first else "-"
    print(f"| {sys.argv[2]} | {len(failed)} of {len(cases)} | {where} |")
PY
}
echo "| fault | failing cases | first failing case, reason |"
echo "|---|---|---|"
"$build/twinpath" run --suite "$suite" --report "$work/clean.h5" > /dev/null || true
summarize "$work/clean.h5" none
for f in $faults; do
  "$build/twinpath" run --suite "$suite" --inject "$f" --report "$work/$f.h5" > /dev/null || true
  summarize "$work/$f.h5" "$f"
done
