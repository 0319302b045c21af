"""Killing a runtime with SIGKILL and starting it again on the same home (docs/durability.md)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from cluster_support import Cluster, pid_gone, start_cluster, wait_until


def crash(cluster: Cluster) -> None:
    """SIGKILL: no shutdown hook, no clean stop; the journal and the store stay as they were."""
    os.kill(cluster.pid, signal.SIGKILL)
    wait_until(lambda: pid_gone(cluster.pid), timeout=10, what="the killed runtime to exit")


def restart(cluster: Cluster, *extra: str, gpus: int = 1, cpus: int = 2) -> Cluster:
    """`bulletin up` again on the same home and port (clients reconnect to the same address)."""
    port = cluster.address.rsplit(":", 1)[1]  # where it served (Cluster.port is only asked)
    return start_cluster(cluster.home, *extra, "--port", port, gpus=gpus, cpus=cpus)


def store_files(cluster: Cluster) -> set[str]:
    """The store's objects, as namespace/id (not its dot-files)."""
    root = Path(cluster.info["store_dir"])
    return {f"{ns.name}/{f.name}" for ns in root.iterdir() if ns.is_dir()
            for f in ns.iterdir() if not f.name.startswith(".")}
