#!/usr/bin/env bash
# Refreshes the ci suite's baseline (cases/baselines/ci.txt.gz), which the ctest `ci_gate` (and
# so .ci/run) holds every ci run to: run this when a numerics change is intended. It runs ci,
# prints what moved against the committed baseline (`report diff`: error growth past x1.4, worse
# outcomes, changed plans), writes the new baseline (gzipped text: ci's passed 5 MB) and prints
# how many of its lines changed, with the first changed ones; review that before committing.
# `git diff` shows the text too after `git config diff.gzip.textconv zcat` (.gitattributes).
#   bash tools/refresh-baseline.sh [build-dir]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
baseline=$root/cases/baselines/ci.txt.gz
mkdir -p "$root/out"
if ! "$build/twinpath" run --suite ci --report "$root/out/baseline-ci.h5" > "$root/out/baseline-ci.log"; then
  echo "refresh-baseline: ci does not pass (out/baseline-ci.log); a baseline records a passing run" >&2
  exit 1
fi
old=$root/out/baseline-ci.old.txt
: > "$old"
if [ -f "$baseline" ]; then
  echo "== against the committed baseline:"
  "$build/twinpath" report diff "$baseline" "$root/out/baseline-ci.h5" --growth 1.4 || true
  zcat "$baseline" > "$old"
fi
"$build/twinpath" report baseline "$root/out/baseline-ci.h5" --out "$baseline"
diff -U0 "$old" <(zcat "$baseline") > "$root/out/baseline-ci.diff" || true
echo "== $(grep -c '^[-+][^-+]' "$root/out/baseline-ci.diff" || true) lines changed" \
  "(out/baseline-ci.diff); the first of them:"
grep '^[-+][^-+]' "$root/out/baseline-ci.diff" | head -20 || true
