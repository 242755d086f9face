#!/usr/bin/env bash
# Runs the libFuzzer targets (tests/fuzz) for SECONDS each, as many at once as there are cores,
# from their committed seeds; new inputs go to out/fuzz/corpus/NAME, each target's log to
# out/fuzz/NAME.log, and a crash, leak or timeout to out/fuzz/NAME-crash-* (make it a regression
# test, then commit it to the seed corpus).
#   bash tools/fuzz.sh SECONDS [NAME...]      e.g. bash tools/fuzz.sh 3600 npy png
# FUZZ_REPLAY=1: no fuzzing; replays what an earlier h5_report run kept in out/fuzz (below).
# FUZZ_CPU=1: SECONDS of CPU time (the fuzzer's own and its fork-mode children's) instead of wall
# time, for runs that share the machine (e.g. under nice -n 19): a watcher ends the fuzzer with
# SIGUSR1 (libFuzzer's graceful stop, final stats printed) once it has used them, and the wall
# limit is 6 times SECONDS.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:?give the seconds each target runs, e.g. bash tools/fuzz.sh 3600}
shift
targets=("$@")
if ((${#targets[@]} == 0)); then
  targets=($(cd "$root/tests/fuzz" && ls ./*_fuzz.cpp | sed 's|^./||; s|_fuzz.cpp$||'))
fi
cd "$root"
cmake --preset sanitize > /dev/null
cmake --build --preset sanitize --parallel "$(nproc)" --target "${targets[@]/%/_fuzz}"
mkdir -p out/fuzz
# Whether replaying CRASH (an h5_report input kept as a crash, leak or oom) shows a defect of
# libhdf5's: a fault or an oversized allocation whose first stack frame past the sanitizer
# runtime (its allocator and interceptors: frames in the fuzz binary without a source line),
# libFuzzer and libc is in libhdf5, or a leak whose every
# unreachable (direct) block libhdf5 allocated (a handle twinpath left open would stay reachable
# from libhdf5's ID tables; a block twinpath allocated would name twinpath's frame). An input that
# shows nothing on replay (a leak that needs the fuzzer's earlier inputs, an empty input fork mode
# kept for a job that died between inputs) is reported as not reproduced and not counted either
# way.
inside_libhdf5() {
  local report
  # -timeout: an input libhdf5 loops on is reported as a timeout with the loop's stack.
  report=$(build-sanitize/tests/fuzz/h5_report_fuzz -rss_limit_mb=3072 -malloc_limit_mb=3072 -timeout=60 "$1" 2>&1 || true)
  if ! grep -qE "ERROR: (AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|libFuzzer)" <<< "$report"; then
    echo "$1: not reproduced on replay" >&2
    return 0
  fi
  if grep -q "LeakSanitizer" <<< "$report"; then
    ! awk '/^Direct leak/ { getline; getline; print }' <<< "$report" | grep -vq "libhdf5"
    return
  fi
  grep -E "^ +#[0-9]+ " <<< "$report" |
    grep -vE "__interceptor_|__asan|__sanitizer|fuzzer::|libclang_rt|sysdeps/x86_64|libc\.so|_fuzz\+0x[0-9a-f]+\)" |
    head -1 | grep -q "libhdf5"
}
# Fails when an input the run kept (h5_report's crashes, leaks and ooms) shows a defect outside
# libhdf5.
replay_kept() {
  [[ "$1" == h5_report ]] || return 0
  local outside=0 kept=0
  for crash in out/fuzz/h5_report-crash-{crash,leak,oom}-*; do
    [[ -e "$crash" ]] || continue
    kept=$((kept + 1))
    if ! inside_libhdf5 "$crash"; then
      echo "$1: $crash faults outside libhdf5"
      outside=1
    fi
  done
  echo "$1: $kept kept crash, leak and oom inputs replayed"
  return $outside
}
run() {
  local name=$1 mode=()
  if [[ "${FUZZ_REPLAY:-0}" == 1 ]]; then
    replay_kept "$name" && echo "$name: every kept input that reproduces is libhdf5's"
    return
  fi
  # libhdf5 loops forever on some damaged files, and reads past its buffers on others
  # (docs/fuzzing.md): fork mode counts those timeouts and crashes and goes on; every crash input
  # is then replayed, and one whose fault is not inside libhdf5 (or any leak) fails the run.
  [[ "$name" == h5_report ]] && mode=(-fork=1 -ignore_timeouts=1 -ignore_crashes=1)
  mkdir -p "out/fuzz/corpus/$name"
  local regressions=()
  [[ -d "tests/fuzz/regressions/$name" ]] && regressions=("tests/fuzz/regressions/$name")
  local wall=$seconds
  [[ "${FUZZ_CPU:-0}" == 1 ]] && wall=$((6 * seconds))
  # libFuzzer's -timeout is wall time: a niced run starved by a build sees 0.4 s inputs take 10 s
  # (two false model_config timeouts, 2026-11-25; one of 65 s beside a ci run and two builds,
  # 2026-11-28, that replays in 1.2 s), so CPU-time runs allow five minutes.
  local timeout=10
  [[ "${FUZZ_CPU:-0}" == 1 ]] && timeout=300
  local start=$SECONDS
  # Seeds: tests/fuzz/corpus/NAME, or for the activation dumps the committed fixtures.
  local seeds=tests/fuzz/corpus/$name
  [[ "$name" == activation_dump ]] && seeds=tests/fixtures/activations
  # -max_len 1 MiB: deep JSON, long lines and padded headers need room (issue 42).
  build-sanitize/tests/fuzz/"${name}"_fuzz "${mode[@]}" -max_total_time="$wall" -timeout="$timeout" -rss_limit_mb=3072 \
    -max_len=1048576 -print_final_stats=1 -artifact_prefix="out/fuzz/$name-crash-" \
    "out/fuzz/corpus/$name" "$seeds" ${regressions[@]+"${regressions[@]}"} \
    > "out/fuzz/$name.log" 2>&1 &
  local pid=$! cpu=0 tick
  tick=$(getconf CLK_TCK)
  while kill -0 "$pid" 2> /dev/null; do
    # utime, stime, cutime, cstime: fields 14 to 17 of /proc/PID/stat (after the command name).
    cpu=$(awk -v t="$tick" '{sub(/.*\) /, ""); print int(($12 + $13 + $14 + $15) / t)}' "/proc/$pid/stat" 2> /dev/null || echo "$cpu")
    [[ "${FUZZ_CPU:-0}" == 1 && $cpu -ge $seconds ]] && kill -USR1 "$pid" 2> /dev/null
    sleep 5
  done
  local outside=0
  replay_kept "$name" || outside=1
  # Fork mode's parent runs no inputs itself: its count is the last status line's (#N: cov ...).
  local inputs
  inputs=$(grep -E '^stat::number_of_executed_units' "out/fuzz/$name.log" | awk '{print $2}')
  [[ "${inputs:-0}" == 0 ]] && inputs=$(grep -oE '^#[0-9]+: cov' "out/fuzz/$name.log" | tail -1 | tr -dc 0-9)
  if wait "$pid" && ((outside == 0)); then
    echo "$name: clean, $inputs inputs in $((SECONDS - start)) s wall, ${cpu} s CPU, $(grep -E 'cov: [0-9]+' -o "out/fuzz/$name.log" | tail -1)"
  else
    echo "$name: FAILED, see out/fuzz/$name.log and out/fuzz/$name-crash-*"
    return 1
  fi
}
status=0
running=0
for name in "${targets[@]}"; do
  run "$name" &
  running=$((running + 1))
  if ((running >= $(nproc))); then
    wait -n || status=1
    running=$((running - 1))
  fi
done
while ((running > 0)); do
  wait -n || status=1
  running=$((running - 1))
done
exit $status
