"""Worker pools through the real runtime: a call for a GPU nobody has starts a worker (a local
process, or a job of the one-node test Slurm that `make test` brings up), runs there, and the
worker goes away once idle. The GPUs are simulated; everything else is real."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

import bulletin
from cluster_support import CALL_SECONDS, run_cli, scrape_metrics, start_cluster, wait_until

SCALE_SECONDS = 90
# A replacement worker: a Slurm job, a JVM and an executor starting on a busy machine.
REPLACE_SECONDS = 150


def pool_config(tmp_path, provider: str, **extra: str) -> str:
    lines = ["pools:", "  - name: gpu", f"    provider: {provider}",
             "    worker: {gpus: 1, cpus: 1" + (", walltime: 10m" if provider == "slurm" else "")
             + "}", "    max_workers: 1", "    idle_timeout: 3s"]
    lines += [f"    {key}: {value}" for key, value in extra.items()]
    path = tmp_path / "pools.yaml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def executor_id():
    import os
    return os.environ["BULLETIN_EXECUTOR_ID"]


def executor_id_once(gate: str):
    """The executor's id once the test touches gate (the worker stays busy until then)."""
    import os
    import time
    while not os.path.exists(gate):
        time.sleep(0.05)
    return executor_id()


def pool_meters(head) -> dict[str, float]:
    return scrape_metrics(head, "bulletin_pool_")


def assert_pool_meters(head, launched: int, workers: int) -> None:
    """/metrics counts the pool's launches and its workers in every state (the gauges refresh
    on a timer, so this waits for them)."""
    def counted():
        meters = pool_meters(head)
        held = sum(value for name, value in meters.items()
                   if name.startswith("bulletin_pool_workers{") and 'pool="gpu"' in name)
        launches = sum(value for name, value in meters.items()
                       if name.startswith("bulletin_pool_decisions_total{")
                       and 'kind="launch"' in name and 'pool="gpu"' in name)
        return held == workers and launches == launched
    wait_until(counted, timeout=30,
               what=f"/metrics to show {workers} pool worker(s) and {launched} launch(es)")


def scale_from_zero_and_back(tmp_path, config: str) -> None:
    head = start_cluster(tmp_path / "home", "--config", config, gpus=0, cpus=1)
    try:
        with head.client() as client:
            assert [w.worker_id for w in client.status().workers] == ["local"]
            started = time.monotonic()
            future = client.submit(executor_id, gpus=1)
            assert future.result(timeout=SCALE_SECONDS).startswith("gpu-")
            print(f"first result from zero workers after {time.monotonic() - started:.2f} s")
            assert future.placement.worker_id.startswith("gpu-")
            status = client.status()
            assert status.pools and status.pools[0].name == "gpu"
            assert any("launch" in event for event in status.pool_events)
            # Idle past idle_timeout: the pool stops its worker.
            wait_until(lambda: len(client.status().workers) == 1, timeout=SCALE_SECONDS,
                       what="the idle pool worker to go")
            assert any("idle" in event for event in client.status().pool_events)
            assert_pool_meters(head, launched=1, workers=0)
            # And a later call scales it up again; /metrics shows the worker while it is busy.
            gate = tmp_path / "gate"
            held = client.submit(executor_id_once, str(gate), gpus=1)
            wait_until(lambda: held.status == "running", timeout=SCALE_SECONDS,
                       what="the second call to run on a new pool worker")
            assert_pool_meters(head, launched=2, workers=1)
            gate.touch()
            assert held.result(timeout=SCALE_SECONDS).startswith("gpu-")
    finally:
        head.stop()


def test_a_local_pool_scales_from_zero_and_back(tmp_path):
    scale_from_zero_and_back(tmp_path, pool_config(tmp_path, "local",
                                                   local="{simulate_gpus: true}"))


def noop():
    return None


def test_a_call_waiting_for_a_pool_worker_hears_why_none_comes(tmp_path):
    """The scheduler knows only attached workers: a call for a GPU that only a pool could bring
    learns from the pool what it does (here: its workers cannot start, so it backs off) in the
    call's wait_info, and the cluster serves the next call meanwhile."""
    config = pool_config(tmp_path, "local", local="{simulate_gpus: true}", python="/bin/false")
    head = start_cluster(tmp_path / "home", "--config", config, gpus=0, cpus=1)
    try:
        with head.client() as client:
            waiting = client.submit(noop, gpus=1)

            def told():
                info = waiting.wait_info
                return info is not None and "pool gpu cannot start a worker now" in info.reason
            wait_until(told, timeout=SCALE_SECONDS,
                       what="the waiting call to hear why the pool starts no worker")
            info = waiting.wait_info
            print("wait_info:", info.reason)
            assert info.code == "NO_WORKERS", info
            assert info.reason.startswith("no worker attached now can run it"), info.reason
            assert "next attempt at " in info.reason, info.reason
            # The provider's words for the failed launch: the worker process that ended.
            assert "exit" in info.reason or "ended" in info.reason, info.reason
            assert client.submit(noop).result(timeout=CALL_SECONDS) is None
            waiting.cancel()
    finally:
        head.stop()


def slurm_partition() -> str | None:
    if shutil.which("sinfo") is None:
        return None
    result = subprocess.run(["sinfo", "-h", "-o", "%P %a"], capture_output=True, text=True,
                            timeout=10)
    rows = [row.split() for row in result.stdout.splitlines() if row.strip()]
    up = [name.rstrip("*") for name, state in rows if state == "up"]
    return up[0] if result.returncode == 0 and up else None


@pytest.mark.skipif(slurm_partition() is None,
                    reason="no Slurm here (`make slurm-up` starts the one-node test Slurm; it "
                           "needs root and apt)")
def test_a_slurm_pool_scales_from_zero_and_back(tmp_path):
    scale_from_zero_and_back(tmp_path, pool_config(
        tmp_path, "slurm", slurm=f"{{partition: {slurm_partition()}, simulate_gpus: true}}"))


def test_a_pool_config_error_names_the_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("pools:\n  - name: gpu\n    provider: nomad\n    max_workers: 1\n")
    home = tmp_path / "home"
    result = run_cli(home, "up", "--port", "0", "--config", str(bad))
    assert result.returncode == 1
    assert "provider" in result.stderr and "local, slurm, kubernetes" in result.stderr


def test_a_gpu_call_no_pool_can_serve_is_still_infeasible(tmp_path):
    head = start_cluster(tmp_path / "home", "--config", pool_config(
        tmp_path, "local", local="{simulate_gpus: true}"), gpus=0, cpus=1)
    try:
        with head.client() as client:
            with pytest.raises(bulletin.InfeasibleError, match="4 GPUs"):
                client.submit(executor_id, gpus=4).result(timeout=CALL_SECONDS)
    finally:
        head.stop()


@pytest.mark.skipif(slurm_partition() is None,
                    reason="no Slurm here (`make slurm-up` starts the one-node test Slurm; it "
                           "needs root and apt)")
def test_a_slurm_worker_job_cancelled_mid_call_fails_the_call_or_reruns_it(tmp_path):
    from cluster_support import wait_for_file
    config = pool_config(tmp_path, "slurm",
                         slurm=f"{{partition: {slurm_partition()}, simulate_gpus: true}}")
    head = start_cluster(tmp_path / "home", "--config", config, gpus=0, cpus=1)
    try:
        with head.client() as client:
            gate = tmp_path / "gate"
            lost = client.submit(wait_for_file, str(gate), 120, gpus=1)
            rerun = client.submit(wait_for_file, str(gate), 120, gpus=1, retries=1)
            wait_until(lambda: lost.status == "running", timeout=SCALE_SECONDS,
                       what="the call to start on a Slurm worker")
            worker = lost.placement.worker_id
            handle = next(w.provider_handle for w in client.status().workers
                          if w.worker_id == worker)
            assert handle.startswith("slurm:")
            subprocess.run(["scancel", handle.split(":", 1)[1]], check=True)
            with pytest.raises(bulletin.WorkerLostError, match=worker):
                lost.result(timeout=SCALE_SECONDS)
            # The call with a retry waits for the pool's next worker and runs there.
            gate.touch()
            assert rerun.result(timeout=SCALE_SECONDS) is True
            assert rerun.placement.worker_id != worker
    finally:
        head.stop()


@pytest.mark.skipif(slurm_partition() is None,
                    reason="no Slurm here (`make slurm-up` starts the one-node test Slurm; it "
                           "needs root and apt)")
@pytest.mark.timeout(480)
def test_a_slurm_worker_near_its_walltime_drains_and_is_replaced(tmp_path):
    from cluster_support import wait_for_file
    # A five-minute allocation replaced 270 s before its end: 30 s after it starts (by then the
    # first call runs there: an idle worker that close to its end is stopped, not replaced), the
    # worker takes no new call, a replacement job starts, and the call it runs still finishes.
    # The first call waits for the gate up to first_wait seconds: the room for the replacement's
    # job to start and run the second call on a busy machine. Its timeout must still fit in what
    # is left of the allocation when it is placed (the runtime places no call it cannot finish),
    # and without a timeout no call goes to a worker within the runtime's drain margin (60 s).
    first_wait = 230
    config = tmp_path / "pools.yaml"
    config.write_text(
        "pools:\n  - name: gpu\n    provider: slurm\n"
        # memory: without --mem the test Slurm gives a job the whole node, and the replacement
        # would wait for the worker it replaces.
        "    worker: {gpus: 1, cpus: 1, memory: 1GiB, walltime: 5m}\n    max_workers: 2\n"
        "    replace_before_expiry: 270s\n    idle_timeout: 5m\n"
        f"    slurm: {{partition: {slurm_partition()}, simulate_gpus: true}}\n")
    head = start_cluster(tmp_path / "home", "--config", str(config), gpus=0, cpus=1)
    try:
        with head.client() as client:
            gate = tmp_path / "gate"
            # wait_for_file has a timeout parameter of its own: the call's timeout is set on
            # the function (a timeout= keyword would be wait_for_file's).
            waiting = bulletin.gpu(wait_for_file, timeout=first_wait + 10)
            first = client.submit(waiting, str(gate), first_wait)
            wait_until(lambda: first.status == "running", timeout=SCALE_SECONDS,
                       what="the first call to start")
            old = first.placement.worker_id
            wait_until(lambda: any("allocation ends in" in event and old in event
                                   for event in client.status().pool_events),
                       timeout=SCALE_SECONDS, what=f"the pool to replace {old} ahead of its end")
            assert any(w.worker_id == old and w.state == "draining"
                       for w in client.status().workers)
            second = client.submit(executor_id, gpus=1, timeout=20)
            assert second.result(timeout=REPLACE_SECONDS).startswith("gpu-")
            assert second.placement.worker_id != old
            gate.touch()
            assert first.result(timeout=CALL_SECONDS) is True, (
                f"the first call on {old} stopped waiting for its gate after {first_wait} s, "
                "before the replacement worker had run the second call")
            wait_until(lambda: all(w.worker_id != old for w in client.status().workers),
                       timeout=SCALE_SECONDS, what=f"the drained {old} to be stopped")
    finally:
        head.stop()
