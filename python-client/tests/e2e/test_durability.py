"""The runtime survives its own crash (issue 13, docs/durability.md): a real runtime killed with
SIGKILL and started again with `bulletin up` on the same home. Accepted calls are not lost, the
calls that were running run again with the next attempt number, the store's files are kept and
reconciled with the journal, a journal of another format is refused, and a full disk under the
state dir refuses calls instead of losing them."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

import bulletin
from cluster_support import (CALL_SECONDS, referenced_objects, run_cli, start_cluster,
                             wait_for_file, wait_until)
from durability_support import crash, restart, store_files

pytestmark = pytest.mark.timeout(240)


def slow_double(x: int, seconds: float) -> int:
    import time
    time.sleep(seconds)
    return 2 * x


def gated_sum(data: bytes, gate: str, started: str) -> int:
    open(started, "w").close()
    wait_for_file(gate, 60)
    return sum(data[:1000]) + len(data)


def test_a_crash_loses_no_accepted_call_and_running_ones_run_again(tmp_path):
    cluster = start_cluster(tmp_path / "home", gpus=0, cpus=2)
    try:
        with cluster.client(set_as_default=False, reconnect_timeout=90) as client:
            futures = [client.submit(slow_double, i, 1.0) for i in range(8)]
            wait_until(lambda: client.status().running > 0, timeout=CALL_SECONDS,
                       what="a call to run")
            crash(cluster)
            cluster = restart(cluster, gpus=0, cpus=2)
            assert [f.result(timeout=CALL_SECONDS) for f in futures] == [2 * i for i in range(8)]
            attempts = [f.attempt for f in futures]
            assert set(attempts) <= {1, 2} and 2 in attempts, attempts  # cut short: ran again
            assert all(f.status == "finished" for f in futures)
        with cluster.client(set_as_default=False) as fresh:
            wait_until(lambda: referenced_objects(fresh) == 0, timeout=10,
                       what="the first client's holds to go with its session")
    finally:
        cluster.stop()


def test_a_submit_lost_with_the_runtime_is_sent_again_to_a_session_with_nothing_to_replay(
        tmp_path):
    # The session is in the journal (it holds an upload) but has no call: the restored runtime
    # has no event to replay to it. The Submit made while the runtime is down waits for the
    # session to resume and catch up, then goes again; the runtime must not name as the seq to
    # catch up to one that no event carries (the client would wait for it for good).
    cluster = start_cluster(tmp_path / "home", gpus=0, cpus=2)
    try:
        with cluster.client(set_as_default=False, reconnect_timeout=90) as client:
            ref = client.scatter(bytes(range(256)) * 8192)  # 2 MiB: an object of its own
            time.sleep(0.5)  # its hold reaches the journal (an upload does not wait for it)
            crash(cluster)
            future = client.submit(len, ref)
            cluster = restart(cluster, gpus=0, cpus=2)
            assert future.result(timeout=CALL_SECONDS) == 256 * 8192
    finally:
        cluster.stop()


def test_the_store_is_kept_and_reconciled_with_the_journal(tmp_path):
    cluster = start_cluster(tmp_path / "home", gpus=0, cpus=2)
    gate, started, lost_started = tmp_path / "gate", tmp_path / "started", tmp_path / "lost"
    try:
        with cluster.client(set_as_default=False, reconnect_timeout=90) as client:
            kept = bytes(range(256)) * 8192  # 2 MiB: stored, not inline
            doomed = bytes(reversed(range(256))) * 8192
            kept_ref, doomed_ref = client.scatter(kept), client.scatter(doomed)
            running = client.submit(gated_sum, kept_ref, str(gate), str(started))
            waiting = client.submit(gated_sum, doomed_ref, str(gate), str(lost_started))
            wait_until(lambda: started.exists() and lost_started.exists(), timeout=CALL_SECONDS,
                       what="both calls to start")
            crash(cluster)
            namespace = next(p for p in Path(cluster.info["store_dir"]).iterdir()
                             if (p / kept_ref.id).exists())
            stray = namespace / ("ab" * 16)
            stray.write_bytes(b"left by nobody the journal knows")
            (namespace / doomed_ref.id).unlink()  # its file did not survive the crash
            gate.touch()
            cluster = restart(cluster, gpus=0, cpus=2)
            assert running.result(timeout=CALL_SECONDS) == sum(kept[:1000]) + len(kept)
            assert running.attempt == 2
            with pytest.raises(bulletin.BulletinError, match="did not survive"):
                waiting.result(timeout=CALL_SECONDS)
            files = store_files(cluster)
            assert f"{namespace.name}/{kept_ref.id}" in files
            assert f"{namespace.name}/{stray.name}" not in files, "a file nobody names leaked"
            # The scattered object is still held by the resumed session: a new call reads it.
            again = client.submit(gated_sum, kept_ref, str(gate), str(started))
            assert again.result(timeout=CALL_SECONDS) == sum(kept[:1000]) + len(kept)
    finally:
        cluster.stop()


def test_a_journal_of_another_format_is_refused_with_what_to_do(tmp_path):
    home = tmp_path / "home"
    journal = home / "journal"
    journal.mkdir(parents=True)
    # A log header (magic "BLJN", format, kind 1 = log) of a format this version does not read.
    (journal / "log-000000000001").write_bytes(b"BLJN" + (99).to_bytes(4, "big")
                                               + (1).to_bytes(4, "big"))
    result = run_cli(home, "up", "--simulate-gpus", "0", "--cpus", "1", "--port", "0")
    output = result.stdout + result.stderr + (home / "runtime.log").read_text()
    assert result.returncode != 0, output
    assert "format 99" in output and "newer bulletin" in output and str(journal) in output, output


@pytest.fixture
def small_tmpfs(tmp_path):
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)],
                          capture_output=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root); the journal's JUnit tests cover a "
                    "full disk with a simulated ENOSPC")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_a_full_state_dir_refuses_calls_instead_of_losing_them(tmp_path, small_tmpfs):
    cluster = start_cluster(tmp_path / "home", "--state-dir", str(small_tmpfs), gpus=0, cpus=1)
    try:
        with cluster.client(set_as_default=False) as client:
            assert client.submit(slow_double, 1, 0).result(timeout=CALL_SECONDS) == 2
            filler = small_tmpfs / "filler"
            fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
            try:  # fill what is left of the file system
                while True:
                    os.write(fd, b"\0" * 4096)
            except OSError:
                pass
            finally:
                os.close(fd)
            # A page the log already has may take a few more records: submit until refused.
            message = None
            for i in range(200):
                try:
                    client.submit(slow_double, i, 0).result(timeout=CALL_SECONDS)
                except bulletin.BulletinError as error:
                    message = str(error)
                    break
            assert message is not None, "a full state dir never refused a call"
            assert str(small_tmpfs / "journal") in message, message
            assert "No space left on device" in message, message
            # An upload's hold is acknowledged only once it is journaled: refused too, saying
            # why, instead of kept in memory only (a crash would then delete the object).
            refused = None
            for i in range(200):
                try:
                    client.scatter(os.urandom(256 << 10)).release()
                except bulletin.BulletinError as error:
                    refused = str(error)
                    break
            assert refused is not None, "a full state dir never refused an upload"
            assert "No space left on device" in refused, refused
            filler.unlink()
            # With room again the runtime journals and runs calls as before.
            deadline = time.monotonic() + CALL_SECONDS
            while True:
                try:
                    assert client.submit(slow_double, 3, 0).result(timeout=CALL_SECONDS) == 6
                    break
                except bulletin.BulletinError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
    finally:
        cluster.stop()
        shutil.rmtree(small_tmpfs / "journal", ignore_errors=True)
