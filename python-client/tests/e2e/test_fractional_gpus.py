"""Fractional GPUs end to end (issue 16.6) on the session cluster's one simulated GPU: two
``gpus=0.5`` calls run at the same time on it and see their share; a whole-GPU call waits
while they share it; bad fractions are refused before anything is sent. Then two users on a
cluster of their own: a share never joins the GPU another user holds whole, shares do not get
a group past its quota, and /metrics and the dashboard's API show the share."""

from __future__ import annotations

import json
import os
import urllib.request

import pytest

import bulletin
from cluster_support import (ALICE, BOB, CALL_SECONDS, cli_env, nothing_running, start_cluster,
                             start_configured_cluster,
                             wait_for_file, wait_until)


def meet_and_wait(here: str, other: str, release: str):
    """Runs remotely: says it runs, waits until the other call runs too (so both held the GPU
    at once), then until the test releases it; returns what its executor was given."""
    import os

    open(here, "w").close()
    met = wait_for_file(other, 60)
    released = wait_for_file(release, 60)
    return {"met": met, "released": released, "pid": os.getpid(),
            "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "fraction": os.environ.get("BULLETIN_GPU_FRACTION")}


def gpu_fraction():
    """Runs remotely: the share its executor was started with (None for whole GPUs)."""
    import os
    return os.environ.get("BULLETIN_GPU_FRACTION")


def test_two_halves_run_at_once_on_one_gpu_and_see_their_share(client, tmp_path):
    a, b, release = (str(tmp_path / name) for name in ("a", "b", "release"))
    first = client.submit(meet_and_wait, a, b, release, gpus=0.5)
    second = client.submit(meet_and_wait, b, a, release, gpus=0.5)
    try:
        assert wait_until(lambda: os.path.exists(a) and os.path.exists(b), timeout=CALL_SECONDS,
                          what="both halves running")
        status = client.status()
        worker = status.workers[0]
        assert worker.gpu_shares == {0: 1.0}, worker
        assert status.gpus.reserved == 1 and status.gpus.reserved_share == 1.0, status.gpus
        assert "gpu0=1" in str(status)

        whole = client.submit(os.getpid, gpus=1)
        wait_until(lambda: whole.wait_info is not None, timeout=CALL_SECONDS,
                   what="the whole-GPU call explained")
        assert whole.status == "queued", "a whole GPU call must not join a shared GPU"
    finally:
        open(release, "w").close()
    one, two = first.result(timeout=CALL_SECONDS), second.result(timeout=CALL_SECONDS)
    assert one["met"] and two["met"], "the two halves did not run at the same time"
    assert one["pid"] != two["pid"], "each share runs in an executor of its own"
    assert one["cuda"] == two["cuda"] == "0"
    assert one["fraction"] == two["fraction"] == "0.5"
    assert whole.result(timeout=CALL_SECONDS) > 0
    assert wait_until(lambda: nothing_running(client), timeout=CALL_SECONDS,
                      what="the GPU free again")


def test_a_share_waits_while_a_whole_gpu_call_holds_the_gpu(client, tmp_path):
    started, release = str(tmp_path / "started"), str(tmp_path / "release")
    holder = client.submit(meet_and_wait, started, started, release, gpus=1)
    try:
        assert wait_until(lambda: os.path.exists(started), timeout=CALL_SECONDS,
                          what="the whole-GPU call running")
        share = client.submit(gpu_fraction, gpus=0.25)
        wait_until(lambda: share.wait_info is not None, timeout=CALL_SECONDS,
                   what="the share explained")
        assert share.status == "queued"
        assert "0.25 of a GPU" in share.wait_info.reason, share.wait_info
    finally:
        open(release, "w").close()
    assert holder.result(timeout=CALL_SECONDS)["fraction"] is None
    assert share.result(timeout=CALL_SECONDS) == "0.25"


@pytest.mark.parametrize("gpus, words", [
    (0.3, "a share of a GPU is a multiple of 1/8"),
    (1.5, "fractions are for less than one GPU"),
    (-0.5, "expected a whole number of GPUs"),
])
def test_a_fraction_that_is_not_an_eighth_below_one_is_refused(client, gpus, words):
    with pytest.raises(bulletin.InvalidArgumentError, match=words.replace(".", r"\.")):
        client.submit(os.getpid, gpus=gpus)


@pytest.fixture(scope="module")
def two_users(tmp_path_factory):
    """alice (vision) and bob (nlp, a quota of 1 GPU that may not borrow), one simulated GPU and
    4 CPUs, so CPUs do not bound how many shares run."""
    home = tmp_path_factory.mktemp("bulletin-fractions")
    c = start_configured_cluster(home, f"""
users:
  - {{name: alice, group: vision, token: "{ALICE}"}}
  - {{name: bob, group: nlp, token: "{BOB}"}}
groups:
  nlp: {{gpus: 1, borrow: false}}
  vision: {{}}
""", gpus=1, cpus=4)
    try:
        yield c
    finally:
        c.stop()


def http_get(cluster, path: str, token: str | None = None) -> str:
    request = urllib.request.Request(cluster.info["dashboard_url"] + path.lstrip("/"))
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read().decode()


def test_a_share_never_joins_a_gpu_another_user_holds_whole(two_users, tmp_path):
    started, release = str(tmp_path / "started"), str(tmp_path / "release")
    with bulletin.Client(two_users.address, token=ALICE, set_as_default=False) as alice, \
            bulletin.Client(two_users.address, token=BOB, set_as_default=False) as bob:
        held = alice.submit(meet_and_wait, started, started, release, gpus=1)
        try:
            wait_until(lambda: os.path.exists(started), timeout=CALL_SECONDS,
                       what="alice's whole-GPU call running")
            share = bob.submit(gpu_fraction, gpus=0.125)
            wait_until(lambda: share.wait_info is not None, timeout=CALL_SECONDS,
                       what="bob's share explained")
            assert share.status == "queued"
            assert "no GPU has 0.125 of a GPU free to share" in share.wait_info.reason
        finally:
            open(release, "w").close()
        assert held.result(timeout=CALL_SECONDS)["met"]
        assert share.result(timeout=CALL_SECONDS) == "0.125"


def test_shares_do_not_get_a_group_past_its_quota_and_are_shown(two_users, tmp_path):
    release = str(tmp_path / "release")
    with bulletin.Client(two_users.address, token=BOB, set_as_default=False) as bob:
        marks = [str(tmp_path / f"run{i}") for i in range(3)]
        calls = [bob.submit(meet_and_wait, mark, mark, release, gpus=gpus, qos="batch")
                 for mark, gpus in zip(marks, (0.5, 0.25, 0.5))]
        try:
            wait_until(lambda: all(map(os.path.exists, marks[:2])), timeout=CALL_SECONDS,
                       what="the first two shares running")
            over = calls[2]
            wait_until(lambda: over.wait_info is not None, timeout=CALL_SECONDS,
                       what="the third share explained")
            assert over.status == "queued" and not os.path.exists(marks[2])
            assert over.wait_info.reason == \
                "group nlp quota: 0.75/1 GPUs held, 0.5 more would exceed it", over.wait_info

            metrics = http_get(two_users, "/metrics")
            assert 'bulletin_gpus{state="reserved",worker="local"} 0.75' in metrics, metrics
            status = json.loads(http_get(two_users, "/api/status", BOB))
            gpus = status["workers"][0]["gpus"]
            assert gpus["shared"] == {"0": 0.75} and gpus["reserved_share"] == 0.75, gpus
            assert bob.status().workers[0].gpu_shares == {0: 0.75}
        finally:
            open(release, "w").close()
        assert [c.result(timeout=CALL_SECONDS)["fraction"] for c in calls] == \
            ["0.5", "0.25", "0.5"]


def run_until_preempted(mark: str):
    """Runs remotely: the first run marks that it started and runs for good (until preempted);
    a run after that returns at once."""
    import os
    import time
    if os.path.exists(mark):
        return "rerun"
    open(mark, "w").close()
    time.sleep(600)
    return "ran to the end"


def test_an_interactive_call_preempts_scavenger_shares_of_its_gpu(two_users, tmp_path):
    marks = [str(tmp_path / "s1"), str(tmp_path / "s2")]
    with bulletin.Client(two_users.address, token=ALICE, set_as_default=False) as alice, \
            bulletin.Client(two_users.address, token=BOB, set_as_default=False) as bob:
        shares = [alice.submit(run_until_preempted, mark, gpus=0.5, qos="scavenger")
                  for mark in marks]
        wait_until(lambda: all(map(os.path.exists, marks)), timeout=CALL_SECONDS,
                   what="both scavenger halves running")
        whole = bob.submit(gpu_fraction, gpus=1, qos="interactive")
        assert whole.result(timeout=CALL_SECONDS) is None
        assert [s.result(timeout=CALL_SECONDS) for s in shares] == ["rerun", "rerun"]
        assert [s.preempted for s in shares] == [1, 1], "a whole GPU frees only with both gone"


def meet_all(here: str, others: list[str]):
    """Runs remotely: says it runs, waits until every other call runs too; returns its GPU."""
    import os

    open(here, "w").close()
    met = all(wait_for_file(other, 60) for other in others)
    return {"met": met, "cuda": os.environ.get("CUDA_VISIBLE_DEVICES")}


def test_four_halves_run_at_once_on_two_gpus_of_a_two_cpu_worker(tmp_path_factory, tmp_path):
    """Issue 28.4: four gpus=0.5 calls on two free GPUs all run at the same time, two per GPU,
    on a worker with two CPU slots (a GPU share asks for the same share of a CPU by default;
    before, each took a whole CPU slot and only two ran at a time, both on GPU 0)."""
    home = tmp_path_factory.mktemp("bulletin-four-halves")
    cluster = start_cluster(home, gpus=2, cpus=2, env=cli_env(home))
    try:
        with cluster.client(set_as_default=False) as client:
            marks = [str(tmp_path / f"m{i}") for i in range(4)]
            futures = [client.submit(meet_all, mark, marks, gpus=0.5) for mark in marks]
            results = [f.result(timeout=CALL_SECONDS) for f in futures]
            assert all(r["met"] for r in results), "the four halves did not all run at once"
            assert sorted(r["cuda"] for r in results) == ["0", "0", "1", "1"], results
            # An explicit cpus= is kept: two halves asking for 1 CPU each fill both slots.
            wide = [client.submit(meet_all, str(tmp_path / f"w{i}"),
                                  [str(tmp_path / "w0"), str(tmp_path / "w1")], gpus=0.5, cpus=1)
                    for i in range(2)]
            assert all(f.result(timeout=CALL_SECONDS)["met"] for f in wide)
            assert client.status().cpus.total == 2
    finally:
        cluster.stop()
