"""`bulletin up/status/down` against tests/fake_java.py standing in for the runtime's JVM."""

import json
import os
import socket
import stat
import sys
from pathlib import Path

import pytest

from bulletin import _cli
from bulletin._launch import pid_alive

HERE = Path(__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def fake_jvm(bulletin_env, tmp_path, monkeypatch):
    bin_dir = tmp_path / "jdk" / "bin"
    bin_dir.mkdir(parents=True)
    java = bin_dir / "java"
    java.write_text(f"#!/bin/sh\nexec {sys.executable} {HERE / 'fake_java.py'} \"$@\"\n")
    java.chmod(0o755)
    jar = tmp_path / "bulletin-runtime.jar"
    jar.write_bytes(b"")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    monkeypatch.setenv("BULLETIN_JAR", str(jar))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(sys.path))
    yield bulletin_env
    info_path = bulletin_env / "runtime.json"
    if info_path.exists():  # a failed test must not leave a runtime behind
        _cli.main(["down"])


def test_up_status_down_follow_the_launch_contract(fake_jvm, capsys):
    port = free_port()
    assert _cli.main(["up", "--simulate-gpus", "2", "--cpus", "4", "--port", str(port)]) == 0
    out = capsys.readouterr().out
    assert f"up at 127.0.0.1:{port}" in out and "GPUs: 2 simulated" in out

    token = fake_jvm / "token"
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    assert stat.S_IMODE(fake_jvm.stat().st_mode) == 0o700
    argv = json.loads((fake_jvm / "fake-java-argv.json").read_text())
    assert argv[:2] == ["--add-opens=java.base/java.nio=ALL-UNNAMED", "-jar"]
    assert ["--port", str(port)] == argv[argv.index("--port"):argv.index("--port") + 2]
    assert "--python" in argv and token.read_text().strip() not in " ".join(argv)

    assert _cli.main(["up"]) == 0
    assert "already up" in capsys.readouterr().out

    assert _cli.main(["status"]) == 0
    assert "GPUs: 2 total, 1 reserved, 1 busy (simulated)" in capsys.readouterr().out

    pid = json.loads((fake_jvm / "runtime.json").read_text())["pid"]
    assert _cli.main(["down"]) == 0
    assert "stopped" in capsys.readouterr().out
    assert not pid_alive(pid) and not (fake_jvm / "runtime.json").exists()
    assert _cli.main(["down"]) == 0
    assert "no bulletin runtime is up" in capsys.readouterr().out


def test_up_reports_the_log_tail_when_the_runtime_fails_to_start(fake_jvm, capsys, monkeypatch):
    monkeypatch.setenv("FAKE_JAVA_FAIL", "1")
    assert _cli.main(["up", "--port", str(free_port())]) == 1
    err = capsys.readouterr().err
    assert "exited with code 3" in err and "port already in use" in err


def test_up_without_java_says_how_to_get_it(bulletin_env, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    monkeypatch.setenv("PATH", str(tmp_path))
    assert _cli.main(["up"]) == 1
    assert "JAVA_HOME" in capsys.readouterr().err


def test_status_without_runtime_fails_with_a_hint(bulletin_env, monkeypatch, capsys):
    monkeypatch.setenv("BULLETIN_ADDRESS", f"127.0.0.1:{free_port()}")
    assert _cli.main(["status"]) == 1
    assert "bulletin up" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [[], ["up", "--gpus", "many"], ["frobnicate"]])
def test_usage_errors_exit_with_2(argv, capsys):
    with pytest.raises(SystemExit) as info:
        _cli.main(argv)
    assert info.value.code == 2
