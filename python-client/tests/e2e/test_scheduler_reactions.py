"""How soon the scheduler acts, end to end, without timing thresholds: a preempted call is
stopped once its checkpoint hook has returned, not after the grace (here 10 minutes, longer than
the test may take), then requeued, and the call it made room for runs; a waiting call is
explained while the call it waits behind still runs (the periodic pass alone would come later).
Timings are in examples/scheduler_latency_benchmark.py."""

from __future__ import annotations

import os
import time

import pytest

from cluster_support import CALL_SECONDS, start_configured_cluster, wait_until

CONFIG = """
scheduler:
  preemption_grace: 10m
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    home = tmp_path_factory.mktemp("bulletin-reactions")
    c = start_configured_cluster(home, CONFIG, gpus=2, cpus=2)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def client(cluster):
    with cluster.client(set_as_default=False) as c:
        yield c


def checkpoint_slowly(saved: str, started: str):
    """Runs until preempted; its hook takes a while, then records that it returned."""
    import time

    import bulletin
    if os.path.exists(saved):
        return "rerun after " + open(saved).read()

    def save():
        time.sleep(1.0)
        with open(saved, "w") as f:
            f.write("checkpoint")

    bulletin.on_preempt(save)
    open(started, "w").close()
    time.sleep(600)
    return "ran to the end"


def sleep_then(seconds: float, value):
    import time
    time.sleep(seconds)
    return value


def test_a_victim_is_stopped_once_its_hook_returned_then_requeued_then_the_caller_runs(
        client, tmp_path):
    saved, started = str(tmp_path / "saved"), str(tmp_path / "started")
    # The other GPU is held by work that cannot be preempted: the victim is the one with a hook.
    held = client.submit(sleep_then, 600, "held", gpus=1, qos="batch")
    victims = [client.submit(checkpoint_slowly, saved, started, gpus=1, qos="scavenger")]
    wait_until(lambda: held.status == "running" and victims[0].status == "running"
               and os.path.exists(started), timeout=CALL_SECONDS, what="both GPUs taken")
    urgent = client.submit(os.getpid, gpus=1, qos="interactive")
    seen = []  # (victim requeued?, hook file present?, urgent started?) at each observation
    while not urgent.done():
        seen.append((any(f.preempted for f in victims), os.path.exists(saved),
                     urgent.status in ("running", "finished")))
        time.sleep(0.005)
    # Done well before the 10-minute grace: the victim was stopped when it was safe, not then.
    assert urgent.result(timeout=CALL_SECONDS) > 0
    requeued_at = next(i for i, s in enumerate(seen) if s[0])
    assert seen[requeued_at][1], "a victim was requeued before its checkpoint hook returned"
    assert not any(s[2] for s in seen[:requeued_at]), \
        "the interactive call started before a victim gave its GPU back"
    assert victims[0].preempted == 1
    assert victims[0].result(timeout=CALL_SECONDS) == "rerun after checkpoint"
    held.cancel()


def test_a_waiting_call_is_explained_while_the_call_ahead_still_runs(client):
    hog = client.submit(sleep_then, 3.0, "hog", gpus=2)
    wait_until(lambda: hog.status == "running", timeout=CALL_SECONDS, what="the 2-GPU call")
    waiting = client.submit(sleep_then, 0, "waited", gpus=1)
    told = None
    while told is None and waiting.status == "queued":
        told = waiting.wait_info
        time.sleep(0.005)
    assert told is not None, "the call ran before it was told why it waited"
    assert hog.status == "running", "the explanation came only after the call ahead ended"
    assert told.position == 1 and "GPU" in told.reason, told
    assert waiting.result(timeout=CALL_SECONDS) == "waited"
