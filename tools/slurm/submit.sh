#!/usr/bin/env bash
# Runs a twinpath suite as a Slurm job array of N shards, then a merge job that waits for all of
# them (afterany: a shard whose cases failed exits 1, and its report must still be merged).
#
#   tools/slurm/submit.sh --shards N --out DIR [--twinpath PATH] [--time MINUTES] [-- RUN OPTIONS...]
#
# e.g. tools/slurm/submit.sh --shards 8 --out /scratch/nightly -- --suite nightly
# Each array task runs `twinpath run RUN OPTIONS --report DIR/shard-K.h5`, its shard taken from
# SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT; the merge job writes DIR/merged.h5 and DIR/merged.txt
# and exits 1 when a case failed. A task stopped by its time limit keeps its finished cases
# (twinpath gets SIGTERM 10 minutes early); the merge then refuses it and says how to resume.
# Extra sbatch options (partition, account) go in SBATCH_* variables, as sbatch reads them.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
shards="" out="" twinpath="" minutes=180
while (($#)); do
  case "$1" in
    --shards) shards=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --twinpath) twinpath=$2; shift 2 ;;
    --time) minutes=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "submit.sh: unknown option $1; see the comment at the top of $0" >&2; exit 2 ;;
  esac
done
if ! [[ "$shards" =~ ^[1-9][0-9]*$ ]] || [[ -z "$out" ]]; then
  echo "submit.sh: give --shards N (a whole number from 1) and --out DIR" >&2
  exit 2
fi
if [[ -z "$twinpath" ]]; then
  twinpath=$(cd "$here/../.." && pwd)/build/twinpath
fi
if [[ ! -x "$twinpath" ]]; then
  echo "submit.sh: no twinpath binary at $twinpath; build it (bash tools/build.sh) or pass --twinpath" >&2
  exit 2
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
array=$(sbatch --parsable --job-name=twinpath-shards --array=0-$((shards - 1)) \
  --time="$minutes" --signal=B:TERM@600 --output="$out/shard-%a.log" \
  "$here/shard.sbatch" "$twinpath" "$out" "$@")
array=${array%%;*}
merge=$(sbatch --parsable --job-name=twinpath-merge --dependency=afterany:"$array" \
  --output="$out/merge.log" "$here/merge.sbatch" "$twinpath" "$out" "$shards")
merge=${merge%%;*}
echo "shards: job $array (array 0-$((shards - 1))), merge: job $merge; reports in $out"
