"""Root stays root's (issue 26): the attacks a hostile user of a run_as cluster made, each from
inside her own calls or with her own client and a few lines of Python, against a runtime that
runs as root. Before the fix each one read or took a root-owned file, or filled the store for
everyone; now each is refused, by name, and the cluster keeps serving.

Needs root (useradd, run_as, a share of the store mounted per user); skipped otherwise, like
test_isolation_accounts.py whose helpers it uses.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import grpc
import numpy as np
import pytest

import bulletin
from bulletin._proto import bulletin_pb2 as pb
from cluster_support import CALL_SECONDS, cli_env, start_cluster
# accounts, alice and bob are fixtures (alice and bob connect to this module's lab).
from test_isolation_accounts import (ALICE_TOKEN, BOB_TOKEN, accounts, alice, bob,  # noqa: F401
                                     executor_python, pytestmark)

SHARE = 192 << 20  # each user's share of the store (--store-user-share)


@pytest.fixture(scope="module")
def lab(accounts):  # noqa: F811
    python, path = executor_python(accounts["alice"][0])
    home = Path(tempfile.mkdtemp(prefix="bulletin-privilege-"))
    config = home / "cluster.yaml"
    config.write_text(
        "allow_system_accounts: true\n"  # useradd --system made them
        "users:\n"
        f"  - {{name: alice, group: lab, token: \"{ALICE_TOKEN}\", run_as: {accounts['alice'][0]}}}\n"
        f"  - {{name: bob, group: lab, token: \"{BOB_TOKEN}\", run_as: {accounts['bob'][0]}}}\n")
    env = dict(cli_env(home), PYTHONPATH=path)
    c = start_cluster(home, "--config", str(config), "--store-capacity", str(4 * SHARE),
                      "--store-user-share", str(SHARE), gpus=1, cpus=2, python=python, env=env)
    try:
        yield c
    finally:
        c.stop()
        shutil.rmtree(home, ignore_errors=True)


def swap_for_link(path: str, target: str) -> str:
    """Runs as alice: replaces one of her published objects with a link to ``target``."""
    import os
    try:
        os.unlink(path)
        os.symlink(target, path)
        return "swapped"
    except OSError as e:
        return f"refused: {e.strerror}"


def plant(staging: str, prefix: str, target: str) -> list[str]:
    """Runs as alice: puts in her staging folder, under her session's prefix, what the runtime
    must never take for an object: a link to ``target``, a FIFO, a folder, a hard link."""
    import os
    names = []
    for kind in ("link", "fifo", "folder", "hardlink"):
        path = os.path.join(staging, f"{prefix}{kind}")
        if kind == "link":
            os.symlink(target, path)
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "folder":
            os.mkdir(path)
            os.symlink(target, os.path.join(path, "inside"))
        else:
            other = os.path.join(staging, f"{prefix}original")
            with open(other, "wb") as f:
                f.write(b"alice's own bytes")
            os.link(other, path)
        names.append(os.path.basename(path))
    return names


def fill(staging: str) -> int:
    """Runs as alice: writes zeros straight into her staging folder until it is full (what
    `dd` does, past the store's back), then gives 4 MiB back so that this call's own small
    result can still be stored; returns the bytes kept."""
    import os
    path, written, chunk = os.path.join(staging, "junk"), 0, b"\0" * (1 << 20)
    with open(path, "wb") as f:
        try:
            while True:
                f.write(chunk)
                f.flush()
                written += len(chunk)
        except OSError:
            pass
    os.truncate(path, written - (4 << 20))
    return written - (4 << 20)


def remove(path: str) -> None:
    import os
    os.unlink(path)


def total(a) -> float:
    return float(a.sum())


def test_a_published_object_cannot_be_swapped_for_a_link_to_a_secret(lab, alice):
    ref = alice.scatter(np.arange(1 << 20, dtype=np.float32))  # 4 MiB: a store file
    published = str(lab.store_dir / "alice" / ref.id)
    said = alice.submit(swap_for_link, published, str(lab.home / "token")).result(
        timeout=CALL_SECONDS)
    assert said.startswith("refused"), said
    # Passed to her next call (where the agent once chowned the call's files by name), the
    # object is still hers, and the token still root's.
    assert alice.submit(total, ref).result(timeout=CALL_SECONDS) == float(
        np.arange(1 << 20, dtype=np.float32).sum())
    assert (lab.home / "token").stat().st_uid == 0


def test_a_staged_link_fifo_folder_or_hard_link_is_refused_by_name(lab, alice):
    session = alice._conn.session_id
    staging = str(lab.store_dir / "alice" / ".staging")
    prefix = f".stage-{session}-"
    names = alice.submit(plant, staging, prefix, str(lab.home / "token")).result(
        timeout=CALL_SECONDS)
    kinds = {"link": "a symbolic link", "fifo": "a FIFO", "folder": "a folder",
             "hardlink": "2 hard links"}
    for name in names:
        oid = "%032x" % (abs(hash(name)) % (1 << 64))
        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as refused:
            alice._conn.stub.AdoptObject(pb.AdoptObjectRequest(id=oid, size=1, staged_name=name),
                                         metadata=alice._conn.metadata, timeout=30)
        assert time.monotonic() - started < 10  # a FIFO does not hang the runtime
        details = refused.value.details()
        assert kinds[name.rsplit("-", 1)[1]] in details and oid in details, details
        assert "owner-token" not in details
    # Nothing planted was published, and the runtime goes on serving her and everyone.
    assert alice.submit(total, np.ones(1 << 20, dtype=np.float32)).result(
        timeout=CALL_SECONDS) == float(1 << 20)


def test_filling_a_share_behind_the_stores_back_fails_only_that_user_and_says_why(lab, alice,
                                                                                  bob):
    staging = str(lab.store_dir / "alice" / ".staging")
    written = alice.submit(fill, staging).result(timeout=CALL_SECONDS)
    assert SHARE // 2 < written <= SHARE
    try:
        # Bob's upload and call are as they would be on an empty store.
        data = np.random.default_rng(1).random(8 << 20, dtype=np.float32)  # 32 MiB
        assert bob.submit(total, data).result(timeout=CALL_SECONDS) == pytest.approx(
            float(data.sum()), rel=1e-5)
        # Alice's is refused at once, naming her use and her share; not a lost runtime.
        started = time.monotonic()
        with pytest.raises(bulletin.StoreFullError, match=r"share.*MiB"):
            alice.scatter(data)
        assert time.monotonic() - started < 20
    finally:
        alice.submit(remove, staging + "/junk").result(timeout=CALL_SECONDS)
    ref = alice.scatter(data)
    assert alice.submit(total, ref).result(timeout=CALL_SECONDS) == pytest.approx(
        float(data.sum()), rel=1e-5)


FIRST_WRITE = """
import json, os, sys
import numpy as np
import bulletin
from bulletin._data._objects import encode
with bulletin.Client(sys.argv[1], token=sys.argv[2], set_as_default=False) as client:
    transfer = client._transfer
    spares = transfer.spares
    if spares is not None:
        spares.wait_filled(60)
    used = lambda: os.statvfs(transfer.staging).f_bfree
    free_before = used()
    transfer.acquire(encode(np.ones(4 << 20, dtype=np.float32)))  # 16 MiB
    print(json.dumps({"same_host": transfer.same_host, "spares": spares is not None,
                      "into_spare": transfer._maps.spare_writes,
                      "uid": os.getuid(), "free_blocks_before": free_before}))
"""


def test_a_client_of_a_run_as_account_writes_its_first_object_into_a_spare_of_its_share(
        lab, accounts):
    """Without a host arena (its files cannot be renamed into a share of its own), a same-host
    client of a run_as user pre-faults spares itself, inside its share: its first large write
    is a copy into memory already faulted, not a page fault per 4 KiB."""
    account, uid = accounts["alice"]
    python, path = executor_python(account)
    child = subprocess.run(
        ["setpriv", f"--reuid={account}", f"--regid={account}", "--init-groups", "/bin/sh",
         "-c", 'exec "$0" "$@"', python, "-c", FIRST_WRITE, lab.address, ALICE_TOKEN],
        env={"PYTHONPATH": path, "PATH": os.environ["PATH"]}, cwd="/", capture_output=True,
        text=True, timeout=CALL_SECONDS * 2)
    assert child.returncode == 0, child.stderr
    said = json.loads(child.stdout.strip().splitlines()[-1])
    assert said["uid"] == uid and said["same_host"], said
    assert said["spares"] and said["into_spare"] == 1, said
    # The spares counted in her share: before the write, her file system had less than all of
    # it free.
    share_blocks = SHARE // os.statvfs(lab.store_dir / "alice").f_frsize
    assert said["free_blocks_before"] < share_blocks, said
