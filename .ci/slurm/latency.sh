#!/usr/bin/env bash
# Slurm job start latency on this machine: time from calling sbatch to the job's command running,
# for N jobs one after another (default 10). Needs the test cluster (.ci/slurm/up.sh).
#   .ci/slurm/latency.sh [N]
set -euo pipefail
n=${1:-10}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/job.sh" <<'JOB'
#!/bin/bash
date +%s.%N > "$1.tmp" && mv "$1.tmp" "$1"
JOB
for i in $(seq "$n"); do
  t0=$(date +%s.%N)
  sbatch --parsable --job-name=bulletin-latency --time=1 --cpus-per-task=1 --gres=gpu:1 \
    --output=/dev/null "$dir/job.sh" "$dir/ran$i" >/dev/null
  while [ ! -f "$dir/ran$i" ]; do sleep 0.01; done
  echo "$(cat "$dir/ran$i") $t0" | awk '{ printf "%.3f\n", $1 - $2 }'
done | sort -n | awk '{ v[NR] = $1 } END {
  printf "slurm job start latency over %d jobs (sbatch call to the job command running): min %.2f s, median %.2f s, max %.2f s\n",
    NR, v[1], v[int((NR + 1) / 2)], v[NR] }'
