"""The connection to a runtime: a gRPC channel checked with Hello, the mapping of its failures to
bulletin's errors, and a client's Session stream (cancels and releases up, task events down).

Shared by ``Client`` and the command line, which only needs the channel.
"""

from __future__ import annotations

import queue
import re
import threading
import uuid
from typing import Callable

import grpc

from . import _tls
from ._config import resolve_address, resolve_token, token_path
from ._errors import (
    AuthenticationError, BulletinError, CallEnvironmentError, CallTimeoutError, InfeasibleError,
    InvalidRequestError, MemoryLimitError, RuntimeFailure, RuntimeUnreachableError, TlsError,
    WorkerDiedError, WorkerLostError)
from ._proto import bulletin_pb2 as pb
from ._proto import bulletin_pb2_grpc as pb_grpc
from ._version import __version__

RPC_SECONDS = 30.0
# How long closing a session waits for the runtime to end it before cutting the stream.
_GOODBYE_SECONDS = 2.0

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

# The one INVALID_REQUEST that is the caller's mistake, not a bug: a QoS class the cluster does
# not have. The runtime's message names it and lists the known ones ("qos 'turbo' is not a QoS
# class of this cluster (known: batch, interactive)"), so it needs no advice but where to put it.
_UNKNOWN_QOS = re.compile(r"\bqos '[^']*' is not a QoS class")
_UNKNOWN_QOS_ADVICE = "Pass one of those as qos=, or leave qos out for the cluster's default class."


# An executor the kernel killed past its call's memory= (a cgroup's memory.max): the worker's
# message names the limit and what to do (dev.bulletin.worker.impl.MemoryCgroups).
_OVER_MEMORY = re.compile(r"\bwent over its memory limit of memory=")
# The call's environment could not be had on its worker (dev.bulletin.worker.impl
# .CallEnvironments, PipEnvironments): another Python version, a failed pip build. The message
# names both sides and what to do.
_ENVIRONMENT = re.compile(r"\bthe call was made from Python |\bcould not build the environment "
                          r"for pip=")


def failure_error(code: int, message: str) -> BulletinError:
    """The error for a call (or an object RPC) the runtime failed with ``code``: ``message``
    followed by what to do about it."""
    cls, advice = _FAILURES.get(code, (RuntimeFailure, ""))
    if code == pb.INVALID_REQUEST and _UNKNOWN_QOS.search(message):
        advice = _UNKNOWN_QOS_ADVICE
    if code == pb.EXECUTOR_DIED and _OVER_MEMORY.search(message):
        cls, advice = MemoryLimitError, ""
    elif code == pb.EXECUTOR_DIED and _ENVIRONMENT.search(message):
        cls, advice = CallEnvironmentError, ""
    return cls(f"{message}. {advice}".rstrip())


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


class Connection:
    """A channel to the runtime, checked with Hello; over TLS when a CA is found for it (see
    ``_tls.resolve_ca``)."""

    def __init__(self, address: str | None = None, token: str | None = None,
                 connect_timeout: float = 3.0, ca=None):
        self.address, self._address_source = resolve_address(address)
        token, self._token_source = resolve_token(token)
        self.tls = _tls.resolve_ca(ca, self.address)
        self._data_tls = None
        self.channel = _tls.grpc_channel(self.address, self.tls, _CHANNEL_OPTIONS)
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
                why = _tls.diagnose(self.address, self.tls, connect_timeout)
                if why:
                    raise TlsError(why) from None
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

    def data_tls(self):
        """The data port's SSL context when the runtime speaks TLS (its ports go together),
        else None."""
        if self.tls.enabled and self._data_tls is None:
            self._data_tls = _tls.ssl_context(self.tls)
        return self._data_tls

    def error(self, exc: grpc.RpcError, what: str) -> BulletinError:
        code, details = exc.code(), exc.details()
        failure = _failure_trailer(exc)
        if failure is not None:  # an object call that failed the way a call fails
            return failure_error(failure, f"{what} failed: {details}")
        if code == grpc.StatusCode.UNAUTHENTICATED:
            # The runtime's own details repeat this advice with a fixed path; the client knows
            # where this user's token file really is.
            return AuthenticationError(
                f"the runtime at {self.address} does not accept the token from "
                f"{self._token_source}. Use the token `bulletin up` wrote to "
                f"{token_path()} on the runtime's machine, or the one your cluster's "
                "admin gave you (in BULLETIN_TOKEN).")
        if code == grpc.StatusCode.PERMISSION_DENIED:
            return AuthenticationError(f"the runtime at {self.address} refused {what}: {details}")
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            return RuntimeUnreachableError(
                f"lost the bulletin runtime at {self.address} during {what} ({details}). "
                "Check it with `bulletin status`; start it again with `bulletin up`.")
        return RuntimeFailure(f"{what} failed: {code.name}: {details}")

    def call(self, method: Callable, request, what: str, timeout: float = RPC_SECONDS):
        try:
            return method(request, metadata=self.metadata, timeout=timeout)
        except grpc.RpcError as exc:
            raise self.error(exc, what) from None

    def close(self) -> None:
        self.channel.close()


class SessionStream:
    """A client's Session stream: messages go up through a queue, and a reader thread hands
    every task event to ``on_event`` and, once the stream ends, calls ``on_end`` once with why
    (a BulletinError), or None when it ended because close() asked it to."""

    def __init__(self, conn: Connection, on_event: Callable, on_end: Callable):
        self._conn = conn
        self._on_event = on_event
        self._on_end = on_end
        self._closing = False
        self.session_id: str | None = None
        self._opened = threading.Event()
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._responses = conn.stub.Session(self._request_stream(), metadata=conn.metadata)
        self._reader = threading.Thread(target=self._read, name="bulletin-dispatcher",
                                        daemon=True)
        self._reader.start()

    def wait_opened(self, timeout: float) -> str | None:
        """The session id once the runtime opened the session; None if it did not in time (or
        the stream ended first)."""
        self._opened.wait(timeout)
        return self.session_id

    def send(self, message) -> None:
        self._requests.put(message)

    def close(self) -> None:
        """Half-closes the stream and lets the runtime end the session (stopping its calls and
        releasing its functions); cancelling at once would race the half-close with a reset,
        which the runtime is not told about."""
        self._closing = True
        self._requests.put(None)
        on_reader = threading.current_thread() is self._reader
        if not on_reader:
            self._reader.join(timeout=_GOODBYE_SECONDS)
        self._responses.cancel()
        if not on_reader:
            self._reader.join(timeout=5)

    def _request_stream(self):
        while True:
            message = self._requests.get()
            if message is None:
                return
            yield message

    def _read(self) -> None:
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
                    self.session_id = message.opened.session_id
                    self._opened.set()
        except grpc.RpcError as exc:
            if not self._closing:
                error = self._conn.error(exc, "the session")
        except Exception as exc:  # a bug here must fail the calls, not hang them
            error = RuntimeFailure(f"bulletin's dispatcher failed: {exc!r}; please report it.")
        else:
            if not self._closing:
                error = RuntimeUnreachableError(
                    f"the runtime at {self._conn.address} ended the session. Check it with "
                    "`bulletin status`; start it again with `bulletin up`.")
        self._opened.set()  # a session that never opened: wait_opened stops waiting
        self._on_end(error)
