"""Clients that outlive a broken link (docs/durability.md, "Reconnecting clients and workers"):
a real runtime and real executors, with a TCP proxy (link_proxy) between client and runtime that
the test cuts and restores. The runtime is not restarted: the session is kept detached while the
link is down, its calls run on, and the client resumes it."""

from __future__ import annotations

import sys
import time

import grpc
import pytest

import bulletin
from bulletin._proto import bulletin_pb2 as pb
from bulletin._proto import bulletin_pb2_grpc as pb_grpc
from cluster_support import (ALICE, BOB, CALL_SECONDS, cli_env, start_cluster,
                             start_two_user_cluster, wait_for_file, wait_until)
from durability_support import start_worker, stop_worker
from link_proxy import LinkProxy


pytestmark = pytest.mark.timeout(240)


def talk_then_wait(gate: str, marker: str) -> int:
    """Runs remotely: prints, waits for the gate, prints while the link is cut, returns."""
    import sys
    print("before the cut", flush=True)
    open(marker, "w").close()
    wait_for_file(gate, 60)
    for i in range(3):
        print(f"during the cut {i}", flush=True)
    print("to stderr", file=sys.stderr, flush=True)
    return 42


def square(x: int) -> int:
    return x * x


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    home = tmp_path_factory.mktemp("bulletin-reconnect")
    c = start_two_user_cluster(home, cpus=2)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def short_window_cluster(tmp_path_factory):
    home = tmp_path_factory.mktemp("bulletin-reconnect-window")
    c = start_cluster(home, gpus=0, cpus=1,
                      env={**cli_env(home), "BULLETIN_RECONNECT_WINDOW": "2"})
    try:
        yield c
    finally:
        c.stop()


def test_calls_complete_and_output_continues_across_a_cut_link(cluster, tmp_path, capfd):
    gate, marker = tmp_path / "gate", tmp_path / "started"
    with LinkProxy(cluster.address) as proxy, bulletin.Client(
            proxy.address, token=ALICE, set_as_default=False, reconnect_timeout=60) as client:
        talking = client.submit(talk_then_wait, str(gate), str(marker))
        earlier = client.map(square, range(5))
        assert [f.result(timeout=CALL_SECONDS) for f in earlier] == [0, 1, 4, 9, 16]
        wait_until(lambda: "before the cut" in talking.output, timeout=CALL_SECONDS,
                   what="the call's first line")

        proxy.cut()
        gate.touch()  # the call prints and ends while its client cannot hear it
        # Calls submitted during the cut wait for the link, then go.
        later = client.map(square, range(10, 20))
        time.sleep(1.5)
        assert not talking.done()
        proxy.restore()

        assert talking.result(timeout=CALL_SECONDS) == 42
        # Every line once, in order: what was printed during the cut came with the resume.
        assert talking.output.count("before the cut") == 1
        assert [line for line in talking.output.splitlines() if "during" in line] == [
            f"during the cut {i}" for i in range(3)]
        assert "to stderr" in talking.output
        assert [f.result(timeout=CALL_SECONDS) for f in later] == [x * x for x in range(10, 20)]
        assert client.submit(square, 7).result(timeout=CALL_SECONDS) == 49
        assert proxy.connections >= 2  # it really reconnected
    err = capfd.readouterr().err
    assert err.count("waiting up to 60 s") == 1, err
    assert "the session resumed" in err


def test_another_user_cannot_resume_a_session(cluster, tmp_path):
    """Bob learnt alice's session id (ids are not secrets): resuming it with his token is
    refused, and alice's session and call are untouched."""
    gate, marker = tmp_path / "gate", tmp_path / "started"
    with bulletin.Client(cluster.address, token=ALICE, set_as_default=False) as alice:
        call = alice.submit(talk_then_wait, str(gate), str(marker))
        wait_until(marker.exists, timeout=CALL_SECONDS, what="alice's call to start")
        channel = grpc.insecure_channel(cluster.address)
        try:
            stub = pb_grpc.BulletinStub(channel)
            metadata = (("authorization", f"Bearer {BOB}"),
                        ("bulletin-session", alice._conn.session_id),
                        ("bulletin-resume-after", "0"))
            with pytest.raises(grpc.RpcError) as refused:
                next(stub.Session(iter(()), metadata=metadata, timeout=10))
            assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
            assert "belongs to another user" in refused.value.details()
            # Nor can he open a fresh session under her id.
            with pytest.raises(grpc.RpcError) as taken:
                next(stub.Session(iter(()), metadata=metadata[:2], timeout=10))
            assert taken.value.code() in (grpc.StatusCode.ALREADY_EXISTS,
                                          grpc.StatusCode.INVALID_ARGUMENT)
        finally:
            channel.close()
        gate.touch()
        assert call.result(timeout=CALL_SECONDS) == 42
        assert call.output.count("before the cut") == 1
    # Once her session ended, his object call naming it hears only that it is not his (hers
    # hears that it ended).
    channel = grpc.insecure_channel(cluster.address)
    try:
        stub = pb_grpc.BulletinStub(channel)

        def has_objects(token):
            try:
                stub.HasObjects(pb.HasObjectsRequest(ids=["00" * 16]), timeout=10, metadata=(
                    ("authorization", f"Bearer {token}"),
                    ("bulletin-session", alice._conn.session_id)))
            except grpc.RpcError as error:
                return error
            return None
        def ended_for_her():
            error = has_objects(ALICE)
            ended = error is not None and error.code() == grpc.StatusCode.FAILED_PRECONDITION
            return error if ended else None
        ended = wait_until(ended_for_her, timeout=10, what="alice's closed session to be ended")
        assert "has ended" in ended.details()
        his = has_objects(BOB)
        assert his is not None and his.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "belongs to another user" in his.details()
    finally:
        channel.close()


def test_a_session_whose_window_passed_is_ended(short_window_cluster, tmp_path):
    c = short_window_cluster
    gate, marker = tmp_path / "gate", tmp_path / "started"
    with LinkProxy(c.address) as proxy, bulletin.Client(
            proxy.address, token=c.token, set_as_default=False, reconnect_timeout=60) as client:
        call = client.submit(talk_then_wait, str(gate), str(marker))
        wait_until(marker.exists, timeout=CALL_SECONDS, what="the call to start")
        proxy.cut()
        time.sleep(4)  # past the runtime's 2 s window: it ends the session and stops its call
        proxy.restore()
        with pytest.raises(bulletin.RuntimeUnreachableError) as lost:
            call.result(timeout=CALL_SECONDS)
        assert "is not kept on this runtime" in str(lost.value)
    with c.client(set_as_default=False) as other:
        wait_until(lambda: other.status().running == 0, timeout=CALL_SECONDS,
                   what="the ended session's call to stop")
    assert "did not resume it within 2 s" in (c.home / "runtime.log").read_text()


def test_runtime_unreachable_only_after_the_limit(short_window_cluster, tmp_path, capfd):
    c = short_window_cluster
    gate, marker = tmp_path / "gate", tmp_path / "started"
    with LinkProxy(c.address) as proxy, bulletin.Client(
            proxy.address, token=c.token, set_as_default=False, reconnect_timeout=1.5) as client:
        call = client.submit(talk_then_wait, str(gate), str(marker))
        wait_until(marker.exists, timeout=CALL_SECONDS, what="the call to start")
        proxy.cut()
        started = time.monotonic()
        with pytest.raises(bulletin.RuntimeUnreachableError) as lost:
            call.result(timeout=CALL_SECONDS)
        waited = time.monotonic() - started
        assert waited >= 1.4, waited
        assert "did not come back within 1.5 s" in str(lost.value)
        assert "reconnect_timeout" in str(lost.value)
        gate.touch()
    err = capfd.readouterr().err
    assert err.count("waiting up to 1.5 s") == 1, err
    assert "gave up waiting" in err


def big_result(n: int):
    import numpy as np
    return np.arange(n, dtype=np.int64)


def test_a_worker_whose_link_is_cut_reattaches_and_its_calls_results_arrive(
        tmp_path_factory, tmp_path):
    home = tmp_path_factory.mktemp("bulletin-reconnect-workers")
    head = start_cluster(home, gpus=0, cpus=1,
                         env={**cli_env(home), "BULLETIN_WORKER_GRACE": "60",
                              "BULLETIN_LINK_LOSS_GRACE": "60"})
    gate, marker = tmp_path / "gate", tmp_path / "started"
    proxy = LinkProxy(head.address)
    proc, log = start_worker(home, proxy.address, "far", "--reconnect-timeout", "60")
    try:
        with head.client(set_as_default=False) as client:
            wait_until(lambda: any(w.worker_id == "far" for w in client.status().workers),
                       timeout=60, what="the worker to attach")
            # A large result stays in the worker's store: the runtime only knows where it is.
            kept = client.submit(big_result, 400_000, gpus=1)
            assert kept.result(timeout=CALL_SECONDS).shape == (400_000,)
            kept_before = client.submit(big_result, 300_000, gpus=1)
            wait_until(kept_before.done, timeout=CALL_SECONDS, what="the kept result")
            call = client.submit(talk_then_wait, str(gate), str(marker), gpus=1)
            wait_until(marker.exists, timeout=CALL_SECONDS, what="the call to start on the worker")

            proxy.cut()
            gate.touch()  # it ends while the worker cannot tell the runtime
            time.sleep(2)
            assert not call.done()
            proxy.restore()

            assert call.result(timeout=60) == 42
            assert call.output.count("before the cut") == 1
            assert "during the cut 2" in call.output
            # The result kept there before the cut is still reachable: the worker reported it.
            assert int(kept_before.result(timeout=CALL_SECONDS)[-1]) == 299_999
            assert client.submit(square, 9, gpus=1).result(timeout=CALL_SECONDS) == 81
        text = (home / "runtime.log").read_text()
        assert "worker far reattached" in text, text[-3000:]
        assert proc.poll() is None, log.read_text()
    finally:
        proxy.close()
        stop_worker(proc)
        head.stop()


def test_a_worker_whose_head_stays_away_exits_with_one_line(tmp_path_factory):
    home = tmp_path_factory.mktemp("bulletin-reconnect-lonely")
    head = start_cluster(home, gpus=0, cpus=1)
    proxy = LinkProxy(head.address)
    proc, log = start_worker(home, proxy.address, "lonely", "--reconnect-timeout", "2")
    try:
        with head.client(set_as_default=False) as client:
            wait_until(lambda: any(w.worker_id == "lonely" for w in client.status().workers),
                       timeout=60, what="the worker to attach")
        proxy.cut()
        assert proc.wait(timeout=60) == 0
        output = log.read_text()
        assert "did not come back within 2 s" in output, output
        assert "Exception" not in output and "\tat " not in output, output
    finally:
        proxy.close()
        stop_worker(proc)
        head.stop()
