#!/usr/bin/env bash
# Refreshes the ci suite's baseline (cases/baselines/ci.txt), which the ctest `ci_gate` (and so
# .ci/run) holds every ci run to: run this when a numerics change is intended. It runs ci, prints
# what moved against the committed baseline (`report diff`: error growth past x1.4, worse
# outcomes, changed plans), and writes the new baseline; review that and
# `git diff cases/baselines/ci.txt` before committing it.
#   bash tools/refresh-baseline.sh [build-dir]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
baseline=$root/cases/baselines/ci.txt
mkdir -p "$root/out"
if ! "$build/twinpath" run --suite ci --report "$root/out/baseline-ci.h5" > "$root/out/baseline-ci.log"; then
  echo "refresh-baseline: ci does not pass (out/baseline-ci.log); a baseline records a passing run" >&2
  exit 1
fi
if [ -f "$baseline" ]; then
  echo "== against the committed baseline:"
  "$build/twinpath" report diff "$baseline" "$root/out/baseline-ci.h5" --growth 1.4 || true
fi
"$build/twinpath" report baseline "$root/out/baseline-ci.h5" --out "$baseline"
git -C "$root" diff --stat -- cases/baselines/ci.txt || true
