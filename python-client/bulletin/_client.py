"""The client: one gRPC Session stream to the runtime and a dispatcher thread resolving futures.

Per call the caller's thread pickles (functions once per object), enqueues one ClientMessage
and returns a Future; the dispatcher thread reads every event of the session and resolves the
future it names. No thread is created per call.
"""

from __future__ import annotations

import atexit
import concurrent.futures as cf
import queue
import re
import threading
import uuid
import weakref
from concurrent.futures import ThreadPoolExecutor
from time import perf_counter
from typing import Any, Callable, Iterable

import grpc

from ._config import Options, resolve_address, resolve_token
from ._decorators import RemoteFunction
from ._envelope import exception_from_envelope
from ._errors import (
    AuthenticationError, BulletinError, CallTimeoutError, InfeasibleError, InvalidRequestError,
    RuntimeFailure, RuntimeUnreachableError, WorkerDiedError,
    WorkerLostError)
from ._future import FIRST_EXCEPTION, Future
from ._future import wait as _wait
from ._proto import bulletin_pb2 as pb
from ._proto import bulletin_pb2_grpc as pb_grpc
from ._serialize import FunctionPickles, callable_name, dumps_args, loads, object_id
from ._status import ClusterStatus
from ._version import __version__

_CHUNK_BYTES = 1 << 20
_CHUNK_HEADROOM = 64 << 10
_CANCEL_ACK_SECONDS = 2.0
_RPC_SECONDS = 30.0

# The client never sends more than the runtime's max_message_bytes (uploads are chunked below
# it), so lifting gRPC's 4 MiB default here is safe, and it needs no second connection after
# Hello. HTTP proxies from the environment are ignored: the runtime sits on the local network.
# Keepalive stays above grpc-java's default permitKeepAliveTime (5 min) to avoid GOAWAYs.
_CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
    ("grpc.enable_http_proxy", 0),
    ("grpc.keepalive_time_ms", 360_000),
]

_FAILURES = {
    pb.INFEASIBLE: (InfeasibleError,
                    "Ask for fewer resources, or for a QoS class whose workers have them; "
                    "`bulletin status` shows what the workers have."),
    pb.EXECUTOR_DIED: (WorkerDiedError,
                       "It may have run out of memory or crashed (see its output); "
                       "retries=N resubmits such calls automatically."),
    pb.WORKER_LOST: (WorkerLostError, ""),  # the runtime's message says what to do
    pb.TIMED_OUT: (CallTimeoutError, ""),  # the runtime's message says which timeout hit
    pb.INVALID_REQUEST: (InvalidRequestError,
                         "This is probably a bulletin bug; please report it with the runtime log."),
    pb.INTERNAL: (RuntimeFailure,
                  "See the runtime log ($BULLETIN_HOME/runtime.log where it runs)."),
}


class _Connection:
    """A channel to the runtime, checked with Hello: shared by Client and the command line."""

    def __init__(self, address: str | None = None, token: str | None = None,
                 connect_timeout: float = 3.0):
        self.address, self._address_source = resolve_address(address)
        token, self._token_source = resolve_token(token)
        self.channel = grpc.insecure_channel(self.address, options=_CHANNEL_OPTIONS)
        self.stub = pb_grpc.BulletinStub(self.channel)
        self.metadata = (("authorization", f"Bearer {token}"),) if token else ()
        # Hello without wait_for_ready fails at once on a refused connection, and within
        # connect_timeout on a host that does not answer.
        try:
            self.hello = self.stub.Hello(pb.HelloRequest(client_version=__version__),
                                         metadata=self.metadata, timeout=connect_timeout)
        except grpc.RpcError as exc:
            self.channel.close()
            code = exc.code()
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise RuntimeUnreachableError(
                    f"no bulletin runtime answers at {self.address} (from "
                    f"{self._address_source}): {exc.details()}. Start one with `bulletin up`, "
                    "or set BULLETIN_ADDRESS to the address of a running one.") from None
            if code == grpc.StatusCode.UNAUTHENTICATED and token is None:
                raise AuthenticationError(
                    f"no token found (looked at the token argument, $BULLETIN_TOKEN and "
                    f"{self._token_source}). `bulletin up` creates one for the runtime's owner; "
                    "other users get theirs from the cluster's admin.") from None
            if code == grpc.StatusCode.UNIMPLEMENTED:
                raise RuntimeUnreachableError(
                    f"something answers at {self.address} (from {self._address_source}), but it "
                    f"is not a bulletin runtime ({exc.details()}). Check the address, or start a "
                    "runtime with `bulletin up`.") from None
            raise self.error(exc, "Hello") from None

    def error(self, exc: grpc.RpcError, what: str) -> BulletinError:
        code, details = exc.code(), exc.details()
        if code == grpc.StatusCode.UNAUTHENTICATED:
            return AuthenticationError(
                f"the runtime at {self.address} does not accept the token from "
                f"{self._token_source} ({details}). Use the token `bulletin up` wrote to "
                "$BULLETIN_HOME/token, or the one your cluster's admin gave you.")
        if code == grpc.StatusCode.PERMISSION_DENIED:
            return AuthenticationError(f"the runtime at {self.address} refused {what}: {details}")
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            return RuntimeUnreachableError(
                f"lost the bulletin runtime at {self.address} during {what} ({details}). "
                "Check it with `bulletin status`; start it again with `bulletin up`.")
        return RuntimeFailure(f"{what} failed: {code.name}: {details}")

    def call(self, method: Callable, request, what: str, timeout: float = _RPC_SECONDS):
        try:
            return method(request, metadata=self.metadata, timeout=timeout)
        except grpc.RpcError as exc:
            raise self.error(exc, what) from None

    def close(self) -> None:
        self.channel.close()


# How long close() waits for the runtime to end the session before cutting the stream.
_GOODBYE_SECONDS = 2.0
# A Submit batch stays under the runtime's message limit (one spec may carry up to the inline
# limit) and bounded in count.
_BATCH_CALLS = 1000


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_")[:48] or "call"


class Client:
    """A connection to a bulletin runtime; the latest one created is the default.

    ``Client(address=None, *, token=None, connect_timeout=3.0)``: the address defaults to
    $BULLETIN_ADDRESS, then $BULLETIN_HOME/runtime.json, then 127.0.0.1:8770; the token to
    $BULLETIN_TOKEN, then $BULLETIN_HOME/token.
    """

    def __init__(self, address: str | None = None, *, token: str | None = None,
                 connect_timeout: float = 3.0, set_as_default: bool = True):
        self._conn = _Connection(address, token, connect_timeout)
        hello = self._conn.hello
        self.address = self._conn.address
        self.user, self.group = hello.user, hello.group
        self.cluster_id, self.runtime_version = hello.cluster_id, hello.runtime_version
        self._inline_limit = hello.inline_limit_bytes
        max_message = hello.max_message_bytes or 4 << 20
        self._chunk_bytes = max(1, min(_CHUNK_BYTES, max_message - _CHUNK_HEADROOM))
        self._batch_bytes = max(1, max_message // 2)

        self._lock = threading.Lock()
        self._closed = False
        self._broken: BulletinError | None = None
        self._futures: dict[str, Future] = {}
        self._sent_functions: set[str] = set()
        self._pickles = FunctionPickles()
        self._downloads: ThreadPoolExecutor | None = None

        # Submissions leave from one thread, one Submit RPC at a time: specs queued while one is
        # in flight go as the next batch (in order, which keeps a function's bytes first).
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()
        self._submitter = threading.Thread(target=self._submit_loop, name="bulletin-submitter",
                                           daemon=True)
        self._session_id: str | None = None
        self._session_opened = threading.Event()

        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._responses = self._conn.stub.Session(self._request_stream(),
                                                  metadata=self._conn.metadata)
        self._dispatcher = threading.Thread(target=self._dispatch, name="bulletin-dispatcher",
                                            daemon=True)
        self._dispatcher.start()
        self._submitter.start()
        if not self._session_opened.wait(max(connect_timeout, 1.0)) or self._session_id is None:
            self.close()
            raise self._broken or RuntimeUnreachableError(
                f"the runtime at {self.address} did not open a session within "
                f"{max(connect_timeout, 1.0):g} s; check it with `bulletin status`")
        _live_clients.add(self)
        if set_as_default:
            _set_default(self)

    # -- public API ---------------------------------------------------------------------------

    def submit(self, fn: Callable, /, *args, gpus: int | None = None, cpus: float | None = None,
               memory: int | str | None = None, qos: str | None = None,
               priority: int | None = None, timeout: float | str | None = None,
               retries: int | None = None, **kwargs) -> Future:
        """Runs ``fn(*args, **kwargs)`` remotely; returns at once with a Future.

        Resources default to the function's decorator options, else gpus=0, cpus=1.
        """
        options = _options_for(fn, gpus=gpus, cpus=cpus, memory=memory, qos=qos,
                               priority=priority, timeout=timeout, retries=retries)
        return self._submit(fn, args, kwargs, options)

    def map(self, fn: Callable, *iterables: Iterable, gpus: int | None = None,
            cpus: float | None = None, memory: int | str | None = None, qos: str | None = None,
            priority: int | None = None, timeout: float | str | None = None,
            retries: int | None = None) -> list[Future]:
        """One call of ``fn`` per element, zipping several iterables like builtins.map."""
        options = _options_for(fn, gpus=gpus, cpus=cpus, memory=memory, qos=qos,
                               priority=priority, timeout=timeout, retries=retries)
        return [self._submit(fn, args, {}, options) for args in zip(*iterables)]

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
        self._check_open()
        reply = self._conn.call(self._conn.stub.Status, pb.StatusRequest(), "Status")
        return ClusterStatus._from_proto(reply)

    def close(self) -> None:
        """Ends the session; calls still pending fail with BulletinError."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        # Half-close first and let the runtime end the session (stopping this client's calls and
        # releasing its functions); cancelling at once would race the half-close with a reset,
        # which the runtime is not told about.
        self._outbox.put(None)
        self._requests.put(None)
        on_dispatcher = threading.current_thread() is self._dispatcher
        if not on_dispatcher:
            self._dispatcher.join(timeout=_GOODBYE_SECONDS)
        self._responses.cancel()
        if not on_dispatcher:
            self._dispatcher.join(timeout=5)
        if self._downloads is not None:
            self._downloads.shutdown(wait=False)
        self._conn.close()
        _live_clients.discard(self)
        _clear_default(self)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "broken" if self._broken else "open"
        return f"<bulletin.Client {self.address} user={self.user!r} {state}>"

    # -- submission ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise BulletinError("this bulletin.Client is closed; create a new one")
        if self._broken is not None:
            raise RuntimeUnreachableError(
                f"this client's session ended: {self._broken} Create a new bulletin.Client() "
                "once the runtime is back.")

    def _submit(self, fn: Callable, args: tuple, kwargs: dict, options: Options,
                blocking: bool = False) -> Future:
        self._check_open()
        if isinstance(fn, RemoteFunction):
            fn = fn.local
        t0 = perf_counter()
        fn_id, fn_bytes = self._pickles.get(fn)
        args_bytes = dumps_args(args, kwargs)
        args_id = object_id(args_bytes)
        t1 = perf_counter()
        upload_fn = fn_id not in self._sent_functions and len(fn_bytes) > self._inline_limit
        if upload_fn:
            self._put_object(fn_id, fn_bytes)
        spec = pb.TaskSpec(name=callable_name(fn), qos=options.qos, priority=options.priority,
                           timeout_seconds=options.timeout, retries=options.retries)
        spec.resources.gpus = options.gpus
        spec.resources.cpus = options.cpus
        spec.resources.memory_bytes = options.memory
        spec.args.id, spec.args.size = args_id, len(args_bytes)
        if len(args_bytes) > self._inline_limit:
            self._put_object(args_id, args_bytes)
        else:
            spec.args.inline_data = args_bytes
        t2 = perf_counter()

        spec.task_id = f"{_slug(spec.name)}-{uuid.uuid4().hex}"
        future = Future(spec.task_id, spec.name, self._cancel_task)
        future._timings.update(serialize=t1 - t0, upload=t2 - t1)
        if blocking:
            future._sink = queue.SimpleQueue()
        spec.function.id, spec.function.size = fn_id, len(fn_bytes)
        # Deciding "inline or id only" and enqueueing under one lock keeps the message that
        # carries a function's bytes ahead of every message that only names it.
        with self._lock:
            self._check_open()
            if fn_id not in self._sent_functions:
                if not upload_fn:
                    spec.function.inline_data = fn_bytes
                self._sent_functions.add(fn_id)
            self._futures[spec.task_id] = future
            self._outbox.put(spec)
        return future

    def _submit_loop(self) -> None:
        while True:
            spec = self._outbox.get()
            if spec is None:
                return
            batch, size = [spec], spec.ByteSize()
            while len(batch) < _BATCH_CALLS and size < self._batch_bytes:
                try:
                    spec = self._outbox.get_nowait()
                except queue.Empty:
                    break
                if spec is None:
                    self._outbox.put(None)  # stop after sending what came before it
                    break
                batch.append(spec)
                size += spec.ByteSize()
            try:
                self._conn.stub.Submit(pb.SubmitRequest(session_id=self._session_id, tasks=batch),
                                       metadata=self._conn.metadata)
            except Exception as exc:  # noqa: BLE001 - every failure fails the batch's calls
                self._fail_batch(batch, exc)

    def _fail_batch(self, batch: list, error) -> None:
        if error is None:
            return
        if isinstance(error, grpc.RpcError):
            failure = self._conn.error(error, "the submission")
        else:
            failure = RuntimeFailure(f"bulletin could not submit: {error!r}")
        for spec in batch:
            with self._lock:
                future = self._futures.pop(spec.task_id, None)
            if future is not None:
                future._set_error(failure)

    def _call(self, fn: Callable, args: tuple, kwargs: dict, options: Options) -> Any:
        """A blocking call: prints the remote output from this thread, cancels on Ctrl-C."""
        future = self._submit(fn, args, kwargs, options, blocking=True)
        try:
            future._drain()
        except KeyboardInterrupt:
            future._sink = None
            future.cancel()
            future._settled.wait(_CANCEL_ACK_SECONDS)
            raise
        return future.result()

    def _cancel_task(self, task_id: str) -> None:
        if not self._closed and self._broken is None:
            self._requests.put(pb.ClientMessage(cancel=pb.CancelTask(task_id=task_id)))

    def _request_stream(self):
        while True:
            message = self._requests.get()
            if message is None:
                return
            yield message

    # -- objects ------------------------------------------------------------------------------

    def _put_object(self, oid: str, data: bytes) -> None:
        step = self._chunk_bytes
        view = memoryview(data)

        def chunks():
            yield pb.ObjectChunk(id=oid, size=len(data), data=bytes(view[:step]))
            for offset in range(step, len(data), step):
                yield pb.ObjectChunk(data=bytes(view[offset:offset + step]))

        try:
            self._conn.stub.PutObject(chunks(), metadata=self._conn.metadata)
        except grpc.RpcError as exc:
            raise self._conn.error(exc, f"the upload of object {oid[:12]}") from None

    def _get_object(self, oid: str) -> bytes:
        try:
            stream = self._conn.stub.GetObject(pb.GetObjectRequest(id=oid),
                                               metadata=self._conn.metadata)
            return b"".join(chunk.data for chunk in stream)
        except grpc.RpcError as exc:
            raise self._conn.error(exc, f"the download of object {oid[:12]}") from None

    # -- the dispatcher thread ----------------------------------------------------------------

    def _dispatch(self) -> None:
        error: BulletinError | None = None
        try:
            for message in self._responses:
                kind = message.WhichOneof("kind")
                if kind == "events":
                    for event in message.events.events:
                        self._on_event(event)
                elif kind == "event":
                    self._on_event(message.event)
                elif kind == "opened":
                    self._session_id = message.opened.session_id
                    self._session_opened.set()
        except grpc.RpcError as exc:
            if not self._closed:
                error = self._conn.error(exc, "the session")
        except Exception as exc:  # a bug here must fail the calls, not hang them
            error = RuntimeFailure(f"bulletin's dispatcher failed: {exc!r}; please report it.")
        else:
            if not self._closed:
                error = RuntimeUnreachableError(
                    f"the runtime at {self.address} ended the session. Check it with "
                    "`bulletin status`; start it again with `bulletin up`.")
        self._session_opened.set()  # a session that never opened: __init__ stops waiting
        self._fail_all(error or BulletinError(
            "the client was closed before this call finished; its result is lost"))

    def _fail_all(self, error: BulletinError) -> None:
        with self._lock:
            if self._broken is None and not self._closed:
                self._broken = error
            pending = list(self._futures.values())
            self._futures.clear()
        for future in pending:
            future._set_error(error)

    def _on_event(self, event) -> None:
        future = self._futures.get(event.task_id)
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
        elif state == pb.PLACED:
            future.placement = event.placement
        elif state in (pb.FINISHED, pb.ERROR, pb.CANCELLED):
            self._futures.pop(event.task_id, None)
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
            cls, advice = _FAILURES.get(failure.code, (RuntimeFailure, ""))
            message = failure.message.rstrip(". ") or pb.FailureCode.Name(failure.code)
            future._set_error(cls(f"call {future.key} failed: {message}. {advice}".rstrip()))
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
        else:
            if self._downloads is None:
                self._downloads = ThreadPoolExecutor(max_workers=4,
                                                     thread_name_prefix="bulletin-download")
            self._downloads.submit(self._download, future, result.value.id, result.raised)

    def _download(self, future: Future, oid: str, raised: bool) -> None:
        t0 = perf_counter()
        try:
            data = self._get_object(oid)
        except BulletinError as exc:
            future._set_error(exc)
            return
        self._resolve(future, raised, data, t0)

    @staticmethod
    def _resolve(future: Future, raised: bool, data: bytes, t0: float) -> None:
        try:
            value = loads(data)
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
        if client is None or client._closed or client._broken is not None:
            client = _default = Client(set_as_default=False)
        return client


@atexit.register
def _close_all() -> None:
    for client in list(_live_clients):
        try:
            client.close()
        except Exception:
            pass
