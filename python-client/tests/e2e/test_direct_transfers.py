"""Direct worker-to-worker transfers (docs/data-plane.md): a result kept on worker A that a call
on worker B reads goes from A's own data port to B, on a ticket the head signed, without
crossing the head; when B cannot reach A it comes through the head as before, said once in B's
log; and another user cannot get a ticket for someone's object. Real runtimes, two real
`bulletin worker` processes each, two users where it matters.

(The happy path with the head's counters is also in test_workers.py, beside the gRPC-only one.)
"""

from __future__ import annotations

import grpc
import numpy as np
import pytest

import bulletin
from bulletin._proto import bulletin_pb2 as pb
from bulletin._ref import Ref
from cluster_support import (ALICE, BOB, CALL_SECONDS, cli_env, start_configured_cluster,
                             wait_until)
from test_workers import workers  # noqa: F401 (the fixture: start, wait, kill, wait gone)

pytestmark = pytest.mark.timeout(300)

EIGHT_MIB = 1 << 21  # float32 elements
PAYLOAD = EIGHT_MIB * 4
EXPECTED = float(np.arange(EIGHT_MIB, dtype=np.float32).astype(np.float64).sum())


# Calls' functions live here: this module is pickled by value (conftest), test_workers is not.
def arange(n):
    import numpy as np
    return np.arange(n, dtype=np.float32)


def total(x):
    import numpy as np
    return float(np.asarray(x, dtype=np.float64).sum())


def hold(x, gate):
    import os
    import time
    while not os.path.exists(gate):
        time.sleep(0.01)
    return True


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    """Alice and bob, and no GPU of the head's own: GPU calls run on the attached workers."""
    home = tmp_path_factory.mktemp("bulletin-direct")
    c = start_configured_cluster(home, f"""
users:
  - {{name: alice, group: vision, token: "{ALICE}"}}
  - {{name: bob, group: nlp, token: "{BOB}"}}
""", gpus=0, cpus=1, env={**cli_env(home), "BULLETIN_WORKER_GRACE": "0",
                          "BULLETIN_LINK_LOSS_GRACE": "0"})
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def cluster(head):
    return head


@pytest.fixture
def head_client(head):
    """Alice on the head's host (test_workers' `workers` fixture watches attachment with it)."""
    with bulletin.Client(head.address, token=ALICE, set_as_default=False) as client:
        yield client


@pytest.fixture
def alice(head_client):
    return head_client


@pytest.fixture
def two_workers(head, workers):
    """Starts `PREFIX-a` and `PREFIX-b`, one simulated GPU each, with extra environment."""
    def start(prefix: str, **env: str) -> list:
        return [workers(f"{prefix}-{name}", "--simulate-gpus", "1",
                        env={**cli_env(head.home), **env}) for name in ("a", "b")]
    return start


def read_away_from_keeper(client, made, tmp_path, tag: str):
    """A call reading `made` that must run on the worker that does not keep it: a first reader
    holds the keeper's only GPU (locality puts it there) until the second one has run."""
    keeper = made.placement.worker_id
    gate = tmp_path / f"gate-{tag}"
    holder = client.submit(hold, made, str(gate), gpus=1)
    wait_until(lambda: holder.status == "running", timeout=CALL_SECONDS, what="holder to run")
    assert holder.placement.worker_id == keeper
    elsewhere = client.submit(total, made, gpus=1)
    value = elsewhere.result(timeout=CALL_SECONDS)
    assert elsewhere.placement.worker_id != keeper
    gate.touch()
    assert holder.result(timeout=CALL_SECONDS) is True
    return value, keeper, elsewhere.placement.worker_id


def test_an_unreachable_keeper_sends_the_value_through_the_head_said_once(
        alice, two_workers, tmp_path):
    # Each worker announces an address where nothing listens (its port is on 127.0.0.1): the
    # other worker's direct fetch is refused at connect, and falls back to the head's path.
    workers = two_workers("far", BULLETIN_DIRECT_HOST="127.0.0.2")
    before = alice.status().store
    readers = []
    for round_ in range(2):
        n = EIGHT_MIB + round_  # new content each round (equal bytes would be found at the head)
        made = alice.submit(arange, n, gpus=1)
        made.exception(timeout=CALL_SECONDS)
        value, keeper, reader = read_away_from_keeper(alice, made, tmp_path, str(round_))
        assert value == float(np.arange(n, dtype=np.float32).astype(np.float64).sum())
        readers.append(reader)
        del made
    after = alice.status().store
    # Tickets were issued, and the head carried the bytes instead: pulled from the keeper and
    # fetched by the reader.
    assert after["direct_tickets"] - before["direct_tickets"] == 2
    assert after["pulled_bytes"] - before["pulled_bytes"] >= 2 * PAYLOAD
    assert after["sent_to_workers_bytes"] - before["sent_to_workers_bytes"] >= 2 * PAYLOAD
    for worker in workers:
        said = worker.output().count("cannot be reached from worker")
        moves_to_it = readers.count(worker.worker_id)
        assert said == min(moves_to_it, 1), worker.output()


def test_the_direct_path_moves_the_value_and_the_head_carries_no_payload(
        alice, two_workers, tmp_path):
    two_workers("near")
    before = alice.status().store
    made = alice.submit(arange, EIGHT_MIB, gpus=1)
    made.exception(timeout=CALL_SECONDS)
    value, keeper, reader = read_away_from_keeper(alice, made, tmp_path, "near")
    assert value == EXPECTED and keeper != reader
    after = alice.status().store
    assert after["direct_tickets"] - before["direct_tickets"] == 1
    for counter in ("data_port_bytes", "pulled_bytes", "sent_to_workers_bytes"):
        assert after[counter] - before[counter] < PAYLOAD, counter
    # The keeper still has it for the runtime; the client's own fetch works as before.
    np.testing.assert_array_equal(made.result(timeout=CALL_SECONDS),
                                  np.arange(EIGHT_MIB, dtype=np.float32))


def test_bob_cannot_get_a_ticket_for_alices_object(cluster, alice, two_workers, tmp_path):
    two_workers("ten")
    made = alice.submit(arange, EIGHT_MIB, gpus=1)
    made.exception(timeout=CALL_SECONDS)
    keeper = made.placement.worker_id
    gate = tmp_path / "gate-bob"
    holder = alice.submit(hold, made, str(gate), gpus=1)
    wait_until(lambda: holder.status == "running", timeout=CALL_SECONDS, what="holder to run")
    with bulletin.Client(cluster.address, token=BOB, set_as_default=False) as bob:
        before = bob.status().store["direct_tickets"]
        # Ids are not secrets: bob names alice's result in a call that would run on the other
        # worker (the keeper's GPU is held). It is not in his store: refused before placement.
        forged = Ref(made.remote_id, PAYLOAD, "ndarray", release=lambda oid: None)
        with pytest.raises(bulletin.BulletinError, match="not in this user's store"):
            bob.submit(total, forged, gpus=1).result(timeout=CALL_SECONDS)
        assert bob.status().store["direct_tickets"] == before
    gate.touch()
    assert holder.result(timeout=CALL_SECONDS) is True
    assert holder.placement.worker_id == keeper


@pytest.fixture
def remote_alice(cluster, monkeypatch):
    """Alice as a client on another host sees her: no store folder to map, the data ports."""
    monkeypatch.setenv("BULLETIN_DATA_PATH", "bulk")
    with bulletin.Client(cluster.address, token=ALICE, set_as_default=False) as client:
        assert not client._transfer.same_host
        yield client


def test_a_client_elsewhere_fetches_a_kept_result_from_its_worker(remote_alice, two_workers):
    two_workers("cli")
    made = remote_alice.submit(arange, EIGHT_MIB + 7, gpus=1)
    made.exception(timeout=CALL_SECONDS)
    before = remote_alice.status().store
    np.testing.assert_array_equal(made.result(timeout=CALL_SECONDS),
                                  np.arange(EIGHT_MIB + 7, dtype=np.float32))
    assert remote_alice._transfer.last_path == "direct"
    after = remote_alice.status().store
    assert after["direct_tickets"] - before["direct_tickets"] == 1
    for counter in ("data_port_bytes", "pulled_bytes", "sent_to_workers_bytes"):
        assert after[counter] - before[counter] < PAYLOAD, counter


def test_a_client_that_cannot_reach_the_worker_fetches_through_the_head(remote_alice,
                                                                        two_workers):
    two_workers("hid", BULLETIN_DIRECT_HOST="127.0.0.2")
    made = remote_alice.submit(arange, EIGHT_MIB + 9, gpus=1)
    made.exception(timeout=CALL_SECONDS)
    before = remote_alice.status().store
    np.testing.assert_array_equal(made.result(timeout=CALL_SECONDS),
                                  np.arange(EIGHT_MIB + 9, dtype=np.float32))
    assert remote_alice._transfer.last_path == "bulk"
    assert "cannot be reached" in remote_alice._transfer.direct_unreachable
    after = remote_alice.status().store
    assert after["pulled_bytes"] - before["pulled_bytes"] >= PAYLOAD
    # The worker's leg crossed the head's data port before the head could serve the result; the
    # client's leg is counted when the head's send ends, which can come after the client read
    # its last byte and asked for the status (seen once in a full run on a loaded machine).
    assert after["data_port_bytes"] - before["data_port_bytes"] >= PAYLOAD


def test_bob_cannot_open_a_direct_transfer_of_alices_object(cluster, alice, two_workers):
    two_workers("peek")
    made = alice.submit(arange, EIGHT_MIB + 11, gpus=1)
    made.exception(timeout=CALL_SECONDS)
    with bulletin.Client(cluster.address, token=BOB, set_as_default=False) as bob:
        before = bob.status().store["direct_tickets"]
        with pytest.raises(grpc.RpcError) as refused:
            bob._conn.stub.OpenTransfer(pb.OpenTransferRequest(
                direction=pb.TRANSFER_GET, id=made.remote_id, direct=True),
                metadata=bob._conn.metadata, timeout=10)
        assert refused.value.code() == grpc.StatusCode.NOT_FOUND
        assert bob.status().store["direct_tickets"] == before
    assert made.result(timeout=CALL_SECONDS)[3] == 3
