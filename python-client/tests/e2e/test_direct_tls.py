"""Direct worker-to-worker transfers in a cluster that speaks TLS (docs/data-plane.md, "TLS on
workers' ports"): each worker's port speaks TLS with its own worker certificate (issued by the
cluster CA at join, docs/security.md), and readers (workers, clients on other hosts) accept only
a certificate of that CA naming the keeper the ticket is for. A result moves A -> B without
crossing the head; a plaintext reader, one without the cluster's CA and one expecting another
worker get nothing, and the ticket is not spent by them; an unreachable keeper still falls back
to the head. Real TLS runtime, real `bulletin worker` processes.
"""

from __future__ import annotations

import ssl

import cloudpickle
import grpc
import numpy as np
import pyarrow as pa
import pytest

import bulletin
from bulletin import _tls
from bulletin._codec import decode
from bulletin._data import _bulk
from bulletin._proto import bulletin_pb2 as pb
from cluster_support import (ALICE, BOB, CALL_SECONDS, cli_env, start_configured_cluster,
                             wait_until)
import test_direct_transfers as plain
from test_direct_transfers import EIGHT_MIB, EXPECTED, PAYLOAD, arange, read_away_from_keeper
from test_workers import workers  # noqa: F401 (the fixture: start, wait, kill, wait gone)

pytestmark = pytest.mark.timeout(300)

# The calls' functions live in test_direct_transfers: the executors cannot import it either.
cloudpickle.register_pickle_by_value(plain)


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    """A TLS runtime (on loopback, asked for with --tls), alice and bob, no GPU of its own."""
    home = tmp_path_factory.mktemp("bulletin-direct-tls")
    c = start_configured_cluster(home, f"""
users:
  - {{name: alice, group: vision, token: "{ALICE}"}}
  - {{name: bob, group: nlp, token: "{BOB}"}}
""", "--tls", gpus=0, cpus=1, env={**cli_env(home), "BULLETIN_WORKER_GRACE": "0",
                                                                "BULLETIN_LINK_LOSS_GRACE": "0"})
    try:
        assert c.info["tls"] is True
        yield c
    finally:
        c.stop()


@pytest.fixture
def head_client(head):
    with bulletin.Client(head.address, token=ALICE, ca=head.home / "ca.pem",
                         set_as_default=False) as client:
        yield client


@pytest.fixture
def two_workers(head, workers):
    def start(prefix: str, **env: str) -> list:
        return [workers(f"{prefix}-{name}", "--simulate-gpus", "1",
                        env={**cli_env(head.home), **env}) for name in ("a", "b")]
    return start


@pytest.fixture
def remote_alice(head, monkeypatch):
    monkeypatch.setenv("BULLETIN_DATA_PATH", "bulk")
    with bulletin.Client(head.address, token=ALICE, ca=head.home / "ca.pem",
                         set_as_default=False) as client:
        assert not client._transfer.same_host
        yield client


def test_a_result_moves_between_workers_over_tls_and_the_head_carries_no_payload(
        head_client, two_workers, tmp_path):
    started = two_workers("tnear")
    wait_until(lambda: all("over TLS" in worker.output() for worker in started), timeout=30,
               what="the workers to say they attached over TLS")
    before = head_client.status().store
    made = head_client.submit(arange, EIGHT_MIB, gpus=1)
    made.exception(timeout=CALL_SECONDS)
    value, keeper, reader = read_away_from_keeper(head_client, made, tmp_path, "tls")
    assert value == EXPECTED and keeper != reader
    after = head_client.status().store
    assert after["direct_tickets"] - before["direct_tickets"] == 1
    for counter in ("data_port_bytes", "pulled_bytes", "sent_to_workers_bytes"):
        assert after[counter] - before[counter] < PAYLOAD, counter
    for worker in started:  # no fallback was taken
        assert "through the head" not in worker.output(), worker.output()


def test_a_client_elsewhere_fetches_from_the_worker_over_pinned_tls(remote_alice, two_workers):
    two_workers("tcli")
    made = remote_alice.submit(arange, EIGHT_MIB + 3, gpus=1)
    made.exception(timeout=CALL_SECONDS)
    before = remote_alice.status().store
    np.testing.assert_array_equal(made.result(timeout=CALL_SECONDS),
                                  np.arange(EIGHT_MIB + 3, dtype=np.float32))
    assert remote_alice._transfer.last_path == "direct"
    after = remote_alice.status().store
    assert after["direct_tickets"] - before["direct_tickets"] == 1
    for counter in ("data_port_bytes", "pulled_bytes", "sent_to_workers_bytes"):
        assert after[counter] - before[counter] < PAYLOAD, counter


def test_a_plaintext_reader_or_one_expecting_another_worker_gets_nothing_and_spends_no_ticket(
        head, remote_alice, two_workers):
    two_workers("tpin")
    n = EIGHT_MIB + 5
    made = remote_alice.submit(arange, n, gpus=1)
    made.exception(timeout=CALL_SECONDS)
    conn = remote_alice._conn
    reply = conn.stub.OpenTransfer(pb.OpenTransferRequest(
        direction=pb.TRANSFER_GET, id=made.remote_id, direct=True), metadata=conn.metadata,
        timeout=10)
    source = reply.direct
    # The keeper's port serves its worker certificate: checked against the cluster CA and the
    # keeper's id, no pin (docs/security.md, "A certificate per worker").
    assert source.tls_worker_certificate and not source.tls_fingerprint and source.address
    other = "tpin-a" if source.keeper == "tpin-b" else "tpin-b"
    host, _, port = source.address.rpartition(":")
    request = _bulk.direct_request(source.reader, source.namespace, made.remote_id,
                                   source.ticket)
    # Plaintext: the TLS port takes the header for a broken handshake and closes.
    sock = _bulk.connect(host, int(port), 3.0)
    with pytest.raises((ConnectionError, OSError, _bulk.BulkError)):
        _bulk.get(sock, request, reply.size, direct=True)
    cluster = _tls.worker_context(_tls.resolve_ca(head.home / "ca.pem", head.address))
    # TLS with the cluster's CA, expecting another worker: refused before any byte is sent.
    with pytest.raises(_bulk.PinMismatch, match=f"not of worker {other}"):
        _bulk.connect(host, int(port), 3.0, tls=cluster, worker=other)
    # TLS without the cluster's CA: the handshake fails.
    strange = ssl.create_default_context()  # the system's CAs
    strange.check_hostname = False
    with pytest.raises(ssl.SSLError):
        _bulk.connect(host, int(port), 3.0, tls=strange, worker=source.keeper)
    # None spent the ticket: the keeper's own id gets the object with it.
    sock = _bulk.connect(host, int(port), 3.0, tls=cluster, worker=source.keeper)
    out = _bulk.get(sock, request, reply.size, direct=True, checksum=False)
    np.testing.assert_array_equal(decode(pa.py_buffer(out)), np.arange(n, dtype=np.float32))


def test_an_unreachable_keeper_still_sends_through_the_head(head_client, two_workers, tmp_path):
    two_workers("tfar", BULLETIN_DIRECT_HOST="127.0.0.2")
    before = head_client.status().store
    n = EIGHT_MIB + 1
    made = head_client.submit(arange, n, gpus=1)
    made.exception(timeout=CALL_SECONDS)
    value, _, _ = read_away_from_keeper(head_client, made, tmp_path, "tfar")
    assert value == float(np.arange(n, dtype=np.float32).astype(np.float64).sum())
    after = head_client.status().store
    assert after["direct_tickets"] - before["direct_tickets"] == 1
    assert after["pulled_bytes"] - before["pulled_bytes"] >= PAYLOAD


def test_bob_cannot_open_a_direct_transfer_of_alices_object(head, head_client, two_workers):
    two_workers("tpeek")
    made = head_client.submit(arange, EIGHT_MIB + 11, gpus=1)
    made.exception(timeout=CALL_SECONDS)
    with bulletin.Client(head.address, token=BOB, ca=head.home / "ca.pem",
                         set_as_default=False) as bob:
        with pytest.raises(grpc.RpcError) as refused:
            bob._conn.stub.OpenTransfer(pb.OpenTransferRequest(
                direction=pb.TRANSFER_GET, id=made.remote_id, direct=True),
                metadata=bob._conn.metadata, timeout=10)
        assert refused.value.code() == grpc.StatusCode.NOT_FOUND
