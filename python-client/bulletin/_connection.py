"""The connection to a runtime: a gRPC channel checked with Hello, the mapping of its failures to
bulletin's errors, and a client's Session stream (cancels and releases up, task events down).

Shared by ``Client`` and the command line, which only needs the channel.
"""

from __future__ import annotations

import collections
import os
import queue
import re
import threading
import time
import uuid
from typing import Callable

# gRPC's fork handlers find a client's threads inside gRPC at every fork of this process (a
# notebook's `!ls`, anything pexpect or multiprocessing starts), skip themselves and log
# "fork_posix.cc:71] Other threads are currently calling into gRPC, skipping fork() handlers"
# into the cell. Off, unless the user turned them on: grpc reads this once, when first imported,
# and this module imports it first (bulletin/__init__.py loads the client lazily).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

import grpc  # noqa: E402

from . import _reconnect, _tls
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
# Reconnecting sessions: the metadata that resumes one, how often events are acknowledged, and
# how many sent messages are kept for a resend (a break loses at most what was in flight).
_RESUME_HEADER = "bulletin-resume-after"
_ACK_EVERY = 256
_KEPT_MESSAGES = 16384

# The client never sends more than the runtime's max_message_bytes (uploads are chunked below
# it), so lifting gRPC's 4 MiB default here is safe, and it needs no second connection after
# Hello. HTTP proxies from the environment are ignored: the runtime sits on the local network.
# Keepalive stays above grpc-java's default permitKeepAliveTime (5 min) to avoid GOAWAYs.
_CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
    ("grpc.enable_http_proxy", 0),
    ("grpc.keepalive_time_ms", 360_000),
    # A lost runtime is retried by the client itself (_reconnect): the channel must try the
    # connection again soon, not after gRPC's backoff of up to two minutes. (Not its
    # min_reconnect_backoff: gRPC also takes that as the time a connection attempt may take.)
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
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
# message names the limit and what to do (dev.bulletin.worker.impl.MemoryCgroups, which writes
# the memory files of the executor's own group).
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
                 connect_timeout: float = 3.0, ca=None, reconnect_timeout: float = 0.0):
        self.address, self._address_source = resolve_address(address)
        # How long a lost runtime is waited for once connected (Hello itself is not retried:
        # a runtime that never answered is a wrong address, not an outage).
        self.reconnect_timeout = reconnect_timeout
        # Outages ridden out (a unary call tried again, a session resumed): a restart may have
        # happened between a caller's steps, and what it staged there may be gone.
        self.outages = 0
        token, self._token_source = resolve_token(token)
        self.tls = _tls.resolve_ca(ca, self.address)
        self._data_tls = None
        self.channel = _tls.grpc_channel(self.address, self.tls, _CHANNEL_OPTIONS)
        self.stub = pb_grpc.BulletinStub(self.channel)
        # Object calls count against the session: what it uploaded goes when it ends.
        self.session_id = uuid.uuid4().hex
        self.metadata = ((("authorization", f"Bearer {token}"),) if token else ()) + (
            ("bulletin-session", self.session_id),)
        try:
            self.hello = self._hello(connect_timeout)
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

    def _hello(self, connect_timeout: float):
        """Hello without wait_for_ready: it fails at once on a refused connection, and within
        connect_timeout on a host that does not answer. A connection cut under it is tried
        again, twice at most: something answered there."""
        for tries_left in (2, 1, 0):
            try:
                return self.stub.Hello(pb.HelloRequest(client_version=__version__),
                                       metadata=self.metadata, timeout=connect_timeout)
            except grpc.RpcError as exc:
                if not (tries_left and _reconnect.link_broke(exc)):
                    raise
            time.sleep(0.05)

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
        """A unary call; tried again while the link is lost, for up to reconnect_timeout
        (only for calls that are safe to repeat: every unary call of the client API is)."""
        try:
            return method(request, metadata=self.metadata, timeout=timeout)
        except grpc.RpcError as exc:
            if not (self.reconnect_timeout > 0 and _reconnect.link_lost(exc)):
                raise self.error(exc, what) from None
        self.outages += 1
        backoff = _reconnect.Backoff(self.reconnect_timeout)
        while backoff.wait():
            try:
                return method(request, metadata=self.metadata, timeout=timeout)
            except grpc.RpcError as exc:
                if not _reconnect.link_lost(exc):
                    raise self.error(exc, what) from None
        raise _reconnect.gave_up(self.address, self.reconnect_timeout, what)

    def close(self) -> None:
        self.channel.close()


class SessionStream:
    """A client's Session stream: messages go up through a queue, and a reader thread hands
    every task event to ``on_event`` and, once the session ends, calls ``on_end`` once with why
    (a BulletinError), or None when it ended because close() asked it to.

    The session outlives its stream (docs/durability.md): when the link breaks, the reader
    opens a new stream that resumes the session after the last event seen (``seq``), for up to
    ``reconnect_timeout`` seconds, and sends again the messages the runtime had not processed.
    Events are acknowledged every ``_ACK_EVERY`` so the runtime can forget them."""

    def __init__(self, conn: Connection, on_event: Callable, on_end: Callable,
                 reconnect_timeout: float = 0.0, calls_waiting: Callable[[], bool] = bool):
        self._conn = conn
        self._on_event = on_event
        self._on_end = on_end
        self._closing = False
        self.session_id: str | None = None
        self._opened = threading.Event()
        self._reconnect_timeout = reconnect_timeout
        self._calls_waiting = calls_waiting
        self._outage = _reconnect.Outage(conn.address)
        # The session is usable (not between streams, and caught up after a resume).
        self._usable = threading.Event()
        self._ended = False
        self._last_seq = 0
        self._acked_seq = 0
        self._catch_up_to = 0
        # Messages sent, by their index over the session's life, kept for a resend: the
        # runtime says on a resume how many it processed.
        self._lock = threading.Lock()
        self._sent: collections.deque = collections.deque(maxlen=_KEPT_MESSAGES)
        self._sent_count = 0
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._responses = conn.stub.Session(self._request_stream(self._requests),
                                            metadata=conn.metadata)
        self._reader = threading.Thread(target=self._read, name="bulletin-dispatcher",
                                        daemon=True)
        self._reader.start()

    def wait_opened(self, timeout: float) -> str | None:
        """The session id once the runtime opened the session; None if it did not in time (or
        the stream ended first)."""
        self._opened.wait(timeout)
        return self.session_id

    def wait_usable(self) -> bool:
        """Blocks while the session is between streams; True once it resumed and caught up,
        False if it ended instead."""
        while not self._usable.wait(0.25):
            if self._ended:
                return False
        return not self._ended

    def send(self, message) -> None:
        with self._lock:
            self._sent.append((self._sent_count, message))
            self._sent_count += 1
            self._requests.put(message)

    def close(self) -> None:
        """Half-closes the stream and lets the runtime end the session (stopping its calls and
        releasing its functions); cancelling at once would race the half-close with a reset,
        which the runtime is not told about."""
        self._closing = True
        with self._lock:
            self._requests.put(None)
        on_reader = threading.current_thread() is self._reader
        if not on_reader:
            self._reader.join(timeout=_GOODBYE_SECONDS)
        self._responses.cancel()
        if not on_reader:
            self._reader.join(timeout=5)

    @staticmethod
    def _request_stream(requests: queue.SimpleQueue):
        while True:
            message = requests.get()
            if message is None:
                return
            yield message

    def _read(self) -> None:
        error: BulletinError | None = None
        responses = self._responses
        while True:
            try:
                for message in responses:
                    self._handle(message)
            except grpc.RpcError as exc:
                if self._closing:
                    break
                if self._reconnect_timeout > 0 and _reconnect.link_lost(exc):
                    responses, error = self._resume()
                    if responses is not None:
                        continue
                else:
                    error = self._conn.error(exc, "the session")
            except Exception as exc:  # a bug here must fail the calls, not hang them
                error = RuntimeFailure(f"bulletin's dispatcher failed: {exc!r}; please report it.")
            else:
                if not self._closing:
                    error = RuntimeUnreachableError(
                        f"the runtime at {self._conn.address} ended the session. Check it with "
                        "`bulletin status`; start it again with `bulletin up`.")
            break
        self._ended = True
        self._usable.set()
        self._opened.set()  # a session that never opened: wait_opened stops waiting
        self._on_end(error)

    def _handle(self, message) -> None:
        kind = message.WhichOneof("kind")
        if kind == "events":
            for event in message.events.events:
                self._on_event(event)
        elif kind == "event":
            self._on_event(message.event)
        elif kind == "opened":
            self.session_id = message.opened.session_id
            self._catch_up_to = message.opened.last_seq
            self._opened.set()
        if message.seq:
            self._last_seq = message.seq
            if message.seq - self._acked_seq >= _ACK_EVERY:
                self._acked_seq = message.seq
                self.send(pb.ClientMessage(session_ack=pb.SessionAck(seq=message.seq)))
        if not self._usable.is_set() and self._last_seq >= self._catch_up_to:
            self._usable.set()

    def _resume(self):
        """Opens streams that resume the session until one does, the runtime refuses, or the
        reconnect timeout passes: (the new stream's responses, None) or (None, why)."""
        self._usable.clear()
        timeout = self._reconnect_timeout
        self._outage.begin(timeout, self._calls_waiting())
        backoff = _reconnect.Backoff(timeout)
        while not self._closing:
            requests: queue.SimpleQueue = queue.SimpleQueue()
            metadata = self._conn.metadata + ((_RESUME_HEADER, str(self._last_seq)),)
            responses = self._conn.stub.Session(self._request_stream(requests), metadata=metadata)
            try:
                opened = next(responses)
            except grpc.RpcError as exc:
                requests.put(None)
                if _reconnect.link_lost(exc) and backoff.wait():
                    continue
                if _reconnect.link_lost(exc):
                    self._outage.end(False, timeout)
                    return None, _reconnect.gave_up(self._conn.address, timeout, "the session")
                self._outage.end(False, timeout, refused=True)
                if exc.code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION):
                    # The runtime is back but no longer has the session; its message says why.
                    return None, RuntimeUnreachableError(
                        f"the runtime at {self._conn.address} is back but ended this client's "
                        f"session: {exc.details()}")
                return None, self._conn.error(exc, "resuming the session")
            except StopIteration:
                requests.put(None)
                return None, RuntimeUnreachableError(
                    f"the runtime at {self._conn.address} ended the session while it resumed")
            with self._lock:
                processed = opened.opened.client_messages
                for index, message in self._sent:
                    if index >= processed:
                        requests.put(message)
                if self._closing:
                    requests.put(None)
                old, self._requests = self._requests, requests
                old.put(None)  # ends the broken stream's request thread
            self._responses = responses
            self._conn.outages += 1
            self._handle(opened)
            self._outage.end(True, timeout)
            return responses, None
        return None, None
