"""Client and runtime on two "hosts": network namespaces joined by a veth pair. The client
cannot see the runtime's store (another network namespace, another host id), so every object
crosses the link through the runtime's bulk data port (raw TCP, CRC32C-checked)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cluster_support import REPO, cli_env, staged_files

sys.path.insert(0, str(REPO / "examples"))
import _netns  # noqa: E402

pytestmark = pytest.mark.timeout(180)

CLIENT = textwrap.dedent("""
    import gc, json, os, sys, time
    import numpy as np
    import bulletin

    client = bulletin.Client(os.environ["TARGET"], token=os.environ["TARGET_TOKEN"],
                             connect_timeout=10)
    out = {"same_host": client._transfer.same_host}
    a = np.random.default_rng(3).random(5 << 20)  # 40 MiB: 40 chunks each way
    client._transfer.corrupt_next_chunk = True
    value = client.submit(lambda x: x * 2, a).result(timeout=60)
    out["round_trip_ok"] = bool(np.array_equal(value, a * 2))
    out["path"] = client._transfer.last_path
    out["corruption_sent"] = not client._transfer.corrupt_next_chunk
    out["resends"] = client._transfer.resends
    uploads = client._transfer.uploads
    ref = client.scatter(a)
    out["scatter_uploaded"] = client._transfer.uploads - uploads  # already there: 0
    out["sums"] = [client.submit(lambda x, k: float(x[k]), ref, k).result(timeout=60)
                   for k in (0, 1)] == [float(a[0]), float(a[1])]
    first = client.submit(lambda n: np.ones(n), 1 << 20)
    out["future_arg"] = client.submit(lambda x: float(x.sum()), first).result(timeout=60)
    out["first_not_fetched"] = first.remote_id is not None
    del value, ref, first, a
    gc.collect()
    time.sleep(0.5)
    out["referenced_before_close"] = client.status().store["referenced"]
    client.close()
    print(json.dumps(out))
""")


BURST = textwrap.dedent("""
    import json, os, time
    import bulletin
    from bulletin import _leases

    client = bulletin.Client(os.environ["TARGET"], token=os.environ["TARGET_TOKEN"],
                             connect_timeout=10)

    def shout(x):
        print("value", x)
        return 2 * x

    # Two calls first, too few to ask for a lease, so the executors hold the function when
    # the burst comes: on a slow machine a fresh executor's first calls took 0.4 s each and
    # the lease call queued behind the burst's first calls (its calls wait for it, up to
    # QUEUED_FALLBACK_SECONDS; they went to the runtime after half a second before).
    client.gather(client.map(shout, range(2)))
    time.sleep(2 * _leases.TRIGGER_SECONDS)
    futures = client.map(shout, range(300))
    leases = client._submitter.leases
    out = {"results": [f.result(timeout=60) for f in futures] == [2 * i for i in range(300)],
           "outputs": all(f.output == f"value {i}\\n" for i, f in enumerate(futures)),
           "tls": leases._tls is not None, "leased": leases.connections > 0}
    client.close()
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def two_hosts():
    why = _netns.available()
    if why:
        pytest.skip(f"cannot make network namespaces here: {why}")
    with _netns.two_hosts() as hosts:
        yield hosts


@contextlib.contextmanager
def runtime_on_server(server_ns, home: Path, port: int):
    """`bulletin up` in the server's namespace, listening on every address; yields its env."""
    env = cli_env(home)
    up = subprocess.run(_netns.in_ns(server_ns, [
        sys.executable, "-m", "bulletin._cli", "up", "--host", "0.0.0.0", "--port", str(port),
        "--simulate-gpus", "1", "--cpus", "2"]), env=env, capture_output=True, text=True,
        timeout=120)
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        yield env
    finally:
        subprocess.run(_netns.in_ns(server_ns, [sys.executable, "-m", "bulletin._cli", "down"]),
                       env=env, capture_output=True, timeout=60)


def run_client(client_ns, env, home: Path, port: int, script: str) -> dict:
    """Runs ``script`` in the client's namespace against the runtime; its last line's JSON."""
    token = (home / "token").read_text().strip()
    run = subprocess.run(_netns.in_ns(client_ns, [sys.executable, "-c", script]),
                         env=dict(env, TARGET=f"{_netns.SERVER_IP}:{port}", TARGET_TOKEN=token),
                         capture_output=True, text=True, timeout=150)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_objects_cross_between_namespaces_through_the_data_port(two_hosts, tmp_path):
    server_ns, client_ns = two_hosts
    with runtime_on_server(server_ns, tmp_path, 18772) as env:
        out = run_client(client_ns, env, tmp_path, 18772, CLIENT)
        assert out == {"same_host": False, "round_trip_ok": True, "path": "bulk",
                       "corruption_sent": True, "resends": 1,
                       "scatter_uploaded": 0, "sums": True, "future_arg": float(1 << 20),
                       "first_not_fetched": True, "referenced_before_close": 4}, out
        # (what stays referenced before close is the session's four functions)
        store = json.loads((tmp_path / "runtime.json").read_text())["store_dir"]
        assert staged_files(Path(store)) == []


def test_a_burst_from_another_host_runs_on_a_lease_over_tls(two_hosts, tmp_path):
    # The lease's executor, on the runtime's host, connects back to the client's address on
    # the route between them, over TLS pinned to the client's own certificate.
    server_ns, client_ns = two_hosts
    with runtime_on_server(server_ns, tmp_path, 18773) as env:
        out = run_client(client_ns, env, tmp_path, 18773, BURST)
        assert out == {"results": True, "outputs": True, "tls": True, "leased": True}, out
