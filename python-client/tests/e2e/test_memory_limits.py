"""memory= is enforced (issue 16, part 7): a call that asked for 256 MiB and allocates 1 GiB
fails with MemoryLimitError naming 256 MiB, its executor is replaced, and the worker keeps
serving; a call within its request runs. On this host the limit is RLIMIT_DATA per executor
(docs/environments.md, "Memory requests")."""

from __future__ import annotations

import os

import pytest

import bulletin
from cluster_support import CALL_SECONDS

pytestmark = pytest.mark.timeout(90)


def allocate(mib):
    block = bytearray(mib << 20)  # touched pages, not a lazy reservation
    for i in range(0, len(block), 4096):
        block[i] = 1
    return os.getpid(), len(block)


def test_a_call_over_its_memory_request_fails_naming_the_limit(client):
    over = client.submit(allocate, 1024, memory="256MiB")
    with pytest.raises(bulletin.MemoryLimitError, match=r"memory=256\.0 MiB") as raised:
        over.result(timeout=CALL_SECONDS)
    assert isinstance(raised.value, MemoryError)  # `except MemoryError` still catches it
    # Its executor was replaced: the next call with the same request runs in another process.
    pid, size = client.submit(allocate, 64, memory="256MiB").result(timeout=CALL_SECONDS)
    assert size == 64 << 20
    pid_again, _ = client.submit(allocate, 1, memory="256MiB").result(timeout=CALL_SECONDS)
    assert pid_again == pid  # a call that stayed within it leaves its executor in service
    # The worker keeps serving calls without a request, which may take more.
    assert client.submit(allocate, 512).result(timeout=CALL_SECONDS)[1] == 512 << 20


def test_the_failed_call_executor_is_replaced(client):
    first = client.submit(os.getpid, memory="256MiB").result(timeout=CALL_SECONDS)
    with pytest.raises(bulletin.MemoryLimitError):
        client.submit(allocate, 1024, memory="256MiB").result(timeout=CALL_SECONDS)
    assert client.submit(os.getpid, memory="256MiB").result(timeout=CALL_SECONDS) != first


def test_a_limited_executor_runs_only_calls_with_that_limit(client):
    limited = client.submit(os.getpid, memory="256MiB").result(timeout=CALL_SECONDS)
    unlimited = client.submit(os.getpid).result(timeout=CALL_SECONDS)
    assert limited != unlimited
    # A call without a request is not held to another call's limit.
    assert client.submit(allocate, 512).result(timeout=CALL_SECONDS)[1] == 512 << 20
