#!/usr/bin/env bash
# Runs clang-tidy with the project's .clang-tidy over every C++ source of a configured build
# (compile_commands.json; CUDA sources are left out) and fails on any finding. Slow on two cores
# (about ten minutes), so it is not part of ctest; run it before sending a change.
#   tools/check-tidy.sh [build-dir]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
[[ -f "$build/compile_commands.json" ]] || { echo "check-tidy: $build/compile_commands.json is missing; configure the build first (tools/build.sh)"; exit 1; }
command -v clang-tidy > /dev/null || { echo "check-tidy: clang-tidy is missing; apt-get install clang-tidy"; exit 1; }
mapfile -t files < <(cd "$root" && git ls-files '*.cpp' | grep -v '^tests/bench/')
log=$(mktemp)
trap 'rm -f "$log"' EXIT
printf '%s\n' "${files[@]}" | xargs -P "$(nproc)" -I{} clang-tidy -p "$build" --quiet "$root/{}" > "$log" 2> /dev/null || true
findings=$(grep -cE ': (warning|error): ' "$log" || true)
{ grep -E ': (warning|error): ' "$log" || true; } | sort -u | head -50
echo "check-tidy: ${#files[@]} files, $findings findings"
[[ "$findings" -eq 0 ]]
