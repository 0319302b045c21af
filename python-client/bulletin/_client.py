"""The client: one Session stream to the runtime, a submitter thread sending calls, and a
dispatcher thread resolving futures; and the default client of decorated functions.

Per call the caller's thread pickles (functions once per object) and queues one TaskSpec, and
returns a Future (``_submitter``); the dispatcher thread reads every event of the session
(``_connection.SessionStream``) and resolves the future it names. No thread is created per
call.
"""

from __future__ import annotations

import atexit
import itertools
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from time import perf_counter
from typing import Any, Callable, Iterable

from ._call_options import split_keywords
from ._environment import parse_pip
from ._config import Options, parse_wait
from ._connection import Connection, SessionStream, failure_error
from ._data._objects import decode
from ._data._transfer import Transfer
from ._decorators import RemoteFunction
from ._envelope import exception_from_envelope
from ._errors import (BulletinError, InvalidArgumentError, RuntimeFailure,
                      RuntimeUnreachableError)
from ._future import Future, WaitInfo, undecodable_result
from ._gather import gather, gather_async
from ._leases import Leases, lease_host
from ._nested import futures_in
from ._output import checked_prefix
from ._proto import bulletin_pb2 as pb
from ._ref import Ref
from ._status import ClusterStatus
from ._usage import UsageReport
from ._arguments import encode_value
from ._reconnect import resolve_reconnect_timeout
from ._call_table import CallTable
from ._submitter import Submitter

_CHUNK_BYTES = 1 << 20
_CHUNK_HEADROOM = 64 << 10
_CANCEL_ACK_SECONDS = 2.0


class Client:
    """A connection to a bulletin runtime; the latest one created is the default.

    ``Client(address=None, *, token=None, connect_timeout=3.0, ca=None, asynchronous=False)``:
    the address defaults to $BULLETIN_ADDRESS, then $BULLETIN_HOME/runtime.json, then
    127.0.0.1:8770; the token to $BULLETIN_TOKEN, then $BULLETIN_HOME/token. ``ca``: the
    cluster's CA certificate (a PEM file: a copy of the head's $BULLETIN_HOME/ca.pem) to check a
    TLS runtime with; defaults to $BULLETIN_CA, then runtime.json (on the head's host), then
    $BULLETIN_HOME/ca.pem; without one the client speaks plaintext. ``ca=False``: plaintext.
    ``reconnect_timeout``: how long a lost runtime is waited for (seconds or a duration; default
    $BULLETIN_RECONNECT_TIMEOUT, else 120 s; 0: fail at once): the session resumes and every
    Future still completes; past it, pending calls fail with RuntimeUnreachableError. An
    asynchronous client (Dask's ``asynchronous=True``) returns awaitables from gather, scatter
    and cancel; Futures are awaitable with either. A call's output is printed a whole line at
    a time (in Jupyter, under the cell that started the call); while calls overlap each line
    starts with a label naming its call, which ``output_prefix=False`` (or setting the
    attribute later) leaves out.
    """

    def __init__(self, address: str | None = None, *, token: str | None = None,
                 connect_timeout: float = 3.0, ca=None, set_as_default: bool = True,
                 asynchronous: bool = False, pip: list[str] | None = None,
                 reconnect_timeout=None, output_prefix: bool = True):
        checked_prefix(output_prefix)  # before anything connects
        self.asynchronous = asynchronous
        self.reconnect_timeout = resolve_reconnect_timeout(reconnect_timeout)
        self._conn = Connection(address, token, connect_timeout, ca=ca,
                                reconnect_timeout=self.reconnect_timeout)
        hello = self._conn.hello
        self.address = self._conn.address
        self.user, self.group = hello.user, hello.group
        self.cluster_id, self.runtime_version = hello.cluster_id, hello.runtime_version
        # The runtime's web dashboard, when it serves one (shown in notebook displays).
        self.dashboard_url = hello.dashboard_url
        if hello.dashboard_url:
            Future._dashboard_url = hello.dashboard_url
        max_message = hello.max_message_bytes or 4 << 20
        chunk_bytes = max(1, min(_CHUNK_BYTES, max_message - _CHUNK_HEADROOM))

        self._calls = CallTable()
        self._downloads: ThreadPoolExecutor | None = None
        self._transfer = Transfer(self._conn, self._conn.session_id, chunk_bytes,
                                  self._send_release)
        self._session = SessionStream(self._conn, self._on_event, self._session_ended,
                                      self.reconnect_timeout, self._calls.has_pending)
        self._submitter = Submitter(self._conn, self._session, self._transfer, self._calls,
                                    inline_limit=hello.inline_limit_bytes,
                                    batch_bytes=max(1, max_message // 2),
                                    pip=parse_pip(pip) if pip else ())
        host = lease_host(self.address)
        if host is not None:
            self._submitter.leases = Leases(self._submitter, self._calls, self._resolve, host)
        self.output_prefix = output_prefix
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

    def submit(self, fn: Callable, /, *args, **kwargs) -> Future:
        """Runs ``fn(*args, **kwargs)`` remotely; returns at once with a Future.

        A keyword ``fn`` accepts reaches ``fn``; one it cannot accept that names a call option
        sets that option: ``gpus``, ``cpus``, ``memory``, ``qos``, ``priority``, ``timeout``,
        ``retries``, ``credits`` (spends that many of your group's credits to move the call
        up its QoS class's queue), and Dask's ``key`` (names the call), ``resources``
        ({"GPU": 1}), ``pure`` (no effect: every call runs). Options default to the function's
        decorator's, else gpus=0, cpus=1 (for a share of a GPU: that share of a CPU);
        ``bulletin.gpu(fn, timeout="2h")`` sets options whatever fn's keywords are.
        ``pip=[...]`` names packages the call needs that its worker lacks (a cached environment
        is built once; ``Client(pip=...)`` sets a default for every call; docs/environments.md).
        """
        call = split_keywords(fn, kwargs, _base_options(fn))
        return self._submit(fn, args, call.kwargs, call.options, call.key)

    def map(self, fn: Callable, *iterables: Iterable, **kwargs) -> list[Future]:
        """One call of ``fn`` per element, zipping several iterables like builtins.map; the
        keywords go to every call, and set options as in ``submit``. ``key`` may also be one
        name per call; ``batch_size=N`` sends the calls to the runtime N at a time at most
        (one Submit each), as Dask sends them to its scheduler."""
        call = split_keywords(fn, kwargs, _base_options(fn), what="map",
                              extra_names=("batch_size",))
        keys = call.key if isinstance(call.key, (list, tuple)) else itertools.repeat(call.key)
        futures = []
        for args, key in zip(zip(*iterables), keys):
            futures.append(self._submit(fn, args, call.kwargs, call.options, key))
            if call.batch_size and len(futures) % call.batch_size == 0:
                self._submitter.end_batch()
        if call.batch_size:
            self._submitter.end_batch()
        return futures

    def scatter(self, data, workers=None, broadcast: bool = False, direct=None,
                hash: bool = True, timeout=None, asynchronous=None):
        """Puts ``data`` in the cluster's object store once and returns a ``Ref`` to pass as
        an argument (any number of calls; it is never uploaded again) or to fetch with
        ``ref.result()``. As in Dask, a list, tuple, set or range gives one Ref per element
        (the same kind of container; a range gives a list) and a dict one per value.

        ``broadcast=True`` changes nothing: one store per host serves all of its executors,
        and an object reaches another host's store the first time a call there needs it.
        ``hash``, ``direct`` and ``timeout`` are accepted for Dask's sake and change nothing
        (objects are always named by their content); ``workers`` is refused (bulletin places
        data where its calls run). Asynchronous: returns an awaitable; the upload runs on a
        worker thread."""
        if self._asynchronous(asynchronous):
            return self._scatter_async(data, workers, broadcast, timeout)
        self._calls.check_open()
        if workers is not None:
            raise InvalidArgumentError(
                f"workers={workers!r}: bulletin places data where its calls run; leave "
                "workers out")
        if not isinstance(broadcast, bool):
            raise InvalidArgumentError(f"broadcast={broadcast!r}: expected True or False")
        parse_wait(timeout)
        if isinstance(data, dict):
            return {key: self._scatter_one(value) for key, value in data.items()}
        if isinstance(data, range):
            data = list(data)
        if isinstance(data, (list, tuple, set, frozenset)):
            refs = [self._scatter_one(value) for value in data]
            return type(data)(refs) if type(data) in (list, tuple, set, frozenset) else refs
        return self._scatter_one(data)

    async def _scatter_async(self, data, workers, broadcast, timeout):
        import asyncio
        return await asyncio.get_running_loop().run_in_executor(
            None, lambda: self.scatter(data, workers, broadcast, timeout=timeout,
                                       asynchronous=False))

    def _scatter_one(self, value) -> Ref:
        encoded = encode_value(value, "the scattered value")
        oid = self._transfer.acquire(encoded)
        return Ref(oid, encoded.nbytes, encoded.kind, self._transfer.release,
                   self._transfer.fetch)

    def gather(self, futures, errors: str = "raise", direct=None, asynchronous=None,
               timeout=None) -> Any:
        """The results of ``futures``: one Future or Ref, or any nesting of lists, tuples,
        sets and dicts of them (and of other values, returned as they are), in the same
        shape. ``errors="raise"`` raises the first error as soon as a call fails (a
        cancelled call raises CancelledError); ``errors="skip"`` leaves failed and cancelled
        calls out of their containers. ``timeout``: seconds or a duration ("1m").
        ``asynchronous=True`` (or an asynchronous client) returns an awaitable instead."""
        __tracebackhide__ = True  # noqa: F841 (pytest and IPython hide this frame)
        if self._asynchronous(asynchronous):
            return gather_async(futures, errors, timeout)
        values, error = gather(futures, errors, timeout)
        if error is not None:
            raise error  # from here: the caller's frame, this one, then the remote frames
        return values

    def cancel(self, futures, asynchronous=None, force: bool = False, reason=None,
               msg=None):
        """Cancels the calls of ``futures`` (one Future, or any nesting of lists, tuples, sets
        and dicts of them); none of them runs afterwards. Refs are left alone. Asynchronous:
        returns an awaitable that cancels them."""
        if self._asynchronous(asynchronous):
            return self._cancel_async(futures)
        for f in futures_in(futures):
            if isinstance(f, Future):
                f.cancel()
        return None

    async def _cancel_async(self, futures) -> None:
        self.cancel(futures, asynchronous=False)

    def _asynchronous(self, asynchronous: bool | None) -> bool:
        return self.asynchronous if asynchronous is None else bool(asynchronous)

    def get_executor(self, **options):
        """A ``concurrent.futures.Executor`` whose calls run here with ``options`` (those of
        ``submit``, and ``max_workers``), as Dask's ``Client.get_executor``."""
        from ._cf_executor import Executor
        return Executor(client=self, **options)

    @property
    def output_prefix(self) -> bool:
        """Whether lines of overlapping calls' output start with a label naming the call."""
        return self._submitter.output.prefix

    @output_prefix.setter
    def output_prefix(self, value: bool) -> None:
        self._submitter.output.prefix = checked_prefix(value)

    @property
    def futures(self) -> dict[str, Future]:
        """This client's Futures that are still referenced somewhere, by key."""
        return dict(self._submitter.futures)

    def status(self) -> ClusterStatus:
        """Workers, GPU and CPU slots (total / reserved / busy) and the queue."""
        self._calls.check_open()
        reply = self._conn.call(self._conn.stub.Status, pb.StatusRequest(), "Status")
        return ClusterStatus._from_proto(reply, self.dashboard_url)

    def _release_resident(self) -> None:
        """Drops every value this session keeps on the cluster (``bulletin.Resident``), as its
        end would, in the background; the session goes on (``%bulletin --release``)."""
        self._calls.check_open()
        self._session.send(pb.ClientMessage(release_resident=pb.ReleaseResident()))

    def close(self) -> None:
        """Ends the session; calls still pending fail with BulletinError. What the session
        keeps on the cluster (its ``bulletin.Resident`` values) is freed there."""
        if not self._calls.close():
            return
        if self._submitter.leases is not None:
            self._submitter.leases.close()
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

    def __await__(self):
        """``client = await bulletin.Client(asynchronous=True)``, as in Dask (the client is
        connected by then)."""
        async def connected():
            return self
        return connected().__await__()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc_info) -> None:
        self.close()

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._calls.closed else "broken" if self._calls.broken else "open"
        return f"<bulletin.Client {self.address} user={self.user!r} {state}>"

    def _repr_html_(self) -> str:
        from ._html import html_fields, link_line
        state = "closed" if self._calls.closed else "broken" if self._calls.broken else "open"
        return html_fields("bulletin.Client", [
            ("address", self.address), ("user", f"{self.user} ({self.group})"),
            ("cluster", self.cluster_id), ("runtime", self.runtime_version),
            ("session", state), ("futures", len(self._submitter.futures))]) + link_line(
                self.dashboard_url)

    def usage(self, since="7d", by: str = "user", until=None) -> UsageReport:
        """The usage ledger over a period (``since``: a duration ago such as "7d" or "12h", or a
        datetime; ``until``: likewise, default now), per user or per group (``by``): GPU-hours
        reserved and busy, calls, credits. Your own calls only, unless you are the cluster's
        owner or an admin."""
        from ._usage import usage_request
        self._calls.check_open()
        reply = self._conn.call(self._conn.stub.Usage, usage_request(since, until, by), "Usage")
        return UsageReport._from_proto(reply, self.dashboard_url)

    # -- calls --------------------------------------------------------------------------------

    def _submit(self, fn: Callable, args: tuple, kwargs: dict, options: Options,
                key: str | None = None) -> Future:
        """A call whose options are validated already (decorated functions come here)."""
        return self._submitter.submit(fn, args, kwargs, options, key=key)

    def _call(self, fn: Callable, args: tuple, kwargs: dict, options: Options,
              key: str | None = None) -> Any:
        """A blocking call: prints the remote output from this thread, cancels on Ctrl-C."""
        return self._call_to_end(fn, args, kwargs, options, key).result()

    def _call_to_end(self, fn: Callable, args: tuple, kwargs: dict, options: Options,
                     key: str | None = None, displays: bool = False) -> Future:
        """``_call``'s Future once the call ended (its output printed from this thread)."""
        future = self._submitter.submit(fn, args, kwargs, options, blocking=True, key=key,
                                        displays=displays)
        try:
            future._drain()
        except KeyboardInterrupt:
            future._sink = None
            future.cancel()
            future._settled.wait(_CANCEL_ACK_SECONDS)
            raise
        return future

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
        if event.attempt:
            future._attempt = future._attempt_base + event.attempt
        if state == pb.RUNNING:
            if detail == "placement":
                future.placement = event.placement
            future._attempts += 1
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
        future._result_bytes = len(result.value.inline_data) or result.value.size
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
        except BaseException as exc:  # noqa: BLE001 - decoding runs the result's own code;
            # an error left in this pool's future would be seen by no one: the call would hang
            future._set_error(undecodable_result(future.key, exc))
            return
        finally:
            self._send_release(oid)
        self._resolve(future, raised, value, t0, decoded=True)

    def _resolve(self, future: Future, raised: bool, data, t0: float,
                 decoded: bool = False) -> None:
        try:
            value = data if decoded else decode(data)
        except BaseException as exc:  # noqa: BLE001 - a SystemExit from a __reduce__ too:
            # this (the dispatcher) thread must live on, or every call would hang for good
            future._set_error(undecodable_result(future.key, exc))
            return
        future._timings["download"] = perf_counter() - t0
        if raised:
            if self._submitter.retry_raised(future, value):
                return
            future._set_error(exception_from_envelope(value, future.key, future.attempts))
        else:
            future._set_finished(value)


def _record_timings(future: Future, timings) -> None:
    future._timings.update(queue=timings.queue_seconds, start=timings.start_seconds,
                           run=timings.run_seconds, held=timings.held_seconds)


def _base_options(fn: Callable) -> Options:
    return fn.call_options if isinstance(fn, RemoteFunction) else Options()


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
