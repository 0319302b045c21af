"""A client's calls in flight, by task id."""

from __future__ import annotations

import threading

from ._errors import BulletinError, RuntimeUnreachableError
from ._future import Future


class CallTable:
    """A client's calls in flight by task id, and whether the client takes new ones.

    Its lock also orders the submitter's queue (see Submitter._send) against close().
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.closed = False
        self.broken: BulletinError | None = None  # why the session ended, if it did
        self._futures: dict[str, Future] = {}

    def is_open(self) -> bool:
        return not self.closed and self.broken is None

    def check_open(self) -> None:
        if self.closed:
            raise BulletinError("this bulletin.Client is closed; create a new one")
        if self.broken is not None:
            raise RuntimeUnreachableError(
                f"this client's session ended: {self.broken} Create a new bulletin.Client() "
                "once the runtime is back.")

    def add(self, future: Future) -> None:
        with self.lock:
            self._futures[future._task_id] = future

    def add_locked(self, future: Future) -> None:
        """add() for a caller that holds the lock."""
        self._futures[future._task_id] = future

    def has_pending(self) -> bool:
        return bool(self._futures)

    def in_flight(self) -> int:
        return len(self._futures)

    def get(self, key: str) -> Future | None:
        return self._futures.get(key)

    def pop(self, key: str) -> Future | None:
        with self.lock:
            return self._futures.pop(key, None)

    def close(self) -> bool:
        """Marks the client closed; False if it already was."""
        with self.lock:
            if self.closed:
                return False
            self.closed = True
            return True

    def fail_all(self, error: BulletinError) -> None:
        """The session ended: every call in flight fails with ``error``."""
        with self.lock:
            if self.broken is None and not self.closed:
                self.broken = error
            pending = list(self._futures.values())
            self._futures.clear()
        for future in pending:
            future._set_error(error)
