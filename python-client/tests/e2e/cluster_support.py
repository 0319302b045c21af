"""The real cluster of the end-to-end tests, and helpers shared by them.

`start_cluster()` runs the real `bulletin up` (the venv's `bulletin` entry point module) with a
simulated GPU, the one fake the project's rules allow on a machine without GPUs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import cloudpickle
import pytest

import bulletin

REPO = Path(__file__).resolve().parents[3]
DEFAULT_JAR = REPO / "runtime" / "target" / "bulletin-runtime.jar"
UP_SECONDS = 90
CALL_SECONDS = 30


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, timeout: float = 5.0, interval: float = 0.05, what: str = "condition"):
    """Polls predicate until it returns something truthy; fails the test after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def pid_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"  # exited, not reaped yet
    except FileNotFoundError:
        return True


# A store folder holds this marker (the Java FileObjectStore writes it); nothing else is removed.
STORE_MARKER = ".bulletin-store"
# Where `bulletin worker` keeps its store when not given --store-dir: WorkerMain names it
# ObjectStores.defaultFolder("worker-<id>-<pid>"), /dev/shm/bulletin-worker-<id>-<pid>, or the
# same name in Java's temp dir where /dev/shm cannot be written. The pid is the worker JVM's,
# which is the `bulletin worker` process's own (it execs java).
WORKER_STORE_BASES = (Path("/dev/shm"), Path("/tmp"))


def remove_dead_worker_stores(name: str = "*", since: float = 0.0) -> list[Path]:
    """Removes the stores of workers that died without removing them (SIGKILL skips a worker's
    own cleanup): folders ``bulletin-worker-<name>`` whose pid is gone, that hold the store
    marker, and that changed at or after ``since`` (epoch seconds). Returns what it removed."""
    removed = []
    for base in WORKER_STORE_BASES:
        for path in base.glob(f"bulletin-worker-{name}"):
            pid = path.name.rsplit("-", 1)[-1]
            try:
                if (not pid.isdigit() or not pid_gone(int(pid))
                        or not (path / STORE_MARKER).is_file() or path.stat().st_mtime < since):
                    continue
            except OSError:
                continue
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def cli_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    for name in ("BULLETIN_ADDRESS", "BULLETIN_TOKEN"):
        env.pop(name, None)
    env["BULLETIN_HOME"] = str(home)
    env.setdefault("BULLETIN_JAR", str(DEFAULT_JAR))
    return env


def run_cli(home: Path, *args: str, timeout: float = UP_SECONDS, env: dict | None = None,
            python: str = sys.executable) -> subprocess.CompletedProcess:
    """Runs the real `bulletin` command (the venv's entry point module) against home; `bulletin
    up` gives its executors the interpreter that runs it."""
    return subprocess.run([python, "-m", "bulletin._cli", *args],
                          env=env or cli_env(home),
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


@dataclass
class Cluster:
    home: Path
    port: int
    info: dict
    up_output: str

    @property
    def address(self) -> str:
        return self.info["address"]

    @property
    def pid(self) -> int:
        return self.info["pid"]

    @property
    def token(self) -> str:
        return (self.home / "token").read_text().strip()

    @property
    def store_dir(self) -> Path:
        return Path(self.info["store_dir"])

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join((self.home / "runtime.log").read_text().splitlines()[-lines:])
        except OSError:
            return "(no runtime.log)"

    def client(self, **kwargs) -> bulletin.Client:
        return bulletin.Client(self.address, token=self.token, **kwargs)

    def stop(self) -> None:
        """`bulletin down`, then SIGKILL if the runtime is still there: never leave one behind,
        nor the store of one that had to be killed."""
        try:
            run_cli(self.home, "down", timeout=60)
        finally:
            if not pid_gone(self.pid):
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                wait_until(lambda: pid_gone(self.pid), timeout=10, what="the runtime to die")
                if (self.store_dir / STORE_MARKER).is_file():
                    shutil.rmtree(self.store_dir, ignore_errors=True)


def start_cluster(home: Path, *extra: str, gpus: int = 1, cpus: int = 2,
                  python: str = sys.executable, env: dict | None = None) -> Cluster:
    # A free port can be taken by another process before the runtime binds it (a busy machine
    # running several suites): the runtime then says so, and the next free port is tried.
    for _attempt in range(3):
        port = free_port()
        result = run_cli(home, "up", "--simulate-gpus", str(gpus), "--cpus", str(cpus),
                         "--port", str(port), *extra, python=python, env=env)
        if not (result.returncode != 0 and f"port {port} on" in result.stderr + result.stdout
                and "is in use" in result.stderr + result.stdout):
            break
    info_path = home / "runtime.json"
    if result.returncode != 0:
        info = json.loads(info_path.read_text()) if info_path.exists() else None
        if info:  # it started but the command failed later: do not leave it running
            Cluster(home, port, info, "").stop()
        pytest.fail(f"`bulletin up` failed with {result.returncode}:\n{result.stdout}\n"
                    f"{result.stderr}", pytrace=False)
    cluster = Cluster(home, port, json.loads(info_path.read_text()), result.stdout)
    wait_warm(cluster)
    return cluster


def wait_warm(cluster: Cluster, timeout: float = 60.0) -> None:
    """`bulletin up` returns before the embedded worker's executors are warm (they start in the
    background; the worker shows as "starting"): tests that count executors wait for them."""
    tls = {"ca": cluster.info["ca"]} if cluster.info.get("tls") else {}

    refused: list[Exception] = []

    def warm() -> bool:
        try:
            with cluster.client(set_as_default=False, **tls) as client:
                return all(w.state != "starting" for w in client.status().workers)
        except bulletin.BulletinError as error:
            refused[:] = [error]  # not answering yet: asked again, as a test's client would
            return False

    what = "the embedded worker's executors to start"
    try:
        wait_until(warm, timeout=timeout, interval=0.2, what=what)
    except AssertionError:
        if refused:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}; the last"
                                 f" status request failed: {refused[0]}") from None
        raise


# The helpers below that run remotely (wait_for_file) live in this module: ship this module by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def scrape_metrics(cluster: Cluster, prefix: str = "bulletin_") -> dict[str, float]:
    """The series of /metrics whose names start with ``prefix``, by name and labels (loopback
    needs no token)."""
    import urllib.request

    with urllib.request.urlopen(cluster.info["dashboard_url"] + "metrics", timeout=10) as reply:
        text = reply.read().decode()
    return {name: float(value) for name, value in
            (line.rsplit(" ", 1) for line in text.splitlines() if line.startswith(prefix))}


def referenced_objects(client: bulletin.Client) -> int:
    """Objects the cluster's store holds a reference to (the leak check counts them)."""
    return client.status().store["referenced"]


def assert_serves(client: bulletin.Client) -> None:
    """The cluster still runs a CPU call and a GPU call after whatever the test did."""
    import operator
    assert client.submit(operator.add, 20, 22).result(timeout=CALL_SECONDS) == 42
    assert client.submit(operator.mul, 6, 7, gpus=1).result(timeout=CALL_SECONDS) == 42


def gpu_executor_pid(client: bulletin.Client) -> int:
    return client.submit(os.getpid, gpus=1).result(timeout=CALL_SECONDS)


def wait_for_file(path: str, timeout: float = 30.0) -> bool:
    """Runs remotely: blocks until path exists (the test's way to release a call)."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def nothing_running(client: bulletin.Client):
    status = client.status()
    return status if status.running == 0 and status.gpus.reserved == 0 and not status.queue else None


ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdefgh"


def start_configured_cluster(home: Path, config_yaml: str, *extra: str, **kwargs) -> Cluster:
    """start_cluster with ``config_yaml`` written to ``home/cluster.yaml`` as its --config."""
    config = home / "cluster.yaml"
    config.write_text(config_yaml)
    return start_cluster(home, "--config", str(config), *extra, **kwargs)


def start_two_user_cluster(home: Path, cpus: int = 1, gpus: int = 1) -> Cluster:
    """A cluster with two users of two groups, alice (vision) and bob (nlp), and one
    (simulated) GPU unless told: the tests of what one user can see or do to another's calls."""
    return start_configured_cluster(home, f"""
users:
  - {{name: alice, group: vision, token: "{ALICE}"}}
  - {{name: bob, group: nlp, token: "{BOB}"}}
""", gpus=gpus, cpus=cpus)


def staged_files(store_dir: Path) -> list[str]:
    """Temporaries left in a store: the runtime's own (dot-files of each namespace's objects
    folder) and what writers staged (in each namespace's .staging folder). Spares a live client
    holds from the host arena (".stage-<session>-spare-...") are not counted: its session's end
    deletes them."""
    left = []
    for namespace in store_dir.iterdir():
        if not namespace.is_dir() or namespace.name.startswith("."):
            continue
        for entry in namespace.iterdir():
            if entry.name == ".staging":
                left += [f"{namespace.name}/.staging/{n}" for n in os.listdir(entry)
                         if "-spare-" not in n]
            elif entry.name.startswith("."):
                left.append(f"{namespace.name}/{entry.name}")
    return left

