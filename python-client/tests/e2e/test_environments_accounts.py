"""pip=[...] environments under users[].run_as (issue 15, part 3, security): each account's
environments are built by that account, in a cache folder only it can write, so one user's
build neither runs as another account nor lands where another user's calls would load it.

Needs root (useradd, run_as); skipped otherwise, like test_isolation_accounts.py whose helpers
it uses.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

import bulletin
from cluster_support import cli_env, start_cluster
from test_environments import make_wheel
from test_isolation_accounts import (ALICE_TOKEN, BOB_TOKEN, accounts,  # noqa: F401 (fixture)
                                     executor_python, pytestmark)

pytestmark = pytestmark + [pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def lab(accounts):  # noqa: F811
    python, path = executor_python(accounts["alice"][0])
    home = Path(tempfile.mkdtemp(prefix="bulletin-envs-run-as-"))
    cache = Path(tempfile.mkdtemp(prefix="bulletin-env-cache-"))
    wheels = Path(tempfile.mkdtemp(prefix="bulletin-wheels-"))
    for folder in (cache, wheels):
        folder.chmod(0o755)  # the accounts must get through to their own folders
    make_wheel(wheels, "tinyshared", "1.0", "import os\nVALUE = 'shared'\n")
    for wheel in wheels.iterdir():
        wheel.chmod(0o644)
    config = home / "cluster.yaml"
    # useradd --system made the accounts (uid below UID_MIN): the config's escape hatch for
    # accounts made for bulletin lets them be run_as.
    config.write_text(
        "allow_system_accounts: true\n"
        "users:\n"
        f"  - {{name: alice, group: lab, token: \"{ALICE_TOKEN}\", run_as: {accounts['alice'][0]}}}\n"
        f"  - {{name: bob, group: lab, token: \"{BOB_TOKEN}\", run_as: {accounts['bob'][0]}}}\n")
    env = dict(cli_env(home), PYTHONPATH=path, BULLETIN_ENV_CACHE=str(cache))
    c = start_cluster(home, "--config", str(config), gpus=1, cpus=2, python=python, env=env)
    c.env_cache, c.wheels = cache, wheels
    try:
        yield c
    finally:
        c.stop()
        for folder in (home, cache, wheels):
            shutil.rmtree(folder, ignore_errors=True)


def where_and_who():
    import os
    import sys

    import tinyshared
    return tinyshared.VALUE, sys.prefix, os.getuid()


def tamper(prefix: str) -> list[str]:
    """Runs as bob: what of an environment folder it could change or read."""
    import os
    done = []
    for action, attempt in (("listed", lambda: os.listdir(prefix)),
                            ("wrote", lambda: open(os.path.join(prefix, "evil.pth"), "w").close())):
        try:
            attempt()
            done.append(action)
        except OSError:
            pass
    return done


def test_each_account_builds_its_own_environment_that_others_cannot_change(lab, accounts):
    pip = ["--no-index", f"--find-links={lab.wheels}", "tinyshared"]
    with bulletin.Client(lab.address, token=ALICE_TOKEN, set_as_default=False) as alice, \
            bulletin.Client(lab.address, token=BOB_TOKEN, set_as_default=False) as bob:
        value, alice_prefix, uid = alice.submit(where_and_who, pip=pip).result(timeout=240)
        assert (value, uid) == ("shared", accounts["alice"][1])
        value, bob_prefix, uid = bob.submit(where_and_who, pip=pip).result(timeout=240)
        assert (value, uid) == ("shared", accounts["bob"][1])
        # The same pip= list, yet two environments: one per account, each built by it.
        assert alice_prefix != bob_prefix
        for prefix, user in ((alice_prefix, "alice"), (bob_prefix, "bob")):
            folder = Path(prefix)
            assert folder.parent == lab.env_cache / f"uid-{accounts[user][1]}"
            assert folder.stat().st_uid == accounts[user][1]  # built as that account
            assert folder.parent.stat().st_uid == accounts[user][1]
            assert stat.S_IMODE(folder.parent.stat().st_mode) == 0o700
        assert bob.submit(tamper, alice_prefix).result(timeout=60) == []
        assert alice.submit(tamper, alice_prefix).result(timeout=60) == ["listed", "wrote"]
        os.unlink(os.path.join(alice_prefix, "evil.pth"))
