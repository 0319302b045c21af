#!/usr/bin/env bash
# Stops the test cluster started by up.sh: slurmctld and slurmd through `scontrol shutdown`, then
# the munged this machine runs, by its pid file. Never by process name.
set -uo pipefail
STATE=${BULLETIN_SLURM_STATE:-/var/lib/bulletin-ci-slurm}
if command -v scontrol >/dev/null 2>&1; then
  timeout 20 scontrol shutdown >/dev/null 2>&1 || true
fi
for pidfile in "$STATE/slurmctld.pid" "$STATE/slurmd.pid"; do
  for _ in $(seq 50); do
    { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; } || break
    sleep 0.2
  done
done
MUNGE_PID=/run/munge/munged.pid
if [ -f "$MUNGE_PID" ] && kill -0 "$(cat "$MUNGE_PID")" 2>/dev/null; then
  kill "$(cat "$MUNGE_PID")"
fi
echo "slurm: down"
