#!/usr/bin/env bash
# Run on a build machine (Debian 12) before a GPU run: fetches the Debian packages the build
# needs and unpacks them into .carry/root (git-ignored), so the GPU machine, which reaches no
# package registry, can build from them. Then call the device tool with carry [".carry"] and
# the command `bash tools/gpu-run.sh` (the README says how).
#
# HDF5 and libpng come as headers from their -dev packages plus every shared library they load
# (this machine's files, found with ldd, glibc's own excepted) in .carry/runtime, which the GPU
# run puts on LD_LIBRARY_PATH for twinpath's programs only. Without them gpu-run.sh still builds
# the GPU tests and benchmarks (TWINPATH_GPU_ONLY).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
carry="$root/.carry"
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
packages=(libeigen3-dev nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev
  libbenchmark1debian libhdf5-dev libpng-dev zlib1g-dev)
rm -rf "$carry" && mkdir -p "$carry/debs" "$carry/root" "$carry/runtime"
(cd "$carry/debs" && apt-get download "${packages[@]}")
for deb in "$carry"/debs/*.deb; do dpkg -x "$deb" "$carry/root"; done
rm -rf "$carry/debs" "$carry/root/usr/share/doc" "$carry/root/usr/share/man"
# Eigen's modules twinpath does not include (Core and Dense only): the device tool carries 64 MiB
# in all, the repository and the diffusers wheel (tools/gpu-run.sh's wan step) included.
eigen="$carry/root/usr/include/eigen3"
rm -rf "$eigen/unsupported" "$eigen"/Eigen/src/{Sparse*,*Support,IterativeLinearSolvers,OrderingMethods} \
  "$eigen"/Eigen/src/misc/lapacke.h
# h5cc and friends hard-code /usr: without them CMake's FindHDF5 looks for the headers and
# libraries under the prefix it is given.
rm -f "$carry"/root/usr/bin/h5*
# Only the shared C libraries are linked: drop the static, C++ and Fortran ones.
rm -f "$carry"/root/usr/lib/"$arch"/libhdf5* "$carry"/root/usr/lib/"$arch"/hdf5/serial/lib* \
  "$carry"/root/usr/lib/"$arch"/lib{png,png16,z}.a
# The runtime libraries, and the -dev links pointed at them (some are absolute, into /lib).
libs=(/usr/lib/"$arch"/libhdf5_serial.so.103 /usr/lib/"$arch"/libhdf5_serial_hl.so.100
  /usr/lib/"$arch"/libpng16.so.16 /lib/"$arch"/libz.so.1)
for lib in "${libs[@]}"; do
  [[ -e $lib ]] || { echo "gpu-carry: $lib is missing; run tools/install-deps.sh first" >&2; exit 2; }
  cp -L "$lib" "$carry/runtime/"
  ldd "$lib" | awk '$3 ~ /^\// {print $3}' | while read -r dep; do
    case $(basename "$dep") in libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|libresolv.so.*|librt.so.*|ld-linux*) ;;
      *) cp -L "$dep" "$carry/runtime/" ;;
    esac
  done
done
for dev in hdf5/serial/libhdf5.so:libhdf5_serial.so.103 hdf5/serial/libhdf5_hl.so:libhdf5_serial_hl.so.100 \
  libpng16.so:libpng16.so.16 libpng.so:libpng16.so.16 libz.so:libz.so.1; do
  ln -sfr "$carry/runtime/${dev#*:}" "$carry/root/usr/lib/$arch/${dev%%:*}"
done
du -sh "$carry" | sed 's/^/gpu-carry: /'
