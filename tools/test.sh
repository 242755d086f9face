#!/usr/bin/env bash
# Builds and runs every test (ctest labels: unit, diff, gpu, slow; GPU tests skip without a GPU).
# Extra arguments go to ctest, e.g. `bash tools/test.sh -L unit`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/tools/build.sh"
ctest --test-dir "$root/build" --output-on-failure --parallel "$(nproc)" "$@"
