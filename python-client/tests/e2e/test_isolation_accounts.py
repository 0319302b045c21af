"""The attack suite with `users[].run_as` (issue 12): the runtime runs as root and starts each
user's executors as that user's own Unix account, made here with useradd. Bob's code then
cannot read alice's objects, the cluster's state folder, nor alice's executor's environment.

Needs root (useradd, and a runtime that may start processes as other accounts) and a Python the
new accounts can run with the bulletin package importable; skipped, saying which, otherwise.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import bulletin
from cluster_support import CALL_SECONDS, cli_env, start_cluster

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="run_as needs a runtime running as root, and "
                       "these tests create Unix accounts with useradd: run them as root"),
    pytest.mark.skipif(not (shutil.which("useradd") and shutil.which("setpriv")),
                       reason="needs useradd and setpriv (util-linux)"),
]

ALICE_TOKEN = "alice-token-run-as-0123456789"
BOB_TOKEN = "bob-token-run-as-0123456789"
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # python-client/


@pytest.fixture(scope="module")
def accounts():
    """Two new system accounts, removed afterwards: {"alice": (name, uid), "bob": ...}."""
    made = {}
    try:
        for user in ("alice", "bob"):
            name = f"bt{user[0]}{secrets.token_hex(4)}"
            subprocess.run(["useradd", "--system", "--no-create-home", "--user-group",
                            "--shell", "/usr/sbin/nologin", name], check=True,
                           capture_output=True, text=True)
            made[user] = (name, int(subprocess.check_output(["id", "-u", name])))
        yield made
    finally:
        for name, _ in made.values():
            subprocess.run(["userdel", name], capture_output=True)


def executor_python(account: str) -> tuple[str, str]:
    """A Python of this version that the account can run, and the PYTHONPATH under which it
    imports bulletin and its dependencies (this venv's); skips the module if there is none."""
    import numpy
    path = os.pathsep.join([str(PACKAGE_ROOT), str(Path(numpy.__file__).resolve().parents[1])])
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    tried = []
    for candidate in dict.fromkeys([sys.executable, os.path.realpath(sys.executable),
                                    f"/usr/bin/{version}", f"/usr/local/bin/{version}"]):
        if not os.path.exists(candidate):
            continue
        # Through a shell's exec: setpriv's own exec finds the program with root's rights (a
        # venv under /root would pass here and then run without its standard library); the
        # runtime refuses an interpreter the account cannot reach by itself (issue 26).
        check = subprocess.run(["setpriv", f"--reuid={account}", f"--regid={account}",
                                "--init-groups", "/bin/sh", "-c", 'exec "$0" "$@"', candidate,
                                "-c",
                                "import bulletin._runtime._executor, numpy, pyarrow, py4j, cloudpickle"],
                               env={"PYTHONPATH": path, "PATH": os.environ["PATH"]},
                               capture_output=True, text=True, cwd="/")
        if check.returncode == 0:
            return candidate, path
        tried.append(f"{candidate}: {check.stderr.strip().splitlines()[-1:]}")
    pytest.skip(f"no {version} that a new account can run imports bulletin with this venv's "
                f"packages (tried {tried})")


@pytest.fixture(scope="module")
def lab(accounts):
    python, path = executor_python(accounts["alice"][0])
    # The state folder where other accounts could reach it if bulletin let them: /tmp is 1777.
    home = Path(tempfile.mkdtemp(prefix="bulletin-run-as-"))
    config = Path(tempfile.mkdtemp(prefix="bulletin-run-as-config-")) / "cluster.yaml"
    # useradd --system made the accounts (uid below UID_MIN): the config's escape hatch for
    # accounts made for bulletin lets them be run_as.
    config.write_text(
        "allow_system_accounts: true\n"
        "users:\n"
        f"  - {{name: alice, group: lab, token: \"{ALICE_TOKEN}\", run_as: {accounts['alice'][0]}}}\n"
        f"  - {{name: bob, group: lab, token: \"{BOB_TOKEN}\", run_as: {accounts['bob'][0]}}}\n")
    env = dict(cli_env(home), PYTHONPATH=path)
    c = start_cluster(home, "--config", str(config), gpus=1, cpus=2, python=python, env=env)
    try:
        yield c
    finally:
        c.stop()
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(config.parent, ignore_errors=True)


@pytest.fixture(scope="module")
def alice(lab):
    with bulletin.Client(lab.address, token=ALICE_TOKEN, set_as_default=False) as c:
        yield c


@pytest.fixture(scope="module")
def bob(lab):
    with bulletin.Client(lab.address, token=BOB_TOKEN, set_as_default=False) as c:
        yield c


def whoami() -> tuple:
    import os
    return os.getuid(), os.geteuid(), 0 in os.getgroups(), os.getpid()


def make_bytes(n: int) -> bytes:
    return b"alice's private data " * (n // 21)


def what_bob_can_read(paths: list[str], folders: list[str]) -> list[str]:
    """Runs as bob: every file it could read and every folder it could list."""
    import os
    got = []
    for path in paths:
        try:
            with open(path, "rb") as f:
                f.read(16)
            got.append(f"read {path}")
        except OSError:
            pass
    for folder in folders:
        try:
            os.listdir(folder)
            got.append(f"listed {folder}")
        except OSError:
            pass
    return got


def test_each_users_executors_run_as_their_account(accounts, alice, bob):
    for gpus in (0, 1):
        for client, user in ((alice, "alice"), (bob, "bob")):
            uid, euid, in_root_group, _ = client.submit(whoami, gpus=gpus).result(
                timeout=CALL_SECONDS)
            assert (uid, euid, in_root_group) == (accounts[user][1], accounts[user][1], False)


def test_a_users_store_folders_give_her_her_objects_and_nothing_to_swap(lab, accounts, alice):
    kept = alice.submit(make_bytes, 4 << 20)
    assert kept.exception(timeout=CALL_SECONDS) is None
    # Published objects: a folder of the runtime's (root), passable but not listable, in which
    # alice can neither add nor swap a name; each of her objects is hers to read, alone.
    objects = (lab.store_dir / "alice").stat()
    assert (objects.st_uid, stat.S_IMODE(objects.st_mode)) == (0, 0o711)
    published = (lab.store_dir / "alice" / kept.remote_id).stat()
    assert (published.st_uid, stat.S_IMODE(published.st_mode)) == (accounts["alice"][1], 0o600)
    # What she writes goes to her staging folder, hers alone.
    staging = (lab.store_dir / "alice" / ".staging").stat()
    assert (staging.st_uid, stat.S_IMODE(staging.st_mode)) == (accounts["alice"][1], 0o700)


def test_bob_cannot_read_alices_objects_the_clusters_state_or_alices_environment(lab, alice,
                                                                                  bob):
    kept = alice.submit(make_bytes, 4 << 20)  # large: it stays in the store, in alice's folder
    assert kept.exception(timeout=CALL_SECONDS) is None  # done, not fetched: still held
    alices_file = lab.store_dir / "alice" / kept.remote_id
    assert alices_file.exists()
    _, _, _, alices_pid = alice.submit(whoami).result(timeout=CALL_SECONDS)
    paths = [str(alices_file), str(lab.home / "token"), str(lab.home / "worker-token"),
             f"/proc/{alices_pid}/environ", f"/proc/{lab.pid}/environ"]
    folders = [str(lab.store_dir), str(lab.store_dir / "alice"), str(lab.home)]
    assert bob.submit(what_bob_can_read, paths, folders).result(timeout=CALL_SECONDS) == []
    # Alice herself reads her object, so the refusals above are bob's, not everyone's.
    assert alice.submit(what_bob_can_read, [str(alices_file)], []).result(
        timeout=CALL_SECONDS) == [f"read {alices_file}"]
