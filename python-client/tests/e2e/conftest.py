"""End-to-end fixtures: a real cluster started with the real `bulletin up`.

One cluster serves the whole session (`cluster`, `client`): the runtime JVM with its embedded
worker agent, `--simulate-gpus 1 --cpus 2`, on a free port, with its state in a temporary
BULLETIN_HOME. It is stopped with `bulletin down` at the end of the session, and killed if that
fails. Tests that must stop or break a cluster start their own with `start_cluster()`.

The one fake is the GPU (simulated: this machine has none), as the project's rules allow.

Functions defined at module level in a test module are pickled by value (the executors cannot
import the test modules), see `_pickle_test_module_by_value`.
"""

from __future__ import annotations

import gc
import os
import time

import cloudpickle
import pytest

from cluster_support import (Cluster, cli_env, referenced_objects,
                             remove_dead_worker_stores, staged_files, start_cluster, wait_until)

# Every runtime the tests start serves its dashboard and /metrics on a free port: suites run
# side by side on one machine, and the default 8780 can be taken (tests that need a known HTTP
# port pass --http-port themselves).
os.environ.setdefault("BULLETIN_HTTP_PORT", "0")


@pytest.fixture(scope="session", autouse=True)
def _no_dead_worker_stores():
    """Workers the runtimes under test stop with SIGKILL (a pool's worker past its grace, one
    whose runtime was killed) cannot remove their stores: remove those this session left."""
    started = time.time()
    yield
    remove_dead_worker_stores(since=started)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory) -> Cluster:
    home = tmp_path_factory.mktemp("bulletin-home")
    # Tests kill clients and check that what they held goes: a short reconnect window ends
    # their sessions soon (test_reconnect.py tests the window itself).
    c = start_cluster(home, env={**cli_env(home), "BULLETIN_RECONNECT_WINDOW": "2"})
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="session")
def client(cluster):
    """The session's client; it is also the default client of @bulletin.gpu functions."""
    c = cluster.client()
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(autouse=True)
def _cluster_environment(request, monkeypatch):
    """Points address/token resolution at the session cluster, and makes its client the default.

    Only for tests that use the session cluster: the others (e.g. a second cluster) get a
    clean environment for their own BULLETIN_HOME.
    """
    for name in ("BULLETIN_ADDRESS", "BULLETIN_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    if "client" in request.fixturenames:
        cluster = request.getfixturevalue("cluster")
        client = request.getfixturevalue("client")
        monkeypatch.setenv("BULLETIN_HOME", str(cluster.home))
        from bulletin import _client
        _client._set_default(client)


@pytest.fixture(autouse=True)
def _store_leak_check(request):
    """After every test on the session cluster, the store holds what it held before: the
    objects some call, future, ref or session still references come back to their count (plus
    one per function the session client sent for the first time: sessions keep functions), and
    no staged or temporary file is left."""
    if "client" not in request.fixturenames:
        yield
        return
    client = request.getfixturevalue("client")
    cluster = request.getfixturevalue("cluster")
    before = referenced_objects(client)
    functions_before = set(client._submitter.sent_functions)
    yield
    gc.collect()  # futures and refs the test dropped release their objects
    expected = before + len(set(client._submitter.sent_functions) - functions_before)
    try:
        wait_until(lambda: referenced_objects(client) == expected, timeout=10,
                   what=f"the store to hold {expected} referenced objects again")
    except AssertionError as leak:  # the runtime's account of what happened, for a rare race
        raise AssertionError(f"{leak} (it holds {referenced_objects(client)}); the runtime log"
                             f" ends with:\n{cluster.log_tail(60)}") from None
    assert staged_files(cluster.store_dir) == []


@pytest.fixture(autouse=True)
def _pickle_test_module_by_value(request):
    # The executors cannot import test modules; cloudpickle ships their functions by value, as
    # it does for a notebook's functions.
    cloudpickle.register_pickle_by_value(request.module)


