"""The scheduling policy through the real runtime: QoS classes and their walltime, per-user
limits (interns), why a call waits (Future.wait_info), and preemption of scavenger work with a
checkpoint hook. The scheduler's own rules are tested stage by stage in the Java suite
(runtime/src/test/java/dev/bulletin/runtime/scheduler); these check the wiring end to end."""

from __future__ import annotations

import os
import time

import pytest

import bulletin
from cluster_support import (CALL_SECONDS, start_cluster, start_configured_cluster, wait_for_file,
                             wait_until)

INTERN_TOKEN = "intern-token-0123456789abcdef"


# Python functions, not the builtins int and time.sleep: bulletin cannot read a builtin's
# signature, so it refuses to guess whether qos= or gpus= is the builtin's or the call's.
def number(text):
    return int(text)


def sleep(seconds):
    time.sleep(seconds)

CONFIG = f"""
users:
  - {{name: ivy, group: interns, token: "{INTERN_TOKEN}"}}
qos:
  short: {{priority: 150, max_walltime: 2s, max_calls_per_user: 4}}
limits:
  intern: {{gpus: 1, users: [ivy]}}
scheduler:
  preemption_grace: 1s
  reclaim_patience: 0
"""


@pytest.fixture(scope="module")
def policy_cluster(tmp_path_factory):
    home = tmp_path_factory.mktemp("bulletin-policy")
    c = start_configured_cluster(home, CONFIG, gpus=2, cpus=2)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def owner(policy_cluster):
    with policy_cluster.client(set_as_default=False) as c:
        yield c


def test_a_qos_class_walltime_stops_a_call_that_runs_past_it(owner):
    with pytest.raises(bulletin.CallTimeoutError, match="walltime of 2s"):
        owner.submit(sleep, 30, qos="short").result(timeout=CALL_SECONDS)
    # Asking for a timeout above the class's maximum is refused at once.
    with pytest.raises(bulletin.InfeasibleError, match="walltime"):
        owner.submit(sleep, 1, qos="short", timeout=60).result(timeout=CALL_SECONDS)
    assert owner.submit(number, "3", qos="short").result(timeout=CALL_SECONDS) == 3


def test_an_unknown_qos_is_refused_naming_the_known_ones(owner):
    with pytest.raises(bulletin.InvalidRequestError, match="interactive") as raised:
        owner.submit(number, "1", qos="turbo").result(timeout=CALL_SECONDS)
    assert "turbo" in str(raised.value) and "short" in str(raised.value)
    # The caller's mistake, told as such: not a bulletin bug.
    assert "qos=" in str(raised.value) and "bug" not in str(raised.value)


def test_an_intern_is_held_to_their_gpu_limit(policy_cluster):
    with bulletin.Client(policy_cluster.address, token=INTERN_TOKEN,
                         set_as_default=False) as intern:
        assert intern.user == "ivy"
        with pytest.raises(bulletin.InfeasibleError, match="at most 1 GPU"):
            intern.submit(number, "2", gpus=2).result(timeout=CALL_SECONDS)
        assert intern.submit(number, "1", gpus=1).result(timeout=CALL_SECONDS) == 1


def test_a_waiting_call_says_why_and_where_it_is(owner, tmp_path):
    gate = tmp_path / "gate"
    hog = owner.submit(wait_for_file, str(gate), 60, gpus=2)
    wait_until(lambda: hog.status == "running", timeout=CALL_SECONDS, what="the 2-GPU call")
    waiting = owner.submit(number, "5", gpus=1)
    info = wait_until(lambda: waiting.wait_info, timeout=CALL_SECONDS, what="a wait reason")
    assert info.position == 1 and "GPU" in info.reason, info
    assert any(q.reason == info.reason for q in owner.status().queue)
    gate.touch()
    assert waiting.result(timeout=CALL_SECONDS) == 5
    assert waiting.wait_info is None  # it ran: no wait to explain


def train_until_preempted(checkpoint: str, gate: str):
    """Resumes from its checkpoint if one exists; otherwise runs until preempted."""
    import os
    import time

    import bulletin
    if os.path.exists(checkpoint):
        return f"resumed from step {open(checkpoint).read()}"
    bulletin.on_preempt(lambda: open(checkpoint, "w").write("7"))
    deadline = time.monotonic() + 60
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.02)
    return "ran to the end"


def test_scavenger_work_is_preempted_checkpointed_and_rerun(owner, tmp_path):
    checkpoint, gate = str(tmp_path / "ckpt"), str(tmp_path / "gate")
    scavengers = [owner.submit(train_until_preempted, checkpoint + str(i), gate, gpus=1,
                               qos="scavenger") for i in range(2)]
    wait_until(lambda: all(f.status == "running" for f in scavengers), timeout=CALL_SECONDS,
               what="the scavenger calls to take both GPUs")
    # An interactive call needs a GPU: one scavenger is preempted, saves, and runs again.
    assert owner.submit(os.getpid, gpus=1).result(timeout=CALL_SECONDS) > 0
    wait_until(lambda: any(f.preempted for f in scavengers) or any(f.done() for f in scavengers),
               timeout=CALL_SECONDS, what="a preemption")
    preempted = [f.result(timeout=CALL_SECONDS) for f in scavengers if f.preempted]
    assert preempted == ["resumed from step 7"], preempted
    open(gate, "w").close()
    assert sum(f.preempted for f in scavengers) == 1
    assert all(f.result(timeout=CALL_SECONDS) for f in scavengers)


def gpus_seen():
    import os
    return sorted(int(g) for g in os.environ["CUDA_VISIBLE_DEVICES"].split(","))


def test_a_two_gpu_call_gets_two_gpus_joined_by_nvlink(tmp_path):
    # Four simulated GPUs report NVLink pairs (0-1, 2-3). With one GPU taken, a 2-GPU call must
    # get the intact pair, never one GPU of each.
    home = tmp_path / "home"
    cluster = start_cluster(home, gpus=4, cpus=3)
    try:
        with cluster.client(set_as_default=False) as c:
            gate = tmp_path / "gate"
            one = c.submit(wait_for_file, str(gate), 60, gpus=1)
            wait_until(lambda: one.status == "running", timeout=CALL_SECONDS, what="1-GPU call")
            taken = one.placement.gpu_ids[0]
            pair = c.submit(gpus_seen, gpus=2).result(timeout=CALL_SECONDS)
            assert pair[0] // 2 == pair[1] // 2 and taken // 2 != pair[0] // 2, (taken, pair)
            gate.touch()
            assert one.result(timeout=CALL_SECONDS) is True
    finally:
        cluster.stop()


def test_a_user_sees_only_their_own_queued_calls(policy_cluster, owner, tmp_path):
    gate = tmp_path / "gate"
    hog = owner.submit(wait_for_file, str(gate), 60, gpus=2)
    wait_until(lambda: hog.status == "running", timeout=CALL_SECONDS, what="the 2-GPU call")
    mine = owner.submit(number, "6", gpus=1)
    with bulletin.Client(policy_cluster.address, token=INTERN_TOKEN,
                         set_as_default=False) as intern:
        theirs = intern.submit(number, "7", gpus=1)
        everything = wait_until(lambda: len((s := owner.status()).queue) == 2 and s,
                                timeout=CALL_SECONDS, what="both calls queued")
        assert {q.user for q in everything.queue} == {owner.user, "ivy"}
        assert everything.others_queued == 0  # the owner sees every call

        seen = intern.status()
        assert [q.user for q in seen.queue] == ["ivy"]  # not the owner's call, nor its name
        assert seen.others_queued == 1
        ivy_position = next(q.position for q in everything.queue if q.user == "ivy")
        assert seen.queue[0].position == ivy_position  # the true place in the queue
        assert "2 queued (1 of other users, not shown)" in str(seen)
        gate.touch()
        assert mine.result(timeout=CALL_SECONDS) == 6
        assert theirs.result(timeout=CALL_SECONDS) == 7


def test_an_admin_sees_every_users_queued_calls(tmp_path):
    admin_token = "admin-token-0123456789abcdef"
    config = tmp_path / "cluster.yaml"
    config.write_text(CONFIG.replace("users:\n", f'users:\n  - {{name: grace, token: "{admin_token}", admin: true}}\n'))
    c = start_cluster(tmp_path / "home", "--config", str(config), gpus=1, cpus=1)
    try:
        gate = tmp_path / "gate"
        with c.client(set_as_default=False) as owner, \
                bulletin.Client(c.address, token=INTERN_TOKEN, set_as_default=False) as intern, \
                bulletin.Client(c.address, token=admin_token, set_as_default=False) as admin:
            hog = owner.submit(wait_for_file, str(gate), 60, gpus=1)
            wait_until(lambda: hog.status == "running", timeout=CALL_SECONDS, what="the GPU call")
            theirs = intern.submit(number, "7", gpus=1)
            seen = wait_until(lambda: (s := admin.status()).queue and s, timeout=CALL_SECONDS,
                              what="the intern's call queued")
            assert [q.user for q in seen.queue] == ["ivy"] and seen.others_queued == 0
            assert intern.status().others_queued == 0  # nothing of others waits
            gate.touch()
            assert theirs.result(timeout=CALL_SECONDS) == 7
    finally:
        c.stop()
