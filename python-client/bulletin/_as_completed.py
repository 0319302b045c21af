"""bulletin.as_completed: Dask's as_completed over bulletin Futures, for threads and asyncio.

Each Future added gets a done callback that queues it (from whatever thread ends it: the
client's dispatcher, mostly); ``next()`` waits on a condition, ``async for`` on an asyncio
future that the callback wakes with ``call_soon_threadsafe``, so an event loop (Jupyter's) is
never blocked. Results, when asked for, are fetched by the consumer (off the loop in async
code), never by the callback.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import threading
import time
import weakref
from typing import Iterable

from ._future import _futures, _wake, parse_wait


class as_completed:  # noqa: N801 - named as Dask's and concurrent.futures' function
    """Yields futures in the order they end (finished, failed or cancelled).

    ``as_completed(futures=None, timeout=None, with_results=False, raise_errors=True)``:
    ``timeout`` (seconds or a duration such as "10 s") counts from creation, as in Dask and
    concurrent.futures; past it ``next()`` raises TimeoutError. With ``with_results=True`` it
    yields ``(future, result)``: a failed call raises its error (or, with
    ``raise_errors=False``, gives ``(type, exception, traceback)`` as its result), a cancelled
    one gives a CancelledError as its result. ``add``/``update`` put more futures in while it
    runs (the same future twice is yielded twice); ``count()``, ``is_empty()``, ``has_ready()``,
    ``next_batch(block=True)``, ``batches()``, ``clear()``; ``for`` and ``async for`` both work.
    ``loop`` is accepted for Dask's sake and not used.
    """

    def __init__(self, futures: Iterable | None = None, timeout=None, with_results: bool = False,
                 raise_errors: bool = True, *, loop=None):
        self.with_results = with_results
        self.raise_errors = raise_errors
        self._timeout = timeout
        seconds = parse_wait(timeout)
        self._deadline = None if seconds is None else time.monotonic() + seconds
        self._changed = threading.Condition()
        self._pending: collections.Counter = collections.Counter()  # not ended yet: how often
        self._ready: collections.deque = collections.deque()  # ended, not yielded yet
        self._async_waiters: list = []  # (loop, asyncio.Future) of async consumers
        self._added = 0  # futures added, for the timeout's message
        if futures is not None:
            self.update(futures)

    # -- adding ---------------------------------------------------------------------------------

    def update(self, futures: Iterable) -> None:
        """Adds futures; each is yielded once it ends."""
        futures = _futures(futures, "as_completed")
        with self._changed:
            self._pending.update(futures)
            self._added += len(futures)
        ended = _weak_callback(self)
        for future in futures:
            future.add_done_callback(ended)

    def add(self, future) -> None:
        """Adds one future; it is yielded once it ends."""
        self.update([future])

    def _ended(self, future) -> None:
        with self._changed:
            if not self._pending[future]:
                return  # cleared meanwhile
            self._pending[future] -= 1
            if not self._pending[future]:
                del self._pending[future]
            self._ready.append(future)
            self._changed.notify_all()
            waiters, self._async_waiters = self._async_waiters, []
        for loop, waiter in waiters:
            try:
                loop.call_soon_threadsafe(_wake, waiter)
            except RuntimeError:  # that loop is closed: nobody waits there any more
                pass

    # -- state ----------------------------------------------------------------------------------

    def count(self) -> int:
        """Futures not yielded yet, ended or not."""
        with self._changed:
            return sum(self._pending.values()) + len(self._ready)

    def is_empty(self) -> bool:
        return not self.count()

    def has_ready(self) -> bool:
        with self._changed:
            return bool(self._ready)

    def clear(self) -> None:
        """Forgets every future not yielded yet."""
        with self._changed:
            self._pending.clear()
            self._ready.clear()

    def __repr__(self) -> str:
        with self._changed:
            waiting, done = sum(self._pending.values()), len(self._ready)
        return f"<as_completed: waiting={waiting} done={done}>"

    # -- iterating ------------------------------------------------------------------------------

    def __iter__(self):
        return self

    def __next__(self):
        __tracebackhide__ = True  # noqa: F841 (pytest and IPython hide this frame)
        with self._changed:
            while not self._ready:
                if not self._pending:
                    raise StopIteration
                self._changed.wait(self._remaining())
            future = self._ready.popleft()
        item, error = self._deliver(future)
        if error is not None:
            raise error
        return item

    next = __next__

    def _remaining(self) -> float | None:
        """Seconds left before the deadline; raises TimeoutError past it."""
        if self._deadline is None:
            return None
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            # concurrent.futures.as_completed's words
            raise cf.TimeoutError(f"{sum(self._pending.values())} (of {self._added}) futures "
                                  "unfinished")
        return remaining

    def __aiter__(self):
        return self

    async def __anext__(self):
        import asyncio
        loop = asyncio.get_running_loop()
        while True:
            with self._changed:
                if self._ready:
                    future = self._ready.popleft()
                    break
                if not self._pending:
                    raise StopAsyncIteration
                remaining = self._remaining()
                waiter = loop.create_future()
                self._async_waiters.append((loop, waiter))
            try:
                await asyncio.wait_for(waiter, remaining)
            except asyncio.TimeoutError:
                pass  # the loop above raises TimeoutError now
        if self.with_results and not isinstance(future, cf.Future):  # a Ref: fetched, off
            item, error = await loop.run_in_executor(None, self._deliver, future)  # the loop
        else:
            if self.with_results and getattr(future, "_remote", None) is not None:
                # A large result is fetched off the event loop; _deliver then finds it here.
                await loop.run_in_executor(None, _fetch, future)
            item, error = self._deliver(future)
        if error is not None:
            raise error
        return item

    def _deliver(self, future) -> tuple:
        """(what to yield, None), or (None, the error to raise): the caller raises it, so
        that the traceback goes from the caller's frame to the remote ones."""
        if not self.with_results:
            return future, None
        if future.cancelled():
            return (future, cf.CancelledError(f"call {future.key} was cancelled")), None
        error = future.exception()
        if error is None:
            return (future, future.result()), None
        traceback = future.traceback() if hasattr(future, "traceback") else error.__traceback__
        if self.raise_errors:
            return None, error.with_traceback(traceback)
        return (future, (type(error), error, traceback)), None

    def next_batch(self, block: bool = True) -> list:
        """The futures ended so far (with their results if asked); with ``block``, waits for
        one first. Raises StopIteration when blocking on an empty as_completed."""
        batch = [next(self)] if block else []
        while True:
            with self._changed:
                if not self._ready:
                    return batch
                future = self._ready.popleft()
            item, error = self._deliver(future)
            if error is not None:
                raise error
            batch.append(item)

    def batches(self):
        """Yields lists of the futures that ended since the last list, until all have."""
        while True:
            try:
                yield self.next_batch(block=True)
            except StopIteration:
                return


def _weak_callback(completed: as_completed):
    """The done callback of ``completed``'s futures. It holds ``completed`` weakly: an
    as_completed dropped before its futures end (a timeout, a ``break``) is freed, and the
    futures that end later are not kept for it (as concurrent.futures.as_completed)."""
    ref = weakref.ref(completed)

    def ended(future) -> None:
        target = ref()
        if target is not None:
            target._ended(future)
    return ended


def _fetch(future) -> None:
    if not future.cancelled() and future.exception() is None:
        future.result()

