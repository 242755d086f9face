#!/usr/bin/env bash
# Checks that every C++ and CUDA source follows .clang-format (Debian's clang-format, installed by
# tools/install-deps.sh). Run by ctest (`formatting`) and so by CI. To fix what it reports:
#   clang-format -i $(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh')
#   tools/check-format.sh [source-root]
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
command -v clang-format > /dev/null || { echo "check-format: clang-format is missing; run tools/install-deps.sh as root"; exit 1; }
if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.h' '*.cpp' '*.cu' '*.cuh')
else
  mapfile -t files < <(find . -path ./build -prune -o -path './build-*' -prune -o \
                         \( -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) -print)
fi
if clang-format --dry-run --Werror "${files[@]}" 2> "${TMPDIR:-/tmp}/check-format.$$"; then
  rm -f "${TMPDIR:-/tmp}/check-format.$$"
  echo "check-format: ${#files[@]} files follow .clang-format"
else
  grep -E '^[^ ].*: error:' "${TMPDIR:-/tmp}/check-format.$$" | cut -d: -f1 | sort -u | sed 's/$/: not formatted (clang-format -i it)/'
  rm -f "${TMPDIR:-/tmp}/check-format.$$"
  exit 1
fi
