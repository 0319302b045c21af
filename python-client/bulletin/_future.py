"""bulletin.Future: a concurrent.futures.Future that knows its remote call.

The base state stays PENDING until the terminal event (the base class's RUNNING state would
make cancel() refuse), so cancel() works for queued and running calls alike; ``status`` tracks
the remote life cycle instead.
"""

from __future__ import annotations

import codecs
import concurrent.futures as cf
import concurrent.futures._base as cf_base
import queue
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable

from ._config import parse_wait as _parse_wait
from ._errors import BulletinError
from ._output import CallOutput, write_output
from ._placeholders import reduce_future
from ._ref import Ref
from ._tracebacks import attach_remote_cause

ALL_COMPLETED = cf.ALL_COMPLETED
FIRST_COMPLETED = cf.FIRST_COMPLETED
FIRST_EXCEPTION = cf.FIRST_EXCEPTION

_TERMINAL = ("finished", "error", "cancelled")


@dataclass(frozen=True)
class WaitInfo:
    """Why a queued call waits, as the scheduler explained it last.

    ``position`` (1 = next), ``reason`` ("group quota reached: 8/8 GPUs"), ``code`` (its kind:
    CAPACITY, GROUP_QUOTA, QOS_LIMIT, ...), ``eta`` (estimated start, epoch seconds, or None) and
    ``suggestions`` (what would run sooner).
    """

    position: int
    reason: str
    code: str
    eta: float | None
    suggestions: tuple[str, ...]

    def __str__(self) -> str:
        text = f"waiting (position {self.position}): {self.reason}"
        if self.eta:
            text += f"; estimated start {time.strftime('%H:%M:%S', time.localtime(self.eta))}"
        if self.suggestions:
            text += "; sooner: " + "; ".join(self.suggestions)
        return text


class Future(cf.Future):
    """The pending result of a remote call.

    Besides the concurrent.futures API: ``key`` (the task id), ``status`` ("queued", "running",
    "finished", "error", "cancelled"), ``output`` (the call's stdout and stderr text so far) and
    ``timings``, seconds per phase: serialize, upload and download (which includes unpickling
    the result) measured here; queue, start and run measured by the runtime, and held: from
    placement to the end, the time its slots (its GPUs) were reserved, which is more than start
    and run by the executor's loading of the function and arguments (imports included) and its
    storing of the result. While queued,
    ``wait_info`` says why it waits (a :class:`WaitInfo`, or None); ``preempted`` counts the
    times the cluster preempted and requeued it (its result is unaffected). As in Dask,
    ``client`` is the Client that sent the call and ``type`` the type of its result once known.
    """

    def __init__(self, key: str, name: str, canceller: Callable[[Future], None]):
        super().__init__()
        self._key = key
        self._task_id = key  # the runtime's id of the current run (a retry gets a new one)
        # Runs the failed call again under this Future (set by the submitter; dropped once
        # the call finishes or is cancelled: only a failed call is retried).
        self._resend: Callable[..., None] | None = None
        self._cancel_asked = False  # set under the submitter's lock by the canceller
        self._name = name
        self._canceller = canceller
        self._status = "queued"
        self._timings: dict[str, float] = {}
        self._output: list[str] = []  # whole lines, in the order they were completed
        self._unfinished: dict[str, str] = {}  # per stream: a line not ended yet
        self._decoders: dict[str, codecs.IncrementalDecoder] = {}
        # Whole lines, labelled while calls overlap, to the cell that submitted the call
        # (the submitter replaces this with one from its client's OutputPolicy).
        self._lines = CallOutput(name)
        # Set while a caller blocks on this call and prints its output from its own thread.
        self._sink: queue.SimpleQueue | None = None
        # Set when the runtime has said its last word about the call (or the session died).
        self._settled = threading.Event()
        self.placement = None
        self._wait_info: WaitInfo | None = None
        self._preempted = 0
        self._preempted_before = 0  # preemptions of the runs before the current task id
        self._attempts = 0  # runs started (RUNNING events), over every retry
        self._attempt = 0  # the runtime's number of the latest run (TaskEvent.attempt)
        self._attempt_base = 0  # runs on a lease before the runtime got the call: first
        self._raised = 0  # runs whose function raised
        self._retries = 0  # how many runs may follow a failed one (the call's retries=)
        # A result left in the cluster's store: (id, size), fetched on first result().
        self._remote: tuple[str, int] | None = None
        self._fetch: Callable | None = None
        self._release: Callable[[str], None] | None = None
        self._fetch_lock = threading.Lock()
        self._error_tb = None  # the traceback the error is raised with (remote frames)
        self._client = _client_of(canceller)
        # Bytes carried in the call's own messages (arguments and function sent inline; what
        # went through the store is counted by the transfer) and the result's encoded size.
        self._inline_bytes = 0
        self._result_bytes = 0

    @property
    def client(self):
        """The ``bulletin.Client`` that sent the call (Dask's ``Future.client``)."""
        return self._client

    @property
    def type(self) -> type | None:
        """The type of the call's result once it is here (Dask's ``Future.type``); None before
        it finished, for a failed or cancelled call, and for a large result the cluster's store
        still holds (until ``result()`` fetched it: the runtime does not say its type, and
        fetching it to learn one would move its bytes)."""
        if self._state != cf_base.FINISHED or self._exception is not None:
            return None
        if self._remote is not None:
            return None
        return type(self._result)

    @property
    def key(self) -> str:
        return self._key

    @property
    def status(self) -> str:
        return self._status

    @property
    def wait_info(self) -> WaitInfo | None:
        """Why the call waits while it is queued; None once it runs or before any explanation."""
        return self._wait_info if self._status == "queued" else None

    @property
    def preempted(self) -> int:
        return self._preempted

    @property
    def attempts(self) -> int:
        """How many times the call started running: 1 once it ran, more after a retry (of
        an exception, a lost worker, a dead executor) or a preemption."""
        return self._attempts

    @property
    def attempt(self) -> int:
        """The runtime's number of the call's latest run: 1 for its first, more when it ran
        again under the same key (a lost worker, a preemption, or a runtime restart that cut a
        run short: a call may run twice across a crash, see docs/durability.md); 0 before it
        started."""
        return self._attempt

    def _failed_runs(self) -> int:
        """Runs that ended without a result: every run started but the preempted ones (at
        least those that raised, should a run's start have gone unannounced)."""
        return max(self._attempts - self._preempted, self._raised)

    def _note(self, text: str) -> None:
        """A line for the caller of a blocking call, printed in its cell (like wait_info)."""
        sink = self._sink
        if sink is not None:
            sink.put(("stderr", f"[bulletin] {self._name}: {text}\n"))

    def _set_wait(self, info: WaitInfo, preempted: int) -> None:
        self._wait_info = info
        self._preempted = max(self._preempted, self._preempted_before + preempted)
        if self._sink is not None:  # a blocking call shows why it waits instead of hanging
            self._note(str(info))  # silently; the others' reasons are formatted when read

    @property
    def timings(self) -> dict[str, float]:
        return dict(self._timings)

    @property
    def output(self) -> str:
        """What the call printed, stdout and stderr, line by line: a line of one stream is
        never cut by the other's (their relative order is the order lines were completed)."""
        unfinished = [text for text in list(self._unfinished.values()) if text]
        return "".join(self._output) + "\n".join(unfinished)

    def result(self, timeout=None):
        """The call's value; a large one is fetched from the cluster's store on first use.
        ``timeout``: seconds or a duration string ("10 ms", "2m"). A remote exception is
        raised with the remote frames below the caller's (``traceback()``)."""
        __tracebackhide__ = True  # noqa: F841 (pytest and IPython hide this frame)
        error = super().exception(parse_wait(timeout))  # waits; raises Cancelled/TimeoutError
        if error is not None:
            raise error.with_traceback(self._error_tb)
        if self._remote is None:
            return self._result
        with self._fetch_lock:
            remote = self._remote
            if remote is None:
                return self._result
            start = time.perf_counter()
            try:
                value = self._fetch(*remote)
            except (BulletinError, KeyboardInterrupt):
                raise
            except BaseException as exc:  # noqa: BLE001 - a __reduce__'s SystemExit too
                # Left in the store: result() may be asked again once the library is here.
                raise undecodable_result(self._key, exc) from exc
            self._timings["download"] = time.perf_counter() - start
            self._result = value
            self._remote = None
            self._release_remote(remote[0])
        return value

    def exception(self, timeout=None):
        """The call's exception, or None; ``timeout`` as in ``result``."""
        return super().exception(parse_wait(timeout))

    def traceback(self, timeout=None):
        """The traceback of the call's exception, or None if it did not fail (Dask's): for a
        remote exception, the remote frames."""
        error = self.exception(timeout)
        return None if error is None else self._error_tb

    def retry(self) -> None:
        """Runs a failed call again under this Future, as Dask's ``Future.retry``: its status
        goes back to "queued" and it ends again; an input that failed runs again first. Does
        nothing to a call that did not fail."""
        if self._status != "error" or not self.done():
            return
        if self._resend is None:
            raise BulletinError(f"call {self._key} cannot run again: bulletin failed it before "
                                "it was sent; submit it again")
        self._resend(self)

    def _reopen(self) -> bool:
        """Ready for another run: a failed Future goes back to pending (Future.retry), a
        pending one (retries=) stays so. False if it finished or was cancelled. The base class
        has no way back from FINISHED; its state is this subclass's to set, under its
        condition."""
        with self._condition:
            if self._state == cf_base.FINISHED and self._exception is not None:
                self._state = cf_base.PENDING
                self._exception = None
                self._result = None
            elif self._state != cf_base.PENDING:
                return False
        self._status = "queued"
        self._preempted_before = self._preempted
        self._settled.clear()
        return True

    @property
    def remote_id(self) -> str | None:
        """The id of the result while it stays in the cluster's store (not fetched yet)."""
        remote = self._remote
        return remote[0] if remote else None

    def _release_remote(self, oid: str) -> None:
        release, self._release = self._release, None
        if release is not None:
            release(oid)

    def __del__(self):
        remote = self._remote
        if remote is not None:
            try:
                self._release_remote(remote[0])
            except Exception:
                pass

    def running(self) -> bool:
        return self._status == "running"

    def cancel(self) -> bool:
        """Cancels the remote call if it is queued or running; True if the future is cancelled."""
        if self.cancelled():
            return True
        if self.done():
            return False
        try:
            self._canceller(self)
        except Exception:  # the session is gone: the call is lost anyway, cancel locally
            pass
        return self._cancel_locally()

    def __repr__(self) -> str:
        kind = self.type
        of_type = f" type={_type_name(kind)}" if kind is not None else ""
        return f"<bulletin.Future {self.key} status={self.status}{of_type}>"

    # The dashboard of the cluster the latest Client connected to (HelloReply.dashboard_url).
    _dashboard_url = ""

    def _repr_html_(self) -> str:
        """Notebook display: status, timings (seconds), why it waits, the end of its output."""
        from ._html import html_fields, link_line
        fields = [("function", self._name), ("key", self.key), ("status", self.status)]
        kind = self.type
        if kind is not None:
            fields.append(("type", _type_name(kind)))
        info = self.wait_info
        if info is not None:
            fields.append(("waiting", str(info)))
        fields += [(name, f"{seconds:.3f} s") for name, seconds in self.timings.items()]
        if self.attempts > 1:
            fields.append(("attempts", self.attempts))
        output = self.output
        if output:
            fields.append(("output", output[-500:]))
        return html_fields("bulletin.Future", fields) + link_line(self._dashboard_url)

    def __reduce__(self):
        # Anywhere inside a call's arguments, a Future resolves on the cluster.
        return reduce_future(self)

    def __await__(self):
        """``await future`` in a coroutine: its value (or its error), without blocking the
        event loop, Jupyter's included; a large result is fetched on a worker thread."""
        return self._result_async().__await__()

    async def _result_async(self):
        __tracebackhide__ = True  # noqa: F841 (pytest and IPython hide this frame)
        import asyncio
        loop = asyncio.get_running_loop()
        if not self.done():
            waiter = loop.create_future()

            def wake(_):
                try:
                    loop.call_soon_threadsafe(_wake, waiter)
                except RuntimeError:  # the loop is closed: nobody awaits any more
                    pass
            self.add_done_callback(wake)
            await waiter
        if self._remote is not None:
            return await loop.run_in_executor(None, self.result)
        return self.result()

    # The dispatcher's side. Each method tolerates a future that is already done, because a
    # local cancel() can race with the runtime's terminal event.

    def _set_status(self, status: str) -> None:
        if self._status not in _TERMINAL:
            self._status = status

    def _add_output(self, stream: str, data: bytes) -> None:
        decoder = self._decoders.get(stream)
        if decoder is None:
            decoder = self._decoders[stream] = codecs.getincrementaldecoder("utf-8")("replace")
        text = decoder.decode(data)
        if not text:
            return
        pending = self._unfinished.get(stream, "") + text
        end = max(pending.rfind("\n"), pending.rfind("\r")) + 1
        if end:
            self._output.append(pending[:end])
        self._unfinished[stream] = pending[end:]
        self._emit(stream, self._lines.lines(stream, text))

    def _emit(self, stream: str, text: str) -> None:
        if not text:
            return
        sink = self._sink
        if sink is not None:
            sink.put((stream, text))
        else:
            self._lines.write(stream, text)

    def _end_output(self) -> None:
        """The call ended: an unfinished last line is written as a line of its own."""
        for stream, text in self._lines.rest():
            self._emit(stream, text)

    def _wake_sink(self) -> None:
        sink = self._sink
        if sink is not None:
            sink.put(None)

    def _cancel_locally(self) -> bool:
        cancelled = cancel_and_notify(self, super().cancel)
        self._wake_sink()
        return cancelled

    def _invoke_callbacks(self) -> None:
        # The base class calls this once the state is final and before any done callback:
        # the remote status is brought in line first, so a callback never reads a stale one.
        if self.cancelled():
            self._status = "cancelled"
        elif self._exception is not None:
            self._status = "error"
        else:
            self._status = "finished"
        if self._status != "error":
            self._resend = None  # only a failed call runs again: let its arguments go
        # As the base class does, but a callback's SystemExit or KeyboardInterrupt is logged
        # too: callbacks run on the client's own threads, whose end would hang every call.
        for callback in self._done_callbacks:
            try:
                callback(self)
            except BaseException:  # noqa: BLE001
                cf_base.LOGGER.exception("exception calling callback for %r", self)

    def _settle(self, status: str, apply: Callable[[], None]) -> None:
        self._end_output()  # before anyone waiting on the result wakes
        try:
            apply()
        except cf.InvalidStateError:
            pass
        else:
            self._status = status
        self._settled.set()
        self._wake_sink()

    def _set_finished(self, value) -> None:
        self._settle("finished", lambda: self.set_result(value))

    def _set_finished_remote(self, oid: str, size: int, fetch: Callable,
                             release: Callable[[str], None]) -> None:
        """Finished, with the value left in the store until result() or this future's end."""
        self._remote, self._fetch, self._release = (oid, size), fetch, release
        self._settle("finished", lambda: self.set_result(None))

    def _set_error(self, exc: BaseException) -> None:
        def fail():
            self._error_tb = exc.__traceback__  # raised with it each time, never longer
            attach_remote_cause(exc)  # the remote traceback's text, as the process pool's
            self.set_exception(exc)
        self._settle("error", fail)

    def _set_cancelled(self) -> None:
        self._end_output()
        self._cancel_locally()
        self._settled.set()

    def _drain(self) -> None:
        """Prints the call's output in this thread until it ends (the blocking-call path)."""
        from ._progress import QueueWait
        sink = self._sink
        if sink is None:
            return
        waiting = QueueWait(self._name)
        try:
            while True:
                # A bounded wait: a signal that arrives on another thread (or interrupt_main())
                # does not wake an unbounded one, and Ctrl-C must reach this thread promptly.
                info = self._wait_info
                waiting.update(self._status, info.position if info else None)
                try:
                    item = sink.get(timeout=0.25)
                except queue.Empty:
                    continue
                if item is None:
                    break
                write_output(*item, displays=self._lines.displays)
        finally:
            waiting.close()
        self._sink = None


def cancel_and_notify(future: cf.Future, cancel: Callable[[], bool]) -> bool:
    """Cancels ``future`` with ``cancel`` (the base class's) and tells its waiters at once.

    The base class's cancel() leaves the state CANCELLED, which wait() and as_completed() do not
    count as done until set_running_or_notify_cancel() moves it to CANCELLED_AND_NOTIFIED;
    without that a cancelled future hung gather() for good. Both steps run under the future's
    lock (re-entrant), so a second cancel (the user's, then the runtime's confirmation) finds
    it notified already instead of tripping the base class's "unexpected state" error.
    """
    with future._condition:
        cancelled = cancel()
        if cancelled and future._state == cf._base.CANCELLED:
            future.set_running_or_notify_cancel()
    return cancelled


def undecodable_result(key: str, exc: BaseException) -> BulletinError:
    """The error of a result that decoding here failed for (its own code ran: a ``__reduce__``
    or a type whose module this interpreter lacks)."""
    return BulletinError(
        f"the result of call {key} cannot be unpickled here: {exc!r}. Install the libraries "
        "that define its types where the client runs.")


def parse_wait(timeout) -> float | None:
    """A wait's timeout in seconds (None: no limit), a number or a duration string ("10 ms").
    A negative number is no wait at all, as in concurrent.futures (whose ``Executor.map``
    passes what is left of its timeout, below zero once it is spent)."""
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout < 0:
        return 0.0
    return _parse_wait(timeout)


def _client_of(canceller):
    """The Client whose submitter made a Future (its canceller is that submitter's), or None
    (a Future made elsewhere: tests, an Executor's waiting call, which sets its own)."""
    owner = getattr(canceller, "__self__", None)
    clients = sys.modules.get("bulletin._client")
    if owner is None or clients is None:
        return None
    for client in list(clients._live_clients):
        if getattr(client, "_submitter", None) is owner:
            return client
    return None


def _type_name(kind: type) -> str:
    module = getattr(kind, "__module__", "builtins")
    name = getattr(kind, "__qualname__", repr(kind))
    return name if module == "builtins" else f"{module}.{name}"


def _wake(waiter) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _futures(fs, what: str) -> list:
    """``fs`` as a list of futures (one Future or Ref alone is a list of one); anything else
    in it is refused, naming it."""
    if isinstance(fs, cf.Future) or _is_ref(fs):
        return [fs]
    try:
        fs = list(fs)
    except TypeError:
        raise TypeError(f"{what} takes futures, got {fs!r}") from None
    for f in fs:
        if not isinstance(f, cf.Future) and not _is_ref(f):
            raise TypeError(f"{what} takes futures (and Refs), got {f!r} (a {type(f).__name__})")
    return fs


def _is_ref(value) -> bool:
    return isinstance(value, Ref)


def wait(fs, timeout: float | str | None = None, return_when: str = ALL_COMPLETED):
    """Waits for futures like concurrent.futures.wait: returns (done, not_done) sets. ``fs``
    may be one Future; ``timeout`` a duration ("10 ms"); Refs count as done."""
    if isinstance(timeout, cf.Future) or _is_ref(timeout):
        raise TypeError("wait takes the futures as one list: wait([x, y]), not wait(x, y) "
                        "(its second argument is the timeout)")
    fs = _futures(fs, "wait")
    refs = {f for f in fs if not isinstance(f, cf.Future)}
    done, not_done = cf.wait([f for f in fs if f not in refs], timeout=parse_wait(timeout),
                             return_when=return_when)
    return cf_base.DoneAndNotDoneFutures(done | refs, not_done)
