"""Remote workers: `bulletin worker --head ADDR` attaches real worker agents to a real runtime.

The runtime offers no GPU of its own (`--simulate-gpus 0`), so every GPU call must run on an
attached worker; each worker is the real command in its own process, with its own object store.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import bulletin
from cluster_support import (CALL_SECONDS, Cluster, assert_serves, cli_env, pid_gone,
                             remove_dead_worker_stores, start_cluster, wait_for_file, wait_until)

ATTACH_SECONDS = 60


class Worker:
    """A `bulletin worker` process; stopped (SIGKILL if needed) by the fixture that made it."""

    def __init__(self, cluster: Cluster, worker_id: str, *extra: str, env: dict | None = None):
        self.worker_id = worker_id
        self.log = cluster.home / f"worker-{worker_id}.log"
        command = [sys.executable, "-m", "bulletin", "worker", "--head", cluster.address,
                   "--worker-id", worker_id, "--cpus", "1", *extra]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(command, env=env or cli_env(cluster.home), stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    @property
    def store(self) -> Path:
        """Its object store (the default folder: these tests give no --store-dir)."""
        return Path("/dev/shm") / f"bulletin-worker-{self.worker_id}-{self.proc.pid}"

    def kill(self) -> None:
        """SIGKILL, as a crash would; its store, which it had no chance to remove, goes too."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        remove_dead_worker_stores(f"{self.worker_id}-{self.proc.pid}")


def number(text):
    """int, with a signature bulletin can read (it refuses to guess for builtins)."""
    return int(text)


def attached(client: bulletin.Client, worker_id: str):
    return next((w for w in client.status().workers if w.worker_id == worker_id), None)


def detached(client: bulletin.Client, worker_id: str) -> bool:
    return attached(client, worker_id) is None


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    home = tmp_path_factory.mktemp("bulletin-head")
    # Killed workers here are gone for good: their calls need no grace period to come back.
    c = start_cluster(home, gpus=0, cpus=1, env={**cli_env(home), "BULLETIN_WORKER_GRACE": "0",
                                                 "BULLETIN_LINK_LOSS_GRACE": "0"})
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def head_client(head):
    c = head.client()
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def workers(head, head_client):
    started: list[Worker] = []

    def start(worker_id: str, *extra: str, wait: bool = True, env: dict | None = None) -> Worker:
        worker = Worker(head, worker_id, *extra, env=env)
        started.append(worker)
        if wait:
            wait_until(lambda: attached(head_client, worker_id) or worker.proc.poll() is not None,
                       timeout=ATTACH_SECONDS, what=f"worker {worker_id} to attach")
            assert worker.proc.poll() is None, worker.output()
        return worker

    yield start
    for worker in started:
        worker.kill()
    for worker in started:
        wait_until(lambda: detached(head_client, worker.worker_id), timeout=30,
                   what=f"worker {worker.worker_id} to detach")


def test_gpu_calls_run_on_the_attached_worker_with_output_objects_and_errors(head_client, workers):
    workers("gpu-a", "--simulate-gpus", "1")
    status = attached(head_client, "gpu-a")
    assert status.remote and status.gpus.total == 1 and status.state == "ready"

    lines = []

    def shout(n):
        print("hello from", os.environ.get("CUDA_VISIBLE_DEVICES"))
        return n * 2

    future = head_client.submit(shout, 21, gpus=1)
    future.add_done_callback(lambda f: lines.append(f.output))
    assert future.result(timeout=CALL_SECONDS) == 42
    assert future.placement.worker_id == "gpu-a"
    assert "hello from 0" in future.output

    # Objects above the inline limit go both ways through the worker's own store.
    big = os.urandom(3 << 20)
    assert head_client.submit(lambda b: b[::-1], big, gpus=1).result(timeout=CALL_SECONDS) \
        == big[::-1]

    def boom():
        raise KeyError("remote boom")

    with pytest.raises(KeyError, match="remote boom"):
        head_client.submit(boom, gpus=1).result(timeout=CALL_SECONDS)
    # The second call to a function reuses the worker's warm executor.
    pids = {head_client.submit(os.getpid, gpus=1).result(timeout=CALL_SECONDS) for _ in range(3)}
    assert len(pids) == 1


def test_a_killed_worker_fails_its_call_naming_the_worker_and_the_cluster_serves_on(
        head, head_client, workers, tmp_path):
    worker = workers("gpu-b", "--simulate-gpus", "1")
    gate = str(tmp_path / "never")
    future = head_client.submit(wait_for_file, gate, 60, gpus=1)
    wait_until(lambda: future.status == "running", timeout=CALL_SECONDS, what="call to start")
    worker.kill()
    with pytest.raises(bulletin.WorkerLostError, match="gpu-b") as raised:
        future.result(timeout=CALL_SECONDS)
    assert "retries=" in str(raised.value)
    wait_until(lambda: detached(head_client, "gpu-b"), timeout=CALL_SECONDS, what="detach")
    # GPU calls now wait (no worker has a GPU) and CPU calls still run on the head's worker.
    assert head_client.submit(int, "7").result(timeout=CALL_SECONDS) == 7
    workers("gpu-c", "--simulate-gpus", "1")
    assert_serves(head_client)


def test_a_killed_worker_leaves_no_store_behind(workers):
    worker = workers("doomed", "--simulate-gpus", "1")
    assert worker.store.is_dir()
    worker.kill()
    assert not worker.store.exists()


def test_a_call_with_retries_runs_again_on_the_next_worker(head_client, workers, tmp_path):
    first = workers("gpu-d", "--simulate-gpus", "1")

    def worker_name(gate):
        import os
        import time
        deadline = time.monotonic() + 60
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.02)
        return os.environ["BULLETIN_EXECUTOR_ID"]

    gate = tmp_path / "gate"
    future = head_client.submit(worker_name, str(gate), gpus=1, retries=1)
    wait_until(lambda: future.status == "running", timeout=CALL_SECONDS, what="call to start")
    first.kill()
    wait_until(lambda: future.status == "queued" or future.done(), timeout=CALL_SECONDS,
               what="call requeued")
    assert not future.done(), future.exception()
    workers("gpu-e", "--simulate-gpus", "1")
    gate.touch()
    assert future.result(timeout=CALL_SECONDS).startswith("gpu-e")
    assert future.placement.worker_id == "gpu-e"


def test_a_worker_is_refused_with_a_wrong_token_a_user_token_or_a_taken_id(head, workers):
    env = cli_env(head.home)
    env["BULLETIN_WORKER_TOKEN"] = "made-up"
    wrong = workers("bad-token", env=env, wait=False)
    assert wrong.proc.wait(timeout=ATTACH_SECONDS) == 3
    assert "not known to this cluster" in wrong.output()

    env["BULLETIN_WORKER_TOKEN"] = head.token  # a user's token cannot attach a worker
    user = workers("user-token", env=env, wait=False)
    assert user.proc.wait(timeout=ATTACH_SECONDS) == 3
    assert "only worker agents attach" in user.output()

    workers("twin")
    twin = workers("twin", wait=False)
    assert twin.proc.wait(timeout=ATTACH_SECONDS) == 3
    assert "already attached" in twin.output()


def test_the_worker_token_cannot_submit_calls(head):
    token = (head.home / "worker-token").read_text().strip()
    with pytest.raises(bulletin.AuthenticationError, match="worker token"):
        bulletin.Client(head.address, token=token)


def test_a_worker_whose_allocation_ends_soon_drains(head_client, workers):
    # The runtime's drain margin is 60 s: a worker ending in 30 s takes no call without a
    # timeout, and shows as draining.
    workers("short", "--simulate-gpus", "1", "--expires-at", f"{time.time() + 30:.0f}")
    assert attached(head_client, "short").state == "draining"
    future = head_client.submit(number, "5", gpus=1)
    # Before the scheduler explains it (a call queued for a moment is not), the status says
    # what it can tell from the workers alone.
    wait_until(lambda: any("stays up" in q.reason for q in head_client.status().queue),
               timeout=CALL_SECONDS, what="the scheduler's reason in the status")
    info = wait_until(lambda: future.wait_info, timeout=CALL_SECONDS, what="the wait reason")
    assert "stays up" in info.reason and info.position == 1
    # A call whose timeout fits in the time left may still go there.
    assert head_client.submit(number, "6", gpus=1, timeout=5).result(timeout=CALL_SECONDS) == 6
    future.cancel()


def test_bulletin_worker_help_and_bad_arguments(head):
    from cluster_support import run_cli
    helped = run_cli(head.home, "worker", "--help", timeout=30)
    assert helped.returncode == 0 and "--head" in helped.stdout and "worker token" in helped.stdout
    bad = run_cli(head.home, "worker", "--head", "nohostport", timeout=30)
    assert bad.returncode == 2 and "HOST:PORT" in bad.stderr
    path = run_cli(head.home, "worker", "--head", head.address, "--data-path", "carrier-pigeon",
                   timeout=30)
    assert path.returncode == 2 and "--data-path" in path.stderr and "carrier-pigeon" in \
        path.stderr, path.stderr
    # The jar's own check, for BULLETIN_DATA_PATH (and a worker started without the CLI).
    env = dict(cli_env(head.home), BULLETIN_DATA_PATH="carrier-pigeon")
    jar = run_cli(head.home, "worker", "--head", head.address, "--cpus", "1", timeout=60,
                  env=env)
    assert jar.returncode != 0 and "BULLETIN_DATA_PATH" in jar.stderr, jar.stderr
    unreachable = run_cli(head.home, "worker", "--head", "127.0.0.1:1", "--cpus", "1", timeout=90)
    assert unreachable.returncode == 3 and "cannot reach the runtime at 127.0.0.1:1" in \
        unreachable.stderr


def test_a_call_whose_executor_dies_runs_again_when_it_has_retries(head_client, tmp_path):
    marker = str(tmp_path / "died-once")

    def die_the_first_time(path):
        import os
        if not os.path.exists(path):
            open(path, "w").close()
            os._exit(9)
        return "second attempt"

    future = head_client.submit(die_the_first_time, marker, retries=1)
    assert future.result(timeout=CALL_SECONDS) == "second attempt"
    with pytest.raises(bulletin.WorkerDiedError, match="exit"):
        head_client.submit(die_the_first_time, str(tmp_path / "no-retries")).result(
            timeout=CALL_SECONDS)


# ---- results stay on their worker (data locality) ------------------------------------------

EIGHT_MIB = 1 << 21  # float32 elements


def arange(n):
    import numpy as np
    return np.arange(n, dtype=np.float32)


def total(x, gate=None):
    import numpy as np
    if gate is not None:
        wait_for_file(gate, 60)
    return float(np.asarray(x, dtype=np.float64).sum())


def kept_on(client, worker_id) -> int:
    return attached(client, worker_id).kept_objects


def assert_nothing_held(client, baseline, functions_before, worker_ids):
    """Leak check across the cluster: the head store is back to its references (plus one per
    function the session sent for the first time: sessions keep functions), nothing is kept on a
    worker for the runtime, and the workers' own stores hold no reference for calls (heartbeats).
    """
    new_functions = set(client._submitter.sent_functions) - functions_before
    expected = baseline["referenced"] + len(new_functions)

    def state():
        status = client.status()
        return (status.store["referenced"], status.store["worker_objects"],
                [(attached(client, w).kept_objects, attached(client, w).store_referenced)
                 for w in worker_ids])
    try:
        wait_until(lambda: state()[0] == expected and state()[1] == 0
                   and all(k == 0 and r == 0 for k, r in state()[2]),
                   timeout=15, what="every store to let go of the test's objects")
    except AssertionError:
        raise AssertionError(f"{state()} {baseline}")


def test_a_large_result_stays_on_its_worker_and_the_next_call_runs_there_with_nothing_moved(
        head_client, workers):
    workers("keep-a", "--simulate-gpus", "1")
    workers("keep-b", "--simulate-gpus", "1")
    before = head_client.status().store
    functions = set(head_client._submitter.sent_functions)
    first = head_client.submit(arange, EIGHT_MIB, gpus=1)
    assert first.exception(timeout=CALL_SECONDS) is None  # finished; nothing fetched
    keeper = first.placement.worker_id
    oid = first.remote_id
    # It lives on the worker: the head's store has no file for it (this client shares the
    # head's host, so it can look) and the head counts it as kept there.
    assert head_client._transfer.same_host
    assert not (head_client._transfer.folder / oid).exists()
    assert head_client.status().store["worker_objects"] == 1
    assert kept_on(head_client, keeper) == 1

    # Passed to the next call: the scheduler places it where the input is; nothing moves.
    second = head_client.submit(total, first, gpus=1)
    expected = float(np.arange(EIGHT_MIB, dtype=np.float32).astype(np.float64).sum())
    assert second.result(timeout=CALL_SECONDS) == expected
    assert second.placement.worker_id == keeper
    moved = head_client.status().store
    assert moved["pulled_bytes"] == before["pulled_bytes"]
    assert moved["sent_to_workers_bytes"] == before["sent_to_workers_bytes"]
    assert not (head_client._transfer.folder / oid).exists()

    # Fetched by the client: only now does it cross, once, straight from the keeper's own data
    # port (the head's store has no file to map; docs/data-plane.md), not through the head.
    value = first.result(timeout=CALL_SECONDS)
    np.testing.assert_array_equal(value, np.arange(EIGHT_MIB, dtype=np.float32))
    assert head_client._transfer.last_path == "direct"
    fetched = head_client.status().store
    assert fetched["direct_tickets"] == before["direct_tickets"] + 1
    assert fetched["pulled_objects"] == before["pulled_objects"]
    assert fetched["data_port_bytes"] - before["data_port_bytes"] < EIGHT_MIB * 4
    del value
    assert_nothing_held(head_client, before, functions, ["keep-a", "keep-b"])


@pytest.mark.parametrize("data_path", ["auto", "grpc"])
def test_a_call_placed_away_from_the_keeper_still_gets_the_value(head_client, workers, tmp_path,
                                                                 data_path):
    workers("away-a", "--simulate-gpus", "1", "--data-path", data_path)
    workers("away-b", "--simulate-gpus", "1", "--data-path", data_path)
    before = head_client.status().store
    functions = set(head_client._submitter.sent_functions)
    first = head_client.submit(arange, EIGHT_MIB, gpus=1)
    first.exception(timeout=CALL_SECONDS)
    keeper = first.placement.worker_id
    other = "away-b" if keeper == "away-a" else "away-a"
    # A call reading the result occupies the keeper's only GPU (locality puts it there) ...
    gate = tmp_path / "gate"
    holder = head_client.submit(total, first, str(gate), gpus=1)
    wait_until(lambda: holder.status == "running", timeout=CALL_SECONDS, what="holder to run")
    assert holder.placement.worker_id == keeper
    # ... so the next one must run on the other worker, which gets the value: straight from
    # the keeper's own data port (a ticket the head signed; no byte crosses the head), or, with
    # gRPC only, pulled by the head from the keeper and fetched from there.
    elsewhere = head_client.submit(total, first, gpus=1)
    expected = float(np.arange(EIGHT_MIB, dtype=np.float32).astype(np.float64).sum())
    assert elsewhere.result(timeout=CALL_SECONDS) == expected
    assert elsewhere.placement.worker_id == other
    moved = head_client.status().store
    over_port = moved["data_port_bytes"] - before["data_port_bytes"]
    if data_path == "auto":
        assert moved["direct_tickets"] == before["direct_tickets"] + 1
        assert moved["pulled_objects"] == before["pulled_objects"]
        assert moved["sent_to_workers_bytes"] == before["sent_to_workers_bytes"]
        assert over_port < EIGHT_MIB * 4, "the head's data port carried the payload"
    else:
        assert moved["direct_tickets"] == before["direct_tickets"]
        assert moved["pulled_objects"] == before["pulled_objects"] + 1
        assert moved["sent_to_workers_bytes"] - before["sent_to_workers_bytes"] >= EIGHT_MIB * 4
        assert over_port == 0
    gate.touch()
    assert holder.result(timeout=CALL_SECONDS) == expected
    del first
    assert_nothing_held(head_client, before, functions, ["away-a", "away-b"])


def test_a_result_whose_worker_went_away_fails_naming_the_worker(head_client, workers):
    before = head_client.status().store
    functions = set(head_client._submitter.sent_functions)
    worker = workers("gone-a", "--simulate-gpus", "1")
    first = head_client.submit(arange, EIGHT_MIB, gpus=1)
    first.exception(timeout=CALL_SECONDS)
    assert first.placement.worker_id == "gone-a"
    worker.kill()
    wait_until(lambda: detached(head_client, "gone-a"), timeout=CALL_SECONDS, what="detach")
    # Passed to a call (a CPU call: the head's own worker could run it) ...
    with pytest.raises(bulletin.WorkerLostError, match="lived only on worker gone-a, which lost"):
        head_client.submit(total, first).result(timeout=CALL_SECONDS)
    # ... or fetched: the error names the worker that had it.
    with pytest.raises(bulletin.WorkerLostError, match="lived only on worker gone-a, which lost"):
        first.result(timeout=CALL_SECONDS)
    del first
    assert_nothing_held(head_client, before, functions, [])
    assert head_client.submit(int, "7").result(timeout=CALL_SECONDS) == 7


def allocate(mib):
    block = bytearray(mib << 20)
    return os.getpid(), len(block)


def test_a_remote_workers_executor_holds_the_calls_memory_request(head_client, workers):
    """memory= reaches a worker on its own (RunCall.memory_bytes): past it, MemoryLimitError."""
    workers("gpu-m", "--simulate-gpus", "1")
    with pytest.raises(bulletin.MemoryLimitError, match=r"memory=256\.0 MiB"):
        head_client.submit(allocate, 1024, gpus=1, memory="256MiB").result(timeout=CALL_SECONDS)
    assert head_client.submit(allocate, 64, gpus=1, memory="256MiB").result(
        timeout=CALL_SECONDS)[1] == 64 << 20
