#!/usr/bin/env bash
# Line and branch coverage of compiled/ (the planner, plan files and validator, the CPU
# emulation's kernels) under the ci suite: builds build-cov/ with compiled/ instrumented
# (TWINPATH_COVERAGE, gcov; the CUDA path left out: it needs a GPU to run), runs
# `twinpath run --suite ci`, and writes out/coverage/summary.txt (per file) and
# out/coverage/uncovered.txt (every line and branch ci never reached, with its source line);
# with --with-tests, then runs every ctest test but the formatting check on the same build and
# writes out/coverage/tests/ (what ci and the tests together leave). docs/coverage.md accounts
# for them.
#   bash tools/coverage.sh [--with-tests]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-cov
out=$root/out/coverage
with_tests=0
[ "${1:-}" = --with-tests ] && with_tests=1
mkdir -p "$out"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTWINPATH_COVERAGE=ON \
  -DTWINPATH_WITH_CUDA=OFF > "$out/configure.log" 2>&1 || {
  cat "$out/configure.log" >&2
  exit 1
}
if [ $with_tests = 1 ]; then
  cmake --build "$build" --parallel "$(nproc)"
else
  cmake --build "$build" --target twinpath --parallel "$(nproc)"
fi
find "$build" -name '*.gcda' -delete

# gcov's counts so far, summarized into $1.
summarize() {
  local dir=$1
  rm -rf "$dir/gcov" && mkdir -p "$dir/gcov"
  (cd "$dir/gcov" && gcov --branch-probabilities --branch-counts --preserve-paths \
    $(find "$build/compiled" -name '*.gcda' | sort) > ../gcov.log)
  python3 "$root/tools/coverage_summary.py" "$root" "$dir/gcov" "$dir"
  python3 "$root/tools/coverage_branches.py" "$dir/uncovered.txt" --list "$dir/branches.txt" \
    > "$dir/branch-kinds.txt"
}

"$build/twinpath" run --suite ci --report "$out/ci.h5" > "$out/ci.log" 2>&1 || {
  echo "coverage: ci did not pass under the instrumented build (out/coverage/ci.log)" >&2
  exit 1
}
summarize "$out"
echo "== compiled/ under the ci suite (out/coverage/summary.txt, uncovered.txt)"
cat "$out/summary.txt"
if [ $with_tests = 1 ]; then
  mkdir -p "$out/tests"
  (cd "$build" && ctest --parallel "$(nproc)" -E '^formatting$' > "$out/tests/ctest.log" 2>&1) || {
    echo "coverage: a test failed under the instrumented build (out/coverage/tests/ctest.log)" >&2
    exit 1
  }
  summarize "$out/tests"
  echo "== compiled/ under ci and every test (out/coverage/tests/)"
  cat "$out/tests/summary.txt"
  echo "== untaken branches on lines that ran, by kind (out/coverage/tests/branches.txt lists each)"
  cat "$out/tests/branch-kinds.txt"
fi
