#!/usr/bin/env bash
# The main job: install, build, then run the ci suite on the built-in tiny models (reference
# path against the compiled path's CPU emulation), writing reports/latest.h5 and its JUnit.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/tools/build.sh"
"$root/build/twinpath" run --suite "$root/cases/suites/ci.txt" \
  --report "$root/reports/latest.h5" --junit "$root/reports/latest.xml"
