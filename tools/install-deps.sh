#!/usr/bin/env bash
# Installs every Debian 12 package twinpath needs to build and test (run as root).
# The CUDA toolkit is not installed here: it is found at /usr/local/cuda when present.
# Pass --fixtures to also install what tools/make-golden-fixtures.sh needs (python3-torch).
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  clang-format             # tools/check-format.sh (ctest: formatting)
  libeigen3-dev            # reference path
  libhdf5-dev hdf5-tools   # reports (h5dump is the independent reader in tests)
  libpng-dev               # .png inputs and outputs
  zlib1g-dev               # the gate's gzipped baseline (cases/baselines/ci.txt.gz)
  nlohmann-json3-dev       # config.json, safetensors headers
  libcli11-dev             # command line
  libgtest-dev libgmock-dev googletest
  libbenchmark-dev
  libtorch-dev             # the torch path: a second, independent opinion
  libopenblas0-openmp      # LibTorch's matmuls on OpenBLAS (OpenMP threads, like ours), not
                           # Debian's default reference BLAS (one thread, ~10x slower on linears)
  python3-h5py             # tests read reports with an independent reader
  chromium                 # the tradeoff page is rendered headless to a PNG in tests
  clang libclang-rt-14-dev libomp-dev  # the sanitize preset: ASan + UBSan, libFuzzer targets
  slurmctld slurmd slurm-client munge  # a one-node Slurm cluster for the sharding test
)
if [[ "${1:-}" == "--fixtures" ]]; then
  packages+=(python3-torch python3-venv python3-pip)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "install-deps: all ${#packages[@]} packages present"
