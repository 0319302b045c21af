"""``bulletin.Executor``: the standard library's ``concurrent.futures.Executor`` over a Client.

Code written against ``concurrent.futures`` moves to the cluster with a one-line change::

    with bulletin.Executor(gpus=1) as ex:          # was: ProcessPoolExecutor()
        losses = list(ex.map(train, configs))

``submit``'s keywords all go to the function, as the standard interface says; the call options
(``gpus``, ``memory``, ``timeout``, ...) are the Executor's, given once when it is made.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import threading
from typing import Callable

from ._config import Options
from ._future import cancel_and_notify


class Executor(cf.Executor):
    """Runs each ``submit``/``map`` call on the cluster with the options given here.

    ``Executor(client=None, *, max_workers=None, **options)``: ``client`` defaults to
    ``bulletin.get_client()`` (an Executor that made its own client closes it at shutdown).
    ``options`` are those of ``Client.submit`` (gpus, cpus, memory, qos, priority, timeout,
    retries, credits), validated now and applied over a decorated function's own.
    ``max_workers`` caps how many of this Executor's calls are on the cluster at once (the
    others wait here, in order); None leaves that to the cluster's scheduler and quotas.
    """

    def __init__(self, client=None, *, max_workers: int | None = None, **options):
        if max_workers is not None and (isinstance(max_workers, bool)
                                        or not isinstance(max_workers, int) or max_workers <= 0):
            raise ValueError(f"max_workers must be greater than 0 (got {max_workers!r}); "
                             "leave it None to let the cluster decide")
        self._given = {name: value for name, value in options.items() if value is not None}
        Options.make(Options(), **self._given)  # a wrong option fails here, not at first submit
        if client is None:
            from ._client import Client, get_client
            self._owns_client = False
            try:
                client = get_client()
            except Exception:
                client, self._owns_client = Client(set_as_default=False), True
        else:
            self._owns_client = False
        self._client = client
        self._lock = threading.Lock()
        self._shutdown = False
        self._pending: set[cf.Future] = set()
        self._throttle = _Throttle(max_workers) if max_workers else None

    def submit(self, fn: Callable, /, *args, **kwargs) -> cf.Future:
        """Runs ``fn(*args, **kwargs)`` on the cluster; returns a Future at once."""
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new futures after shutdown")
            if self._throttle is None:
                future = self._start(fn, args, kwargs)
            else:
                future = self._throttle.submit(lambda: self._start(fn, args, kwargs))
            self._pending.add(future)
        future.add_done_callback(self._forget)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No new calls after this. ``cancel_futures`` cancels the calls that have not started
        running (queued on the cluster or waiting here); ``wait`` waits for the others."""
        with self._lock:
            self._shutdown = True
            pending = list(self._pending)
        if cancel_futures:
            if self._throttle is not None:
                self._throttle.cancel_waiting()
            for future in pending:
                if not future.running():
                    future.cancel()
        if wait:
            cf.wait(pending)
        if self._owns_client and (wait or not pending):
            self._client.close()

    def __repr__(self) -> str:
        state = "shut down" if self._shutdown else "open"
        return f"<bulletin.Executor {self._client.address} {state} options={self._given!r}>"

    def _start(self, fn: Callable, args: tuple, kwargs: dict) -> cf.Future:
        from ._client import _base_options
        options = Options.make(_base_options(fn), **self._given)
        return self._client._submit(fn, args, kwargs, options)

    def _forget(self, future: cf.Future) -> None:
        with self._lock:
            self._pending.discard(future)


class _Throttle:
    """At most ``limit`` calls on the cluster; the rest wait here as plain Futures that take
    their call's outcome when it ends. A waiting Future cancelled before its turn never runs."""

    def __init__(self, limit: int):
        self._limit = limit
        self._running = 0
        self._waiting: collections.deque = collections.deque()
        self._lock = threading.Lock()

    def submit(self, start: Callable[[], cf.Future]) -> cf.Future:
        proxy = _WaitingCall()
        with self._lock:
            self._waiting.append((proxy, start))
        self._start_next()
        return proxy

    def cancel_waiting(self) -> None:
        with self._lock:
            waiting, self._waiting = list(self._waiting), collections.deque()
        for proxy, _ in waiting:
            proxy.cancel()

    def _start_next(self) -> None:
        while True:
            with self._lock:
                if self._running >= self._limit or not self._waiting:
                    return
                proxy, start = self._waiting.popleft()
                if proxy.cancelled() or not proxy.set_running_or_notify_cancel():
                    continue  # cancelled while it waited
                self._running += 1
            try:
                remote = start()
            except BaseException as exc:  # noqa: BLE001 - the caller reads it from the Future
                self._ended()
                proxy.set_exception(exc)
                continue
            remote.add_done_callback(lambda done, proxy=proxy: self._settle(proxy, done))

    def _settle(self, proxy: cf.Future, remote: cf.Future) -> None:
        if remote.cancelled():
            proxy.set_exception(cf.CancelledError(f"{remote!r} was cancelled on the cluster"))
        elif remote.exception() is not None:
            proxy.set_exception(remote.exception())
        else:
            proxy.set_result(remote.result())
        self._ended()

    def _ended(self) -> None:
        with self._lock:
            self._running -= 1
        self._start_next()



class _WaitingCall(cf.Future):
    """A call waiting for its turn. Cancelling it tells waiters at once: a plain Future stays
    CANCELLED, which ``wait`` and ``as_completed`` do not count as done, until its turn."""

    def cancel(self) -> bool:
        return cancel_and_notify(self, super().cancel)
