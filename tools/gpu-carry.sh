#!/usr/bin/env bash
# Run on a build machine (Debian 12) before a GPU run: fetches the Debian packages the build
# needs and unpacks them into .carry/root (git-ignored), so the GPU machine, which reaches no
# package registry, can build from them. Then call the device tool with carry [".carry"] and
# the command `bash tools/gpu-run.sh` (the README says how).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
carry="$root/.carry"
packages=(libeigen3-dev nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian)
rm -rf "$carry" && mkdir -p "$carry/debs" "$carry/root"
(cd "$carry/debs" && apt-get download "${packages[@]}")
for deb in "$carry"/debs/*.deb; do dpkg -x "$deb" "$carry/root"; done
rm -rf "$carry/debs" "$carry/root/usr/share/doc"
du -sh "$carry" | sed 's/^/gpu-carry: /'
