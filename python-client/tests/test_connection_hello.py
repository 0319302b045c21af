"""Connecting: a Hello whose connection is cut under it is sent again; a refused or wrong
address is said at once. Against a real gRPC server on loopback that speaks the Bulletin
service's Hello and cuts the first calls."""

from __future__ import annotations

from concurrent import futures

import grpc
import pytest

from bulletin._connection import Connection
from bulletin._errors import RuntimeUnreachableError
from bulletin._proto import bulletin_pb2 as pb
from bulletin._proto import bulletin_pb2_grpc as pb_grpc


class CuttingHello(pb_grpc.BulletinServicer):
    """Answers Hello after ``cuts`` calls that end as a cut connection does."""

    def __init__(self, cuts: int, details: str = "Socket closed"):
        self.cuts, self.details, self.calls = cuts, details, 0

    def Hello(self, request, context):
        self.calls += 1
        if self.calls <= self.cuts:
            context.abort(grpc.StatusCode.UNAVAILABLE, self.details)
        return pb.HelloReply(store_capacity_bytes=1 << 20)


@pytest.fixture
def serve():
    servers = []

    def start(servicer) -> str:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        pb_grpc.add_BulletinServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        return f"127.0.0.1:{port}"
    yield start
    for server in servers:
        server.stop(None)


def test_a_hello_cut_under_it_is_sent_again(serve):
    servicer = CuttingHello(cuts=2)
    conn = Connection(serve(servicer), token="t" * 20)
    try:
        assert conn.hello.store_capacity_bytes == 1 << 20
        assert servicer.calls == 3
    finally:
        conn.channel.close()


def test_a_link_cut_every_time_is_said_after_three_tries(serve):
    servicer = CuttingHello(cuts=10)
    with pytest.raises(RuntimeUnreachableError, match="Socket closed"):
        Connection(serve(servicer), token="t" * 20)
    assert servicer.calls == 3


def test_a_runtime_that_says_unavailable_for_another_reason_is_not_asked_again(serve):
    servicer = CuttingHello(cuts=10, details="the runtime is shutting down")
    with pytest.raises(RuntimeUnreachableError, match="shutting down"):
        Connection(serve(servicer), token="t" * 20)
    assert servicer.calls == 1


def test_nothing_listening_is_said_at_once():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")  # bound, never started: then closed
    server.stop(None)
    with pytest.raises(RuntimeUnreachableError, match="no bulletin runtime answers"):
        Connection(f"127.0.0.1:{port}", token="t" * 20, connect_timeout=2.0)
