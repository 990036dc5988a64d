#!/usr/bin/env bash
# A throw-away Slurm cluster on this host (Debian slurm-wlm 22.05 + munge), everything under DIR:
# NODES logical nodes (slurmd -N nodeI) with 8 fake H100 GPUs each (gres files are symlinks to
# /dev/null), ports from PORT_BASE. Facts behind each setting: shared/docs/SLURM.md.
#
#   scripts/slurm-cluster.sh start DIR PORT_BASE NODES   # prints SLURM_CONF=DIR/etc/slurm.conf
#   scripts/slurm-cluster.sh stop DIR                    # cancels its jobs, stops its daemons
#   scripts/slurm-cluster.sh run DIR NODE...             # with DIR/etc/*.conf written already
#   scripts/slurm-cluster.sh install -                   # the Debian packages, when missing
#
# Installs slurm-wlm and munge with apt-get when missing (a policy-rc.d keeps Debian from
# starting system daemons). Start waits until every node is idle (at most 30 s).
set -euo pipefail
cmd=${1:?start|stop}
DIR=$(realpath -m "${2:-.}")

stop() {
  # jobs first, while slurmd can still end their steps (a job's `sleep infinity` would outlive
  # the daemons otherwise)
  if [ -f "$DIR/etc/slurm.conf" ] && [ -f "$DIR/run/slurmctld.pid" ]; then
    SLURM_CONF="$DIR/etc/slurm.conf" scancel --full --user=root 2>/dev/null || true
    for _ in $(seq 50); do
      left=$(SLURM_CONF="$DIR/etc/slurm.conf" squeue -h -t running,completing 2>/dev/null | wc -l || echo 0)
      [ "$left" = 0 ] && break
      sleep 0.1
    done
  fi
  for pidfile in "$DIR"/run/slurmd-*.pid "$DIR"/run/slurmctld.pid "$DIR"/run/munged.pid; do
    [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
  done
  for _ in $(seq 50); do
    pgrep -f "$DIR/etc/slurm.conf" >/dev/null || break
    sleep 0.1
  done
  pkill -9 -f "$DIR/etc/slurm.conf" 2>/dev/null || true
  [ -f "$DIR/run/munged.pid" ] && kill -9 "$(cat "$DIR/run/munged.pid")" 2>/dev/null || true
  return 0
}

install() {
  command -v slurmctld >/dev/null && command -v munged >/dev/null && return 0
  echo "slurm-cluster: installing slurm-wlm and munge with apt-get" >&2
  "$(dirname "$0")/apt-install-quietly.sh" slurm-wlm munge
}

prepare() {  # runtime folders, a fresh munge key, eight stand-in GPU devices
  mkdir -p "$DIR"/{etc,run,log,state,spool,dev,munge}
  chmod 700 "$DIR/munge"
  rm -f "$DIR/munge/munge.key"
  head -c 1024 /dev/urandom >"$DIR/munge/munge.key"
  chmod 400 "$DIR/munge/munge.key"
  for g in $(seq 0 7); do ln -sf /dev/null "$DIR/dev/nvidia$g"; done
}

run() {  # munged, slurmctld and one slurmd per node name given; waits until all are idle
  munged --key-file="$DIR/munge/munge.key" --socket="$DIR/run/munge.socket" \
    --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" \
    --seed-file="$DIR/munge/munged.seed"
  export SLURM_CONF="$DIR/etc/slurm.conf"
  slurmctld -f "$SLURM_CONF"
  for node in "$@"; do slurmd -f "$SLURM_CONF" -N "$node"; done
  for _ in $(seq 300); do
    idle=$(sinfo -h -N -o '%N %t' 2>/dev/null | grep -c ' idle$' || true)
    [ "$idle" -ge "$#" ] && { echo "SLURM_CONF=$SLURM_CONF"; exit 0; }
    sleep 0.1
  done
  echo "slurm-cluster: nodes not idle after 30 s; see $DIR/log" >&2
  sinfo -N >&2 || true
  exit 1
}

case "$cmd" in
  stop) stop; exit 0 ;;
  install) install; exit 0 ;;
  run)  # DIR/etc/{slurm,gres,topology}.conf written by the caller (e.g. core.slurmconf)
    shift 2
    install
    stop
    prepare
    run "$@"
    ;;
esac

PORT_BASE=${3:?PORT_BASE}
NODES=${4:-4}
install

stop
rm -rf "$DIR"
prepare
HOST=$(hostname -s)

{
  cat <<EOF
ClusterName=cardhour-test
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$PORT_BASE
SlurmdPort=$((PORT_BASE + 100))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/run/munge.socket
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/log/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
TopologyPlugin=topology/tree
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
EnforcePartLimits=ALL
ReturnToService=2
MinJobAge=3600
KillWait=5
MailProg=/bin/true
EOF
  for i in $(seq 1 "$NODES"); do
    echo "NodeName=node$i NodeHostname=$HOST NodeAddr=127.0.0.1 Port=$((PORT_BASE + 100 + i)) CPUs=16 RealMemory=65536 Gres=gpu:h100:8 State=UNKNOWN"
  done
  echo "PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
} >"$DIR/etc/slurm.conf"
printf 'AutoDetect=off\nNodeName=node[1-%s] Name=gpu Type=h100 File=%s/dev/nvidia[0-7]\n' \
  "$NODES" "$DIR" >"$DIR/etc/gres.conf"
printf 'SwitchName=leaf1 Nodes=node[1-%s]\n' "$NODES" >"$DIR/etc/topology.conf"

run $(for i in $(seq 1 "$NODES"); do echo "node$i"; done)
