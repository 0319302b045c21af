"""The client: one Session stream to the runtime, a submitter thread sending calls, and a
dispatcher thread resolving futures; and the default client of decorated functions.

Per call the caller's thread pickles (functions once per object) and queues one TaskSpec, and
returns a Future (``_submitter``); the dispatcher thread reads every event of the session
(``_connection.SessionStream``) and resolves the future it names. No thread is created per
call.
"""

from __future__ import annotations

import atexit
import concurrent.futures as cf
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from time import perf_counter
from typing import Any, Callable, Iterable

from ._config import Options
from ._connection import Connection, SessionStream, failure_error
from ._data._objects import Ref, decode
from ._data._transfer import Transfer
from ._decorators import RemoteFunction
from ._envelope import exception_from_envelope
from ._errors import BulletinError, RuntimeFailure, RuntimeUnreachableError
from ._future import FIRST_EXCEPTION, Future, WaitInfo
from ._future import wait as _wait
from ._proto import bulletin_pb2 as pb
from ._status import ClusterStatus
from ._submitter import CallTable, Submitter, encode_value

_CHUNK_BYTES = 1 << 20
_CHUNK_HEADROOM = 64 << 10
_CANCEL_ACK_SECONDS = 2.0


class Client:
    """A connection to a bulletin runtime; the latest one created is the default.

    ``Client(address=None, *, token=None, connect_timeout=3.0, ca=None)``: the address
    defaults to $BULLETIN_ADDRESS, then $BULLETIN_HOME/runtime.json, then 127.0.0.1:8770; the
    token to $BULLETIN_TOKEN, then $BULLETIN_HOME/token. ``ca``: the cluster's CA certificate
    (a PEM file: a copy of the head's $BULLETIN_HOME/ca.pem) to check a TLS runtime with;
    defaults to $BULLETIN_CA, then runtime.json (on the head's host), then
    $BULLETIN_HOME/ca.pem; without one the client speaks plaintext. ``ca=False``: plaintext.
    """

    def __init__(self, address: str | None = None, *, token: str | None = None,
                 connect_timeout: float = 3.0, ca=None, set_as_default: bool = True):
        self._conn = Connection(address, token, connect_timeout, ca=ca)
        hello = self._conn.hello
        self.address = self._conn.address
        self.user, self.group = hello.user, hello.group
        self.cluster_id, self.runtime_version = hello.cluster_id, hello.runtime_version
        max_message = hello.max_message_bytes or 4 << 20
        chunk_bytes = max(1, min(_CHUNK_BYTES, max_message - _CHUNK_HEADROOM))

        self._calls = CallTable()
        self._downloads: ThreadPoolExecutor | None = None
        self._transfer = Transfer(self._conn, self._conn.session_id, chunk_bytes,
                                  self._send_release)
        self._session = SessionStream(self._conn, self._on_event, self._session_ended)
        self._submitter = Submitter(self._conn, self._session, self._transfer, self._calls,
                                    self._cancel_task, inline_limit=hello.inline_limit_bytes,
                                    batch_bytes=max(1, max_message // 2))
        self._submitter.start()
        wait = max(connect_timeout, 1.0)
        if self._session.wait_opened(wait) is None:
            self.close()
            raise self._calls.broken or RuntimeUnreachableError(
                f"the runtime at {self.address} did not open a session within {wait:g} s; "
                "check it with `bulletin status`")
        _live_clients.add(self)
        if set_as_default:
            _set_default(self)

    # -- public API ---------------------------------------------------------------------------

    def submit(self, fn: Callable, /, *args, gpus: int | None = None, cpus: float | None = None,
               memory: int | str | None = None, qos: str | None = None,
               priority: int | None = None, timeout: float | str | None = None,
               retries: int | None = None, credits: float | None = None, **kwargs) -> Future:
        """Runs ``fn(*args, **kwargs)`` remotely; returns at once with a Future.

        Resources default to the function's decorator options, else gpus=0, cpus=1.
        ``credits`` spends that many of your group's credits to move the call up its QoS
        class's queue (an urgent run), paid when it is placed.
        """
        options = _options_for(fn, gpus=gpus, cpus=cpus, memory=memory, qos=qos,
                               priority=priority, timeout=timeout, retries=retries,
                               credits=credits)
        return self._submit(fn, args, kwargs, options)

    def map(self, fn: Callable, *iterables: Iterable, gpus: int | None = None,
            cpus: float | None = None, memory: int | str | None = None, qos: str | None = None,
            priority: int | None = None, timeout: float | str | None = None,
            retries: int | None = None, credits: float | None = None) -> list[Future]:
        """One call of ``fn`` per element, zipping several iterables like builtins.map."""
        options = _options_for(fn, gpus=gpus, cpus=cpus, memory=memory, qos=qos,
                               priority=priority, timeout=timeout, retries=retries,
                               credits=credits)
        return [self._submit(fn, args, {}, options) for args in zip(*iterables)]

    def scatter(self, value) -> Ref:
        """Puts ``value`` in the cluster's object store once; pass the returned Ref as an
        argument (any number of calls) and it is never uploaded again."""
        self._calls.check_open()
        encoded = encode_value(value, "the scattered value")
        oid = self._transfer.acquire(encoded)
        return Ref(oid, encoded.nbytes, encoded.kind, self._transfer.release)

    def gather(self, futures: cf.Future | Iterable[cf.Future]) -> Any:
        """The results of the futures, in order; raises the first error as soon as one fails."""
        if isinstance(futures, cf.Future):
            return futures.result()
        futures = list(futures)
        done, _ = _wait(futures, return_when=FIRST_EXCEPTION)
        for f in futures:
            if f in done and (f.cancelled() or f.exception() is not None):
                f.result()
        return [f.result() for f in futures]

    def status(self) -> ClusterStatus:
        """Workers, GPU and CPU slots (total / reserved / busy) and the queue."""
        self._calls.check_open()
        reply = self._conn.call(self._conn.stub.Status, pb.StatusRequest(), "Status")
        return ClusterStatus._from_proto(reply)

    def close(self) -> None:
        """Ends the session; calls still pending fail with BulletinError."""
        if not self._calls.close():
            return
        self._submitter.stop()
        self._session.close()
        if self._downloads is not None:
            self._downloads.shutdown(wait=False)
        self._transfer.close()
        self._conn.close()
        _live_clients.discard(self)
        _clear_default(self)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._calls.closed else "broken" if self._calls.broken else "open"
        return f"<bulletin.Client {self.address} user={self.user!r} {state}>"

    # -- calls --------------------------------------------------------------------------------

    def _submit(self, fn: Callable, args: tuple, kwargs: dict, options: Options) -> Future:
        """A call whose options are validated already (decorated functions come here)."""
        return self._submitter.submit(fn, args, kwargs, options)

    def _call(self, fn: Callable, args: tuple, kwargs: dict, options: Options) -> Any:
        """A blocking call: prints the remote output from this thread, cancels on Ctrl-C."""
        future = self._submitter.submit(fn, args, kwargs, options, blocking=True)
        try:
            future._drain()
        except KeyboardInterrupt:
            future._sink = None
            future.cancel()
            future._settled.wait(_CANCEL_ACK_SECONDS)
            raise
        return future.result()

    def _cancel_task(self, task_id: str) -> None:
        if self._calls.is_open():
            self._session.send(pb.ClientMessage(cancel=pb.CancelTask(task_id=task_id)))

    def _send_release(self, oid: str) -> None:
        self._submitter.release(oid)

    # -- the dispatcher thread ----------------------------------------------------------------

    def _session_ended(self, error: BulletinError | None) -> None:
        """The session ended (``error`` says why; None when close() ended it)."""
        self._calls.fail_all(error or BulletinError(
            "the client was closed before this call finished; its result is lost"))

    def _on_event(self, event) -> None:
        future = self._calls.get(event.task_id)
        if future is None:
            return  # failed or forgotten locally already
        detail = event.WhichOneof("detail")
        if detail == "output":
            stream = "stderr" if event.output.stream == pb.STDERR else "stdout"
            future._add_output(stream, event.output.data)
            return
        state = event.state
        if state == pb.RUNNING:
            if detail == "placement":
                future.placement = event.placement
            future._set_status("running")
        elif state == pb.QUEUED:  # also after a retry or a preemption
            future._set_status("queued")
            if detail == "wait":
                w = event.wait
                future._set_wait(WaitInfo(w.position, w.reason, w.code, w.eta or None,
                                          tuple(w.suggestions)), w.preemptions)
        elif state == pb.PLACED:
            future.placement = event.placement
        elif state in (pb.FINISHED, pb.ERROR, pb.CANCELLED):
            self._calls.pop(event.task_id)
            try:
                self._on_terminal(future, event, detail)
            except Exception as exc:
                future._set_error(RuntimeFailure(
                    f"bulletin could not process the end of call {future.key}: {exc!r}"))

    def _on_terminal(self, future: Future, event, detail: str | None) -> None:
        if event.state == pb.CANCELLED:
            future._set_cancelled()
            return
        if detail == "failure":
            failure = event.failure
            _record_timings(future, failure.timings)
            if failure.code == pb.CANCELLED_BY_USER:
                future._set_cancelled()
                return
            message = failure.message.rstrip(". ") or pb.FailureCode.Name(failure.code)
            future._set_error(failure_error(failure.code, f"call {future.key} failed: {message}"))
            return
        if detail != "result":
            future._set_error(RuntimeFailure(
                f"the runtime ended call {future.key} ({pb.TaskState.Name(event.state)}) "
                "without a result; please report it with the runtime log."))
            return
        result = event.result
        _record_timings(future, result.timings)
        if result.value.inline_data:
            t0 = perf_counter()
            self._resolve(future, result.raised, result.value.inline_data, t0)
        elif not result.raised:
            # Stays in the store until result() fetches it, or passes it to another call.
            future._set_finished_remote(result.value.id, result.value.size, self._transfer.fetch,
                                        self._send_release)
        else:
            if self._downloads is None:
                self._downloads = ThreadPoolExecutor(max_workers=4,
                                                     thread_name_prefix="bulletin-download")
            self._downloads.submit(self._download, future, result.value.id, result.raised,
                                   result.value.size)

    def _download(self, future: Future, oid: str, raised: bool, size: int = 0) -> None:
        t0 = perf_counter()
        try:
            value = self._transfer.fetch(oid, size)
        except BulletinError as exc:
            future._set_error(exc)
            return
        finally:
            self._send_release(oid)
        self._resolve(future, raised, value, t0, decoded=True)

    @staticmethod
    def _resolve(future: Future, raised: bool, data, t0: float, decoded: bool = False) -> None:
        try:
            value = data if decoded else decode(data)
        except Exception as exc:
            future._set_error(BulletinError(
                f"the result of call {future.key} cannot be unpickled here: {exc!r}. Install "
                "the libraries that define its types where the client runs."))
            return
        future._timings["download"] = perf_counter() - t0
        if raised:
            future._set_error(exception_from_envelope(value, future.key))
        else:
            future._set_finished(value)


def _record_timings(future: Future, timings) -> None:
    future._timings.update(queue=timings.queue_seconds, start=timings.start_seconds,
                           run=timings.run_seconds)


def _options_for(fn: Callable, **given) -> Options:
    base = fn._options if isinstance(fn, RemoteFunction) else None
    return Options.make(base, **given)


# -- the default client -----------------------------------------------------------------------

_default_lock = threading.Lock()
_default: Client | None = None
_live_clients: weakref.WeakSet = weakref.WeakSet()


def _set_default(client: Client) -> None:
    global _default
    with _default_lock:
        _default = client


def _clear_default(client: Client) -> None:
    global _default
    with _default_lock:
        if _default is client:
            _default = None


def get_client() -> Client:
    """The default client: the last one created, else a new ``Client()``."""
    global _default
    with _default_lock:
        client = _default
        if client is None or not client._calls.is_open():
            client = _default = Client(set_as_default=False)
        return client


@atexit.register
def _close_all() -> None:
    for client in list(_live_clients):
        try:
            client.close()
        except Exception:
            pass
