#!/usr/bin/env bash
# A real single-node Slurm cluster for the workflow's cluster tests (run as root).
#   tests/slurm/cluster.sh install   # Debian's slurm-wlm and munge
#   tests/slurm/cluster.sh start     # munged + slurmctld + slurmd, a gpu GRES backed by /dev/null
#   tests/slurm/cluster.sh status
#   tests/slurm/cluster.sh stop
# State, spool and logs live under $CUEAUDIT_SLURM_DIR (default /tmp/cueaudit-slurm).
set -euo pipefail

STATE_DIR=${CUEAUDIT_SLURM_DIR:-/tmp/cueaudit-slurm}
CONF_DIR=/etc/slurm
NODE=$(hostname -s)

install() {
  if command -v slurmctld >/dev/null && command -v munged >/dev/null; then
    return
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq slurm-wlm munge >/dev/null
}

write_config() {
  local cpus memory
  cpus=$(nproc)
  # Leave the host some memory; Slurm refuses jobs asking for more than RealMemory.
  memory=$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.8}' /proc/meminfo)
  mkdir -p "$CONF_DIR" "$STATE_DIR/state" "$STATE_DIR/spool"
  cat >"$CONF_DIR/slurm.conf" <<CONF
ClusterName=cueaudit-test
SlurmctldHost=$NODE
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE_DIR/state
SlurmdSpoolDir=$STATE_DIR/spool
SlurmctldPidFile=$STATE_DIR/slurmctld.pid
SlurmdPidFile=$STATE_DIR/slurmd.pid
SlurmctldLogFile=$STATE_DIR/slurmctld.log
SlurmdLogFile=$STATE_DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# No accounting database: finished jobs must stay visible to squeue for Snakemake's
# status checks (snakemake --slurm-status-command squeue).
MinJobAge=86400
ReturnToService=2
MpiDefault=none
GresTypes=gpu
NodeName=$NODE CPUs=$cpus RealMemory=$memory Gres=gpu:1 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=ALL Default=NO MaxTime=INFINITE State=UP
CONF
  # The GPU is a stand-in: scheduling of --gres=gpu:1 / --gpus=1 is real, the device is not.
  echo "NodeName=$NODE Name=gpu File=/dev/null" >"$CONF_DIR/gres.conf"
}

start() {
  install
  write_config
  if ! pgrep -x munged >/dev/null; then
    [ -f /etc/munge/munge.key ] || mungekey --create 2>/dev/null || create-munge-key -f
    mkdir -p /run/munge && chown munge:munge /run/munge 2>/dev/null || true
    munged --force 2>/dev/null || munged --force
  fi
  munge -n | unmunge | grep -q "STATUS:.*Success"
  pgrep -x slurmctld >/dev/null || slurmctld
  pgrep -x slurmd >/dev/null || slurmd
  for _ in $(seq 60); do
    if sinfo -h -N -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
      sinfo -N -o '%N %P %T %c %m %G'
      return 0
    fi
    sleep 1
  done
  echo "slurm did not come up; see $STATE_DIR/*.log" >&2
  tail -n 20 "$STATE_DIR"/*.log >&2 || true
  return 1
}

status() {
  sinfo -N -o '%N %P %T %c %m %G'
}

stop() {
  scontrol shutdown 2>/dev/null || true
  for _ in $(seq 20); do
    pgrep -x slurmctld >/dev/null || pgrep -x slurmd >/dev/null || break
    sleep 0.5
  done
  pkill -x munged 2>/dev/null || true
  # a start right after a stop must not find the old munged on its way out
  for _ in $(seq 20); do
    pgrep -x munged >/dev/null || break
    sleep 0.5
  done
}

"${1:-start}"
