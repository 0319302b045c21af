"""The host's store arena against a real cluster: the runtime pre-faults files once for the host,
a client's first large write after connecting lands in one moved into its folder, an executor's
new result too, no file that held or will hold one user's bytes reaches another, and the share
can be off."""

from __future__ import annotations

import os
import stat
import threading
import time

import grpc

import numpy as np
import pytest

import bulletin
from bulletin._data import _arena
from bulletin._proto import bulletin_pb2 as pb
from cluster_support import (CALL_SECONDS, free_port, run_cli, scrape_metrics, start_cluster,
                             wait_until)

pytestmark = pytest.mark.timeout(120)

MIB = 1 << 20
USERS = ("users:\n  - name: ada\n    group: g\n    token: ada-token-0123456789\n"
         "  - name: bob\n    group: g\n    token: bob-token-0123456789\n")


def total(x):
    return float(np.asarray(x).sum())


@pytest.fixture(scope="module")
def two_users(tmp_path_factory):
    home = tmp_path_factory.mktemp("arena")
    config = home / "cluster.yaml"
    config.write_text(USERS)
    # 256 MiB store, a quarter of it pre-faulted for the host: a 64 MiB arena (34 + 18 + 10
    # MiB files); a user may hold one file, or up to half of it.
    cluster = start_cluster(home / "home", "--store-capacity", str(256 * MIB),
                            "--store-arena-share", "0.25", "--config", str(config))
    try:
        yield cluster
    finally:
        cluster.stop()


def _client(cluster, who: str) -> bulletin.Client:
    return bulletin.Client(cluster.address, token=f"{who}-token-0123456789",
                           set_as_default=False)


def _filled(spares, timeout: float = 60) -> bool:
    """Waits for a client's spares; says why when they do not come."""
    if spares.wait_filled(timeout):
        return True
    available, total = _arena._meminfo()
    if total and available < total * _arena._LOW_MEMORY_SHARE:
        pytest.skip("the machine is short of memory: the arena gives its memory back by design")
    raise AssertionError(f"spares not filled within {timeout} s: still to take "
                         f"{spares._plan}, taking {spares._filling}, holding "
                         f"{spares.spare_bytes()} bytes")


def _stats(folder, prefix=""):
    """The files of a folder as they stand; one moved away meanwhile (a handout) is left out."""
    found = []
    for name in os.listdir(folder):
        if name.startswith(prefix):
            try:
                found.append(os.stat(folder / name))
            except FileNotFoundError:
                pass
    return found


def _inodes(folder, prefix=""):
    return {st.st_ino for st in _stats(folder, prefix) if stat.S_ISREG(st.st_mode)}


def _files_of(transfer) -> set:
    """The inodes of a client's files: its published objects and what it staged."""
    return _inodes(transfer.folder) | _inodes(transfer.staging)


def test_the_first_large_write_after_connecting_lands_in_a_spare(two_users):
    with _client(two_users, "ada") as ada:
        transfer = ada._transfer
        hello = ada._conn.hello
        assert hello.host_arena_bytes == 64 * MIB and hello.arena_bytes == 64 * MIB
        assert transfer.same_host and transfer.spares is not None
        assert _filled(transfer.spares)
        assert transfer.spares.spare_bytes() >= 32 * MIB  # the arena's largest file
        # The spare is a file of the host arena, moved into ada's folder under her session.
        names = [n for n in os.listdir(transfer.staging) if "-spare-" in n]
        assert names and all(n.startswith(f".stage-{ada._conn.session_id}-spare-")
                             for n in names)
        a = np.random.default_rng(3).random(4 * MIB, dtype=np.float32)  # 16 MiB
        ref = ada.scatter(a)
        assert transfer._maps.spare_writes == 1, "the first write did not take a spare"
        assert ada.submit(total, ref).result(timeout=CALL_SECONDS) == pytest.approx(
            float(a.sum()), rel=1e-5)
        # The object is an ordinary store file: the writer's alone, no other link.
        st = os.stat(transfer.folder / ref.id)
        assert st.st_size == ref.nbytes and st.st_nlink == 1
        assert stat.S_IMODE(st.st_mode) == 0o600
        # The spare taken is taken again from the arena, the size of the write.
        assert _filled(transfer.spares)
        # /metrics says what the arena holds and has handed out.
        meters = scrape_metrics(two_users, "bulletin_store_arena_")
        assert meters["bulletin_store_arena_handouts_total"] >= 2
        held = sum(value for name, value in meters.items()
                   if name.startswith("bulletin_store_arena_bytes{"))
        assert 32 * MIB <= held <= 64 * MIB, meters
        assert transfer.spares.largest() >= ref.nbytes
        # The same bytes again: copied and hashed into a spare, then found held already: the
        # spare is put back, nothing is written.
        held = transfer.spares.spare_bytes()
        again = ada.scatter(a.copy())
        assert again.id == ref.id
        assert transfer._maps.spare_writes == 1
        assert transfer.spares.spare_bytes() == held
        del again
        del ref
    # Closing the client deletes the spares it did not use: their memory is the host's again.
    wait_until(lambda: not [n for n in os.listdir(transfer.staging) if "-spare-" in n],
               timeout=10, what="the closed client's spares to go")


def test_an_executors_new_result_lands_in_an_arena_file(two_users):
    """Bob's first call (so his executor has no spare of its own yet) returns a new array."""
    with _client(two_users, "bob") as bob:
        bob._transfer.spares.close()  # bob's client holds none: his share is free for results
        arena = two_users.store_dir / ".arena"
        wait_until(lambda: any(st.st_size >= 6 * MIB for st in _stats(arena)), timeout=30,
                   what="an arena file for a 5 MiB result")
        # Every file the arena holds while the call runs (the filler may make the one the
        # result takes after the call started; a tmpfs inode is not reused while its file lives).
        pooled, watching = _inodes(arena), threading.Event()

        def watch():
            while not watching.is_set():
                pooled.update(_inodes(arena))
                time.sleep(0.001)
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            f = bob.submit(lambda n: np.full(n, 2.0, dtype=np.float32), 5 * MIB // 4)
            assert f.exception(timeout=CALL_SECONDS) is None  # the result stays in the store
        finally:
            watching.set()
            watcher.join()
        assert os.stat(bob._transfer.folder / f.remote_id).st_ino in pooled, \
            "the executor wrote its result into a fresh file, not an arena file"
        assert f.result().sum() == 5 * MIB // 2
        del f


def test_no_file_that_held_or_will_hold_one_users_bytes_reaches_another(two_users):
    """Arena files go one way, from the runtime's own 0700 pool into one user's folder; a
    user's files never go back. Bob cannot take a spare under ada's session, and none of the
    files bob ever gets (spares, results) is one ada had or has."""
    arena = two_users.store_dir / ".arena"
    assert stat.S_IMODE(os.stat(arena).st_mode) == 0o700
    with _client(two_users, "ada") as ada:
        folder = ada._transfer.folder
        assert _filled(ada._transfer.spares)
        adas = _files_of(ada._transfer)  # her spares: bytes she will write
        secret = np.full(4 * MIB, 7.0, dtype=np.float32)
        ref = ada.scatter(secret)
        adas |= _files_of(ada._transfer)
        assert os.stat(folder / ref.id).st_ino in adas
        ref.release()
        # A spare asked for under ada's session by bob is refused: it would land in her folder.
        with _client(two_users, "bob") as bob:
            metadata = tuple((k, v) for k, v in bob._conn.metadata if k != "bulletin-session")
            with pytest.raises(grpc.RpcError) as refused:
                bob._conn.stub.TakeArenaSpare(pb.ArenaSpareRequest(size=4 * MIB), metadata=(
                    *metadata, ("bulletin-session", ada._conn.session_id)))
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "belongs to another user" in refused.value.details()
            adas |= _files_of(ada._transfer)
            bob._transfer.spares.wait_filled(30)  # ada's spare may hold the arena: then none
            mine = bob.scatter(np.zeros(4 * MIB, dtype=np.float32))
            # A call of bob's returning a new array: the executor writes a file of bob's.
            result = bob.submit(lambda n: np.ones(n, dtype=np.float32), 3 * MIB)
            assert result.result(timeout=CALL_SECONDS).sum() == 3 * MIB
            bobs = _files_of(bob._transfer)
            assert bobs and not bobs & adas, "a file of ada's reached bob"
            assert not _files_of(ada._transfer) & bobs
            for path in [*bob._transfer.folder.iterdir(), *bob._transfer.staging.iterdir()]:
                try:
                    with open(path, "rb") as f:
                        held = f.read()
                except (FileNotFoundError, IsADirectoryError):
                    continue  # a spare taken meanwhile: its file is read under its new name
                assert b"\x00\x00\xe0\x40" * 16 not in held, "ada's bytes in bob's file"
            del mine, result
        del ref


def test_the_default_arena_is_an_eighth_of_the_store(client):
    hello = client._conn.hello
    assert hello.host_arena_bytes == hello.store_capacity_bytes // 8


def test_a_share_of_zero_keeps_no_spares(tmp_path):
    cluster = start_cluster(tmp_path / "home", "--store-arena-share", "0")
    try:
        with cluster.client(set_as_default=False) as client:
            assert client._conn.hello.arena_bytes == 0
            assert client._conn.hello.host_arena_bytes == 0
            assert not (cluster.store_dir / ".arena").exists()
            assert client._transfer.spares is None
    finally:
        cluster.stop()


def test_a_share_out_of_range_is_refused_naming_the_option(tmp_path):
    result = run_cli(tmp_path / "home", "up", "--port", str(free_port()),
                     "--store-arena-share", "0.9")
    assert result.returncode != 0
    assert "storeArenaShare must be 0..0.5" in result.stdout + result.stderr
