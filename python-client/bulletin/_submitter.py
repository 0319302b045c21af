"""Submitting calls: each call becomes a TaskSpec and leaves in a batch from one thread.

The caller's thread pickles (a function once per object), uploads large arguments once (they
stay in the store while the caller's object lives), waits for Future arguments without
blocking (the call goes out once they finish, and their results stay on the cluster), and
queues the spec for the submitter thread (``_submit_queue``). A failed call can be sent again
under its Future (``Future.retry``, ``retries=``).
"""

from __future__ import annotations

import functools
import os
import queue
import re
import threading
import weakref
from time import perf_counter
from typing import Callable

from ._arguments import CallArguments, InputCancelled, InputFailed
from ._environment import CallerEnvironment
from ._config import Options, gpu_eighths
from ._connection import Connection, SessionStream
from ._data._transfer import Transfer
from ._decorators import RemoteFunction
from ._errors import BulletinError
from ._future import Future
from ._output import OutputPolicy
from ._proto import bulletin_pb2 as pb
from ._serialize import FunctionPickles, callable_name
from ._call_table import CallTable
from ._kept_arguments import KeptArguments
from ._submit_queue import SubmitQueue


# A function larger than this goes to the runtime's store rather than down a lease's socket.
_LEASED_FUNCTION_BYTES = 64 << 20


def _leasable(spec, arguments) -> bool:
    """Whether a lease can run the call: everything it needs travels with it (no store objects
    or resident values in its arguments, its arguments inline)."""
    return (not arguments.refs and not spec.resident_handles and not spec.prefer_worker
            and bool(spec.args.inline_data) and spec.function.size <= _LEASED_FUNCTION_BYTES)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_")[:48] or "call"


class _Call:
    """One call: its spec, its arguments, and after it is queued what it takes to send it
    again (Future.retry, retries=): the objects it uploaded, its inputs kept alive."""

    __slots__ = ("spec", "_future", "arguments", "fn_encoded", "upload_fn", "waited", "sent",
                 "uploads", "options", "direct", "__weakref__")

    def __init__(self, spec, future: Future, arguments: CallArguments, fn_encoded,
                 upload_fn: bool, options: Options, direct: bool):
        self.spec = spec
        self.options = options
        self.direct = direct  # a lease may take it (bulletin._leases)
        # Weak: the Future holds its call (for a retry), the call must not hold it back; the
        # call table holds the Future while it is pending.
        self._future = weakref.ref(future)
        self.arguments = arguments
        self.fn_encoded = fn_encoded
        self.upload_fn = upload_fn
        self.waited = False  # it waited for input Futures (Submitter._waiting)
        self.sent = False  # queued for the runtime (else it ended before: an input failed)
        self.uploads: list = []  # what it put in the store, to put there again for a retry

    @property
    def future(self) -> Future | None:
        return self._future()

    @property
    def task_id(self) -> str:
        return self.spec.task_id


class _RandomIds:
    """128 random bits per call id, as uuid4 gives, read from the kernel 256 ids at a time
    (uuid4 made a system call per call: a twentieth of a small call's cost in the client). Not
    a count: other users see ids in `bulletin status`, and an id they could guess next they
    could take first (the runtime refuses an id in use)."""

    _BATCH = 256

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool = b""
        self._next = 0

    def next_hex(self) -> str:
        with self._lock:
            if self._next >= len(self._pool):
                self._pool, self._next = os.urandom(16 * self._BATCH), 0
            start, self._next = self._next, self._next + 16
            return self._pool[start:start + 16].hex()


class Submitter:
    """Turns calls into TaskSpecs and sends them, in batches, from its own thread."""

    def __init__(self, conn: Connection, session: SessionStream, transfer: Transfer,
                 calls: CallTable, inline_limit: int,
                 batch_bytes: int, pip: tuple = ()):
        self._transfer = transfer
        self._environment = CallerEnvironment()
        self._pip = pip  # the Client's default pip=, for calls that name none
        self._calls = calls
        self.inline_limit = inline_limit
        self.sent_functions: set[str] = set()
        self._pickles = FunctionPickles()
        self._ids = _RandomIds()
        # The Futures of this client's calls that are still referenced (Client.futures).
        self.futures: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        # Calls waiting for their input Futures, by task id (under the call table's lock):
        # one cancelled meanwhile is never sent.
        self._waiting: dict[str, _Call] = {}
        self._queue = SubmitQueue(conn, session, transfer, calls, inline_limit, batch_bytes,
                                  self.sent_functions)
        self.leases = None  # bulletin._leases.Leases, where the client uses leases
        # Large arguments stay in the store while the caller's object lives.
        self.kept = KeptArguments(transfer)
        # Whole lines, labelled while calls overlap, under the cell that submitted each call.
        self.output = OutputPolicy()

    def start(self) -> None:
        self._queue.start()

    def stop(self) -> None:
        """Sends what is queued, then stops."""
        self._queue.stop()

    def release(self, oid: str) -> None:
        """Drops the session's hold on an object, after every Submit queued before it has
        returned: the runtime has taken its own references for those calls first."""
        if self._calls.is_open():
            self._queue.release(oid)

    def end_batch(self) -> None:
        """The calls submitted so far leave without the ones submitted after."""
        self._queue.end_batch()

    def submit(self, fn: Callable, args: tuple, kwargs: dict, options: Options,
               blocking: bool = False, key: str | None = None, displays: bool = False,
               direct: bool = True, lease: bool = False) -> Future:
        """Queues one call; ``key`` (Dask's) starts its task id instead of the function's name
        (ids stay unique: two calls never share one); ``displays``: its display lines show as
        displays (``_output.CallOutput``); ``direct=False``: no lease takes it; ``lease``: it
        is a lease's call (``_leases``), which the usage ledger does not count as a call."""
        self._calls.check_open()
        if isinstance(fn, RemoteFunction):
            fn = fn.remote  # with keep=True, the wrapper that keeps its result (not .local)
        t0 = perf_counter()
        fn_id, fn_encoded = self._pickles.get(fn)
        arguments = CallArguments(self, args, kwargs)
        t1 = perf_counter()
        upload_fn = fn_id not in self.sent_functions and fn_encoded.nbytes > self.inline_limit
        if upload_fn:
            arguments.releases.append(self._transfer.acquire(fn_encoded))
        spec = pb.TaskSpec(name=callable_name(fn), qos=options.qos, priority=options.priority,
                           credits=options.credits,
                           timeout_seconds=options.timeout, retries=options.retries,
                           lease=lease)
        spec.resources.gpu_eighths = gpu_eighths(options.gpus)
        spec.resources.gpus = 0 if spec.resources.gpu_eighths else options.gpus
        spec.resources.cpus = options.cpu_demand
        spec.resources.memory_bytes = options.memory
        env, caller = spec.environment, self._environment
        env.python_executable, env.python_version = caller.executable, caller.python_version
        env.fingerprint = caller.fingerprint()
        env.pip.extend(options.pip or self._pip)
        spec.task_id = self._new_task_id(key or spec.name)
        spec.function.id, spec.function.size = fn_id, fn_encoded.nbytes
        future = Future(spec.task_id, spec.name, self.cancel)
        future._lines = self.output.open(spec.task_id, displays)
        future._timings.update(serialize=t1 - t0 - arguments.upload_seconds,
                               upload=arguments.upload_seconds)
        if blocking:
            future._sink = queue.SimpleQueue()
        call = _Call(spec, future, arguments, fn_encoded, upload_fn, options,
                     direct and not displays and self.leases is not None
                     and not options.timeout and not options.credits)
        future._resend = functools.partial(self.resend, call)
        future._retries = options.retries
        self.futures[future.key] = future
        self._calls.add(future)
        try:
            encoded = arguments.encode()
            if not arguments.pending:
                self._send(call, encoded)
                return future
        except (InputCancelled, InputFailed) as ended:
            self._input_ended(call, ended)
            return future
        except BaseException:  # nothing was sent: the error is the caller's, at once
            self._abandon(call)
            raise
        self._send_when_ready(call, arguments.pending)
        return future

    def _send_when_ready(self, call: _Call, pending: list[Future]) -> None:
        """A Future argument resolves on the cluster: the call goes out once its inputs end,
        unless it was cancelled meanwhile (see cancel())."""
        call.waited = True
        with self._calls.lock:
            self._waiting[call.task_id] = call
        remaining = [len(pending)]
        lock = threading.Lock()

        def input_done(_):
            with lock:
                remaining[0] -= 1
                if remaining[0]:
                    return
            if call.task_id not in self._waiting:
                return  # cancelled while it waited
            try:
                self._send(call, call.arguments.encode())
            except (InputCancelled, InputFailed) as ended:
                self._input_ended(call, ended)
            except BaseException as exc:
                future = call.future
                self._abandon(call)
                if future is not None:
                    future._set_error(exc if isinstance(exc, BulletinError) else BulletinError(
                        f"call {future.key} could not be sent once its inputs finished: "
                        f"{exc!r}"))
        for dep in pending:
            dep.add_done_callback(input_done)

    def _input_ended(self, call: _Call, ended: Exception) -> None:
        """As in Dask: a call whose input was cancelled is cancelled, one whose input failed
        fails with the input's error; it is never sent."""
        future = call.future
        self._abandon(call)
        if future is None:
            return
        if isinstance(ended, InputCancelled):
            future._set_cancelled()
        else:
            future._set_error(ended.error_for(future.key))

    def cancel(self, future: Future) -> None:
        """Cancels a call wherever it is: one waiting for its inputs or queued here is never
        sent; one in a Submit in flight is cancelled as soon as the runtime has accepted it;
        one the runtime knows is cancelled there. (The Future's canceller.)"""
        with self._calls.lock:
            future._cancel_asked = True  # a retry about to be sent sees it (resend)
            task_id = future._task_id
            waiting = self._waiting.pop(task_id, None)
            if waiting is None and self._queue.cancel_locked(task_id):
                return
        if waiting is not None:
            self._abandon(waiting)
            return
        if self.leases is not None and self.leases.cancel(task_id):
            return
        self._queue.send_cancel(task_id)

    def _abandon(self, call: _Call) -> None:
        """A call that will not be sent: forgotten, its holds dropped."""
        self._calls.pop(call.task_id)
        with self._calls.lock:
            self._waiting.pop(call.task_id, None)
        self._drop_holds(call.arguments)

    def _drop_holds(self, arguments: CallArguments) -> None:
        for oid in arguments.releases:
            self._transfer.release(oid)
        arguments.releases.clear()

    def _send(self, call: _Call, args_encoded) -> None:
        """Puts the encoded arguments in the spec (inline, or uploaded) and queues it."""
        spec, future, arguments = call.spec, call.future, call.arguments
        if call.sent:
            raise RuntimeError(f"call {spec.task_id} was queued twice; this is a bulletin bug")
        args_id = args_encoded.digest()
        spec.args.id, spec.args.size = args_id, args_encoded.nbytes
        if args_encoded.nbytes > self.inline_limit:
            start = perf_counter()
            arguments.releases.append(self._transfer.acquire(args_encoded))
            call.uploads.append(args_encoded)
            if future is not None:
                future._timings["upload"] = (future._timings.get("upload", 0)
                                             + perf_counter() - start)
        else:
            spec.args.inline_data = args_encoded.to_bytes()
            if future is not None:
                future._inline_bytes += args_encoded.nbytes
        for oid, size in arguments.refs.items():
            spec.refs.add(id=oid, size=size)
        if getattr(arguments, "prefer_worker", ""):
            spec.prefer_worker = arguments.prefer_worker
        spec.resident_handles.extend(getattr(arguments, "resident_handles", None) or ())
        lease = None
        # Deciding "inline or id only" and queueing under one lock keeps the message that
        # carries a function's bytes ahead of every message that only names it; releases go
        # after the submit on the same queue, so the runtime has taken its own references.
        # It is the call table's lock: close() cannot slip in between the check and the put.
        with self._calls.lock:
            self._calls.check_open()
            if call.waited and self._waiting.pop(spec.task_id, None) is not call:
                return  # cancelled while it waited for its inputs; cancel() dropped its holds
            if call.direct and _leasable(spec, arguments):
                call.sent, lease = self.leases.offer(call)
            if not call.sent:
                self._queue_locked(call)
        call.uploads.extend(arguments.uploads)
        arguments.sent()
        self._drop_holds(arguments)
        if lease is not None:
            self.leases.ask(lease)

    def _queue_locked(self, call: _Call) -> None:
        """Queues the call's spec for the runtime, with its function's bytes if they have not
        gone before. The caller holds the call table's lock."""
        spec, future, fn_id = call.spec, call.future, call.spec.function.id
        first_use = None
        if fn_id not in self.sent_functions:
            if not call.upload_fn:
                spec.function.inline_data = call.fn_encoded.to_bytes()
                if future is not None:
                    future._inline_bytes += call.fn_encoded.nbytes
            self.sent_functions.add(fn_id)
            first_use = (fn_id, call.fn_encoded)
        self._queue.put_locked(spec, first_use)
        call.sent = True

    def to_runtime(self, call: _Call) -> None:
        """A call a lease took and gives back unrun (it ended, or none connected in time):
        it goes to the runtime like any other."""
        spec = call.spec
        hold = None
        try:
            if (spec.function.id not in self.sent_functions
                    and call.fn_encoded.nbytes > self.inline_limit):
                # Held in the store until the Submit is in (the release queues after it).
                hold = self._transfer.acquire(call.fn_encoded)
                call.upload_fn = True
            with self._calls.lock:
                future = self._calls.get(spec.task_id)
                if future is None or not self._calls.is_open():
                    return  # cancelled meanwhile, or the client is closed (its call failed)
                future._attempt_base = future._attempt  # a lease may have started it
                self._queue_locked(call)
        except BaseException as exc:  # noqa: BLE001 - the call's error, never this thread's
            future = self._calls.pop(spec.task_id)
            if future is not None:
                future._set_error(exc if isinstance(exc, BulletinError) else BulletinError(
                    f"call {future.key} could not be sent to the runtime: {exc!r}"))
        finally:
            if hold is not None:
                self._transfer.release(hold)

    def _new_task_id(self, name: str) -> str:
        return f"{_slug(name)}-{self._ids.next_hex()}"

    def resend(self, call: _Call, future: Future, retries_left: int | None = None) -> None:
        """Runs a call again under its Future, with a new task id: a failed one
        (Future.retry), or one whose function raised while retries remain (``retries_left``:
        what the runtime may still spend on lost workers and dead executors)."""
        if not future._reopen():
            return
        task_id = self._new_task_id(call.spec.name)
        if not call.sent:  # an input failed: that input runs again, then this call
            for dep in call.arguments.inputs:
                if isinstance(dep, Future) and dep.status == "error":
                    dep.retry()
            with self._calls.lock:
                call.spec.task_id = future._task_id = task_id
            call.waited = False
            self._calls.add(future)
            pending = [dep for dep in call.arguments.inputs
                       if isinstance(dep, Future) and not dep.done()]
            if pending:
                self._send_when_ready(call, pending)
                return
            try:
                self._send(call, call.arguments.encode())
            except (InputCancelled, InputFailed) as ended:
                self._input_ended(call, ended)
            return
        spec = pb.TaskSpec()
        spec.CopyFrom(call.spec)
        spec.task_id = task_id
        if retries_left is not None:
            spec.retries = max(0, retries_left)
        # What the call names must be in the store again: the runtime let its objects go
        # when the last run ended (acquire uploads only what is gone).
        holds = [self._transfer.acquire(encoded) for encoded in call.uploads]
        fn_id, first_use = spec.function.id, None
        large_fn = call.fn_encoded.nbytes > self.inline_limit
        if fn_id not in self.sent_functions and large_fn:  # a lease ran it: never sent here
            holds.append(self._transfer.acquire(call.fn_encoded))
        try:
            with self._calls.lock:
                self._calls.check_open()
                if future._cancel_asked:
                    return
                future._task_id = task_id
                self._calls.add_locked(future)
                if fn_id not in self.sent_functions:
                    if not large_fn:
                        spec.function.inline_data = call.fn_encoded.to_bytes()
                    self.sent_functions.add(fn_id)
                    first_use = (fn_id, call.fn_encoded)
                self._queue.put_locked(spec, first_use)
        finally:
            for oid in holds:
                self._transfer.release(oid)

    def retry_raised(self, future: Future, envelope: dict) -> bool:
        """retries=: a call whose function raised runs again while its retries last (as in
        Dask; the runtime's own retries cover lost workers and dead executors). True if it
        was sent again. bulletin's own errors (an unpicklable result, arguments that would
        not load) are not retried: they would fail the same way."""
        future._raised += 1
        failed_runs = future._failed_runs()
        if (failed_runs > future._retries or future._resend is None
                or str(envelope.get("type", "")).startswith("bulletin.")):
            return False
        future._note(f"raised {envelope.get('type')}; running it again (attempt "
                     f"{future.attempts + 1} of at most {future._retries + 1 + future.preempted})")
        future._resend(future, retries_left=future._retries - failed_runs)
        return True
