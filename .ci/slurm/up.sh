#!/usr/bin/env bash
# Brings up a one-node Slurm cluster on loopback for bulletin's tests (and CI): installs the
# Debian packages slurm-wlm and munge when missing, writes /etc/slurm/slurm.conf with 4 simulated
# GPUs as gres, starts munged, slurmctld and slurmd, and waits until the node takes jobs.
# Idempotent: a second run with the cluster up does nothing. Needs root (apt, daemons).
#
# Exit status: 0 = Slurm answers; 3 = cannot be started here (the reason is printed and written
# to $STATE/unavailable, tests skip with it); anything else = a real failure.
#
# Stop it with .ci/slurm/down.sh (scontrol shutdown + the munged pid, never by process name).
set -euo pipefail

STATE=${BULLETIN_SLURM_STATE:-/var/lib/bulletin-ci-slurm}
CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
MARKER="# written by bulletin .ci/slurm/up.sh"
NODE=$(hostname -s)
GPUS=4
PARTITION=debug

unavailable() {
  echo "slurm: cannot start a test cluster here: $*" >&2
  mkdir -p "$STATE" 2>/dev/null && echo "$*" > "$STATE/unavailable" 2>/dev/null || true
  exit 3
}

answers() {
  timeout 10 scontrol ping 2>/dev/null | grep -q 'is UP' \
    && timeout 10 sinfo -h -p "$PARTITION" -o '%t' 2>/dev/null | grep -Eq '^(idle|mix|alloc)'
}

if command -v scontrol >/dev/null 2>&1 && [ -f "$CONF" ] && grep -qF "$MARKER" "$CONF" && answers; then
  echo "slurm: already up (partition $PARTITION on $NODE)"
  exit 0
fi

[ "$(id -u)" = 0 ] || unavailable "not root (installing packages and starting slurmctld/slurmd need root); run: sudo $0"

if ! command -v slurmctld >/dev/null 2>&1 || ! command -v slurmd >/dev/null 2>&1 \
    || ! command -v sbatch >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 || unavailable "slurm-wlm and munge are missing and apt-get is not available"
  echo "slurm: installing slurm-wlm and munge with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null || unavailable "apt-get update failed"
  apt-get install -y -q --no-install-recommends slurm-wlm munge >/dev/null \
    || unavailable "apt-get install slurm-wlm munge failed"
fi

if [ -f "$CONF" ] && ! grep -qF "$MARKER" "$CONF"; then
  unavailable "$CONF exists and was not written by this script (a site Slurm?); not touching it"
fi

mkdir -p "$STATE"/{gpu,ctld,slurmd,log} "$CONF_DIR"
rm -f "$STATE/unavailable"
for i in $(seq 0 $((GPUS - 1))); do : > "$STATE/gpu/gpu$i"; done

# Memory and CPUs are declared, not measured (config_overrides): tests ask for them in sbatch
# requests and must behave the same on a 2-core CI machine.
cat > "$CONF.tmp" <<CONF
$MARKER
ClusterName=bulletin-ci
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/slurmd
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
KillWait=5
MinJobAge=30
InactiveLimit=0
GresTypes=gpu
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=8 RealMemory=16000 Gres=gpu:$GPUS State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
CONF
mv "$CONF.tmp" "$CONF"
echo "Name=gpu File=$STATE/gpu/gpu[0-$((GPUS - 1))]" > "$CONF_DIR/gres.conf"

# munge: reuse a running munged, else start one as user munge with the package's key.
MUNGE_PID=/run/munge/munged.pid
if ! { [ -f "$MUNGE_PID" ] && kill -0 "$(cat "$MUNGE_PID")" 2>/dev/null; }; then
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  chmod 0755 /run/munge
  if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
  fi
  runuser -u munge -- /usr/sbin/munged --pid-file="$MUNGE_PID" \
    || unavailable "munged did not start (see /var/log/munge/munged.log)"
fi
for _ in $(seq 50); do munge -n >/dev/null 2>&1 && break; sleep 0.2; done
munge -n | unmunge >/dev/null || unavailable "munge does not answer (see /var/log/munge/munged.log)"

start_daemon() {  # name pidfile
  local name=$1 pidfile=$2
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    # A daemon from an older configuration: reread instead of restarting by name.
    return 0
  fi
  "/usr/sbin/$name" || unavailable "$name did not start (see $STATE/log/$name.log)"
}
start_daemon slurmctld "$STATE/slurmctld.pid"
start_daemon slurmd "$STATE/slurmd.pid"
scontrol reconfigure >/dev/null 2>&1 || true

for _ in $(seq 150); do
  if answers; then
    echo "slurm: up (partition $PARTITION on $NODE, $GPUS simulated GPUs as gres, state in $STATE)"
    exit 0
  fi
  # A node that was down in an earlier run (killed daemons) comes back to service.
  scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true
  sleep 0.2
done
echo "slurm: did not come up; last lines of the logs:" >&2
tail -n 20 "$STATE/log/slurmctld.log" "$STATE/log/slurmd.log" >&2 || true
sinfo >&2 || true
exit 1
