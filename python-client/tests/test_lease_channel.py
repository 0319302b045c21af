"""Leases between a client's ``Leases`` and the executor's ``serve`` over real loopback sockets,
with no runtime: the lease call that the runtime would schedule is run in a thread of this
process by a harness submitter (``_Runtime``), which also stands for the runtime's path that
calls given back take. tests/e2e/test_leases.py runs the same through a real cluster.

What is checked: calls and results, output and errors per call; the handshake (a peer without
the secret, or naming a lease that ended, gets no call and learns nothing); calls a lease leaves
unanswered, and calls no lease takes in time, go to the runtime (soon when a lease runs and does
not connect, later while the leases are queued); a lease sends one call at a time while calls
run long, more while they run short."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from bulletin import _lease_channel, _leases
from bulletin._config import Options
from bulletin._data._objects import decode, encode
from bulletin._envelope import exception_from_envelope
from bulletin._future import Future, WaitInfo
from bulletin._lease_wire import (FrameReader, LeaseProtocolError, client_greeting, client_prove,
                                  executor_hello, frame, recv_exactly)
from bulletin._proto import bulletin_pb2 as pb
from bulletin._call_table import CallTable
from bulletin._submitter import _Call

OPTIONS = Options()


def double(x):
    return 2 * x


def shout(x):
    print("value", x)
    if x == 3:
        raise ValueError("three")
    return x


def nap(seconds):
    time.sleep(seconds)
    return seconds


class _Runtime:
    """The submitter the Leases talk to: a lease call runs ``serve`` in a thread (or, with
    ``start_leases=False``, never starts); a call given back is recorded as sent to the
    runtime."""

    def __init__(self, start_leases: bool = True):
        self.start_leases = start_leases
        self.futures: dict = {}
        self.to_runtime_calls: list = []
        self.lease_calls = 0

    def submit(self, fn, args, kwargs, options, direct=True, key=None, lease=False):
        assert lease and not direct  # a lease call: never leased itself, never a user's call
        future = Future(f"{key}-{self.lease_calls}", key, lambda f: None)
        self.lease_calls += 1
        if self.start_leases:
            def run():
                future._set_status("running")  # as the runtime's RUNNING event would
                try:
                    future._set_finished(fn(*args, **kwargs))
                except BaseException as exc:  # noqa: BLE001
                    future._set_error(exc)
            threading.Thread(target=run, daemon=True).start()
        return future

    def to_runtime(self, call) -> None:
        self.to_runtime_calls.append(call)


def _resolve(future, raised, data, t0):
    value = decode(data)
    if raised:
        future._set_error(exception_from_envelope(value, future.key, 1))
    else:
        future._set_finished(value)


@pytest.fixture
def harness(monkeypatch):
    monkeypatch.setattr(_leases, "TRIGGER_CALLS", 1)  # every call of the test is a burst's
    runtime = _Runtime()
    calls = CallTable()
    leases = _leases.Leases(runtime, calls, _resolve)
    yield runtime, calls, leases
    leases.close()


def _submit(leases, calls, fn, *args, options=OPTIONS):
    """What Submitter.submit and _send do for a leasable call, less the runtime's spec."""
    fn_encoded = encode(fn)
    spec = pb.TaskSpec(task_id=f"{fn.__name__}-{time.monotonic_ns()}", name=fn.__name__)
    spec.function.id, spec.function.size = fn_encoded.digest(), fn_encoded.nbytes
    spec.args.inline_data = encode((args, {})).to_bytes()
    future = Future(spec.task_id, spec.name, lambda f: None)
    calls.add(future)
    call = _Call(spec, future, None, fn_encoded, False, options, True)
    taken, lease = leases.offer(call)
    assert taken
    if lease is not None:
        leases.ask(lease)
    return future, call


def test_a_burst_goes_through_one_lease_with_each_calls_result_output_and_error(harness):
    runtime, calls, leases = harness
    futures = [_submit(leases, calls, shout, i)[0] for i in range(40)]
    for i, future in enumerate(futures):
        if i == 3:
            with pytest.raises(ValueError, match="three"):
                future.result(timeout=10)
        else:
            assert future.result(timeout=10) == i
        assert future.output == f"value {i}\n"
    assert runtime.to_runtime_calls == []
    assert not calls.has_pending()
    assert {(f.attempts, f.attempt) for f in futures} == {(1, 1)}
    more = [_submit(leases, calls, double, i)[0] for i in range(100)]
    assert [f.result(timeout=10) for f in more] == [2 * i for i in range(100)]
    assert runtime.lease_calls <= _leases.MAX_LEASES + 1  # a few leases carried 140 calls


def _lease_address(leases):
    return leases._listener.getsockname()[:2]


def _first_lease(leases):
    with leases._cond:
        return next(iter(leases._leases.values()))


def test_a_peer_without_the_secret_gets_no_call(harness):
    runtime, calls, leases = harness
    runtime.start_leases = False  # the lease stays waiting: only the impostor connects
    future, _ = _submit(leases, calls, double, 21)
    lease = _first_lease(leases)
    with socket.create_connection(_lease_address(leases), timeout=5) as sock:
        with pytest.raises(LeaseProtocolError):
            executor_hello(sock, lease.id, b"not the secret" * 2)
        sock.shutdown(socket.SHUT_WR)  # the client waits for a proof that will not come
        sock.settimeout(5)
        assert sock.recv(1 << 16) == b""  # closed, and no frame came before
    assert not future.done() and lease.channel is None
    # The real executor still gets the call.
    threading.Thread(target=_leases.serve, daemon=True, args=(
        *_lease_address(leases), lease.id.hex(), lease.secret.hex(), "", 5.0, 0.5)).start()
    assert future.result(timeout=10) == 42


def test_a_peer_that_names_no_live_lease_is_closed_without_a_word(harness):
    runtime, calls, leases = harness
    future, _ = _submit(leases, calls, double, 1)
    lease = _first_lease(leases)
    assert future.result(timeout=10) == 2
    lease.future.result(timeout=10)  # idle: the lease call ended
    with socket.create_connection(_lease_address(leases), timeout=5) as sock:
        with pytest.raises(LeaseProtocolError):
            executor_hello(sock, lease.id, lease.secret)  # the right secret, but too late
    with socket.create_connection(_lease_address(leases), timeout=5) as sock:
        with pytest.raises(LeaseProtocolError):
            executor_hello(sock, b"\0" * 16, lease.secret)


def test_the_client_refuses_an_executor_that_cannot_prove_the_secret():
    listener = socket.create_server(("127.0.0.1", 0))
    secret = b"s" * 32

    def fake_client():
        sock, _ = listener.accept()
        with sock:
            _, nonce = client_greeting(sock)
            try:
                client_prove(sock, secret, nonce)
            except LeaseProtocolError as exc:
                outcome.append(exc)

    outcome: list = []
    thread = threading.Thread(target=fake_client)
    thread.start()
    with socket.create_connection(listener.getsockname()) as sock:
        # An impostor executor: it sends the opening, then a proof made without the secret.
        sock.sendall(b"BLS1" + b"\1" * 16 + b"\2" * 16)
        recv_exactly(sock, 48)
        sock.sendall(b"\3" * 32)
        thread.join(5)
    listener.close()
    assert outcome and "failed the handshake" in str(outcome[0])


class _Executor:
    """A lease's executor that the test drives: it passes the handshake, records the calls it
    is sent, and answers as told."""

    def __init__(self, leases, lease):
        self.sock = socket.create_connection(_lease_address(leases), timeout=10)
        executor_hello(self.sock, lease.id, lease.secret)
        self.reader = FrameReader(self.sock)

    def calls(self, timeout: float = 5.0) -> list:
        messages = self.reader.read(timeout) or []
        return [m for m in messages if m[0] == "call"]

    def answer(self, call, run_seconds: float) -> None:
        self.sock.sendall(frame([("done", call[1], False, encode(None).to_bytes(), b"", b"",
                                  run_seconds)]))


def test_calls_a_lease_leaves_unanswered_go_to_the_runtime(harness):
    runtime, calls, leases = harness
    runtime.start_leases = False
    submitted = [_submit(leases, calls, double, i) for i in range(6)]
    executor = _Executor(leases, _first_lease(leases))
    sent = executor.calls()
    executor.answer(sent[0], 0.0001)  # fast: the window grows, more calls come
    sent += executor.calls()
    assert len(sent) >= 2
    executor.sock.close()  # the executor dies with the rest unanswered
    _first_lease(leases).future._set_finished({})  # and its lease call ends
    deadline = time.monotonic() + 5
    while len(runtime.to_runtime_calls) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert submitted[0][0].done()
    assert sorted(c.task_id for c in runtime.to_runtime_calls) == sorted(
        c.task_id for _, c in submitted[1:])


def _sent_to_runtime(runtime, count: int, seconds: float) -> list:
    deadline = time.monotonic() + seconds
    while len(runtime.to_runtime_calls) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    return [c.task_id for c in runtime.to_runtime_calls]


def test_calls_a_running_lease_does_not_take_go_to_the_runtime(harness, monkeypatch):
    runtime, calls, leases = harness
    monkeypatch.setattr(_leases, "FALLBACK_SECONDS", 0.2)
    monkeypatch.setattr(_leases, "QUEUED_FALLBACK_SECONDS", 60.0)
    runtime.start_leases = False
    submitted = [_submit(leases, calls, double, i)[1] for i in range(5)]
    # Queued in the runtime, the lease keeps its calls: there they would queue behind it.
    assert _sent_to_runtime(runtime, 1, 1.0) == []
    _first_lease(leases).future._set_status("running")  # its executor never connects
    assert _sent_to_runtime(runtime, 5, 5.0) == [c.task_id for c in submitted]


def test_calls_go_to_the_runtime_when_their_lease_stays_queued(harness, monkeypatch):
    runtime, calls, leases = harness
    monkeypatch.setattr(_leases, "QUEUED_FALLBACK_SECONDS", 0.3)
    runtime.start_leases = False
    submitted = [_submit(leases, calls, double, i)[1] for i in range(5)]
    assert _sent_to_runtime(runtime, 5, 5.0) == [c.task_id for c in submitted]


def test_a_lease_takes_one_call_at_a_time_while_they_run_long(harness):
    runtime, calls, leases = harness
    runtime.start_leases = False
    for i in range(8):
        _submit(leases, calls, double, i)
    executor = _Executor(leases, _first_lease(leases))
    for _ in range(4):  # long calls: never more than one unanswered
        sent = executor.calls()
        assert len(sent) == 1, sent
        executor.answer(sent[0], 0.5)
    widths = []
    for _ in range(2):  # short ones: the window opens
        sent = executor.calls()
        widths.append(len(sent))
        for call in sent:
            executor.answer(call, 0.0001)
    assert widths == [1, 2], widths
    executor.sock.close()


def test_a_cancelled_call_waiting_for_a_lease_never_runs(harness):
    runtime, calls, leases = harness
    runtime.start_leases = False
    _, cancelled = _submit(leases, calls, double, 1)
    _, kept = _submit(leases, calls, double, 2)
    assert leases.cancel(cancelled.task_id)
    executor = _Executor(leases, _first_lease(leases))
    sent = executor.calls()
    assert [args for _, _, _, _, args in sent] == [kept.spec.args.inline_data]
    executor.sock.close()


def test_a_call_waiting_for_a_lease_says_why_the_lease_waits(harness):
    runtime, calls, leases = harness
    runtime.start_leases = False
    future, _ = _submit(leases, calls, double, 1)
    why = WaitInfo(2, "both GPUs are taken", "QUEUED_BEHIND", None, ())
    _first_lease(leases).future._set_wait(why, 0)  # what the runtime says of the lease call
    deadline = time.monotonic() + 5
    while future.wait_info is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert future.wait_info is why


def test_a_lease_off_loopback_speaks_tls_pinned_to_the_clients_own_certificate(monkeypatch):
    host = _leases.lease_host("192.0.2.1:8770")  # this host's address on a route off it
    if host is None or host == "127.0.0.1":
        pytest.skip("this host has no address besides loopback")
    monkeypatch.setattr(_leases, "TRIGGER_CALLS", 1)
    runtime, calls = _Runtime(), CallTable()
    leases = _leases.Leases(runtime, calls, _resolve, host)
    try:
        futures = [_submit(leases, calls, double, i)[0] for i in range(20)]
        assert [f.result(timeout=10) for f in futures] == [2 * i for i in range(20)]
        assert leases.connections >= 1
        address = _lease_address(leases)
        # An executor that speaks plaintext gets nothing: the port speaks TLS first.
        with socket.create_connection(address, timeout=5) as sock:
            with pytest.raises((LeaseProtocolError, OSError)):
                executor_hello(sock, b"\0" * 16, b"s" * 32)
        # One given another certificate's pin refuses this port before it says a word.
        from bulletin._data._bulk import PinMismatch, connect
        from bulletin._tls import pinned_context
        with pytest.raises(PinMismatch):
            connect(*address, 5, tls=pinned_context(), pin=b"\1" * 32)
    finally:
        leases.close()


def test_a_lease_still_queued_when_no_call_waits_for_it_is_withdrawn(harness):
    runtime, calls, leases = harness
    runtime.start_leases = False
    _, call = _submit(leases, calls, double, 1)
    lease = _first_lease(leases)
    assert leases.cancel(call.task_id)  # nothing waits for the lease any more
    deadline = time.monotonic() + 5
    while not lease.future.cancelled() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert lease.future.cancelled()


def ones(n):
    import numpy as np
    return np.ones(n, dtype=np.uint8)


def test_a_large_result_comes_whole_and_sends_its_shape_the_runtimes_way(harness):
    runtime, calls, leases = harness
    future, call = _submit(leases, calls, ones, _lease_channel.LARGE_RESULT + 1)
    value = future.result(timeout=30)
    assert value.nbytes == _lease_channel.LARGE_RESULT + 1 and value.all()
    small = Future("next", "next", lambda f: None)
    spec = pb.TaskSpec(task_id="next", name="ones")
    spec.args.inline_data = call.spec.args.inline_data
    taken, _ = leases.offer(_Call(spec, small, None, call.fn_encoded, False, OPTIONS, True))
    assert not taken  # the store moves such results without a copy: the runtime's path
