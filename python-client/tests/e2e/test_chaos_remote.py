"""Chaos with a remote worker (issue 13, docs/durability.md "Remote workers across a restart"):
a `bulletin worker` in its own process, on its own link, runs calls while the runtime is killed
with SIGKILL and started again on the same home. The worker outlives the runtime: its calls run
on, and when it reattaches the restored runtime adopts them, so each ends exactly once for its
caller, with its right result, and runs once (a marker file per call counts its runs). A call
that ends while the runtime is down has its outcome kept by the worker and reported on the
reattach. A result kept in the worker's store survives the restarts in its session's holds."""

from __future__ import annotations

import threading
import time

import pytest

from cluster_support import CALL_SECONDS, referenced_objects, start_cluster, wait_until
from durability_support import crash, restart, start_worker, stop_worker

pytestmark = pytest.mark.timeout(300)

ROUNDS = 2


def counted(folder: str, key: str, seconds: float, gate: str = "") -> str:
    """Runs remotely: counts its runs (a line in ``key.started`` as each starts), sleeps
    ``seconds`` (or until the file ``gate`` exists) and records the run's GPU, start and end
    times in ``key``."""
    import os
    import time
    start = time.time()
    with open(os.path.join(folder, key + ".started"), "a") as runs:
        runs.write(f"{os.getpid()}\n")
    time.sleep(seconds)
    while gate and not os.path.exists(gate) and time.time() - start < 120:
        time.sleep(0.05)
    with open(os.path.join(folder, key), "a") as runs:
        runs.write(f"{os.environ.get('CUDA_VISIBLE_DEVICES')} {start} {time.time()}\n")
    return key * 2


def big_result(n: int):
    import numpy as np
    return np.arange(n, dtype=np.int64)


def runs_of(folder, key: str) -> int:
    """How many runs of the call ``key`` started."""
    path = folder / (key + ".started")
    return len(path.read_text().splitlines()) if path.exists() else 0


def run_of(folder, key: str) -> tuple[str, float, float]:
    """The call's only run: its GPU, when it started and when it ended."""
    gpu, start, end = (folder / key).read_text().split()
    return gpu, float(start), float(end)


def test_calls_on_a_remote_worker_survive_sigkills_of_the_runtime(tmp_path):
    home = tmp_path / "home"
    runs = tmp_path / "runs"
    runs.mkdir()
    # The embedded worker has no GPU: every gpus=1 call runs on the remote worker.
    cluster = start_cluster(home, gpus=0, cpus=1)  # --worker-grace: 60 s
    worker, worker_log = start_worker(home, cluster.address, "far", "--reconnect-timeout", "120",
                                      cpus=2, gpus=2)
    ends: dict[str, int] = {}
    ends_lock = threading.Lock()

    def count_end(future):
        with ends_lock:
            ends[future.key] = ends.get(future.key, 0) + 1

    submitted = []
    try:
        client = cluster.client(set_as_default=False, reconnect_timeout=120)
        wait_until(lambda: any(w.worker_id == "far" for w in client.status().workers),
                   timeout=60, what="the worker to attach")
        # A large result stays in the worker's store; the runtime knows only where it is.
        kept = client.submit(big_result, 400_000, gpus=1)
        wait_until(kept.done, timeout=CALL_SECONDS, what="the kept result")

        for round_ in range(ROUNDS):
            # One call ends while the runtime is down (its outcome waits on the worker); one
            # is still running when the worker reattaches (it is adopted and ends later); one
            # waits in the queue for a GPU (the worker's two are busy), and must neither fail
            # before the worker is back nor take the GPU the adopted call still holds.
            gate = runs / f"gate{round_}"
            slow = client.submit(counted, str(runs), f"slow{round_}", 0.0, str(gate), gpus=1)
            wait_until(lambda: runs_of(runs, f"slow{round_}"), timeout=CALL_SECONDS,
                       what="the slow call to start")  # first: it takes the first GPU
            quick = client.submit(counted, str(runs), f"quick{round_}", 2.0, gpus=1)
            queued = client.submit(counted, str(runs), f"queued{round_}", 0.5, gpus=1)
            for future in (quick, slow, queued):
                future.add_done_callback(count_end)
                submitted.append(future)
            wait_until(lambda: runs_of(runs, f"quick{round_}") and runs_of(runs, f"slow{round_}"),
                       timeout=CALL_SECONDS, what="both calls to start on the worker")
            # Their start is journaled once the runtime told the client (the journal does not
            # wait for a start; a start not yet on disk is queued again, see the docs).
            wait_until(lambda: quick.status == "running" and slow.status == "running",
                       timeout=CALL_SECONDS, what="the client to hear both started")
            time.sleep(0.5)
            crash(cluster)
            time.sleep(2.5)  # quick ends meanwhile
            cluster = restart(cluster, gpus=0, cpus=1)

            assert quick.result(timeout=60) == f"quick{round_}" * 2
            assert queued.result(timeout=60) == f"queued{round_}" * 2
            # The adopted call still runs, on its GPU, which stayed reserved: the queued call
            # ran on the other one.
            assert not slow.done()
            gate.touch()
            assert slow.result(timeout=60) == f"slow{round_}" * 2
            for future, key in ((quick, f"quick{round_}"), (slow, f"slow{round_}"),
                                (queued, f"queued{round_}")):
                assert runs_of(runs, key) == 1, f"{key} ran {runs_of(runs, key)} times"
                assert future.attempt == 1, (key, future.attempt)
            slow_gpu = run_of(runs, f"slow{round_}")[0]
            queued_gpu = run_of(runs, f"queued{round_}")[0]
            assert queued_gpu != slow_gpu, f"both ran on GPU {slow_gpu} at once"

        # The kept result came through both restarts: still held, fetched from the worker.
        assert int(kept.result(timeout=CALL_SECONDS)[-1]) == 399_999
        wait_until(lambda: len(ends) == len(submitted), timeout=5, what="every done callback")
        assert all(count == 1 for count in ends.values()), f"a call ended twice: {ends}"
        # The worker still serves the restored runtime.
        assert client.submit(counted, str(runs), "after", 0.0, gpus=1).result(
            timeout=CALL_SECONDS) == "afterafter"
        client.close()
        with cluster.client(set_as_default=False) as fresh:
            wait_until(lambda: referenced_objects(fresh) == 0, timeout=15,
                       what="nothing referenced once the client is gone")
        text = (home / "runtime.log").read_text()
        assert "worker far reattached after the restart" in text, text[-3000:]
        assert worker.poll() is None, worker_log.read_text()
    finally:
        stop_worker(worker)
        cluster.stop()
