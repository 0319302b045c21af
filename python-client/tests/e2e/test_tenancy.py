"""One user against another through the API, on a real runtime with two users: bob knows the
ids of alice's call and of its result (ids are not secrets: they show in logs and tracebacks)
and tries to cancel the call, fetch the result, see the call in status and attach a worker with
his own token. Each attempt fails, and alice's call is unaffected. (What bob's *code* can do
inside an executor is test_isolation.py's.)"""

from __future__ import annotations

import time

import grpc
import numpy as np
import pytest

import bulletin
from bulletin._proto import bulletin_pb2 as pb
from cluster_support import (ALICE, BOB, CALL_SECONDS, start_two_user_cluster, wait_for_file,
                             wait_until)


pytestmark = pytest.mark.timeout(180)


def number(text: str) -> int:
    return int(text)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    home = tmp_path_factory.mktemp("bulletin-tenancy")
    c = start_two_user_cluster(home)
    try:
        yield c
    finally:
        c.stop()


def test_bob_cannot_cancel_fetch_or_see_alices_calls(cluster, tmp_path):
    gate = tmp_path / "gate"
    with bulletin.Client(cluster.address, token=ALICE, set_as_default=False) as alice, \
            bulletin.Client(cluster.address, token=BOB, set_as_default=False) as bob:
        running = alice.submit(wait_for_file, str(gate), 60, gpus=1)
        wait_until(lambda: running.status == "running", timeout=CALL_SECONDS, what="alice's call")
        queued = alice.submit(number, "3", gpus=1)
        wait_until(lambda: alice.status().queue, timeout=CALL_SECONDS, what="alice's queued call")

        # Cancels of another user's calls, sent on bob's own session, change nothing.
        for key in (running.key, queued.key):
            bob._session.send(pb.ClientMessage(cancel=pb.CancelTask(task_id=key)))
        # A cancel that took effect would end alice's calls within milliseconds; give it a
        # second (the cancels ride bob's stream, the status call does not wait for them).
        time.sleep(1.0)
        seen = bob.status()
        assert not seen.queue and seen.others_queued == 1
        assert running.status == "running" and queued.status == "queued"

        gate.touch()
        assert running.result(timeout=CALL_SECONDS) is True
        assert queued.result(timeout=CALL_SECONDS) == 3

        # A result left in the store: bob cannot open a transfer for it, nor read it by chunks.
        big = alice.submit(np.arange, 1 << 20)
        big.exception(timeout=CALL_SECONDS)
        with pytest.raises(grpc.RpcError) as refused:
            bob._conn.stub.OpenTransfer(pb.OpenTransferRequest(
                direction=pb.TRANSFER_GET, id=big.remote_id), metadata=bob._conn.metadata,
                timeout=10)
        assert refused.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(bulletin.BulletinError):
            bob._transfer.fetch(big.remote_id, 8 << 20)
        assert big.result(timeout=CALL_SECONDS)[5] == 5


def test_a_user_token_cannot_attach_a_worker(cluster):
    channel = grpc.insecure_channel(cluster.address)
    attach = channel.stream_stream(
        "/bulletin.v1.Workers/Attach",
        request_serializer=pb.WorkerMessage.SerializeToString,
        response_deserializer=pb.HeadMessage.FromString)
    hello = pb.WorkerMessage(register=pb.RegisterWorker(worker_id="bob-fake", host="evil"))
    with pytest.raises(grpc.RpcError) as refused:
        for _ in attach(iter([hello]), metadata=(("authorization", f"Bearer {BOB}"),),
                        timeout=10):
            pass
    assert refused.value.code() in (grpc.StatusCode.UNAUTHENTICATED,
                                    grpc.StatusCode.PERMISSION_DENIED)
    channel.close()
