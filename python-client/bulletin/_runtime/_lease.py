"""A lease, the executor's side: ``serve`` is the function of the lease call.

The runtime schedules a lease like any call of its user (quotas, fair share, QoS, preemption,
the ledger's reserved time, the journal and wait explanations all see one call holding one
slot). Its executor connects back to the client, proves it holds the lease's secret
(``bulletin._lease_wire``) and runs the calls the client sends it, one after the other, on this
thread, until the lease's term is over, no call came for ``idle`` seconds, or a preemption
stops it. The client side is ``bulletin._leases``; docs/internals.md ("Leases") has the
protocol and what each end promises.

Messages, client to executor: ``("call", n, fn_id, fn_bytes | None, args_bytes)``,
``("cancel", n)``, ``("bye",)``. Executor to client: ``("done", n, raised, result_bytes,
stdout, stderr, run_seconds)`` (``result_bytes`` None: the result is the frame's next tail), ``("cancelled", n)``, ``("ending", why)``. The executor says
``ending`` once and runs what arrives until ``bye`` (the client's last word after its last
call): no call crosses the end unanswered. A preemption is the exception: the agent stops the
executor, and the client runs what went unanswered through the runtime.
"""

from __future__ import annotations

import io
import socket
import sys
import time
from collections import OrderedDict, deque

from .._data._bulk import connect
from .._data._objects import decode
from .._errors import BulletinError, MemoryLimitError
from .._lease_wire import (TAIL_MIN, FrameReader, LeaseProtocolError, executor_hello, frame,
                           send_frame)
from .._tls import pinned_context
from . import _limits, _preempt
from ._gpu_share import release_cached_gpu_memory
from ._limits import Limits, over_limit
from ._outcome import encode_outcome, kept_on_device

# Results of calls that ran one after the other leave together, but none waits longer than this
# for the calls after it (a burst of slow calls still returns each result promptly).
_FLUSH_SECONDS = 0.002
# How long the executor waits for the client's "bye" once it said "ending".
_BYE_SECONDS = 10.0
_FUNCTIONS_KEPT = 128
# A client that cannot be reached in this time is not there for this lease: its calls fall back.
_CONNECT_SECONDS = 5.0


# The calls the lease call running in this executor has run so far: the executor reports them
# with the lease call's end (``take_calls_run``), so that the usage ledger counts each of them.
_calls_run: int | None = None


def take_calls_run() -> int | None:
    """How many calls the lease that just ended here ran; None when the call was no lease."""
    global _calls_run
    calls, _calls_run = _calls_run, None
    return calls


def serve(host: str, port: int, lease_id: str, secret: str, pin: str, term: float,
          idle: float) -> dict:
    """Connects to the client at (host, port), over TLS when ``pin`` names the SHA-256 of its
    port's certificate (a client on another host), and runs its calls; returns what it
    served."""
    global _calls_run
    _calls_run = 0
    tls = pinned_context() if pin else None
    sock = connect(host, port, _CONNECT_SECONDS, tls=tls, pin=bytes.fromhex(pin) if pin else None)
    sock.settimeout(None)
    try:
        executor_hello(sock, bytes.fromhex(lease_id), bytes.fromhex(secret))
        return _Server(sock, term, idle).run()
    finally:
        sock.close()


class _Captured:
    """A stream a call's ``print`` writes to; what it wrote goes back with its result."""

    def __init__(self):
        self._bytes = io.BytesIO()
        self.stream = io.TextIOWrapper(self._bytes, encoding="utf-8", errors="replace",
                                       write_through=True)

    def take(self) -> bytes:
        self.stream.flush()
        data = self._bytes.getvalue()
        if data:
            self._bytes.seek(0)
            self._bytes.truncate(0)
        return data


class _Server:
    def __init__(self, sock: socket.socket, term: float, idle: float):
        self._sock = sock
        self._reader = FrameReader(sock)
        self._deadline = time.monotonic() + term
        self._idle = idle
        self._queue: deque = deque()
        self._functions: OrderedDict[str, object] = OrderedDict()
        self._limits = Limits()
        self._stdout, self._stderr = _Captured(), _Captured()
        self._stopped = ""  # why no further call may run here (a preemption, a lost limit)
        self._over_memory: MemoryLimitError | None = None
        self._bye = False
        self.calls = 0
        self.run_seconds = 0.0

    def run(self) -> dict:
        def preempted() -> None:  # a checkpoint hook: runs on the main thread (SIGUSR1)
            self._stopped = "it was preempted"
        hooks = [preempted]
        with _preempt._lock:
            _preempt._hooks[:] = hooks
        ending = False
        try:
            while not (self._bye and not self._queue):
                if not ending and (self._stopped or time.monotonic() >= self._deadline):
                    ending = self._say_ending(self._stopped or "its term is over")
                if self._stopped:
                    break  # the agent stops this executor; the client resends the rest
                if not self._queue:
                    wait = _BYE_SECONDS if ending else max(0.0, min(
                        self._idle, self._deadline - time.monotonic()))
                    messages = self._reader.read(wait)
                    if messages is None:
                        if ending:
                            break  # the client never said bye: it went away
                        if time.monotonic() < self._deadline:
                            ending = self._say_ending("it was idle")
                        continue
                    self._take(messages)
                    continue
                self._run_queued(hooks)
        except (LeaseProtocolError, OSError):
            pass  # the client went away: nothing is left to answer
        if self._over_memory is not None:
            raise self._over_memory  # the executor is replaced (Executor.run retires it)
        return {"calls": self.calls, "run_seconds": round(self.run_seconds, 6)}

    def _say_ending(self, why: str) -> bool:
        self._sock.sendall(frame([("ending", why)]))
        return True

    def _take(self, messages: list) -> None:
        for message in messages:
            kind = message[0]
            if kind == "call":
                self._queue.append(message)
            elif kind == "cancel":
                for queued in self._queue:
                    if queued[1] == message[1]:
                        self._queue.remove(queued)
                        self._sock.sendall(frame([("cancelled", message[1])]))
                        break
            elif kind == "bye":
                self._bye = True

    def _run_queued(self, hooks: list) -> None:
        """Runs the queued calls; their results leave together while more calls are ready."""
        results, tails, first = [], [], 0.0
        while self._queue and not self._stopped:
            result, tail = self._run_one(self._queue.popleft(), hooks)
            results.append(result)
            if tail is not None:
                tails.append(tail)
            first = first or time.monotonic()
            if self._reader.ready():
                self._take(self._reader.read(0) or [])
            if not self._queue or tails or time.monotonic() - first >= _FLUSH_SECONDS:
                send_frame(self._sock, results, tails)
                results, tails, first = [], [], 0.0
        if results:
            send_frame(self._sock, results, tails)

    def _run_one(self, message, hooks: list):
        _, number, fn_id, fn_bytes, args_bytes = message
        with _preempt._lock:  # the call's own hooks join the lease's, and go with the call
            _preempt._hooks[:] = hooks
        value, raised, run_seconds = self._invoke(fn_id, fn_bytes, args_bytes)
        retire = self._limits.restore()
        if retire:
            self._stopped = retire
        encoded, raised = encode_outcome(value, raised)
        del value
        release_cached_gpu_memory()
        self.calls += 1
        global _calls_run
        _calls_run = self.calls
        self.run_seconds += run_seconds
        large = encoded.nbytes >= TAIL_MIN  # a tail: the frame's pickle holds no copy of it
        return ("done", number, raised, None if large else encoded.to_bytes(),
                self._stdout.take(), self._stderr.take(), run_seconds), (
                    encoded if large else None)

    def _invoke(self, fn_id: str, fn_bytes, args_bytes: bytes):
        """(value or exception, raised, run seconds), the call's output captured."""
        try:
            fn = self._function(fn_id, fn_bytes)
            args, kwargs = decode(args_bytes)
        except BaseException as exc:  # noqa: BLE001
            error = BulletinError(f"the executor could not load the call's function or "
                                  f"arguments: {exc!r}")
            error.__cause__ = exc
            return error, True, 0.0
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = self._stdout.stream, self._stderr.stream
        start = time.perf_counter()
        try:
            return kept_on_device(fn, fn(*args, **kwargs)), False, time.perf_counter() - start
        except MemoryError as exc:
            limit = _limits.memory_limit
            if not limit:
                return exc, True, time.perf_counter() - start
            error = over_limit(exc, limit)
            self._over_memory = self._over_memory or error
            self._stopped = "a call went over its memory limit"
            return error, True, time.perf_counter() - start
        except BaseException as exc:  # noqa: BLE001 - SystemExit too: the executor stays
            return exc, True, time.perf_counter() - start
        finally:
            sys.stdout, sys.stderr = saved

    def _function(self, fn_id: str, fn_bytes):
        fn = self._functions.get(fn_id)
        if fn is not None:
            self._functions.move_to_end(fn_id)
            return fn
        if fn_bytes is None:
            raise BulletinError(f"function {fn_id} was named before it was sent")
        fn = self._functions[fn_id] = decode(fn_bytes)
        if len(self._functions) > _FUNCTIONS_KEPT:
            self._functions.popitem(last=False)
        return fn

