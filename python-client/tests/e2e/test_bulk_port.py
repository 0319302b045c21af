"""The bulk data port against real clusters on loopback: BULLETIN_DATA_PATH=bulk makes a
same-host client take the cross-host path (the one test_cross_host runs between network
namespaces). Tickets that are wrong, used or expired are refused; a connection cut mid-upload
leaves nothing; a corrupted upload is sent again; an unreachable port falls back to gRPC; a
too-large upload and another user's object are refused before any byte moves. Connections that
never show a ticket cannot hold the port shut."""

from __future__ import annotations

import os
import socket
import struct
import time

import grpc
import numpy as np
import pytest

import bulletin
from bulletin._data import _bulk
from bulletin._data._objects import encode
from bulletin._proto import bulletin_pb2 as pb
from cluster_support import (CALL_SECONDS, assert_serves, free_port, staged_files, start_cluster,
                             wait_until)

pytestmark = pytest.mark.timeout(120)

TICKET_SECONDS = 1.0


def double(x):
    return x * 2


def open_transfer(client, direction, oid, size=0):
    return client._conn.stub.OpenTransfer(pb.OpenTransferRequest(
        direction=direction, id=oid, size=size), metadata=client._conn.metadata, timeout=10)


def data_socket(client) -> socket.socket:
    return _bulk.connect(client._transfer._data_host, client._transfer._data_port, 5)


@pytest.fixture
def bulk_client(cluster, monkeypatch):
    monkeypatch.setenv("BULLETIN_DATA_PATH", "bulk")
    with cluster.client(set_as_default=False) as remote:
        assert not remote._transfer.same_host and remote._transfer._data_port > 0
        yield remote


def test_large_object_round_trip_goes_through_the_data_port(bulk_client, client):
    a = np.random.default_rng(5).random(6 << 20)  # 48 MiB each way
    value = bulk_client.submit(double, a).result(timeout=CALL_SECONDS)
    assert bulk_client._transfer.last_path == "bulk"  # the result came back through the port
    np.testing.assert_array_equal(value, a * 2)
    assert value.flags.writeable  # downloaded into the client's own memory
    uploads = bulk_client._transfer.uploads
    assert bulk_client.submit(lambda x: float(x[9]), a).result(timeout=CALL_SECONDS) == a[9]
    assert bulk_client._transfer.uploads == uploads  # "has it?" still spares the upload


def test_idle_connections_cannot_hold_the_data_port_shut(bulk_client):
    """200 connections that never send a ticket (and one that sends half of one) used to take
    all eight data threads: a real upload then failed after 10 s. Now they wait in the header
    gate, which closes them within its deadline, and the real transfer goes through at once."""
    host, port = bulk_client._transfer._data_host, bulk_client._transfer._data_port
    idle = [socket.create_connection((host, port), timeout=5) for _ in range(200)]
    half = socket.create_connection((host, port), timeout=5)
    half.sendall(struct.pack(">II", _bulk.MAGIC, _bulk.VERSION) + b"\0" * 7)
    try:
        a = np.random.default_rng(6).random(4 << 20)  # 32 MiB each way
        uploads = bulk_client._transfer.uploads
        value = bulk_client.submit(double, a).result(timeout=CALL_SECONDS)
        assert bulk_client._transfer.uploads == uploads + 1
        assert bulk_client._transfer.last_path == "bulk"
        np.testing.assert_array_equal(value, a * 2)
        # Each idle connection is closed by the runtime (at its deadline, or as the oldest of
        # its address past the cap): reading it ends instead of blocking.
        for sock in [*idle, half]:
            sock.settimeout(30)
            try:
                assert sock.recv(1) == b""
            except ConnectionResetError:
                pass
    finally:
        for sock in [*idle, half]:
            sock.close()


def test_downloads_reuse_the_memory_of_results_let_go_and_never_one_still_held(bulk_client,
                                                                             client):
    buffers = bulk_client._transfer.receive_buffers
    held = bulk_client.submit(np.full, 1 << 20, 1.0).result(timeout=CALL_SECONDS)
    reused = buffers.reused
    # Another result of that size while the first is still held: fresh memory.
    second = bulk_client.submit(np.full, 1 << 20, 2.0).result(timeout=CALL_SECONDS)
    assert buffers.reused == reused
    del second  # let go: the next download lands in its memory
    third = bulk_client.submit(np.full, 1 << 20, 3.0).result(timeout=CALL_SECONDS)
    assert buffers.reused == reused + 1
    np.testing.assert_array_equal(held, np.full(1 << 20, 1.0))
    np.testing.assert_array_equal(third, np.full(1 << 20, 3.0))


def test_a_corrupted_upload_is_sent_again(bulk_client, client):
    a = np.random.default_rng(6).random(3 << 20)
    bulk_client._transfer.corrupt_next_chunk = True
    value = bulk_client.submit(double, a).result(timeout=CALL_SECONDS)
    np.testing.assert_array_equal(value, a * 2)
    assert not bulk_client._transfer.corrupt_next_chunk  # the flipped bit was sent...
    assert bulk_client._transfer.resends == 1  # ...refused by the runtime, and sent again


def _release_an_upload(remote, nbytes: int, seed: int) -> None:
    """Uploads new content of that size and lets it go: the store keeps its file, pages
    allocated, for the next upload of that size."""
    referenced = remote.status().store["referenced"]
    oid = remote._transfer.acquire(encode(np.random.default_rng(seed).random(nbytes // 8)))
    remote._transfer.release(oid)
    wait_until(lambda: remote.status().store["referenced"] <= referenced, timeout=10,
               what="the release to reach the runtime")


@pytest.mark.parametrize("memory", ["fresh", "released"])
def test_a_connection_cut_mid_upload_leaves_nothing(cluster, bulk_client, client, memory):
    if memory == "released":  # the upload then reads straight into that object's old file
        _release_an_upload(bulk_client, 64 << 20, seed=30)
    recycled = bulk_client.status().store["recycled_files"]
    encoded = encode(np.random.default_rng(7).random(8 << 20))  # 64 MiB
    oid = encoded.digest()
    reply = open_transfer(bulk_client, pb.TRANSFER_PUT, oid, encoded.nbytes)
    sock = data_socket(bulk_client)
    sock.sendall(struct.pack(">II", _bulk.MAGIC, _bulk.VERSION) + reply.ticket)
    assert sock.recv(1) == b"\0"
    sent = 0
    for piece in encoded.iter_chunks(1 << 20):
        sock.sendall(piece)
        sent += len(piece)
        if sent >= encoded.nbytes // 2:
            break
    sock.close()  # half the bytes, no CRC: the client died
    wait_until(lambda: not staged_files(cluster.store_dir), timeout=10,
               what="the partial upload to go away")
    assert not bulk_client._conn.call(bulk_client._conn.stub.HasObjects,
                                      pb.HasObjectsRequest(ids=[oid]), "HasObjects").present[0]
    assert bulk_client.status().store["recycled_files"] == recycled + (memory == "released")
    assert_serves(client)


def test_a_large_upload_into_released_memory_is_read_straight_into_it(bulk_client, client):
    for seed, corrupt in ((20, False), (22, True)):  # the in-place path checks its CRC too
        _release_an_upload(bulk_client, 64 << 20, seed)
        recycled = bulk_client.status().store["recycled_files"]
        resends = bulk_client._transfer.resends
        a = np.random.default_rng(seed + 1).random(8 << 20)  # 64 MiB of new content
        bulk_client._transfer.corrupt_next_chunk = corrupt
        bulk_client._transfer.acquire(encode(a))  # the upload alone (a result could reuse too)
        assert bulk_client.status().store["recycled_files"] == recycled + 1
        assert bulk_client._transfer.resends == resends + corrupt
        value = bulk_client.submit(double, a).result(timeout=CALL_SECONDS)  # no upload: has it
        np.testing.assert_array_equal(value, a * 2)


def test_an_object_downloaded_then_released_gives_its_memory_to_the_next_upload(bulk_client,
                                                                               client):
    a = np.random.default_rng(40).random(8 << 20)  # 64 MiB
    encoded = encode(a)
    referenced = bulk_client.status().store["referenced"]
    oid = bulk_client._transfer.acquire(encoded)
    back = bulk_client._transfer.fetch(oid, encoded.nbytes)  # the runtime maps it to check it
    assert bulk_client._transfer.last_path == "bulk" and back[7] == a[7]
    bulk_client._transfer.release(oid)
    wait_until(lambda: bulk_client.status().store["referenced"] <= referenced, timeout=10,
               what="the release to reach the runtime")
    recycled = bulk_client.status().store["recycled_files"]
    bulk_client._transfer.acquire(encode(np.random.default_rng(41).random(8 << 20)))
    # Reused only if the download left no mapping of the file behind in the runtime.
    assert bulk_client.status().store["recycled_files"] == recycled + 1


def test_an_unreachable_data_port_falls_back_to_grpc(bulk_client, client):
    transfer = bulk_client._transfer
    transfer._data_port = free_port()  # nothing listens there
    a = np.random.default_rng(8).random(2 << 20)
    value = bulk_client.submit(double, a).result(timeout=CALL_SECONDS)
    np.testing.assert_array_equal(value, a * 2)
    assert transfer.last_path == "grpc" and "cannot be reached" in transfer.bulk_unreachable
    assert transfer._data_port == 0  # not tried again by this client


# ---- tickets, capacity and owners: a cluster of its own, with short-lived tickets -------------


@pytest.fixture(scope="module")
def ticket_cluster(tmp_path_factory):
    home = tmp_path_factory.mktemp("bulk-home")
    config = home / "cluster.yaml"
    config.write_text("users:\n  - name: ada\n    group: g\n    token: ada-token-0123456789\n"
                      "  - name: bob\n    group: g\n    token: bob-token-0123456789\n")
    os.environ["BULLETIN_TICKET_SECONDS"] = str(TICKET_SECONDS)  # read by the runtime at start
    try:
        cluster = start_cluster(home, "--store-capacity", str(32 << 20), "--config", str(config))
    finally:
        del os.environ["BULLETIN_TICKET_SECONDS"]
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def ada(ticket_cluster, monkeypatch):
    monkeypatch.setenv("BULLETIN_DATA_PATH", "bulk")
    with bulletin.Client(ticket_cluster.address, token="ada-token-0123456789",
                         set_as_default=False) as c:
        yield c


def refused(client, ticket: bytes, header: bytes | None = None) -> str:
    sock = data_socket(client)
    with sock:
        sock.sendall(header if header is not None
                     else struct.pack(">II", _bulk.MAGIC, _bulk.VERSION) + ticket)
        status = sock.recv(1)[0]
        message = _bulk._message(sock)
        try:
            assert sock.recv(1) == b""  # and the runtime closed the connection
        except ConnectionResetError:
            pass  # closed with bytes of ours unread
    assert status == _bulk.REFUSED, message
    return message


def test_wrong_used_and_expired_tickets_are_refused(ticket_cluster, ada):
    assert "unknown transfer ticket" in refused(ada, os.urandom(32))
    assert "not a bulletin data connection" in refused(ada, b"", header=b"GET / HTTP/1.1\r\n" * 4)

    f = ada.submit(np.arange, 1 << 20)  # a result left in the store: something to GET
    f.exception(timeout=CALL_SECONDS)
    reply = open_transfer(ada, pb.TRANSFER_GET, f.remote_id)
    data = _bulk.get(data_socket(ada), reply.ticket, reply.size)
    assert len(data) == reply.size
    assert "already used" in refused(ada, reply.ticket)

    encoded = encode(np.ones(1 << 20))
    in_memory = ada.status().store["memory_bytes"]
    reply = open_transfer(ada, pb.TRANSFER_PUT, encoded.digest(), encoded.nbytes)
    # The upload's room is reserved (its file is made at its first byte).
    assert ada.status().store["memory_bytes"] >= in_memory + encoded.nbytes
    time.sleep(TICKET_SECONDS + 1.5)  # past the lifetime and one sweep
    assert "expired" in refused(ada, reply.ticket)
    assert ada.status().store["memory_bytes"] == in_memory  # the reservation was given back
    assert not staged_files(ticket_cluster.store_dir)
    assert f.result(timeout=CALL_SECONDS)[7] == 7
    assert_serves(ada)


def test_too_large_and_other_users_objects_are_refused_before_any_byte(ticket_cluster, ada):
    with pytest.raises(grpc.RpcError) as too_large:
        open_transfer(ada, pb.TRANSFER_PUT, "ab" * 16, 40 << 20)
    assert too_large.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    with pytest.raises(bulletin.StoreFullError):  # what the client makes of it
        ada._transfer.upload("ab" * 16, type("Big", (), {"nbytes": 40 << 20})())

    f = ada.submit(np.arange, 1 << 20)
    f.exception(timeout=CALL_SECONDS)
    with bulletin.Client(ticket_cluster.address, token="bob-token-0123456789",
                         set_as_default=False) as bob:
        with pytest.raises(grpc.RpcError) as missing:
            open_transfer(bob, pb.TRANSFER_GET, f.remote_id)
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(bulletin.BulletinError, match="NOT_FOUND"):
            bob._transfer.fetch(f.remote_id, 8 << 20)
    assert f.result(timeout=CALL_SECONDS)[3] == 3
    assert not staged_files(ticket_cluster.store_dir)
