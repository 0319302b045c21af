"""The runtime's log as an operator reads it: a bound SLF4J provider (no "No SLF4J providers"),
one line per record, how each call ended at INFO, and one log file per start, so `bulletin up`
and runtime.log show this start's lines and not an older run's."""

from __future__ import annotations

import operator

import pytest

from cluster_support import CALL_SECONDS, cli_env, run_cli, start_cluster, wait_until

pytestmark = pytest.mark.timeout(240)


def test_one_log_per_start_with_calls_state_changes(tmp_path):
    home = tmp_path / "home"
    first = start_cluster(home, gpus=0, cpus=1)
    try:
        with first.client(set_as_default=False) as client:
            assert client.submit(operator.add, 1, 2).result(timeout=CALL_SECONDS) == 3
        log = home / "runtime.log"
        wait_until(lambda: "-> FINISHED" in log.read_text(), timeout=10,
                   what="the call's end in the log")
        text = log.read_text()
        assert "No SLF4J providers" not in text and "NOP" not in text, text
        # One line per call at INFO, how it ended; the steps before it only at FINE.
        ended = [line for line in text.splitlines() if " INFO bulletin.calls: call " in line]
        assert len(ended) == 1 and "RUNNING -> FINISHED on " in ended[0], text
        assert "QUEUED -> PLACED" not in text and "PLACED -> RUNNING" not in text, text
        # Per-stream noise stays out of an INFO log.
        assert "io.netty" not in text, text
    finally:
        first.stop()
    (home / "runtime.log").write_text((home / "runtime.log").read_text()
                                      + "MARKER OF THE FIRST START\n")
    second = start_cluster(home, gpus=0, cpus=1)
    try:
        now, before = (home / "runtime.log").read_text(), (home / "runtime.log.1").read_text()
        assert "MARKER OF THE FIRST START" in before
        assert "MARKER OF THE FIRST START" not in now
        assert f"serving at {second.address}" in now
        assert f"serving at {first.address}" not in now or first.address == second.address
    finally:
        second.stop()


def test_a_failed_start_quotes_its_own_log(tmp_path):
    """An older start's lines must not be quoted as this start's error."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "runtime.log").write_text("OLD RUN: something else went wrong\n")
    bad = home / "bad.yaml"
    bad.write_text("users: 7\n")
    result = run_cli(home, "up", "--simulate-gpus", "0", "--cpus", "1", "--port", "0",
                     "--config", str(bad), env=cli_env(home))
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "OLD RUN" not in output, output
    assert "OLD RUN" in (home / "runtime.log.1").read_text()
