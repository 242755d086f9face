#!/usr/bin/env bash
# Builds and runs every test: the release build's ctest (labels: unit, diff, gpu, slow; GPU tests
# skip without a GPU), then the sanitize preset (clang, ASan + UBSan) on the unit tests and the
# report and CLI tests, and each libFuzzer target for a short fixed time (label fuzz).
# Extra arguments go to the release build's ctest alone, e.g. `bash tools/test.sh -L unit`, and
# skip the sanitize stage.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/tools/build.sh"
ctest --test-dir "$root/build" --output-on-failure --parallel "$(nproc)" "$@"
if (($#)); then exit 0; fi
cd "$root"
cmake --preset sanitize > /dev/null
cmake --build --preset sanitize --parallel "$(nproc)"
ctest --preset sanitize --parallel "$(nproc)"
