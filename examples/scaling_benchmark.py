"""Time to the first result of a no-op GPU call, by how much of the pool has to start first.

    python examples/scaling_benchmark.py [--rounds 5] [--no-slurm]

For each provider (local processes; Slurm when `sinfo` answers, e.g. after `make slurm-up`) it
starts a throwaway runtime whose only GPUs come from a pool (`max_workers: 1`, simulated GPUs
on machines without any), then measures, per round:

- from zero: submit to result while the pool has no worker (the worker is launched, starts its
  JVM and warm executor, attaches, runs the call), then the launch-to-attached time the pool
  reported ("registered after N ms"); for Slurm also Slurm's job start to attached;
- warm: submit to result of the next calls, with the worker attached and its executor warm:
  the first 100 (the worker's JVM is still compiling its hot paths) and, in the last round, the
  steady state (median of the last 500 of --warm-calls).

Between rounds the pool's idle timeout (2 s) takes the worker away again. Targets (issue 5):
warm equal to the no-op round trip of the overhead benchmark; from zero with the local provider
under 3 s; Slurm job start to worker ready under 5 s.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime

import bulletin


def noop():
    return None


def _cli(home: str, *args: str) -> None:
    env = dict(os.environ, BULLETIN_HOME=home)
    subprocess.run([sys.executable, "-m", "bulletin._cli", *args], check=True, env=env,
                   stdout=subprocess.DEVNULL)


def _slurm_partition() -> str | None:
    if shutil.which("sinfo") is None:
        return None
    out = subprocess.run(["sinfo", "-h", "-o", "%P %a"], capture_output=True, text=True)
    up = [p.rstrip("*") for p, state in (r.split() for r in out.stdout.splitlines()) if state == "up"]
    return up[0] if out.returncode == 0 and up else None


def _config(home: str, provider: str, partition: str | None) -> str:
    simulate = "true" if shutil.which("nvidia-smi") is None else "false"
    walltime = ", walltime: 30m" if provider == "slurm" else ""
    options = (f"    slurm: {{partition: {partition}, simulate_gpus: {simulate}}}"
               if provider == "slurm" else f"    local: {{simulate_gpus: {simulate}}}")
    path = os.path.join(home, "pools.yaml")
    with open(path, "w") as f:
        f.write(f"pools:\n  - name: gpu\n    provider: {provider}\n"
                f"    worker: {{gpus: 1, cpus: 1{walltime}}}\n    max_workers: 1\n"
                f"    idle_timeout: 2s\n{options}\n")
    return path


def _registered_ms(events) -> float | None:
    for event in reversed(events):
        m = re.search(r"registered after (\d+) ms", event)
        if m:
            return float(m.group(1))
    return None


def _slurm_start_to_attach(client) -> float | None:
    """Slurm's StartTime of the worker's job (1 s resolution) to now (it has attached), in s."""
    for worker in client.status().workers:
        if worker.provider_handle.startswith("slurm:"):
            job = worker.provider_handle.split(":", 1)[1]
            start = subprocess.run(["squeue", "-h", "-j", job, "-o", "%S"], capture_output=True,
                                   text=True).stdout.strip()
            if start and start[0].isdigit():
                return time.time() - datetime.fromisoformat(start).timestamp()
    return None


def bench(provider: str, rounds: int, warm_calls: int, partition: str | None) -> dict:
    home = tempfile.mkdtemp(prefix=f"bulletin-scaling-{provider}-")
    _cli(home, "up", "--port", "0", "--cpus", "1", "--simulate-gpus", "0",
         "--config", _config(home, provider, partition))
    zero, launch, slurm_start, warm, steady = [], [], [], [], []
    try:
        os.environ["BULLETIN_HOME"] = home
        with bulletin.Client() as client:
            for round_ in range(rounds):
                while any(w.pool for w in client.status().workers):
                    time.sleep(0.2)  # wait for the idle timeout to take the worker away
                t = time.perf_counter()
                client.submit(noop, gpus=1).result(timeout=300)
                zero.append(time.perf_counter() - t)
                if provider == "slurm":
                    slurm_start.append(_slurm_start_to_attach(client) or float("nan"))
                launch.append((_registered_ms(client.status().pool_events) or float("nan")) / 1e3)
                calls = warm_calls if round_ == rounds - 1 else 100
                times = []
                for _ in range(calls):
                    t = time.perf_counter()
                    client.submit(noop, gpus=1).result(timeout=60)
                    times.append(time.perf_counter() - t)
                warm += times[:100]
                steady += times[100:][-500:]
    finally:
        _cli(home, "down")
        shutil.rmtree(home, ignore_errors=True)
    return {"zero": zero, "launch": launch, "slurm_start": slurm_start, "warm": warm,
            "steady": steady}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warm-calls", type=int, default=2000)
    parser.add_argument("--no-slurm", action="store_true")
    args = parser.parse_args()
    partition = None if args.no_slurm else _slurm_partition()
    results = {"local": bench("local", args.rounds, args.warm_calls, None)}
    if partition:
        results["slurm"] = bench("slurm", args.rounds, args.warm_calls, partition)
    else:
        print("(Slurm skipped: no `sinfo` answering; `make slurm-up` starts the test Slurm)")
    med = lambda xs: statistics.median(xs) * 1e3 if xs else float("nan")  # noqa: E731
    print(f"\ntime to first result of a no-op GPU call, {args.rounds} rounds, "
          f"{os.cpu_count()} cores (medians, ms)")
    print(f"{'provider':9s} {'warm 100':>9s} {'steady':>7s} {'from zero':>10s} "
          f"{'launch->attached':>17s} {'slurm start->attached':>22s}")
    for name, r in results.items():
        print(f"{name:9s} {med(r['warm']):9.2f} {med(r['steady']):7.2f} {med(r['zero']):10.0f} "
              f"{med(r['launch']):17.0f} {med(r['slurm_start']):22.0f}")


if __name__ == "__main__":
    main()
