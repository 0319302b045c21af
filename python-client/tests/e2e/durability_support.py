"""Killing a runtime with SIGKILL and starting it again on the same home (docs/durability.md)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from cluster_support import Cluster, cli_env, pid_gone, start_cluster, wait_until


def crash(cluster: Cluster) -> None:
    """SIGKILL: no shutdown hook, no clean stop; the journal and the store stay as they were."""
    os.kill(cluster.pid, signal.SIGKILL)
    wait_until(lambda: pid_gone(cluster.pid), timeout=10, what="the killed runtime to exit")


def restart(cluster: Cluster, *extra: str, gpus: int = 1, cpus: int = 2) -> Cluster:
    """`bulletin up` again on the same home and port (clients reconnect to the same address)."""
    port = cluster.address.rsplit(":", 1)[1]  # where it served (Cluster.port is only asked)
    return start_cluster(cluster.home, *extra, "--port", port, gpus=gpus, cpus=cpus)


def store_files(cluster: Cluster) -> set[str]:
    """The store's objects, as namespace/id (not its dot-files, nor the host arena's pool of
    pre-faulted files in .arena: those are no objects)."""
    root = Path(cluster.info["store_dir"])
    return {f"{ns.name}/{f.name}" for ns in root.iterdir()
            if ns.is_dir() and not ns.name.startswith(".")
            for f in ns.iterdir() if not f.name.startswith(".")}


def start_worker(home, head_address: str, worker_id: str, *extra: str, cpus: int = 1,
                 gpus: int = 1) -> tuple:
    """A remote `bulletin worker` (its own process group, log in the home); (process, log)."""
    log_path = home / f"worker-{worker_id}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bulletin", "worker", "--head", head_address, "--worker-id",
             worker_id, "--cpus", str(cpus), "--simulate-gpus", str(gpus), *extra],
            env=cli_env(home), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
    return proc, log_path


def stop_worker(proc) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
