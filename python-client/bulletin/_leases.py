"""Leases, the client's side: the calls of a burst go to an executor directly.

A call's way through the runtime (Submit, scheduling pass, the agent's Py4J round trip, the
end's event) costs the runtime some 300 µs of CPU and wakes ten threads in four processes. A
burst of calls of one shape (``map``, a loop of ``submit`` or of sync calls) need not pay it per
call: once a shape's calls come quickly, the client asks the runtime for a lease, a call of
that shape whose function (``bulletin._runtime._lease.serve``) connects back to this client and
runs the calls the client sends it, until its term (``TERM``) ends or it sits idle (``IDLE``).

What the runtime promises holds because the lease is a call: it is queued, placed and charged
like one (quotas, fair share, QoS and credits, the ledger's reserved time, preemption, the wait
explanation), on an executor of this user. A term of a few seconds gives the slot back to the
scheduler often, so a lease never holds a GPU from a colleague longer than a call would. What
the lease does not carry goes the usual way: calls with a timeout, credits, store objects or
resident values among their arguments, and a cell's call. The executor connects back over
loopback to a client on the runtime's host; off it, to this host's address on the route to the
runtime, over TLS with a certificate the lease call pins (``lease_host``).

A call given to a lease is this client's until its result is back: if the lease's executor goes
away (a preemption, the runtime's crash, the executor's), or a lease's call runs and does not
connect within ``FALLBACK_SECONDS``, the call is sent to the runtime like any other and runs
there. While the shape's leases are still queued in the runtime the calls wait for them longer
(``QUEUED_FALLBACK_SECONDS``): in the runtime's queue they would wait behind them for the same
slots. No call is lost, and none runs twice unless its executor died while it ran (as on the
runtime's path).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections import deque
from dataclasses import replace
from typing import Callable

from ._lease_channel import WINDOW, Channel
from ._lease_wire import LeaseProtocolError, client_greeting, client_prove
from ._runtime._lease import serve
from ._tls import ephemeral_server_context, is_loopback

log = logging.getLogger("bulletin.leases")

# A shape whose calls come this many within TRIGGER_SECONDS gets a lease.
TRIGGER_CALLS = 8
TRIGGER_SECONDS = 0.1
# The longest a lease takes calls, and how long it waits for one before it ends (the slot goes
# back to the scheduler: a colleague's call waits at most about TERM for a lease to end).
TERM = 2.0
IDLE = 0.05
MAX_LEASES = 8  # per shape
# A call waits at most this long for a lease whose call runs to connect; then it goes to the
# runtime (that executor cannot reach this client).
FALLBACK_SECONDS = 0.5
# ... and at most this long while the shape's leases are queued in the runtime. There the calls
# would queue behind the leases for the same slots, and then run the slower way: on the 2-core
# VM a first map of 3,000 no-ops, whose leases waited over half a second for their slots, sent
# 2,425-2,993 of its calls to the runtime and took 11.8-13.8 s, against 2.1-2.3 s waiting.
QUEUED_FALLBACK_SECONDS = 5.0
_HANDSHAKE_SECONDS = 2.0
_HANDSHAKES = 16  # at once; a peer that stalls its handshake holds one for _HANDSHAKE_SECONDS


def lease_host(address: str) -> str | None:
    """Where this client's lease port listens for a runtime at ``address``: loopback for a
    runtime on this host; else this host's address on the route to the runtime (its workers'
    executors connect to it, over TLS). None where $BULLETIN_LEASES=0 (or no route is found)."""
    if os.environ.get("BULLETIN_LEASES", "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    if address.startswith("unix:"):
        return "127.0.0.1"
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    if is_loopback(host):
        return "127.0.0.1"
    try:
        family, _, _, _, where = socket.getaddrinfo(host, int(port), type=socket.SOCK_DGRAM)[0]
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect(where)  # no packet leaves: the kernel picks the route's address
            return probe.getsockname()[0]
    except (OSError, ValueError, IndexError):
        return None


class _Pool:
    """The calls of one shape waiting for a lease, and the leases of that shape."""

    def __init__(self, options):
        self.options = options
        self.pending: deque = deque()
        self.leases: list[_Lease] = []
        self.recent: deque = deque(maxlen=TRIGGER_CALLS)
        # Since when calls wait here with no lease connected (None: they do not).
        self.unserved_since: float | None = None
        self.large_until = 0.0  # calls go to the runtime until then: their results are large

    def hot(self, now: float) -> bool:
        return (len(self.recent) == TRIGGER_CALLS
                and now - self.recent[0] <= TRIGGER_SECONDS)

    def connected(self) -> bool:
        return any(lease.channel is not None for lease in self.leases)

    def live(self) -> int:
        return sum(1 for lease in self.leases if not lease.ending)


class _Lease:
    __slots__ = ("id", "secret", "pool", "future", "channel", "ending", "ended", "running_since")

    def __init__(self, pool: _Pool):
        self.id = os.urandom(16)
        self.secret = os.urandom(32)
        self.pool = pool
        self.future = None
        self.channel: Channel | None = None
        self.ending = False  # it takes no more calls (its executor said so, or went away)
        self.ended = False  # its call ended
        # Since when its call has been seen running without its executor connected, or None.
        self.running_since: float | None = None


class Leases:
    """Decides which calls go to a lease, asks the runtime for leases, and serves them."""

    def __init__(self, submitter, calls, resolve: Callable, host: str = "127.0.0.1"):
        """``host``: where the lease port listens (``lease_host``); off loopback it serves
        TLS with a certificate made for it, whose SHA-256 each lease call carries."""
        self._submitter = submitter
        self._host = host
        self._tls, self._pin = None, b""  # made with the listener, off loopback
        self._handshakes = threading.BoundedSemaphore(_HANDSHAKES)
        self.connections = 0  # leases' executors that passed the handshake (for `repr`, tests)
        self._calls = calls
        self.resolve = resolve  # Client._resolve(future, raised, data, t0): a result in
        self._cond = threading.Condition()
        self._pools: dict = {}
        self._leases: dict[bytes, _Lease] = {}
        self._where: dict[str, _Pool] = {}  # task id -> the pool its call waits in
        self._listener: socket.socket | None = None
        self._closed = False

    # -- the submitter's side ------------------------------------------------------------------

    def offer(self, call) -> tuple[bool, _Lease | None]:
        """Whether a lease takes ``call`` (then it is this module's), and a new lease to ask
        the runtime for (``ask``, once the call table's lock is released), if one is needed."""
        options = call.options
        now = time.monotonic()
        with self._cond:
            if self._closed:
                return False, None
            pool = self._pools.get(options)
            if pool is None:
                pool = self._pools[options] = _Pool(options)
            pool.recent.append(now)
            live = pool.live()
            if (not live and not pool.hot(now)) or pool.large_until > now:
                return False, None
            pool.pending.append(call)
            self._where[call.task_id] = pool
            lease = None
            if not live or (len(pool.pending) > WINDOW * live and live < MAX_LEASES):
                lease = _Lease(pool)
                pool.leases.append(lease)
                self._leases[lease.id] = lease
            self._cond.notify_all()
        return True, lease

    def ask(self, lease: _Lease) -> None:
        """Submits the lease call of ``lease``."""
        listener = self._listen()
        host, port = listener.getsockname()[:2]
        options = replace(lease.pool.options, timeout=0.0, retries=0, credits=0.0)
        try:
            future = self._submitter.submit(
                serve, (host, port, lease.id.hex(), lease.secret.hex(), self._pin.hex(), TERM,
                        IDLE), {}, options, direct=False, key="bulletin-lease", lease=True)
        except Exception as exc:  # noqa: BLE001 - the calls go the runtime's way instead
            log.debug("could not ask for a lease: %r", exc)
            self._lease_ended(lease)
            return
        self._submitter.futures.pop(future.key, None)  # not one of the user's calls
        lease.future = future
        future.add_done_callback(lambda _: self._lease_ended(lease))

    def cancel(self, task_id: str) -> bool:
        """True if the call was a lease's: it is dropped here, or its executor is told (it
        skips the call unless it runs it already). The caller holds no lock."""
        channels = []
        with self._cond:
            pool = self._where.pop(task_id, None)
            if pool is None:
                return False
            for waiting in pool.pending:
                if waiting.task_id == task_id:
                    pool.pending.remove(waiting)
                    break
            else:
                channels = [lease.channel for lease in pool.leases if lease.channel is not None]
        for channel in channels:
            if channel.cancel(task_id):
                break
        self._calls.pop(task_id)
        return True

    def close(self) -> None:
        with self._cond:
            self._closed = True
            listener, self._listener = self._listener, None
            channels = [lease.channel for lease in self._leases.values() if lease.channel]
            self._cond.notify_all()
        if listener is not None:
            listener.close()
        for channel in channels:
            channel.close()

    # -- leases connecting ---------------------------------------------------------------------

    def _listen(self) -> socket.socket:
        with self._cond:
            if self._listener is None:
                if not is_loopback(self._host):
                    self._tls, self._pin = ephemeral_server_context()
                listener = socket.socket(
                    socket.AF_INET6 if ":" in self._host else socket.AF_INET, socket.SOCK_STREAM)
                listener.bind((self._host, 0))
                listener.listen(16)
                self._listener = listener
                threading.Thread(target=self._accept_loop, args=(listener,), daemon=True,
                                 name="bulletin-leases").start()
            return self._listener

    def _accept_loop(self, listener: socket.socket) -> None:
        listener.settimeout(0.1)
        while True:
            try:
                sock, _ = listener.accept()
            except socket.timeout:
                self._fall_back_late()
                continue
            except OSError:
                return  # closed
            if self._handshakes.acquire(blocking=False):
                threading.Thread(target=self._open, args=(sock,), daemon=True,
                                 name="bulletin-lease-handshake").start()
            else:
                sock.close()  # as many handshakes under way as allowed: a flood, not a lease
            self._fall_back_late()

    def _open(self, sock: socket.socket) -> None:
        """The handshake, on a thread of its own; a lease's executor that passes it gets a
        channel, anything else is closed."""
        try:
            sock.settimeout(_HANDSHAKE_SECONDS)
            if self._tls is None:
                if not _own_account(sock):
                    raise LeaseProtocolError("the connection is not from this account")
            else:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock = self._tls.wrap_socket(sock, server_side=True)
            self._handshake(sock)
        except (OSError, LeaseProtocolError) as exc:
            log.debug("refused a lease connection: %r", exc)
            sock.close()
        finally:
            self._handshakes.release()

    def _handshake(self, sock: socket.socket) -> None:
        lease_id, nonce = client_greeting(sock)
        with self._cond:
            lease = self._leases.get(lease_id)
        if lease is None or lease.ended:
            raise LeaseProtocolError("no such lease")
        client_prove(sock, lease.secret, nonce)
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._cond:
            if lease.ended or self._closed:
                raise LeaseProtocolError("the lease ended meanwhile")
            lease.channel = Channel(self, lease, sock)
            lease.ending = False  # a lease the runtime ran again (after a preemption) is back
            self.connections += 1
        lease.channel.start()

    # -- calls going back to the runtime -------------------------------------------------------

    def _lease_ended(self, lease: _Lease) -> None:
        """The lease call ended (or could not be made): its pool's waiting calls go to the
        runtime if no other lease of the shape is left to take them."""
        if lease.future is not None and not lease.future.cancelled() and lease.future.exception():
            log.debug("lease %s ended with %r", lease.future.key, lease.future.exception())
        with self._cond:
            lease.ended = True
            self._leases.pop(lease.id, None)
            pool = lease.pool
            if lease in pool.leases:
                pool.leases.remove(lease)
            orphans = [] if pool.live() else self._drain_locked(pool)
        self._to_runtime(orphans)

    def lease_ending(self, lease: _Lease) -> None:
        """The lease takes no more calls: another is asked for if calls of its shape wait."""
        with self._cond:
            lease.ending = True
            pool, successor = lease.pool, None
            if pool.pending and not pool.live() and not self._closed:
                successor = _Lease(pool)
                pool.leases.append(successor)
                self._leases[successor.id] = successor
            self._cond.notify_all()
        if successor is not None:
            self.ask(successor)

    def _fall_back_late(self) -> None:
        """Calls that waited too long for a lease that has not connected (``_gave_up_locked``) go to
        the runtime; a lease still queued for a pool with nothing left is withdrawn."""
        now = time.monotonic()
        late, withdraw = [], []
        with self._cond:
            for pool in self._pools.values():
                if not pool.pending:
                    pool.unserved_since = None
                    withdraw.extend(lease.future for lease in pool.leases
                                    if lease.channel is None and lease.future is not None
                                    and lease.future.status == "queued")
                elif pool.connected():
                    pool.unserved_since = None
                elif pool.unserved_since is None:
                    pool.unserved_since = now
                    self._explain_wait_locked(pool)
                elif self._gave_up_locked(pool, now):
                    late.extend(self._drain_locked(pool))
                else:
                    self._explain_wait_locked(pool)
        self._to_runtime(late)
        for future in withdraw:
            future.cancel()

    @staticmethod
    def _gave_up_locked(pool: _Pool, now: float) -> bool:
        """Whether the calls waiting in ``pool`` (none of its leases connected) stop waiting: a
        lease's call has run FALLBACK_SECONDS without its executor connecting, or they waited
        QUEUED_FALLBACK_SECONDS in all. Called every tenth of a second, it also notes when each
        lease's call is first seen running (``running_since``), the clock of the first case."""
        gave_up = now - pool.unserved_since > QUEUED_FALLBACK_SECONDS
        for lease in pool.leases:
            future = lease.future
            if future is None or lease.ending or future.status != "running":
                lease.running_since = None  # a preempted lease is queued again
            elif lease.running_since is None:
                lease.running_since = now
            elif now - lease.running_since > FALLBACK_SECONDS:
                gave_up = True
        return gave_up

    @staticmethod
    def _explain_wait_locked(pool: _Pool) -> None:
        """Calls waiting for a lease say why its call waits (the runtime's explanation)."""
        info = next((lease.future.wait_info for lease in pool.leases
                     if lease.future is not None and lease.future.wait_info), None)
        if info is None:
            return
        for call in pool.pending:
            future = call.future
            if future is not None and future._wait_info is not info:
                future._set_wait(info, 0)

    def _drain_locked(self, pool: _Pool) -> list:
        calls = list(pool.pending)
        pool.pending.clear()
        pool.unserved_since = None
        for call in calls:
            self._where.pop(call.task_id, None)
        return calls

    def _to_runtime(self, calls: list) -> None:
        for call in calls:
            self._submitter.to_runtime(call)

    # -- a channel's side ----------------------------------------------------------------------

    def take(self, channel: Channel, room: int) -> list:
        """Up to ``room`` waiting calls for ``channel``; blocks while there are none and the
        channel goes on. [] when the channel should stop taking calls."""
        pool = channel.lease.pool
        with self._cond:
            while not pool.pending and not channel.ending and not self._closed:
                self._cond.wait()
            if channel.ending or self._closed:
                return []
            taken = []
            while pool.pending and len(taken) < room:
                taken.append(pool.pending.popleft())
            return taken

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def answered(self, call) -> None:
        with self._cond:
            self._where.pop(call.task_id, None)
        self._calls.pop(call.task_id)

    def closed(self, channel: Channel, unanswered: list) -> None:
        """A channel closed; the calls it left unanswered run through the runtime."""
        with self._cond:
            if channel.lease.channel is channel:
                channel.lease.channel = None
            channel.lease.ending = True
            for call in unanswered:
                self._where.pop(call.task_id, None)
            self._cond.notify_all()
        self._to_runtime(unanswered)


def _own_account(sock: socket.socket) -> bool:
    """Whether the peer's socket belongs to this process's account (a first filter, before the
    handshake: another user's process is closed without a word)."""
    from ._runtime._callback_server import socket_owner
    try:
        owner = socket_owner(sock.getpeername()[:2], sock.getsockname()[:2])
    except OSError:
        return False
    return owner is not None and owner[0] == os.getuid()
