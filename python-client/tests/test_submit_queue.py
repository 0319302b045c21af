"""The submitter thread survives a failed upload of a function it carries, and call ids stay
unguessable (unit tests with fakes: the e2e suites cover the real Submit path)."""

from __future__ import annotations

import threading
import time

import grpc
import pytest

from bulletin._errors import StoreFullError
from bulletin._proto import bulletin_pb2 as pb
from bulletin._submit_queue import SubmitQueue


class _Encoded:
    nbytes = 1 << 20  # above the inline limit: carried as an upload


class _Transfer:
    def __init__(self):
        self.acquired, self.released, self.fail_next = [], [], True

    def acquire(self, encoded):
        if self.fail_next:
            self.fail_next = False
            raise StoreFullError("this object is 1048576 bytes, larger than the store")
        self.acquired.append(encoded)
        return "f" * 32

    def release(self, oid):
        self.released.append(oid)


class _Future:
    def __init__(self):
        self.error = None

    def _set_error(self, error):
        self.error = error


class _Calls:
    def __init__(self):
        self.lock = threading.RLock()
        self.futures: dict[str, _Future] = {}

    def is_open(self):
        return True

    def get(self, task_id):
        return self.futures.get(task_id)

    def pop(self, task_id):
        return self.futures.pop(task_id, None)


class _Stub:
    def __init__(self):
        self.batches = []

    def Submit(self, request, metadata=None):  # noqa: N802 - the gRPC stub's name
        self.batches.append([spec.task_id for spec in request.tasks])


class _Conn:
    metadata = ()
    reconnect_timeout = 0

    def __init__(self):
        self.stub = _Stub()


class _Session:
    session_id = "s"

    def send(self, message):
        pass


def _spec(task_id: str) -> pb.TaskSpec:
    spec = pb.TaskSpec(task_id=task_id, name="f")
    spec.function.id = "f" * 32
    return spec


def test_a_failed_upload_of_a_carried_function_fails_its_calls_and_the_thread_goes_on():
    calls, transfer, conn = _Calls(), _Transfer(), _Conn()
    queue = SubmitQueue(conn, _Session(), transfer, calls, inline_limit=1024,
                        batch_bytes=1 << 20, sent_functions=set())
    for task_id in ("first", "second"):
        calls.futures[task_id] = _Future()
    second = calls.futures["second"]
    with calls.lock:
        # The first call names the function first and is cancelled before it leaves: the next
        # one carries the function's bytes, and their upload fails.
        queue.put_locked(_spec("first"), first_use=("f" * 32, _Encoded()))
        assert queue.cancel_locked("first")
        queue.put_locked(_spec("second"))
    queue.start()
    deadline = time.monotonic() + 10
    while second.error is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert isinstance(second.error, StoreFullError), second.error
    assert conn.stub.batches == []

    # The thread lives on, and the next call naming the function carries it again.
    calls.futures["third"] = _Future()
    with calls.lock:
        queue.put_locked(_spec("third"))
    while not conn.stub.batches and time.monotonic() < deadline:
        time.sleep(0.01)
    assert conn.stub.batches == [["third"]]
    assert len(transfer.acquired) == 1
    queue.stop()


class _HeldStub:
    """Submit waits until the test lets it answer (the runtime waits for its journal's fsync),
    then returns or raises ``answer``."""

    def __init__(self):
        self.batches, self.entered, self.answer = [], threading.Event(), threading.Event()
        self.error: Exception | None = None

    def Submit(self, request, metadata=None):  # noqa: N802 - the gRPC stub's name
        self.batches.append([spec.task_id for spec in request.tasks])
        self.entered.set()
        assert self.answer.wait(10)
        if self.error is not None:
            raise self.error


class _Exhausted(grpc.RpcError):
    def code(self):
        return grpc.StatusCode.RESOURCE_EXHAUSTED

    def details(self):
        return "cannot write the runtime's journal"


def _held_queue(stub):
    from bulletin._future import Future
    from bulletin._call_table import CallTable

    calls, conn = CallTable(), _Conn()
    conn.stub = stub
    conn.error = lambda error, what: RuntimeError(f"{what}: {error.details()}")
    queue = SubmitQueue(conn, _Session(), _Transfer(), calls, inline_limit=1024,
                        batch_bytes=1 << 20, sent_functions={"f" * 32})
    future = Future("t1", "f", canceller=lambda f: None)
    calls.add(future)
    with calls.lock:
        queue.put_locked(_spec("t1"))
    queue.start()
    assert stub.entered.wait(10)
    # The result event arrives before the Submit's reply, as Client._on_event takes it.
    assert calls.pop("t1") is future
    future._set_finished(5)
    return queue, calls, future


@pytest.mark.parametrize("reply", ["ok", "refused"])
def test_a_result_that_arrives_before_its_submit_reply_is_kept(reply):
    """The runtime runs a call on its embedded worker once the call is written to its journal
    and replies to the Submit once it is synced: the result may come first."""
    stub = _HeldStub()
    if reply == "refused":
        stub.error = _Exhausted()
    queue, calls, future = _held_queue(stub)
    assert future.result(timeout=1) == 5
    assert future.cancel() is False, "a finished call cannot be cancelled"
    stub.answer.set()
    deadline = time.monotonic() + 10
    while queue._unacknowledged and time.monotonic() < deadline:  # noqa: SLF001
        time.sleep(0.01)
    assert not queue._unacknowledged  # noqa: SLF001
    assert future.result(timeout=1) == 5, "the reply (or its refusal) does not undo the result"
    assert future.exception(timeout=1) is None
    assert stub.batches == [["t1"]], "the call is not sent again"
    assert calls.get("t1") is None
    queue.stop()


def test_call_ids_are_random_128_bit_and_never_repeat_across_threads():
    from bulletin._submitter import _RandomIds

    ids, drawn = _RandomIds(), []

    def draw():
        drawn.extend(ids.next_hex() for _ in range(1000))

    threads = [threading.Thread(target=draw) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(drawn)) == 4000  # across several refills of the pool, from four threads
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in drawn)
    # Not a count: no two ids drawn one after another differ by a small step.
    numbers = [int(i, 16) for i in drawn[:1000]]
    assert all(abs(b - a) > 1 << 64 for a, b in zip(numbers, numbers[1:]))
