"""Pre-faulted spare files against a real cluster: the first large write after connecting lands
in one, each user's spares stay in that user's own store folder, and the share can be off."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

import bulletin
from cluster_support import CALL_SECONDS, free_port, run_cli, start_cluster

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
    # 256 MiB store, a quarter of it pre-faulted per client: up to 64 MiB of spares.
    cluster = start_cluster(home / "home", "--store-capacity", str(256 * MIB),
                            "--store-arena-share", "0.25", "--config", str(config))
    try:
        yield cluster
    finally:
        cluster.stop()


def _client(cluster, who: str) -> bulletin.Client:
    return bulletin.Client(cluster.address, token=f"{who}-token-0123456789",
                           set_as_default=False)


def test_the_first_large_write_after_connecting_lands_in_a_spare(two_users):
    with _client(two_users, "ada") as ada:
        transfer = ada._transfer
        assert transfer.same_host and transfer.spares is not None
        assert transfer.spares.wait_filled(30)
        assert transfer.spares.spare_bytes() >= 32 * MIB  # a ladder within the 64 MiB
        a = np.random.default_rng(3).random(4 * MIB, dtype=np.float32)  # 16 MiB
        ref = ada.scatter(a)
        assert transfer._maps.spare_writes == 1, "the first write did not take a spare"
        assert ada.submit(total, ref).result(timeout=CALL_SECONDS) == pytest.approx(
            float(a.sum()), rel=1e-5)
        # The object is an ordinary store file: the writer's alone, no other link.
        st = os.stat(transfer.folder / ref.id)
        assert st.st_size == ref.nbytes and st.st_nlink == 1
        assert stat.S_IMODE(st.st_mode) == 0o600
        # The spare taken is made again in the background, the size of the write.
        assert transfer.spares.wait_filled(30)
        del ref


def test_each_users_spares_stay_in_that_users_folder(two_users):
    """A spare is an anonymous file of the writer's own process in the writer's own folder:
    ada's memory never becomes bob's object, nor bob's ada's."""
    with _client(two_users, "ada") as ada, _client(two_users, "bob") as bob:
        assert ada._transfer.folder != bob._transfer.folder
        assert ada._transfer.spares.folder == ada._transfer.folder
        assert bob._transfer.spares.folder == bob._transfer.folder
        for client in (ada, bob):
            assert client._transfer.spares.wait_filled(30)
            assert stat.S_IMODE(os.stat(client._transfer.folder).st_mode) == 0o700
            # No name until it holds an object: nothing in the folder to open.
            assert not [n for n in os.listdir(client._transfer.folder) if n.startswith(".")]
        secret = np.full(4 * MIB, 7.0, dtype=np.float32)
        ref = ada.scatter(secret)
        ada_inode = os.stat(ada._transfer.folder / ref.id).st_ino
        ref.release()
        spare_writes = bob._transfer._maps.spare_writes
        mine = bob.scatter(np.zeros(4 * MIB, dtype=np.float32))
        assert bob._transfer._maps.spare_writes == spare_writes + 1
        bob_file = bob._transfer.folder / mine.id
        assert os.stat(bob_file).st_ino != ada_inode
        assert bob.submit(total, mine).result(timeout=CALL_SECONDS) == 0.0
        # A write of bob's with no spare of its size (the spare is a fresh, zeroed file):
        # bob's zeros stay zeros, and none of ada's bytes show up in bob's files.
        with open(bob_file, "rb") as f:
            assert b"\x00\x00\xe0\x40" * 16 not in f.read()  # 7.0f, ada's bytes
        del mine


def test_a_share_of_zero_keeps_no_spares(tmp_path):
    cluster = start_cluster(tmp_path / "home", "--store-arena-share", "0")
    try:
        with cluster.client(set_as_default=False) as client:
            assert client._conn.hello.arena_bytes == 0
            assert client._transfer.spares is None
    finally:
        cluster.stop()


def test_a_share_out_of_range_is_refused_naming_the_option(tmp_path):
    result = run_cli(tmp_path / "home", "up", "--port", str(free_port()),
                     "--store-arena-share", "0.9")
    assert result.returncode != 0
    assert "storeArenaShare must be 0..0.5" in result.stdout + result.stderr
