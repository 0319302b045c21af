"""Leases through a real cluster (docs/internals.md, "Leases"): a burst of calls runs on a
lease's executor, which the runtime scheduled as one call; with leases off every call reaches
the runtime; a runtime crash in the middle of a leased burst loses no call; an intern's GPU
limit holds for leased calls; and a lease preempted for another call gives its calls back,
which then run through the runtime."""

from __future__ import annotations

import os

import pytest

import bulletin
from bulletin import _leases
from cluster_support import (CALL_SECONDS, nothing_running, scrape_metrics, start_cluster,
                             start_configured_cluster, wait_until)
from durability_support import crash, restart

pytestmark = pytest.mark.timeout(240)

INTERN_TOKEN = "intern-token-0123456789abcdef"
CONFIG = f"""
users:
  - {{name: ivy, group: interns, token: "{INTERN_TOKEN}"}}
limits:
  intern: {{gpus: 1, users: [ivy]}}
scheduler:
  preemption_grace: 1s
  reclaim_patience: 0
"""


@pytest.fixture
def patient_leases(monkeypatch):
    """What these tests check is where a burst's calls run, not how fast a lease comes: on a
    loaded machine a lease's executor can take longer to start than calls wait for one by
    default (half a second), and eight submits longer than the burst trigger's 0.1 s."""
    monkeypatch.setattr(_leases, "FALLBACK_SECONDS", 10.0)
    monkeypatch.setattr(_leases, "QUEUED_FALLBACK_SECONDS", 10.0)
    monkeypatch.setattr(_leases, "TRIGGER_SECONDS", 5.0)


def shout(x):
    print("value", x)
    if x == 3:
        raise ValueError("three")
    return x


def slow_double(x, seconds):
    import time
    time.sleep(seconds)
    return 2 * x


def span(seconds):
    """When the call ran: (start, end) on the host's monotonic clock (one host: comparable)."""
    import time
    start = time.monotonic()
    time.sleep(seconds)
    return start, time.monotonic()


def calls_ended(cluster) -> float:
    return sum(value for name, value in scrape_metrics(cluster).items()
               if name.startswith("bulletin_calls_ended_total"))


def live_leases(client) -> list:
    leases = client._submitter.leases
    with leases._cond:
        return [lease for lease in leases._leases.values() if lease.channel is not None]


def ledger_calls(client) -> int:
    return sum(row.calls for row in client.usage(since="1h").rows)


def calls_leased(cluster) -> float:
    return sum(value for name, value in scrape_metrics(cluster).items()
               if name.startswith("bulletin_calls_leased_total"))


def test_a_burst_runs_on_a_lease_that_the_runtime_sees_as_one_call(cluster, client,
                                                                    patient_leases):
    wait_until(lambda: nothing_running(client), timeout=CALL_SECONDS, what="an idle cluster")
    before, in_ledger, leased = calls_ended(cluster), ledger_calls(client), calls_leased(cluster)
    futures = client.map(shout, range(300))
    for i, future in enumerate(futures):
        if i == 3:
            with pytest.raises(ValueError, match="three") as raised:
                future.result(timeout=CALL_SECONDS)
            assert "shout" in str(raised.traceback[-1])  # the remote frame, as without a lease
        else:
            assert future.result(timeout=CALL_SECONDS) == i
        assert future.output == f"value {i}\n"
    wait_until(lambda: nothing_running(client), timeout=CALL_SECONDS, what="the leases to end")
    ran_by_the_runtime = calls_ended(cluster) - before
    # The burst's first calls go the runtime's way until the burst is seen (TRIGGER_CALLS),
    # then a few leases carry the rest.
    assert ran_by_the_runtime < 50, ran_by_the_runtime
    # The usage ledger counts the user's 300 calls, not the leases that ran most of them.
    wait_until(lambda: ledger_calls(client) - in_ledger == 300, timeout=CALL_SECONDS,
               what=f"300 calls in the usage ledger ({ledger_calls(client) - in_ledger} there)")
    assert calls_leased(cluster) - leased > 300 - ran_by_the_runtime - 1


def test_with_leases_off_every_call_reaches_the_runtime(cluster, client, monkeypatch):
    monkeypatch.setenv("BULLETIN_LEASES", "0")
    wait_until(lambda: nothing_running(client), timeout=CALL_SECONDS, what="an idle cluster")
    before = calls_ended(cluster)
    with cluster.client(set_as_default=False) as plain:
        assert plain._submitter.leases is None
        assert plain.gather(plain.map(shout, range(4, 64))) == list(range(4, 64))
    wait_until(lambda: calls_ended(cluster) - before == 60, timeout=CALL_SECONDS,
               what="60 calls ended by the runtime")


def test_a_runtime_crash_during_a_leased_burst_loses_no_call(tmp_path, patient_leases):
    cluster = start_cluster(tmp_path / "home", gpus=0, cpus=2)
    try:
        with cluster.client(set_as_default=False, reconnect_timeout=90) as client:
            futures = client.map(slow_double, range(300), [0.01] * 300)
            wait_until(lambda: live_leases(client) and sum(f.done() for f in futures) >= 30,
                       timeout=CALL_SECONDS, what="the burst to run on a lease")
            crash(cluster)
            cluster = restart(cluster, gpus=0, cpus=2)
            assert [f.result(timeout=CALL_SECONDS) for f in futures] == [
                2 * i for i in range(300)]
            assert all(f.status == "finished" for f in futures)
            # A call cut short on the lease's executor ran again through the runtime: its
            # second attempt; every other call ran once.
            assert {f.attempt for f in futures} <= {1, 2}, {f.attempt for f in futures}
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def policy_cluster(tmp_path_factory):
    home = tmp_path_factory.mktemp("bulletin-leases-policy")
    c = start_configured_cluster(home, CONFIG, gpus=2, cpus=2)
    try:
        yield c
    finally:
        c.stop()


def test_an_interns_leased_calls_hold_one_gpu_at_a_time(policy_cluster, patient_leases):
    with bulletin.Client(policy_cluster.address, token=INTERN_TOKEN,
                         set_as_default=False) as intern:
        futures = intern.map(span, [0.005] * 120, gpus=1)
        spans = sorted(f.result(timeout=CALL_SECONDS) for f in futures)
        assert intern._submitter.leases.connections > 0, "no lease carried the burst"
    overlaps = [(a, b) for a, b in zip(spans, spans[1:]) if b[0] < a[1]]
    assert overlaps == []  # the limit of 1 GPU held: never two calls at once


def test_a_preempted_lease_gives_its_calls_back_to_the_runtime(policy_cluster, monkeypatch):
    monkeypatch.setattr(_leases, "TRIGGER_CALLS", 1)  # every call here goes to a lease
    # Every lease of the test, not only the two held when the interactive call comes: a held
    # lease's 2 s term can end first on a loaded machine, and its successor is the one preempted.
    every_lease = []
    make_lease = _leases._Lease.__init__

    def recorded(lease, pool):
        make_lease(lease, pool)
        every_lease.append(lease)

    monkeypatch.setattr(_leases._Lease, "__init__", recorded)
    with policy_cluster.client(set_as_default=False) as owner:
        scavengers = owner.map(slow_double, range(200), [0.02] * 200, gpus=1, qos="scavenger")
        wait_until(lambda: len(live_leases(owner)) == 2, timeout=CALL_SECONDS,
                   what="two scavenger leases holding both GPUs")
        # An interactive call needs a GPU: a scavenger lease is preempted for it.
        assert owner.submit(os.getpid, gpus=1).result(timeout=CALL_SECONDS) > 0
        assert [f.result(timeout=CALL_SECONDS) for f in scavengers] == [
            2 * i for i in range(200)]
        assert any(lease.future is not None and lease.future.preempted
                   for lease in every_lease), [
            (lease.future.status, lease.future.preempted) for lease in every_lease
            if lease.future is not None]
