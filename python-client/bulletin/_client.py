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
    RuntimeFailure, RuntimeUnreachableError, SerializationError, WorkerDiedError,
    WorkerLostError)
from ._future import FIRST_EXCEPTION, Future, WaitInfo
from ._future import wait as _wait
from ._proto import bulletin_pb2 as pb
from ._proto import bulletin_pb2_grpc as pb_grpc
from ._objects import Ref, StoreRef, decode, encode
from ._serialize import FunctionPickles, callable_name, dumps_args, type_name
from ._status import ClusterStatus
from ._transfer import StoreFullError, Transfer
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


def _failure_trailer(exc: grpc.RpcError):
    """The FailureCode an object RPC's trailer names (e.g. WORKER_LOST), or None."""
    try:
        trailers = exc.trailing_metadata() or ()
    except Exception:
        return None
    for key, value in trailers:
        if key == "bulletin-failure":
            try:
                return pb.FailureCode.Value(value)
            except ValueError:
                return None
    return None


class _Connection:
    """A channel to the runtime, checked with Hello: shared by Client and the command line."""

    def __init__(self, address: str | None = None, token: str | None = None,
                 connect_timeout: float = 3.0):
        self.address, self._address_source = resolve_address(address)
        token, self._token_source = resolve_token(token)
        self.channel = grpc.insecure_channel(self.address, options=_CHANNEL_OPTIONS)
        self.stub = pb_grpc.BulletinStub(self.channel)
        # Object calls count against the session: what it uploaded goes when it ends.
        self.session_id = uuid.uuid4().hex
        self.metadata = ((("authorization", f"Bearer {token}"),) if token else ()) + (
            ("bulletin-session", self.session_id),)
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
        failure = _failure_trailer(exc)
        if failure is not None:  # an object call that failed the way a call fails
            cls, advice = _FAILURES.get(failure, (RuntimeFailure, ""))
            return cls(f"{what} failed: {details}. {advice}".rstrip())
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
        self._transfer = Transfer(self._conn, self._conn.session_id, self._chunk_bytes,
                                  self._send_release)
        # Large arguments stay in the store while the caller's object lives: id(obj) -> ids.
        self._kept: dict[int, tuple[weakref.ref, dict[str, weakref.finalize]]] = {}

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
        self._check_open()
        encoded = _encode_value(value, "the scattered value")
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
        self._transfer.close()
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
        fn_id, fn_encoded = self._pickles.get(fn)
        call = _PendingCall(self)
        args = tuple(call.convert(a) for a in args)
        kwargs = {k: call.convert(v) for k, v in kwargs.items()}
        t1 = perf_counter()
        upload_fn = fn_id not in self._sent_functions and fn_encoded.nbytes > self._inline_limit
        if upload_fn:
            call.releases.append(self._transfer.acquire(fn_encoded))
        spec = pb.TaskSpec(name=callable_name(fn), qos=options.qos, priority=options.priority,
                           credits=options.credits,
                           timeout_seconds=options.timeout, retries=options.retries)
        spec.resources.gpus = options.gpus
        spec.resources.cpus = options.cpus
        spec.resources.memory_bytes = options.memory
        spec.task_id = f"{_slug(spec.name)}-{uuid.uuid4().hex}"
        spec.function.id, spec.function.size = fn_id, fn_encoded.nbytes
        future = Future(spec.task_id, spec.name, self._cancel_task)
        future._timings.update(serialize=t1 - t0 - call.upload_seconds,
                               upload=call.upload_seconds)
        if blocking:
            future._sink = queue.SimpleQueue()
        with self._lock:
            self._futures[spec.task_id] = future
        pending = [dep for dep in call.futures if not dep.done()]
        if not pending:
            self._send(call, spec, args, kwargs, fn_encoded, upload_fn, future)
            return future
        # A Future argument resolves on the cluster: the call goes out once its inputs finish.
        remaining = [len(pending)]
        lock = threading.Lock()

        def input_done(_):
            with lock:
                remaining[0] -= 1
                if remaining[0]:
                    return
            try:
                self._send(call, spec, args, kwargs, fn_encoded, upload_fn, future)
            except BaseException as exc:
                with self._lock:
                    self._futures.pop(spec.task_id, None)
                future._set_error(exc if isinstance(exc, BulletinError) else BulletinError(
                    f"call {future.key} could not be sent once its inputs finished: {exc!r}"))
        for dep in pending:
            dep.add_done_callback(input_done)
        return future

    def _send(self, call: "_PendingCall", spec, args: tuple, kwargs: dict, fn_encoded,
              upload_fn: bool, future: Future) -> None:
        """Encodes the arguments (Future inputs are done by now) and queues the submit."""
        args = tuple(call.resolve(a) for a in args)
        kwargs = {k: call.resolve(v) for k, v in kwargs.items()}
        try:
            args_encoded = encode((args, kwargs))
        except Exception:
            dumps_args(args, kwargs)  # raises a SerializationError naming the argument
            raise
        args_id = args_encoded.digest()
        spec.args.id, spec.args.size = args_id, args_encoded.nbytes
        if args_encoded.nbytes > self._inline_limit:
            start = perf_counter()
            call.releases.append(self._transfer.acquire(args_encoded))
            future._timings["upload"] = future._timings.get("upload", 0) + perf_counter() - start
        else:
            spec.args.inline_data = args_encoded.to_bytes()
        for oid, size in call.refs.items():
            spec.refs.add(id=oid, size=size)
        fn_id = spec.function.id
        # Deciding "inline or id only" and enqueueing under one lock keeps the message that
        # carries a function's bytes ahead of every message that only names it; releases go
        # after the submit on the same stream, so the runtime has taken its own references.
        with self._lock:
            self._check_open()
            if fn_id not in self._sent_functions:
                if not upload_fn:
                    spec.function.inline_data = fn_encoded.to_bytes()
                self._sent_functions.add(fn_id)
            self._outbox.put(spec)
        for oid in call.releases:
            self._transfer.release(oid)
        call.releases.clear()

    def _keep_while_alive(self, value, encoded) -> tuple[str, bool]:
        """Holds a large argument in the store while ``value`` lives; (id, held for good).

        Only the object's current content is held: an array changed in place and sent again
        lets its earlier content go (calls already submitted hold their own references).
        """
        oid = encoded.digest()
        key = id(value)
        kept = self._kept.get(key)
        if kept is not None and kept[0]() is value and oid in kept[1]:
            return oid, True
        oid = self._transfer.acquire(encoded)
        try:
            ref = weakref.ref(value)
        except TypeError:
            return oid, False  # cannot tell when it dies: held for this call only
        if kept is None or kept[0]() is not value:
            kept = self._kept[key] = (ref, {})
        for stale, finalizer in kept[1].items():
            if finalizer.detach() is not None:
                self._transfer.release(stale)
        kept[1].clear()
        kept[1][oid] = weakref.finalize(value, self._forget_kept, key, oid)
        return oid, True

    def _forget_kept(self, key: int, oid: str) -> None:
        kept = self._kept.get(key)
        if kept is not None and kept[0]() is None:
            del self._kept[key]
        self._transfer.release(oid)

    def _send_release(self, oid: str) -> None:
        # Through the outbox: a release leaves only after every Submit queued before it has
        # returned, so the runtime has taken its own references for those calls first.
        if not self._closed and self._broken is None:
            self._outbox.put(_Release(oid))

    def _submit_loop(self) -> None:
        while True:
            item = self._outbox.get()
            if item is None:
                return
            batch, releases, size = [], [], 0
            while True:
                if isinstance(item, _Release):
                    releases.append(item.oid)
                else:
                    batch.append(item)
                    size += item.ByteSize()
                if len(batch) >= _BATCH_CALLS or size >= self._batch_bytes:
                    break
                try:
                    item = self._outbox.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._outbox.put(None)  # stop after sending what came before it
                    break
            if batch:
                try:
                    self._conn.stub.Submit(pb.SubmitRequest(session_id=self._session_id,
                                                            tasks=batch),
                                           metadata=self._conn.metadata)
                except Exception as exc:  # noqa: BLE001 - every failure fails the batch's calls
                    self._fail_batch(batch, exc)
            if releases:
                self._requests.put(pb.ClientMessage(release=pb.ReleaseObjects(ids=releases)))

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
            if detail == "wait":
                w = event.wait
                future._set_wait(WaitInfo(w.position, w.reason, w.code, w.eta or None,
                                          tuple(w.suggestions)), w.preemptions)
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


def _encode_value(value, what: str):
    try:
        return encode(value)
    except Exception as exc:
        raise SerializationError(f"{what} (a {type_name(value)}) cannot be encoded: {exc}. "
                                 "Pass something picklable instead.") from exc


def _bulky(value, limit: int) -> bool:
    """Large enough to travel as an object of its own (uploaded once, shared by calls)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value) > limit
    nbytes = getattr(value, "nbytes", None)
    return isinstance(nbytes, int) and nbytes > limit and not isinstance(value, type)


class _Release:
    """An outbox entry: drop the session's hold on an object once earlier submits are in."""

    __slots__ = ("oid",)

    def __init__(self, oid: str):
        self.oid = oid


class _PendingCall:
    """The objects one submit refers to, and the holds to drop once it is queued."""

    def __init__(self, client: Client):
        self.client = client
        self.refs: dict[str, int] = {}
        self.releases: list[str] = []
        self.futures: list[Future] = []
        self.upload_seconds = 0.0

    def convert(self, value):
        if isinstance(value, Ref):
            self.refs[value.id] = value.nbytes
            return StoreRef(value.id)
        if isinstance(value, Future):
            self.futures.append(value)
            return value
        if _bulky(value, max(self.client._inline_limit, 1 << 16)):
            encoded = _encode_value(value, "an argument")
            start = perf_counter()
            oid, kept = self.client._keep_while_alive(value, encoded)
            self.upload_seconds += perf_counter() - start
            if not kept:
                self.releases.append(oid)
            self.refs[oid] = encoded.nbytes
            return StoreRef(oid)
        return value

    def resolve(self, value):
        """A done Future argument: its result stays on the cluster when it is still there."""
        if not isinstance(value, Future):
            return value
        if value.cancelled():
            raise BulletinError(f"an argument is the future of call {value.key}, which was "
                                "cancelled; nothing was sent")
        error = value.exception()
        if error is not None:
            raise BulletinError(f"an argument is the future of call {value.key}, which failed: "
                                f"{error!r}; nothing was sent") from error
        oid = value.remote_id
        if oid is not None:
            self.refs[oid] = value._remote[1] if value._remote else 0
            return StoreRef(oid)
        return self.convert(value.result())


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
