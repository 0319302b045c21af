"""Start a throwaway bulletin cluster for an example, and stop it afterwards.

If a runtime is already reachable ($BULLETIN_ADDRESS or ~/.bulletin), the examples use it and
leave it running. Otherwise they start one in a temporary $BULLETIN_HOME with `bulletin up`
(real GPUs when nvidia-smi finds any, else one simulated GPU) and stop it with `bulletin down`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile

import bulletin


def _bulletin(*args: str, python: str = sys.executable) -> None:
    subprocess.run([python, "-m", "bulletin._cli", *args], check=True)


@contextlib.contextmanager
def local_cluster(cpus: int = 0, up_args: tuple[str, ...] = (), reuse: bool = True,
                  python: str = sys.executable):
    """``up_args`` go to `bulletin up` (and force a cluster of our own, as does reuse=False);
    ``python`` runs it, and so the cluster's executors."""
    if reuse and not up_args and python == sys.executable:
        try:
            client = bulletin.Client(connect_timeout=1.0)
            yield client
            client.close()
            return
        except bulletin.BulletinError:
            pass  # none running: start our own
    home = tempfile.mkdtemp(prefix="bulletin-example-")
    os.environ["BULLETIN_HOME"] = home
    gpu_args = [] if shutil.which("nvidia-smi") else ["--simulate-gpus", "1"]
    # Free ports, as for the gRPC port: a throwaway cluster must not take another's dashboard port.
    http_args = [] if "--http-port" in up_args else ["--http-port", "0"]
    up = subprocess.run([python, "-m", "bulletin._cli", "up", "--port", "0", *http_args,
                         *(["--cpus", str(cpus)] if cpus else []), *gpu_args, *up_args],
                        capture_output=True, text=True)
    if up.returncode != 0:
        sys.stderr.write(up.stdout + up.stderr)
        raise SystemExit(f"`bulletin up` failed; its log stays in {home}/runtime.log")
    # `bulletin up` ends with where its log is, but this cluster's folder goes when the example
    # ends: that line is left out, and the log is kept (and named) only if the example fails.
    print("".join(line for line in up.stdout.splitlines(keepends=True)
                  if not line.startswith("log: ")), end="")
    failed = True
    try:
        client = bulletin.Client()
        yield client
        client.close()
        failed = False
    finally:
        _bulletin("down", python=python)
        if failed:
            print(f"the example failed; the cluster's log stays in {home}/runtime.log",
                  file=sys.stderr)
        else:
            shutil.rmtree(home, ignore_errors=True)
