"""Executor confinement (issue 26, parts 2, 4 and 6; docs/security.md, "Executor confinement"):

- a call's processes end with their executor: a daemon a call leaves behind (double fork,
  setsid) is gone once the executor retires, once its call is cancelled, or once the cluster
  stops (each executor runs in a cgroup v2 group of its own; where there is none, a sweep of its
  session and descendants, which misses exactly this daemon: ProcessSweepTest);
- private scratch: an executor's TMPDIR is its own (0700) and goes with it; with `run_as`, each
  executor has a /tmp of its own, and bob's call cannot read what alice's wrote to /tmp;
- the executor's Py4J callback port serves its agent only: 200 connections to it from the
  call (or from another user's call) add no thread, and the next call runs.

The `run_as` tests need root, useradd and setpriv, like test_isolation_accounts.py (skipped,
saying which, otherwise).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

import bulletin
from cluster_support import (CALL_SECONDS, cli_env, pid_gone, start_cluster, wait_for_file,
                             wait_until)
from test_isolation_accounts import ALICE_TOKEN, BOB_TOKEN, accounts, executor_python  # noqa: F401

pytestmark = pytest.mark.timeout(240)

def needs_accounts(test):
    """run_as: a runtime running as root, and accounts made with useradd (setpriv starts them)."""
    test = pytest.mark.skipif(os.geteuid() != 0, reason="run_as needs a runtime running as "
                              "root, and these tests create Unix accounts with useradd: run "
                              "them as root")(test)
    return pytest.mark.skipif(not (shutil.which("useradd") and shutil.which("setpriv")),
                              reason="needs useradd and setpriv (util-linux)")(test)


GONE_SECONDS = 15


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A cluster whose users' idle executors retire after 2 s."""
    home = tmp_path_factory.mktemp("bulletin-confinement")
    c = start_cluster(home, "--executor-idle-seconds", "2", gpus=1, cpus=2)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def client(lab):
    with lab.client(set_as_default=False) as c:
        yield c


# ---- Run by the calls --------------------------------------------------------------------------

def leave_a_daemon(setsid: bool = True, pid_file: str = "",
                   then_wait_for: str = "") -> tuple[int, int]:
    """Starts `sleep 600` the way a daemon does (fork, fork again, the middle process exits:
    the sleep's parent is not the executor) and, with ``setsid``, in a session of its own (the
    middle process calls setsid first); returns its pid and the executor's. With
    ``then_wait_for``, writes the pid to ``pid_file`` and blocks until that file exists."""
    import os
    import time

    read, write = os.pipe()
    middle = os.fork()
    if middle == 0:
        try:
            if setsid:
                os.setsid()
            if os.fork() == 0:
                os.write(write, str(os.getpid()).encode())
                os.execvp("sleep", ["sleep", "600"])
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(middle, 0)
    daemon = int(os.read(read, 32))
    os.close(read)
    if pid_file:
        with open(pid_file + ".part", "w") as f:
            f.write(str(daemon))
        os.rename(pid_file + ".part", pid_file)
    deadline = time.monotonic() + 120
    while then_wait_for and not os.path.exists(then_wait_for) and time.monotonic() < deadline:
        time.sleep(0.05)
    return daemon, os.getpid()


def swept(cluster) -> bool:
    """Whether the runtime said it has no cgroup for its executors (not root, no writable
    cgroup2) and sweeps their sessions instead."""
    return "executors run without a cgroup of their own" in (
        cluster.home / "runtime.log").read_text()


def skip_if_swept(cluster) -> None:
    """A daemon that left the executor's session is held by a cgroup only: the sweep that
    replaces it where there is none misses such a daemon by design (docs/security.md;
    ProcessSweepTest shows it)."""
    if swept(cluster):
        pytest.skip("the runtime's executors have no cgroup of their own here (the runtime is "
                    "not root, or cgroup2 is not writable): the sweep misses a setsid daemon")


def session_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[3])


def scratch() -> dict:
    """What a call sees of its scratch space."""
    import os
    import stat
    import tempfile

    folder = tempfile.gettempdir()
    info = os.stat(folder)
    return {"tmpdir": os.environ.get("TMPDIR"), "gettempdir": folder,
            "mode": stat.S_IMODE(info.st_mode), "uid": info.st_uid, "pid": os.getpid()}


def write_secret(text: str) -> dict:
    import os

    with open("/tmp/secret", "w") as f:  # world-readable (umask 022): /tmp itself must hide it
        f.write(text)
    os.chmod("/tmp/secret", 0o644)
    with open("/tmp/secret") as f:  # alice's account reads it: what bob gets is bob's refusal
        read_back = f.read()
    info = os.stat("/tmp")
    return {"pid": os.getpid(), "tmp": sorted(os.listdir("/tmp")), "uid": os.getuid(),
            "read_back": read_back,
            "tmp_owner": (info.st_uid, info.st_mode & 0o777)}


def read_secret(alices_pid: int) -> dict:
    """Run as bob: every way to alice's /tmp/secret, and what bob's /tmp is."""
    import os

    got = {}
    for path in ("/tmp/secret", f"/proc/{alices_pid}/root/tmp/secret"):
        try:
            with open(path) as f:
                got[path] = f.read()
        except OSError as error:
            got[path] = type(error).__name__
    info = os.stat("/tmp")
    return {"got": got, "tmp": sorted(os.listdir("/tmp")), "uid": os.getuid(),
            "tmp_owner": (info.st_uid, info.st_mode & 0o777), "pid": os.getpid()}


def own_callback_port() -> int:
    """The port this executor's Py4J callback server listens on: its own listening socket."""
    import os

    mine = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            mine.add(target[8:-1])
    with open("/proc/self/net/tcp") as table:
        for line in list(table)[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in mine:  # LISTEN
                return int(fields[1].split(":")[1], 16)
    raise AssertionError("this executor has no listening socket")


def flood(port: int, count: int = 200) -> dict:
    """Opens ``count`` idle connections to ``port`` and counts this process's threads before and
    while they are open; and how many of them the server closed at once."""
    import os
    import socket
    import time

    def threads() -> int:
        return len(os.listdir("/proc/self/task"))

    before = threads()
    sockets, errors = [], {}
    for _ in range(count):
        s = socket.socket()
        s.settimeout(5)
        try:
            s.connect(("127.0.0.1", port))
        except OSError as error:
            errors[repr(error)] = errors.get(repr(error), 0) + 1
            s.close()
            continue
        sockets.append(s)
    time.sleep(1.0)  # the server's accept loop has seen them all
    during = threads()
    closed = 0
    for s in sockets:
        s.settimeout(0.05)
        try:
            closed += s.recv(1) == b""
        except (socket.timeout, OSError):
            pass
        s.close()
    return {"before": before, "during": during, "opened": len(sockets), "closed": closed,
            "errors": errors}


def flood_from_a_child(port: int, count: int = 200) -> dict:
    """The flood from a process the call starts (not the executor, nor its agent: another
    process of the same account), while this executor counts its own threads: before, and the
    most while the child's connections are open."""
    import json
    import os
    import subprocess
    import sys
    import time

    import cloudpickle

    def threads() -> int:
        return len(os.listdir("/proc/self/task"))

    code = ("import sys, json, cloudpickle; f = cloudpickle.loads(sys.stdin.buffer.read());"
            f" print(json.dumps(f({port}, {count})))")
    before = most = threads()
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)
    child.stdin.write(cloudpickle.dumps(flood))
    child.stdin.close()
    deadline = time.monotonic() + 120
    while child.poll() is None and time.monotonic() < deadline:
        most = max(most, threads())
        time.sleep(0.01)
    seen = json.loads(child.stdout.read())
    return dict(seen, before=before, most=most)


def thread_count() -> int:
    import os
    return len(os.listdir("/proc/self/task"))


def flood_own_port() -> dict:
    # 50: in one process the flood and the accept loop share the GIL, and the listen backlog
    # (py4j's 5) fills: each 6 connections wait a second for a SYN to be sent again.
    return flood(own_callback_port(), 50)


def watch_threads(release: str) -> dict:
    """This executor's thread count now, and the most it reaches until ``release`` exists; its
    port is printed first (the test reads it from the call's output)."""
    import os
    import time

    print(f"port {own_callback_port()}", flush=True)
    before = most = len(os.listdir("/proc/self/task"))
    deadline = time.monotonic() + 120
    while not os.path.exists(release) and time.monotonic() < deadline:
        most = max(most, len(os.listdir("/proc/self/task")))
        time.sleep(0.02)
    return {"before": before, "most": most}


def watching_port(future) -> int:
    """The port a running watch_threads call printed."""
    def printed():
        for line in (future.output or "").splitlines():
            if line.startswith("port "):
                return int(line.split()[1])
        return None
    return wait_until(printed, timeout=CALL_SECONDS, what="the watching call's port")


# ---- A call's processes end with their executor ------------------------------------------------

@pytest.mark.parametrize("setsid", [True, False], ids=["own-session", "executors-session"])
def test_a_daemon_a_call_left_ends_when_its_executor_retires(lab, client, setsid):
    if setsid:
        skip_if_swept(lab)
    daemon, executor = client.submit(leave_a_daemon, setsid).result(timeout=CALL_SECONDS)
    assert not pid_gone(daemon)
    if setsid:  # it left the executor's session and init adopted it: only a cgroup holds it
        assert session_of(daemon) not in (executor, session_of(executor))
    # The user's idle executor retires after 2 s (--executor-idle-seconds), and the daemon with it.
    wait_until(lambda: pid_gone(executor), timeout=GONE_SECONDS, what="the executor to retire")
    wait_until(lambda: pid_gone(daemon), timeout=GONE_SECONDS,
               what="the call's daemon to end with its executor")


@pytest.mark.parametrize("setsid", [True, False], ids=["own-session", "executors-session"])
def test_a_daemon_a_call_left_ends_when_the_call_is_cancelled(lab, client, tmp_path, setsid):
    if setsid:
        skip_if_swept(lab)
    pid_file, release = tmp_path / "daemon-pid", tmp_path / "release"
    running = client.submit(leave_a_daemon, setsid, str(pid_file), str(release), gpus=1)
    try:
        assert wait_for_file(str(pid_file), timeout=CALL_SECONDS)
        daemon = int(pid_file.read_text())
        assert not pid_gone(daemon)
        assert running.cancel()
        wait_until(lambda: pid_gone(daemon), timeout=GONE_SECONDS,
                   what="the cancelled call's daemon to end")
    finally:
        release.touch()
    # The GPU's next call runs, on a new executor.
    assert client.submit(os.getpid, gpus=1).result(timeout=CALL_SECONDS) > 0


def test_a_daemon_a_call_left_ends_when_the_cluster_stops(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    c = start_cluster(home, gpus=1, cpus=1)
    try:
        with c.client(set_as_default=False) as client:
            daemon, executor = client.submit(leave_a_daemon, not swept(c), gpus=1).result(
                timeout=CALL_SECONDS)
        assert not pid_gone(daemon) and not pid_gone(executor)
    finally:
        c.stop()
    wait_until(lambda: pid_gone(daemon), timeout=GONE_SECONDS,
               what="the daemon to end with the cluster")


# ---- Private scratch ---------------------------------------------------------------------------

def test_each_executor_has_a_private_tmpdir_that_goes_with_it(client):
    cpu = client.submit(scratch).result(timeout=CALL_SECONDS)
    gpu = client.submit(scratch, gpus=1).result(timeout=CALL_SECONDS)
    for seen in (cpu, gpu):
        assert seen["tmpdir"] == seen["gettempdir"] != tempfile.gettempdir()
        assert seen["mode"] == 0o700 and seen["uid"] == os.geteuid()
        assert os.path.isdir(seen["tmpdir"])
    assert cpu["tmpdir"] != gpu["tmpdir"]
    wait_until(lambda: pid_gone(cpu["pid"]) and pid_gone(gpu["pid"]), timeout=GONE_SECONDS,
               what="the executors to retire")
    wait_until(lambda: not os.path.exists(cpu["tmpdir"]) and not os.path.exists(gpu["tmpdir"]),
               timeout=GONE_SECONDS, what="their TMPDIR folders to be removed")


@pytest.fixture(scope="module")
def lab_as(accounts):  # noqa: F811
    python, path = executor_python(accounts["alice"][0])
    home = Path(tempfile.mkdtemp(prefix="bulletin-confinement-run-as-"))
    config = home / "cluster.yaml"
    config.write_text(  # one line per user, as test_isolation_accounts.py writes them
        "allow_system_accounts: true\n"
        "users:\n"
        f"  - {{name: alice, group: lab, token: \"{ALICE_TOKEN}\", run_as: {accounts['alice'][0]}}}\n"
        f"  - {{name: bob, group: lab, token: \"{BOB_TOKEN}\", run_as: {accounts['bob'][0]}}}\n")
    env = dict(cli_env(home), PYTHONPATH=path)
    c = start_cluster(home, "--config", str(config), "--executor-idle-seconds", "2", gpus=1,
                      cpus=2, python=python, env=env)
    try:
        yield c
    finally:
        c.stop()
        shutil.rmtree(home, ignore_errors=True)


@needs_accounts
@pytest.mark.parametrize("gpus", [0, 1])
def test_with_run_as_bob_cannot_read_what_alices_call_wrote_to_tmp(lab_as, gpus):
    with bulletin.Client(lab_as.address, token=ALICE_TOKEN, set_as_default=False) as alice, \
            bulletin.Client(lab_as.address, token=BOB_TOKEN, set_as_default=False) as bob:
        wrote = alice.submit(write_secret, "alice's secret", gpus=gpus).result(
            timeout=CALL_SECONDS)
        assert "secret" in wrote["tmp"] and wrote["read_back"] == "alice's secret"
        seen = bob.submit(read_secret, wrote["pid"], gpus=gpus).result(timeout=CALL_SECONDS)
        assert seen["got"]["/tmp/secret"] == "FileNotFoundError", seen
        # Through alice's executor's root: refused (ptrace rules), or gone (idle 2 s, or bob's
        # call took the GPU from it).
        assert seen["got"][f"/proc/{wrote['pid']}/root/tmp/secret"] in (
            "PermissionError", "FileNotFoundError"), seen
        assert "secret" not in seen["tmp"]
        # Each /tmp is its account's alone.
        assert wrote["tmp_owner"] == (wrote["uid"], 0o700)
        assert seen["tmp_owner"] == (seen["uid"], 0o700) and seen["uid"] != wrote["uid"]
        # Once her executor retired (idle 2 s, or bob's call took the GPU), her /tmp is gone:
        # her next executor has a new one.
        wait_until(lambda: pid_gone(wrote["pid"]), timeout=GONE_SECONDS,
                   what="alice's executor to retire")
        again = alice.submit(read_secret, wrote["pid"], gpus=gpus).result(timeout=CALL_SECONDS)
        assert again["pid"] != wrote["pid"]
        assert again["got"]["/tmp/secret"] == "FileNotFoundError"


# ---- The callback port serves the agent only ---------------------------------------------------

@pytest.fixture
def steady(cluster):
    """A client of the session's cluster, whose executors retire after the default idle time:
    one executor serves all of a test's calls."""
    with cluster.client(set_as_default=False) as c:
        yield c


def test_connections_to_the_callback_port_add_no_thread_and_calls_still_run(steady):
    client = steady
    port = client.submit(own_callback_port, gpus=1).result(timeout=CALL_SECONDS)
    # 200 from another process of the executor's account.
    seen = client.submit(flood_from_a_child, port, gpus=1).result(timeout=150)
    assert seen["opened"] >= 150, seen
    assert seen["most"] - seen["before"] <= 2, seen
    assert seen["closed"] >= seen["opened"] - 2, seen
    # And from the call's own process (the executor connecting to itself).
    own = client.submit(flood_own_port, gpus=1).result(timeout=150)
    assert own["opened"] >= 40 and own["during"] - own["before"] <= 2, own
    assert own["closed"] >= own["opened"] - 2, own
    # Nothing was left behind, and the executor still serves its agent.
    threads = client.submit(thread_count, gpus=1).result(timeout=CALL_SECONDS)
    assert threads - seen["before"] <= 2
    assert client.submit(own_callback_port, gpus=1).result(timeout=CALL_SECONDS) == port


@needs_accounts
def test_with_run_as_bobs_connections_to_alices_executor_are_closed(lab_as):
    with bulletin.Client(lab_as.address, token=ALICE_TOKEN, set_as_default=False) as alice, \
            bulletin.Client(lab_as.address, token=BOB_TOKEN, set_as_default=False) as bob:
        # Alice's executor counts its threads while bob's call floods its port (busy, it is
        # neither retired nor given up for bob's CPU slot meanwhile). It is released through
        # /dev/shm: its /tmp is its own.
        release = Path(tempfile.mkdtemp(prefix="bulletin-test-release-", dir="/dev/shm"))
        release.chmod(0o755)
        try:
            watching = alice.submit(watch_threads, str(release / "go"))
            wait_until(lambda: watching.running() or watching.done(), timeout=CALL_SECONDS,
                       what="alice's call to run")
            seen = bob.submit(flood, watching_port(watching)).result(timeout=120)
            (release / "go").touch()
            counted = watching.result(timeout=60)
        finally:
            shutil.rmtree(release, ignore_errors=True)
        assert counted["most"] - counted["before"] <= 2, (counted, seen)
        assert seen["opened"] >= 100 and seen["closed"] >= seen["opened"] - 2, str(seen)
