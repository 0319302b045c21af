"""The usage ledger end to end: real runtimes, real executors. Busy comes from the worker's
utilisation samples: with simulated GPUs from the executor's CPU share (a call that spins is
busy, one that sleeps is not), with a fake `nvidia-smi` on PATH (FAKE_NVIDIA_SMI below, the
boundary a machine without GPUs cannot cross) from what it prints. A user sees their own rows
only; the owner sees everyone's; the ledger survives a restart."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import bulletin
from cluster_support import (ALICE, BOB, CALL_SECONDS, cli_env, remove_dead_worker_stores, run_cli,
                             start_cluster, start_two_user_cluster, wait_until)


pytestmark = pytest.mark.timeout(240)


def spin(seconds: float) -> int:
    """Runs remotely: keeps a CPU busy (what the simulated GPU counts as busy)."""
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        n += 1
    return n


def nap(seconds: float) -> bool:
    """Runs remotely: holds its GPU and computes nothing."""
    time.sleep(seconds)
    return True


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    home = tmp_path_factory.mktemp("bulletin-usage")
    c = start_two_user_cluster(home)
    try:
        yield c
    finally:
        c.stop()


def rows_by_user(report) -> dict:
    return {row.user: row for row in report.rows}


def test_busy_from_simulated_samples_and_who_sees_what(cluster):
    with bulletin.Client(cluster.address, token=ALICE, set_as_default=False) as alice, \
            bulletin.Client(cluster.address, token=BOB, set_as_default=False) as bob, \
            cluster.client(set_as_default=False) as owner:
        assert alice.submit(spin, 3.0, gpus=1).result(timeout=CALL_SECONDS) > 0
        assert bob.submit(nap, 3.0, gpus=1).result(timeout=CALL_SECONDS) is True

        mine = alice.usage(since="1h")
        assert not mine.all_users
        assert list(rows_by_user(mine)) == ["alice"]
        spun = mine.rows[0]
        assert spun.group == "vision" and spun.calls == 1
        assert 3.0 / 3600 <= spun.gpu_hours_reserved < 10.0 / 3600
        # Spinning keeps the executor on a CPU: busy is most of the reservation (a shared,
        # loaded machine may give it less than a whole CPU).
        assert spun.busy_ratio > 0.4, spun

        theirs = bob.usage(since="1h")
        assert list(rows_by_user(theirs)) == ["bob"]  # never alice's row
        napped = theirs.rows[0]
        assert napped.gpu_hours_reserved >= 3.0 / 3600
        assert napped.busy_ratio < 0.15, napped  # time.sleep computes nothing

        everyone = owner.usage(since="1h")
        assert everyone.all_users and {"alice", "bob"} <= set(rows_by_user(everyone))
        groups = {row.group: row for row in owner.usage(since="1h", by="group").rows}
        assert groups["vision"].calls == 1 and groups["nlp"].calls == 1
        assert groups["vision"].user == ""
        # A period that ended before the calls holds none of them.
        assert not owner.usage(since="2h", until="1h").rows

        html = everyone._repr_html_()
        assert "alice" in html and "<table" in html


def test_cli_usage_json_and_csv_show_only_the_callers_rows(cluster):
    with bulletin.Client(cluster.address, token=ALICE, set_as_default=False) as alice:
        alice.submit(nap, 0.2, gpus=1).result(timeout=CALL_SECONDS)
    env = cli_env(cluster.home)
    env["BULLETIN_TOKEN"] = BOB
    env["BULLETIN_ADDRESS"] = cluster.address
    done = run_cli(cluster.home, "usage", "--since", "1d", "--json", env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["by"] == "user" and report["all_users"] is False
    assert {row["user"] for row in report["rows"]} <= {"bob"}

    env["BULLETIN_TOKEN"] = cluster.token
    done = run_cli(cluster.home, "usage", "--since", "1d", "--by", "group", "--csv", env=env,
                   timeout=60)
    assert done.returncode == 0, done.stderr
    table = list(csv.DictReader(io.StringIO(done.stdout)))
    assert "vision" in {row["group"] for row in table}
    assert {"gpu_hours_reserved", "gpu_hours_busy", "busy_ratio", "calls"} <= set(table[0])

    text = run_cli(cluster.home, "usage", "--since", "1d", env=env, timeout=60)
    assert text.returncode == 0, text.stderr
    assert "(all users)" in text.stdout and "busy/reserved" in text.stdout
    assert "alice" in text.stdout

    bad = run_cli(cluster.home, "usage", "--since", "a week", env=env, timeout=60)
    assert bad.returncode != 0 and "since" in bad.stderr


FAKE_NVIDIA_SMI = """#!/bin/sh
# A FAKE nvidia-smi for tests on machines without GPUs: one GPU, always 75 % utilised.
case "$*" in
  *utilization.gpu*) echo "0, GPU-fake-0000, 75" ;;
  *--query-gpu=name*) echo "FAKE GPU (tests)" ;;
  *) exit 1 ;;
esac
"""


def fake_nvidia_smi_env(tmp_path, home):
    """The environment of `bulletin up` / `bulletin worker` with the fake nvidia-smi first on
    PATH."""
    fake = tmp_path / "fake-bin"
    fake.mkdir(exist_ok=True)
    (fake / "nvidia-smi").write_text(FAKE_NVIDIA_SMI)
    (fake / "nvidia-smi").chmod(0o755)
    env = cli_env(home)
    env["PATH"] = f"{fake}:{env['PATH']}"
    return env


def test_busy_from_nvidia_smi_samples_survives_a_restart(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = fake_nvidia_smi_env(tmp_path, home)
    c = start_cluster(home, gpus=0, cpus=1, env=env)
    try:
        with c.client(set_as_default=False) as client:
            status = client.status()
            assert status.gpus.total == 1 and not status.simulated_gpus
            assert client.submit(nap, 3.0, gpus=1).result(timeout=CALL_SECONDS) is True
            row = client.usage(since="1h").rows[0]
        # nvidia-smi said 75 % whatever the call did: busy is 75 % of the time sampled.
        assert 0.5 < row.busy_ratio < 0.8, row
    finally:
        c.stop()
    c = start_cluster(home, gpus=0, cpus=1, env=env)
    try:
        with c.client(set_as_default=False) as client:
            again = client.usage(since="1h").rows
        assert again and again[0].calls == 1
        assert again[0].gpu_hours_busy == pytest.approx(row.gpu_hours_busy)
    finally:
        c.stop()
    # Kept for 2 s only, the row (older by now) is deleted when the runtime starts.
    time.sleep(2)
    c = start_cluster(home, "--usage-retention", "2s", gpus=0, cpus=1, env=env)
    try:
        with c.client(set_as_default=False) as client:
            assert not client.usage(since="1h").rows
    finally:
        c.stop()


def test_up_refuses_a_retention_that_is_no_duration(tmp_path):
    done = run_cli(tmp_path, "up", "--usage-retention", "a while", timeout=60)
    assert done.returncode != 0
    assert "--usage-retention" in done.stderr and "1h30m" in done.stderr


def test_a_remote_workers_samples_reach_the_ledger(tmp_path):
    """A worker on another host reports its calls' busy GPU-seconds in CallEnded."""
    home = tmp_path / "head"
    home.mkdir()
    head = start_cluster(home, gpus=0, cpus=1)
    log = home / "worker.log"
    try:
        with open(log, "wb") as out:
            worker = subprocess.Popen(
                [sys.executable, "-m", "bulletin", "worker", "--head", head.address,
                 "--worker-id", "usage-w", "--cpus", "1"],
                env=fake_nvidia_smi_env(tmp_path, home), stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            with head.client(set_as_default=False) as client:
                wait_until(lambda: any(w.worker_id == "usage-w" and w.gpus.total == 1
                                       for w in client.status().workers),
                           timeout=60, what="the remote worker to attach")
                future = client.submit(nap, 3.0, gpus=1)
                assert future.result(timeout=CALL_SECONDS) is True
                assert future.placement.worker_id == "usage-w"
                row = client.usage(since="1h").rows[0]
            assert 0.5 < row.busy_ratio < 0.8, (row, log.read_text(errors="replace"))
        finally:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(timeout=30)
            remove_dead_worker_stores(f"usage-w-{worker.pid}")
    finally:
        head.stop()


def test_a_large_upload_shows_a_progress_bar_that_fills_and_closes(cluster, monkeypatch):
    import numpy as np
    from bulletin import _progress

    bars = []

    class RecordingBar:  # stands in for tqdm: what the upload told its bar
        def __init__(self, total, **_):
            self.total, self.n, self.closed = total, 0, False
            bars.append(self)

        def update(self, n):
            self.n += n

        def reset(self):
            self.n = 0

        def close(self):
            self.closed = True

    monkeypatch.setattr(_progress, "enabled", lambda: True)
    monkeypatch.setattr(_progress, "_bar", lambda **kw: RecordingBar(**kw))
    with cluster.client(set_as_default=False) as client:
        client._transfer.same_host = False  # as a client on another host: over the data port
        small = client.scatter(np.ones(1 << 10))
        assert not bars  # under the threshold: no bar
        big = client.scatter(np.ones((80 << 20) // 8))
        assert client.submit(np.sum, big).result(timeout=CALL_SECONDS) == (80 << 20) // 8
        del small, big
    assert len(bars) == 1
    assert bars[0].total >= 80 << 20 and bars[0].n == bars[0].total and bars[0].closed
