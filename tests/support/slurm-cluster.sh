#!/usr/bin/env bash
# A one-node Slurm cluster in a folder of its own, for the sharding test (Debian's slurmctld,
# slurmd and munge; run as root, as CI does):
#   slurm-cluster.sh start DIR PORT   munged, slurmctld (PORT) and slurmd (PORT+1), config DIR/slurm.conf;
#                                     returns once the node is idle
#   slurm-cluster.sh stop DIR         ends all three
# Clients use it with SLURM_CONF=DIR/slurm.conf.
set -euo pipefail
cmd=$1 dir=$2
case "$cmd" in
  start)
    port=$3
    for tool in munged mungekey slurmctld slurmd sbatch sinfo; do
      command -v "$tool" > /dev/null || { echo "slurm-cluster: $tool is missing; run tools/install-deps.sh" >&2; exit 3; }
    done
    mkdir -p "$dir"/{state,spool,log,munge}
    chmod 700 "$dir/munge"
    mungekey --create --keyfile="$dir/munge/munge.key" --force
    chmod 400 "$dir/munge/munge.key"
    munged --key-file="$dir/munge/munge.key" --socket="$dir/munge/sock" \
      --pid-file="$dir/munge/pid" --log-file="$dir/munge/log" --seed-file="$dir/munge/seed" --force
    node=$(hostname -s)
    cat > "$dir/slurm.conf" <<CONF
ClusterName=twinpath-test
SlurmctldHost=$node
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
AuthInfo=socket=$dir/munge/sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
NodeName=$node CPUs=$(nproc) State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
    export SLURM_CONF=$dir/slurm.conf
    slurmctld -i
    slurmd
    for _ in $(seq 60); do
      [[ "$(sinfo -h -o %t 2> /dev/null)" == idle ]] && exit 0
      sleep 1
    done
    echo "slurm-cluster: the node did not come up in 60 s; see $dir/log/" >&2
    exit 1
    ;;
  stop)
    # Each daemon is waited for (slurmctld saves its state on SIGTERM): the caller removes DIR
    # next, and a daemon still writing there made that removal fail. SIGKILL after 10 s.
    for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munge/pid"; do
      [[ -f "$pidfile" ]] || continue
      pid=$(cat "$pidfile")
      kill "$pid" 2> /dev/null || continue
      for _ in $(seq 100); do
        kill -0 "$pid" 2> /dev/null || break
        sleep 0.1
      done
      kill -9 "$pid" 2> /dev/null || true
    done
    ;;
  *)
    echo "slurm-cluster: use start DIR PORT or stop DIR" >&2
    exit 2
    ;;
esac
