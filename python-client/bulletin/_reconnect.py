"""Riding out a lost runtime: which gRPC failures mean the link is gone (not that the call
was refused), how long to keep trying and how often, and the one line a waiting user sees.

The client retries for ``reconnect_timeout`` seconds (``Client(reconnect_timeout=...)``, else
$BULLETIN_RECONNECT_TIMEOUT, else 120): its Session stream resumes the session (the runtime
kept it detached, docs/durability.md), unary calls and Submits are sent again. Only past the
limit does a caller get RuntimeUnreachableError.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import grpc

from ._config import parse_duration
from ._errors import RuntimeUnreachableError

DEFAULT_RECONNECT_SECONDS = 120.0
_FIRST_DELAY = 0.1
_MAX_DELAY = 3.0
# Failures that say the link broke (a reset, a closed socket), not that the runtime refused.
_LOST_CODES = (grpc.StatusCode.UNAVAILABLE,)
_LOST_DETAILS = ("Stream removed", "RST_STREAM", "Socket closed", "Connection reset",
                 "GOAWAY", "Broken pipe", "connection lost")


def resolve_reconnect_timeout(value) -> float:
    """Seconds from the argument, else $BULLETIN_RECONNECT_TIMEOUT, else 120 (0: never retry).
    Seconds or a duration ("2m", "90s")."""
    if value is not None:
        return parse_duration(value, "reconnect_timeout")
    text = os.environ.get("BULLETIN_RECONNECT_TIMEOUT", "")
    if not text.strip():
        return DEFAULT_RECONNECT_SECONDS
    return parse_duration(text, "$BULLETIN_RECONNECT_TIMEOUT")


def link_lost(exc: grpc.RpcError) -> bool:
    """True if the call failed because the runtime could not be reached or the link broke."""
    try:
        code, details = exc.code(), exc.details() or ""
    except Exception:
        return False
    if code in _LOST_CODES:
        return True
    if code in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL, grpc.StatusCode.CANCELLED):
        return any(mark in details for mark in _LOST_DETAILS)
    return False


def link_broke(exc: grpc.RpcError) -> bool:
    """True if a connection was made and then cut (not refused, not a wrong address): a Hello
    that meets this on a runtime that just started, or on a connection the channel reused as
    it closed, is worth sending again."""
    return link_lost(exc) and any(mark in (exc.details() or "") for mark in _LOST_DETAILS)


class Backoff:
    """Delays between tries until a deadline: short at first (a cut link comes back fast),
    then every few seconds."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self._delay = _FIRST_DELAY

    def wait(self) -> bool:
        """Sleeps before the next try; False when the deadline passed (no more tries)."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(self._delay, left))
        self._delay = min(self._delay * 2, _MAX_DELAY)
        return True


def gave_up(address: str, timeout: float, what: str) -> RuntimeUnreachableError:
    return RuntimeUnreachableError(
        f"lost the bulletin runtime at {address} during {what} and it did not come back within "
        f"{timeout:g} s. Check it with `bulletin status` (start it with `bulletin up`), then "
        "create a new bulletin.Client; to wait longer, pass Client(reconnect_timeout=SECONDS) "
        "or set BULLETIN_RECONNECT_TIMEOUT.")


class Outage:
    """Says once per outage, on stderr, that the runtime is being waited for, and how it
    ended; only when calls wait on it (nobody needs to hear of a link nobody uses)."""

    def __init__(self, address: str):
        self._address = address
        self._lock = threading.Lock()
        self._announced = False

    def begin(self, timeout: float, calls_waiting: bool) -> None:
        with self._lock:
            if self._announced or not calls_waiting:
                return
            self._announced = True
        _say(f"bulletin: lost the runtime at {self._address}; waiting up to {timeout:g} s "
             "for it to come back (your calls keep running there)")

    def end(self, resumed: bool, timeout: float, refused: bool = False) -> None:
        with self._lock:
            announced, self._announced = self._announced, False
        if not announced:
            return
        if refused:
            _say(f"bulletin: the runtime at {self._address} is back but ended the session "
                 "(its calls fail with the reason)")
        elif resumed:
            _say(f"bulletin: the runtime at {self._address} is back; the session resumed")
        else:
            _say(f"bulletin: gave up waiting for the runtime at {self._address} after "
                 f"{timeout:g} s")


def _say(line: str) -> None:
    try:
        print(line, file=sys.stderr, flush=True)
    except Exception:
        pass


def retry_lost(conn, what: str, attempt):
    """``attempt()``, tried again while it fails for a lost link (RuntimeUnreachableError that
    is no TLS failure) for up to the connection's reconnect timeout: for work that is safe to
    repeat, like moving an object named by its content."""
    from ._errors import TlsError
    try:
        return attempt()
    except TlsError:
        raise
    except RuntimeUnreachableError:
        if conn.reconnect_timeout <= 0:
            raise
    backoff = Backoff(conn.reconnect_timeout)
    while backoff.wait():
        try:
            return attempt()
        except TlsError:
            raise
        except RuntimeUnreachableError:
            continue
    raise gave_up(conn.address, conn.reconnect_timeout, what)
