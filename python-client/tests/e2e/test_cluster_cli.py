"""The `bulletin` command (up, status, down) against real runtimes started by the real `bulletin up`."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys

import pytest

import bulletin
from cluster_support import (CALL_SECONDS, cli_env, free_port, pid_gone, run_cli, start_cluster,
                             wait_for_file, wait_until)

pytestmark = pytest.mark.timeout(120)


def test_up_reports_the_address_and_the_simulated_gpu(cluster):
    assert f"up at {cluster.address}" in cluster.up_output
    assert "GPUs: 1 simulated, CPUs: 2" in cluster.up_output
    assert cluster.address == f"127.0.0.1:{cluster.port}"


def test_up_on_a_running_cluster_says_so_starts_nothing_and_names_what_differs(cluster):
    port = free_port()
    result = run_cli(cluster.home, "up", "--simulate-gpus", "1", "--port", str(port))
    assert result.returncode == 0, result.stderr
    assert f"already up at {cluster.address} (pid {cluster.pid})" in result.stdout
    assert json.loads((cluster.home / "runtime.json").read_text())["pid"] == cluster.pid
    assert f"--port {port}: it has port {cluster.port}" in result.stderr
    assert "--simulate-gpus 1 (runtime.json does not record" in result.stderr
    assert "bulletin down" in result.stderr
    # The same port, and nothing else asked: nothing to say.
    again = run_cli(cluster.home, "up", "--port", str(cluster.port))
    assert again.returncode == 0 and "already up" in again.stdout and again.stderr == ""


def test_status_prints_slots_and_simulated_gpus(cluster):
    result = run_cli(cluster.home, "status", timeout=30)
    assert result.returncode == 0, result.stderr
    assert f"runtime {cluster.address}" in result.stdout
    assert "GPUs: 1 total" in result.stdout and "(simulated)" in result.stdout
    assert "CPUs: 2 total" in result.stdout


def test_token_is_private_to_its_owner(cluster):
    assert stat.S_IMODE((cluster.home / "token").stat().st_mode) == 0o600
    assert stat.S_IMODE(cluster.home.stat().st_mode) == 0o700
    token = cluster.token
    assert len(token) >= 32
    # The runtime gets the token in its environment, never on its command line (`ps` shows it).
    with open(f"/proc/{cluster.pid}/cmdline", "rb") as f:
        assert token.encode() not in f.read()


@pytest.mark.parametrize("argv, expected", [
    (["--help"], ["up", "status", "down", "BULLETIN_HOME"]),
    (["up", "--help"], ["--simulate-gpus", "--port", "--gpus", "--cpus", "--foreground"]),
    (["status", "--help"], ["GPU"]),
    (["down", "--help"], ["runtime.json"]),
])
def test_help_exits_0_with_useful_text(argv, expected, tmp_path):
    result = run_cli(tmp_path, *argv, timeout=30)
    assert result.returncode == 0, result.stderr
    for word in expected:
        assert word in result.stdout


@pytest.mark.parametrize("argv", [[], ["up", "--gpus", "many"], ["frobnicate"],
                                  ["up", "--cpus", "-1"]])
def test_usage_errors_exit_with_2(argv, tmp_path):
    result = run_cli(tmp_path, *argv, timeout=30)
    assert result.returncode == 2
    assert "usage" in result.stderr or "must be" in result.stderr


def test_status_without_a_runtime_fails_with_a_hint(tmp_path):
    env = cli_env(tmp_path)
    env["BULLETIN_ADDRESS"] = f"127.0.0.1:{free_port()}"
    result = subprocess.run([sys.executable, "-m", "bulletin._cli", "status"], env=env,
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert "bulletin up" in result.stderr and env["BULLETIN_ADDRESS"] in result.stderr


def test_status_with_no_cluster_up_here_says_so_instead_of_trying_the_default_port(tmp_path):
    result = run_cli(tmp_path, "status", timeout=30)
    assert result.returncode == 1
    assert "no bulletin runtime is up here" in result.stderr and "runtime.json" in result.stderr
    assert "bulletin up" in result.stderr and "BULLETIN_ADDRESS" in result.stderr
    assert "8770" not in result.stderr


def test_down_without_a_runtime_says_so(tmp_path):
    result = run_cli(tmp_path, "down", timeout=30)
    assert result.returncode == 0
    assert "no bulletin runtime is up" in result.stdout


def test_up_without_java_says_how_to_get_it(tmp_path):
    env = cli_env(tmp_path / "home")
    env["JAVA_HOME"] = str(tmp_path / "nowhere")
    env["PATH"] = str(tmp_path)  # no java on it
    result = subprocess.run([sys.executable, "-m", "bulletin._cli", "up", "--port",
                             str(free_port())], env=env, capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 1
    assert "JAVA_HOME" in result.stderr and "java" in result.stderr


def test_up_without_the_jar_says_how_to_build_it(tmp_path):
    env = cli_env(tmp_path / "home")
    env["BULLETIN_JAR"] = str(tmp_path / "missing.jar")
    result = subprocess.run([sys.executable, "-m", "bulletin._cli", "up", "--port",
                             str(free_port())], env=env, capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 1
    assert "missing.jar" in result.stderr and "make build" in result.stderr


def test_up_on_a_taken_port_fails_with_the_runtime_log(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli(tmp_path, "up", "--simulate-gpus", "1", "--cpus", "1", "--port",
                         str(port))
    assert result.returncode == 1
    assert "exited with code" in result.stderr
    assert f"port {port} on 127.0.0.1 is in use (another bulletin runtime?" in result.stderr
    assert not (tmp_path / "runtime.json").exists()
    # Said first and alone: the runtime checks its ports before it starts anything (no event
    # loop to report blocked, no executors started only to be stopped).
    log = result.stderr.split("runtime.log:\n", 1)[1].splitlines()
    assert log[0].startswith(f"bulletin-runtime: port {port} on 127.0.0.1 is in use"), log
    assert len(log) == 1, log


def test_down_stops_the_runtime_and_fails_the_calls_of_its_clients(tmp_path):
    home = tmp_path / "home"
    own = start_cluster(home, cpus=1)
    try:
        client = own.client(set_as_default=False)
        gate = tmp_path / "never"
        pending = client.submit(wait_for_file, str(gate), gpus=1)
        wait_until(lambda: pending.status == "running", timeout=CALL_SECONDS,
                   what="the call to run")
        assert _executors_of(own.store_dir), "this cluster's executors should be found by their env"

        result = run_cli(home, "down", timeout=60)
        assert result.returncode == 0, result.stderr
        assert f"bulletin runtime at {own.address} stopped" in result.stdout
        assert pid_gone(own.pid)
        assert not (home / "runtime.json").exists()
        assert not own.store_dir.exists()

        with pytest.raises(bulletin.RuntimeUnreachableError, match=own.address):
            pending.result(timeout=10)
        with pytest.raises(bulletin.RuntimeUnreachableError):
            client.submit(len, b"")
        client.close()

        again = run_cli(home, "down", timeout=30)
        assert again.returncode == 0 and "no bulletin runtime is up" in again.stdout
    finally:
        own.stop()
    # Its executors went with it.
    wait_until(lambda: not _executors_of(own.store_dir), timeout=5, what="the executors to exit")


def _executors_of(store_dir) -> list[int]:
    """Live executor processes of the runtime whose store is store_dir (executors do not inherit
    the runtime's environment, BULLETIN_HOME included: they are told their store)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or pid_gone(int(name)):
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read().split(b"\0")
        except OSError:
            continue
        if f"BULLETIN_STORE_DIR={store_dir}".encode() in environ and any(
                e.startswith(b"BULLETIN_EXECUTOR_ID=") for e in environ):
            found.append(int(name))
    return found


def _hold(port: int) -> socket.socket | None:
    """Listens on port, or None when another process holds it already (taken either way)."""
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        s.listen()
        return s
    except OSError:
        s.close()
        return None


def test_up_beside_a_process_on_the_default_ports_moves_to_free_ones_and_says_which(tmp_path):
    """Issue 28.5: the default gRPC (8770) and dashboard (8780) ports taken, as by a second
    cluster on the host: `bulletin up` takes the next free ones, says so as Jupyter does, and a
    client finds the runtime through runtime.json."""
    held = [_hold(8770), _hold(8780)]
    home = tmp_path / "home"
    env = cli_env(home)
    env.pop("BULLETIN_HTTP_PORT", None)
    try:
        result = run_cli(home, "up", "--simulate-gpus", "0", "--cpus", "1", env=env)
        assert result.returncode == 0, result.stdout + result.stderr
        info = json.loads((home / "runtime.json").read_text())
        port = int(info["address"].rsplit(":", 1)[1])
        assert port != 8770 and info["http_port"] != 8780, info
        assert f"port 8770 is in use, using {port}" in result.stdout, result.stdout
        assert f"port 8780 is in use, using {info['http_port']}" in result.stdout, result.stdout
        token = (home / "token").read_text().strip()
        with bulletin.Client(info["address"], token=token, set_as_default=False) as client:
            assert client.submit(int, "7").result(timeout=CALL_SECONDS) == 7
    finally:
        run_cli(home, "down", env=env)
        for s in held:
            if s is not None:
                s.close()
