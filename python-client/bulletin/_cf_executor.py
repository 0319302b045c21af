"""``bulletin.Executor``: the standard library's ``concurrent.futures.Executor`` over a Client.

Code written against ``concurrent.futures`` moves to the cluster with a one-line change::

    with bulletin.Executor(gpus=1) as ex:          # was: ProcessPoolExecutor()
        losses = list(ex.map(train, configs))

``submit``'s keywords all go to the function, as the standard interface says; the call options
(``gpus``, ``memory``, ``timeout``, ...) are the Executor's, given once when it is made.

As the standard executors, an Executor waits at interpreter exit for the calls it still has
(run from ``threading``'s exit hooks, as ``ThreadPoolExecutor`` does, so before the clients
close in ``atexit``); ``wait_at_exit=False`` leaves them to be cancelled when the client
disconnects. With ``max_workers``, a call waits here for its turn (``_Throttle``) as a
``_WaitingCall``: a ``bulletin.Future`` that speaks for the call itself once it is sent.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import re
import sys
import threading
import uuid
import weakref
from typing import Callable

from ._config import Options
from ._future import Future, WaitInfo, parse_wait

# Executors alive, for the exit hook; set once the interpreter exits (no new calls then).
_executors: weakref.WeakSet = weakref.WeakSet()
_exiting = False
_hook_lock = threading.Lock()
_hook_registered = False

_AFTER_SHUTDOWN = "cannot schedule new futures after shutdown"
_AFTER_EXIT = "cannot schedule new futures after interpreter shutdown"


class Executor(cf.Executor):
    """Runs each ``submit``/``map`` call on the cluster with the options given here.

    ``Executor(max_workers=None, *, client=None, wait_at_exit=True, **options)``, as the
    standard executors (``bulletin.Executor(5)`` is ``max_workers=5``): ``max_workers`` caps
    how many of this Executor's calls are on the cluster at once (the others wait here, in
    order; their Futures are ``bulletin.Future`` all the same); None leaves that to the
    cluster's scheduler and quotas. ``client`` defaults to ``bulletin.get_client()`` (an
    Executor that made its own client closes it at shutdown). ``options`` are those of
    ``Client.submit`` (gpus, cpus, memory, qos, priority, timeout, retries, credits),
    validated now and applied over a decorated function's own. At interpreter exit the
    Executor waits for its calls still pending, as ``ThreadPoolExecutor`` does, even without
    ``shutdown()``; ``wait_at_exit=False`` does not wait: they are cancelled when the client
    disconnects.
    """

    def __init__(self, max_workers: int | None = None, *, client=None,
                 wait_at_exit: bool = True, **options):
        if max_workers is not None and not isinstance(max_workers, int):
            if hasattr(max_workers, "_submit"):
                raise TypeError(
                    "bulletin.Executor's first argument is max_workers, as in the standard "
                    "executors; pass the client by name: bulletin.Executor(client=client)")
            raise TypeError(f"max_workers must be an int or None (got {max_workers!r})")
        if max_workers is not None and (isinstance(max_workers, bool) or max_workers <= 0):
            raise ValueError(f"max_workers must be greater than 0 (got {max_workers!r}); "
                             "leave it None to let the cluster decide")
        if not isinstance(wait_at_exit, bool):
            raise TypeError(f"wait_at_exit must be True or False (got {wait_at_exit!r})")
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
        self._max_workers = max_workers
        self._wait_at_exit = wait_at_exit
        _register_exit_hook()
        _executors.add(self)

    def submit(self, fn: Callable, /, *args, **kwargs) -> Future:
        """Runs ``fn(*args, **kwargs)`` on the cluster; returns a ``bulletin.Future`` at once.
        Raises RuntimeError after ``shutdown()``, at interpreter exit, and once the Executor's
        client is closed."""
        with self._lock:
            if _exiting:
                raise RuntimeError(f"{_AFTER_EXIT}: the program is exiting")
            if self._shutdown:
                raise RuntimeError(f"{_AFTER_SHUTDOWN}: this bulletin.Executor was shut down; "
                                   "make a new one")
            calls = getattr(self._client, "_calls", None)
            if calls is not None and calls.closed:
                raise RuntimeError(f"{_AFTER_SHUTDOWN}: the bulletin.Client of this Executor "
                                   "is closed; make a new Executor (with an open client)")
            if self._throttle is None:
                future = self._start(fn, args, kwargs)
            else:
                future = _WaitingCall(self._client, fn, self._throttle,
                                      lambda: self._start(fn, args, kwargs))
            self._pending.add(future)
        future.add_done_callback(self._forget)
        if self._throttle is not None:
            # Outside the lock: a call that ends as it starts (its argument could not be
            # pickled) runs its callbacks, _forget included, in this thread.
            self._throttle.submit(future)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """No new calls after this. ``cancel_futures`` cancels the calls that have not started:
        with ``max_workers``, those waiting here for their turn (the ones sent are its
        workers' calls, as a pool's); without, those the cluster has not started running.
        ``wait`` waits for the others."""
        with self._lock:
            self._shutdown = True
            pending = list(self._pending)
        if cancel_futures:
            if self._throttle is not None:
                self._throttle.cancel_waiting()
            else:
                for future in pending:
                    if not future.running():
                        future.cancel()
        if wait:
            cf.wait(pending)
        if self._owns_client and (wait or not pending):
            self._client.close()

    def __repr__(self) -> str:
        state = "shut down" if self._shutdown else "open"
        workers = f" max_workers={self._max_workers}" if self._max_workers else ""
        return (f"<bulletin.Executor {self._client.address} {state}{workers} "
                f"options={self._given!r}>")

    def _start(self, fn: Callable, args: tuple, kwargs: dict) -> Future:
        from ._client import _base_options
        options = Options.make(_base_options(fn), **self._given)
        return self._client._submit(fn, args, kwargs, options)

    def _forget(self, future: cf.Future) -> None:
        with self._lock:
            self._pending.discard(future)

    def _at_exit(self) -> None:
        """The interpreter exits: no new calls; wait for those still pending (the standard's
        behaviour), or with ``wait_at_exit=False`` leave them to the client's disconnection
        (the ones waiting here for a turn are cancelled now)."""
        with self._lock:
            self._shutdown = True
            pending = list(self._pending)
        if not self._wait_at_exit:
            if self._throttle is not None:
                self._throttle.cancel_waiting()
            return
        cf.wait(pending)


def _register_exit_hook() -> None:
    """Registers ``_at_exit`` once, with ``threading``'s exit hooks: they run before
    ``atexit``'s, where the clients close (as ``ThreadPoolExecutor`` joins its threads)."""
    global _hook_registered
    with _hook_lock:
        if _hook_registered:
            return
        register = getattr(threading, "_register_atexit", None)
        try:
            if register is None:
                raise RuntimeError("no threading._register_atexit")
            register(_at_exit)
        except RuntimeError:  # exiting already, or an interpreter without it: atexit then,
            import atexit  # which runs it before the clients close (registered before it,
            atexit.register(_at_exit)  # when bulletin._client was imported; last in, first run)
        _hook_registered = True


def _at_exit() -> None:
    global _exiting
    _exiting = True
    try:
        for executor in list(_executors):
            try:
                executor._at_exit()
            except Exception:  # one executor's failure must not keep the others from waiting
                pass
    except KeyboardInterrupt:  # one line instead of the traceback of threading's exit hooks
        sys.stderr.write(
            "bulletin: interrupted while waiting at exit for the calls of a bulletin.Executor; "
            "they are cancelled as the client disconnects (Executor(wait_at_exit=False) does "
            "not wait)\n")


class _Throttle:
    """At most ``limit`` calls of one Executor on the cluster; the others wait here, in order.
    A waiting call cancelled before its turn is never sent."""

    def __init__(self, limit: int):
        self.limit = limit
        self._running = 0
        self._waiting: collections.deque[_WaitingCall] = collections.deque()
        self._lock = threading.Lock()
        self._local = threading.local()  # set while this thread starts calls

    def submit(self, call: _WaitingCall) -> None:
        with self._lock:
            self._waiting.append(call)
        self._start_next()

    def position(self, call: _WaitingCall) -> int | None:
        """1 for the next call to start; None once it left the queue."""
        with self._lock:
            for index, waiting in enumerate(self._waiting, 1):
                if waiting is call:
                    return index
        return None

    def withdraw(self, call: _WaitingCall) -> bool:
        """Takes a call out of the queue; False if it is not there (started, or starting)."""
        with self._lock:
            for waiting in self._waiting:
                if waiting is call:
                    self._waiting.remove(waiting)
                    return True
        return False

    def cancel_waiting(self) -> None:
        with self._lock:
            waiting, self._waiting = list(self._waiting), collections.deque()
        for call in waiting:
            call._cancel_locally()

    def ended(self) -> None:
        """A call sent by this throttle ended: its turn goes to the next one."""
        with self._lock:
            self._running -= 1
        self._start_next()

    def _start_next(self) -> None:
        if getattr(self._local, "starting", False):
            return  # a call ended while this thread starts calls: the loop below goes on
        self._local.starting = True
        try:
            while True:
                with self._lock:
                    if self._running >= self.limit or not self._waiting:
                        return
                    call = self._waiting.popleft()
                    self._running += 1
                if not call._begin():  # cancelled meanwhile, or it failed before it was sent
                    with self._lock:
                        self._running -= 1
        finally:
            self._local.starting = False


def _no_canceller(_future) -> None:
    pass


def _function_name(fn) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    return name if isinstance(name, str) else type(fn).__name__


class _WaitingCall(Future):
    """The ``bulletin.Future`` of an Executor's call under ``max_workers``: while the call
    waits here for its turn, its status is "queued" and ``wait_info`` says so (code
    MAX_WORKERS, its place in line) under a key of its own; once sent, everything it reports
    (key, status, wait_info, timings, output, attempts, type) is the call's, and it ends with
    the call. A large result stays in the cluster's store until ``result()``, as any call's.
    """

    _call: Future | None = None  # the call once sent (read before __init__ sets fields)

    def __init__(self, client, fn: Callable, throttle: _Throttle, start: Callable[[], Future]):
        name = _function_name(fn)
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_")[:32] or "call"
        super().__init__(f"{slug}-waiting-{uuid.uuid4().hex[:12]}", name, _no_canceller)
        self._client = client
        self._throttle = throttle
        self._start_call: Callable[[], Future] | None = start
        self._state_lock = threading.Lock()
        self._cancel_wanted = False
        self._slot_held = False

    # -- what the call reports, once sent ---------------------------------------------------

    @property
    def key(self) -> str:
        call = self._call
        return self._key if call is None else call.key

    @property
    def status(self) -> str:
        call = self._call
        return self._status if call is None or self.done() else call.status

    @property
    def wait_info(self) -> WaitInfo | None:
        call = self._call
        if call is not None:
            return call.wait_info
        position = None if self.done() else self._throttle.position(self)
        if position is None:
            return None
        limit = self._throttle.limit
        return WaitInfo(position, f"max_workers={limit}: {limit} calls of this Executor are on "
                        "the cluster; the next starts when one ends", "MAX_WORKERS", None,
                        ("a larger max_workers (or None: the cluster's scheduler decides)",))

    @property
    def timings(self) -> dict[str, float]:
        call = self._call
        return dict(self._timings) if call is None else call.timings

    @property
    def output(self) -> str:
        call = self._call
        return "" if call is None else call.output

    @property
    def attempts(self) -> int:
        call = self._call
        return 0 if call is None else call.attempts

    @property
    def attempt(self) -> int:
        call = self._call
        return 0 if call is None else call.attempt

    @property
    def preempted(self) -> int:
        call = self._call
        return 0 if call is None else call.preempted

    @property
    def placement(self):
        call = self._call
        return None if call is None else call.placement

    @placement.setter
    def placement(self, value) -> None:
        pass  # set by Future.__init__; the call's own is the one that counts

    @property
    def type(self) -> type | None:
        call = self._call
        return None if call is None or not self.done() else call.type

    # The call's result while the cluster's store holds it: passing this Future to another
    # call names that object (_arguments.reduce_future), it never passes through here.
    @property
    def _remote(self):
        call = self._call
        return None if call is None else call._remote

    @_remote.setter
    def _remote(self, value) -> None:
        pass  # Future.__init__'s None

    @property
    def _fetch_lock(self):
        call = self._call
        return self._own_fetch_lock if call is None else call._fetch_lock

    @_fetch_lock.setter
    def _fetch_lock(self, lock) -> None:
        self._own_fetch_lock = lock

    def running(self) -> bool:
        call = self._call
        return call is not None and not self.done() and call.running()

    def result(self, timeout=None):
        """The call's value (fetched from the cluster's store on first use if large); a
        remote exception is raised with the remote frames, as ``Future.result``."""
        __tracebackhide__ = True  # noqa: F841 (pytest and IPython hide this frame)
        error = cf.Future.exception(self, parse_wait(timeout))
        if error is not None:
            raise error.with_traceback(self._error_tb)
        return self._call.result()

    def cancel(self) -> bool:
        """Cancels the call: one still waiting here is never sent; one sent is cancelled on
        the cluster (as ``Future.cancel``). False once it finished."""
        if self.done():
            return self.cancelled()
        if self._throttle.withdraw(self):
            return self._cancel_locally()
        with self._state_lock:
            call = self._call
            if call is None:  # leaving the queue right now: it will not be sent
                self._cancel_wanted = True
        if call is None:
            return self._cancel_locally()
        if call.cancel():
            return self._cancel_locally()
        return self.cancelled()

    def retry(self) -> None:
        """Runs the failed call again under this Future (``Future.retry``); it no longer
        counts against ``max_workers``."""
        call = self._call
        if call is None:
            return super().retry()  # failed before it was sent: says to submit it again
        if self._status != "error" or not self.done() or call.status != "error":
            return
        if call._resend is None:
            return call.retry()  # raises, saying why it cannot run again
        if self._reopen():
            call.retry()

    # -- the throttle's side ----------------------------------------------------------------

    def _begin(self) -> bool:
        """Sends the call (its turn came); False if it was cancelled meanwhile or could not
        be sent (this Future then has the error)."""
        with self._state_lock:
            if self._cancel_wanted or self.done():
                return False
        start, self._start_call = self._start_call, None  # the arguments are the call's now
        try:
            call = start()
        except BaseException as exc:  # noqa: BLE001 - the caller reads it from the Future
            self._set_error(exc)
            return False
        with self._state_lock:
            self._call = call
            self._slot_held = True
            cancel = self._cancel_wanted
        call.add_done_callback(self._from_call)
        if cancel:
            call.cancel()
        return True

    def _from_call(self, call: Future) -> None:
        """The call ended (again, after a retry): its turn is over, and this Future ends. The
        next call is sent first: once this Future ends, its waiter may drop it and expect it
        and its result gone (CPython's test_free_reference), which this frame would prevent
        while it sends another call."""
        with self._state_lock:
            held, self._slot_held = self._slot_held, False
        if held:
            self._throttle.ended()
        if call.cancelled():
            self._set_cancelled()
        else:
            error = call._exception
            if error is not None:
                tb = call._error_tb

                def fail():
                    self._error_tb = tb
                    self.set_exception(error)
                self._settle("error", fail)
            else:
                self._settle("finished", lambda: self.set_result(None))
