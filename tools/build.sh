#!/usr/bin/env bash
# Installs the Debian packages (tools/install-deps.sh), configures and builds into build/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [[ $(id -u) -eq 0 ]]; then
  bash "$root/tools/install-deps.sh"
else
  echo "build: not root, skipping package installation (run tools/install-deps.sh as root if the build fails)"
fi
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$root/build" --parallel "$(nproc)"
