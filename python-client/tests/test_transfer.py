"""The object paths against a corrupting link: an in-process gRPC server that flips a bit in
chosen GetObject chunks, or a data port that flips one in a download, simulates the network
fault (the one thing a test here cannot cause for real); the client must fetch the bad bytes
again (gRPC: from the bad chunk's offset), or fail clearly."""

from __future__ import annotations

import os
import socket
import struct
import threading
from concurrent import futures
from types import SimpleNamespace

import grpc
import numpy as np
import pytest

import bulletin
from bulletin._data import _bulk
from bulletin._connection import Connection
from bulletin._data._objects import crc32c_extend, encode
from bulletin._proto import bulletin_pb2 as pb
from bulletin._proto import bulletin_pb2_grpc as pb_grpc
from bulletin._data._transfer import Transfer

CHUNK = 64 << 10


class CorruptingLink(pb_grpc.BulletinServicer):
    """Serves one object; the chunks at ``corrupt`` offsets arrive with a flipped bit the first
    ``times`` times they are sent."""

    def __init__(self, data: bytes, corrupt: set[int], times: int):
        self.data, self.corrupt, self.times = data, corrupt, times
        self.sent: dict[int, int] = {}
        self.requests: list[int] = []

    def GetObject(self, request, context):  # noqa: N802 (gRPC names)
        self.requests.append(request.offset)
        for offset in range(request.offset, len(self.data), CHUNK):
            data = self.data[offset:offset + CHUNK]
            crc = crc32c_extend(0, data)
            count = self.sent[offset] = self.sent.get(offset, 0) + 1
            if offset in self.corrupt and count <= self.times:
                data = bytes([data[0] ^ 0x10]) + data[1:]
            yield pb.ObjectChunk(id="x" if offset == 0 else "", size=len(self.data), data=data,
                                 offset=offset, crc32c=crc, last=offset + CHUNK >= len(self.data))


@pytest.fixture
def serve():
    """serve(servicer, **hello) -> a Transfer talking to ``servicer`` on an in-process server."""
    servers = []

    def start(servicer, **hello):
        server = grpc.server(futures.ThreadPoolExecutor(2))
        pb_grpc.add_BulletinServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        conn = SimpleNamespace(
            hello=pb.HelloReply(store_capacity_bytes=1 << 30, **hello),
            stub=pb_grpc.BulletinStub(channel), metadata=(), address=f"127.0.0.1:{port}",
            _address_source="test", _token_source="test",
            data_tls=lambda: None)  # a plaintext runtime
        conn.error = lambda exc, what: Connection.error(conn, exc, what)
        return Transfer(conn, "s" * 32, CHUNK, lambda oid: None)

    yield start
    for server in servers:
        server.stop(0)


@pytest.fixture
def link(serve):
    def start(data, corrupt, times):
        servicer = CorruptingLink(data, corrupt, times)
        return serve(servicer), servicer

    return start


def test_a_corrupted_download_chunk_is_fetched_again_from_its_offset(link):
    value = np.arange(100_000, dtype=np.float64)
    data = encode(value).to_bytes()
    bad = 3 * CHUNK
    transfer, servicer = link(data, {bad}, times=1)
    np.testing.assert_array_equal(transfer.fetch("x", len(data)), value)
    assert servicer.requests == [0, bad]  # resumed at the bad chunk, not from the start


def test_a_link_that_keeps_corrupting_fails_with_a_clear_error(link):
    data = encode(np.ones(50_000)).to_bytes()
    transfer, servicer = link(data, {CHUNK}, times=10)
    with pytest.raises(bulletin.BulletinError, match=r"failed its CRC32C check 3 times at offset"):
        transfer.fetch("x", len(data))


# ---- the bulk data port against a corrupting link ---------------------------------------------


class CorruptingDataPort(pb_grpc.BulletinServicer):
    """OpenTransfer hands out tickets; a raw TCP data port serves GETs of one object in the
    runtime's wire format, flipping a bit in the first ``times`` downloads."""

    def __init__(self, data: bytes, times: int):
        self.data, self.times, self.served = data, times, 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def OpenTransfer(self, request, context):  # noqa: N802 (gRPC names)
        return pb.OpenTransferReply(ticket=os.urandom(32), size=len(self.data),
                                    data_port=self.port)

    def _serve(self):
        while True:
            conn, _ = self.listener.accept()
            with conn:
                header = conn.recv(40, socket.MSG_WAITALL)
                assert struct.unpack(">II", header[:8]) == (_bulk.MAGIC, _bulk.VERSION)
                self.served += 1
                data = self.data
                if self.served <= self.times:
                    data = bytes([data[0] ^ 0x10]) + data[1:]
                conn.sendall(bytes([_bulk.OK]) + struct.pack(">Q", len(data)) + data
                             + struct.pack(">I", crc32c_extend(0, self.data)))


@pytest.fixture
def data_port(serve):
    def start(data, times):
        servicer = CorruptingDataPort(data, times)
        return serve(servicer, data_port=servicer.port), servicer

    return start


def test_a_corrupted_bulk_download_is_fetched_again(data_port):
    value = np.arange(300_000, dtype=np.float64)
    data = encode(value).to_bytes()
    transfer, servicer = data_port(data, times=1)
    np.testing.assert_array_equal(transfer.fetch("x", len(data)), value)
    assert servicer.served == 2 and transfer.last_path == "bulk"


def test_a_data_port_that_keeps_corrupting_fails_with_a_clear_error(data_port):
    data = encode(np.ones(50_000)).to_bytes()
    transfer, servicer = data_port(data, times=10)
    with pytest.raises(bulletin.BulletinError, match=r"failed its CRC32C check 3 times"):
        transfer.fetch("x", len(data))
    assert servicer.served == 3
