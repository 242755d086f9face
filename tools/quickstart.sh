#!/usr/bin/env bash
# The main job: install, build, then run the ci suite on the built-in tiny models (reference
# path against the compiled path's CPU emulation), writing out/runs/TIME.h5 and its JUnit,
# linked as out/latest.h5 and out/latest.xml.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/tools/build.sh"
cd "$root"
"$root/build/twinpath" run   # no arguments: the ci suite, reported as out/latest.h5 and out/latest.xml
