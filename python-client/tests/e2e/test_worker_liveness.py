"""A dead worker is noticed in seconds (issue 28.3): a `bulletin worker` killed with SIGKILL in
the middle of a call has that call run again (or fail with WorkerLostError under retries=0)
within the link-loss grace (--link-loss-grace, 5 s), not the restart's worker grace (60 s,
left at its default here). A worker whose link comes back after its calls were given up runs
them once more only as the new attempt: the old run's late end is refused, not taken as the
new attempt's.

The timings asserted are generous (well under the 60 s a restart's grace would take); the
measured time is printed (pytest -s), for the issue's table.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import grpc
import pytest

import bulletin
from cluster_support import (CALL_SECONDS, cli_env, remove_dead_worker_stores, start_cluster,
                             wait_until)
from durability_support import start_worker, stop_worker
from link_proxy import LinkProxy

# Far below the 60 s restart grace, far above the 5 s link-loss grace on a busy machine.
WELL_BEFORE_RESTART_GRACE = 30.0


def note_start_then_wait(starts: str, gate: str):
    """Runs remotely: appends the time it started to `starts`, then waits for `gate`."""
    import os
    import time
    with open(starts, "a") as out:
        out.write(f"{time.time()}\n")
    deadline = time.monotonic() + 120
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.02)
    return os.environ.get("BULLETIN_EXECUTOR_ID", "")


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    home = tmp_path_factory.mktemp("bulletin-liveness")
    env = cli_env(home)
    # The graces' defaults: these tests are about them.
    env.pop("BULLETIN_WORKER_GRACE", None)
    env.pop("BULLETIN_LINK_LOSS_GRACE", None)
    c = start_cluster(home, gpus=0, cpus=1, env=env)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def client(head):
    c = head.client(set_as_default=False)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def workers(head, client):
    started = []

    def start(worker_id: str, address: str | None = None, *extra: str):
        proc, log = start_worker(head.home, address or head.address, worker_id, *extra)
        started.append((worker_id, proc))
        wait_until(lambda: attached(client, worker_id) or proc.poll() is not None, timeout=60,
                   what=f"worker {worker_id} to attach")
        assert proc.poll() is None, log.read_text()
        return proc

    yield start
    for worker_id, proc in started:
        stop_worker(proc)
        remove_dead_worker_stores(f"{worker_id}-{proc.pid}")
    for worker_id, _ in started:
        wait_until(lambda: attached(client, worker_id) is None, timeout=60,
                   what=f"worker {worker_id} to detach")


def attached(client, worker_id: str):
    return next((w for w in client.status().workers if w.worker_id == worker_id), None)


def lines(path) -> list[float]:
    try:
        return [float(x) for x in path.read_text().split()]
    except FileNotFoundError:
        return []


def test_a_sigkilled_workers_call_runs_again_within_seconds(client, workers, tmp_path):
    procs = {"live-a": workers("live-a"), "live-b": workers("live-b")}
    starts, gate = tmp_path / "starts", tmp_path / "gate"
    future = client.submit(note_start_then_wait, str(starts), str(gate), gpus=1, retries=1)
    wait_until(lambda: len(lines(starts)) == 1, timeout=CALL_SECONDS, what="the first run")
    doomed = future.placement.worker_id
    killed_at = time.time()
    stop_worker(procs[doomed])  # SIGKILL to its process group: no goodbye
    wait_until(lambda: len(lines(starts)) == 2, timeout=CALL_SECONDS, what="the retry")
    to_retry = lines(starts)[1] - killed_at
    print(f"\nSIGKILLed worker {doomed}: its call's retry started {to_retry:.2f} s later")
    assert to_retry < WELL_BEFORE_RESTART_GRACE, to_retry
    gate.touch()
    assert future.result(timeout=CALL_SECONDS).startswith("live-")
    assert future.attempt == 2 and future.placement.worker_id != doomed


def test_a_sigkilled_workers_call_without_retries_fails_within_seconds(client, workers,
                                                                       tmp_path):
    proc = workers("live-c")
    starts, gate = tmp_path / "starts", tmp_path / "never"
    future = client.submit(note_start_then_wait, str(starts), str(gate), gpus=1)
    wait_until(lambda: len(lines(starts)) == 1, timeout=CALL_SECONDS, what="the run")
    killed_at = time.monotonic()
    stop_worker(proc)
    with pytest.raises(bulletin.WorkerLostError, match="live-c") as raised:
        future.result(timeout=CALL_SECONDS)
    to_failure = time.monotonic() - killed_at
    print(f"\nSIGKILLed worker live-c: its call failed {to_failure:.2f} s later")
    assert to_failure < WELL_BEFORE_RESTART_GRACE, to_failure
    assert "link-loss-grace" in str(raised.value) or "reattach" in str(raised.value), raised


def test_a_worker_back_after_its_call_was_requeued_runs_it_once_more_as_the_new_attempt(
        head, client, workers, tmp_path):
    proxy = LinkProxy(head.address)
    try:
        workers("cut-a", proxy.address, "--reconnect-timeout", "120")
        starts, gate = tmp_path / "starts", tmp_path / "gate"
        future = client.submit(note_start_then_wait, str(starts), str(gate), gpus=1, retries=1)
        wait_until(lambda: len(lines(starts)) == 1, timeout=CALL_SECONDS, what="the first run")
        proxy.cut()
        # Past the link-loss grace the call is queued again (no other worker has a GPU).
        wait_until(lambda: future.status == "queued", timeout=WELL_BEFORE_RESTART_GRACE,
                   what="the call requeued")
        gate.touch()  # the first run ends while the runtime cannot hear it
        time.sleep(1)
        proxy.restore()
        # The worker comes back and sends the first run's end: that end belongs to an attempt
        # the runtime gave up, so the call runs again (attempt 2) and that run's result counts.
        assert future.result(timeout=CALL_SECONDS).startswith("cut-a")
        assert future.attempt == 2
        assert len(lines(starts)) == 2, "the call ran once per attempt"
    finally:
        proxy.close()


def test_a_worker_whose_link_goes_silent_loses_its_call_within_the_heartbeat_limit(
        head, client, workers, tmp_path):
    """No FIN, no goodbye: the link stays open and nothing comes through. The runtime declares
    it broken after 8 s without a heartbeat, then waits the link-loss grace."""
    proxy = LinkProxy(head.address)
    try:
        workers("quiet-a", proxy.address, "--reconnect-timeout", "120")
        starts, gate = tmp_path / "starts", tmp_path / "never"
        future = client.submit(note_start_then_wait, str(starts), str(gate), gpus=1)
        wait_until(lambda: len(lines(starts)) == 1, timeout=CALL_SECONDS, what="the run")
        frozen_at = time.monotonic()
        proxy.freeze()
        with pytest.raises(bulletin.WorkerLostError, match="quiet-a"):
            future.result(timeout=CALL_SECONDS)
        to_failure = time.monotonic() - frozen_at
        print(f"\nsilent worker quiet-a: its call failed {to_failure:.2f} s later")
        assert to_failure < WELL_BEFORE_RESTART_GRACE, to_failure
    finally:
        proxy.close()


def runtime_log(head) -> str:
    return (head.home / "runtime.log").read_text(errors="replace")


def test_a_worker_stopped_with_sigterm_says_goodbye_and_a_queued_call_waits_for_another(
        head, client, workers, tmp_path):
    """`bulletin worker` stopped as a service manager stops it: its link ends as a goodbye, so
    the runtime takes it as gone at once (no link-loss grace). The call queued behind its
    running one fitted no other worker: it waits for one (it was accepted: a worker that fits
    was there), and runs when one joins, rather than failing as if it could never run."""
    proc = workers("term-a")
    starts, gate = tmp_path / "starts", tmp_path / "gate"
    running = client.submit(note_start_then_wait, str(starts), str(gate), gpus=1, retries=1)
    wait_until(lambda: len(lines(starts)) == 1, timeout=CALL_SECONDS, what="the first run")
    queued = client.submit(note_start_then_wait, str(starts), str(gate), gpus=1)
    wait_until(lambda: queued.wait_info is not None, timeout=CALL_SECONDS,
               what="the second call to wait")
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=60)
    wait_until(lambda: attached(client, "term-a") is None, timeout=WELL_BEFORE_RESTART_GRACE,
               what="term-a to detach")
    assert "worker term-a detached: ended its stream" in runtime_log(head)
    for future in (running, queued):
        wait_until(lambda: future.status == "queued" and future.wait_info is not None
                   and "waits for a worker that can to join" in future.wait_info.reason,
                   timeout=CALL_SECONDS, what="the call to wait for a worker")
    assert not queued.done() and not running.done()
    gate.touch()
    workers("term-b")
    assert queued.result(timeout=CALL_SECONDS).startswith("term-b")
    assert running.result(timeout=CALL_SECONDS).startswith("term-b")
    assert running.attempt == 2


def test_a_worker_link_reset_by_the_worker_is_noticed_without_waiting_for_heartbeats(head):
    """An HTTP/2 reset of the Attach stream (RST_STREAM, what a cancelled gRPC call sends)
    is a lost link at once, not after the heartbeat limit (8 s)."""
    from bulletin._proto import bulletin_pb2 as pb
    from bulletin._proto import bulletin_pb2_grpc as rpc

    token = (head.home / "worker-token").read_text().strip()
    register = pb.WorkerMessage(register=pb.RegisterWorker(
        worker_id="reset-a", host="test", cpus=1, memory_bytes=1 << 30,
        version=bulletin.__version__))
    done = threading.Event()

    def messages():  # the registration, then an open stream (no half-close) until the reset
        yield register
        done.wait(60)

    with grpc.insecure_channel(head.address) as channel:
        call = rpc.WorkersStub(channel).Attach(
            messages(), metadata=[("authorization", f"Bearer {token}")])
        next(call)  # accepted
        call.cancel()
        done.set()
    wait_until(lambda: "worker reset-a reset its link" in runtime_log(head),
               timeout=CALL_SECONDS, what="the runtime to see the reset")
    assert "worker reset-a sent no heartbeat" not in runtime_log(head)
