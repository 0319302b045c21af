"""@bulletin.gpu and @bulletin.cpu: functions that run remotely when called."""

from __future__ import annotations

import functools
from typing import Any, Callable

from ._call_options import split_keywords
from ._config import Options


class RemoteFunction:
    """A function that runs on the cluster: ``f(x)`` blocks and prints its output here,
    ``f.submit(x)`` returns a Future, ``f.map(xs)`` a list of them, ``f.local(x)`` runs here.

    Calls go through the default client (``bulletin.get_client()``). The function is pickled
    at its first remote call, with the globals it uses as they are then (as in Ray).
    """

    def __init__(self, fn: Callable, options: Options):
        if not callable(fn):
            raise TypeError(f"bulletin decorators need a function, got {fn!r}")
        if isinstance(fn, RemoteFunction):  # re-decorating replaces the options
            fn = fn.local
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._options = options

    @property
    def local(self) -> Callable:
        """The undecorated function, to run in this process."""
        from ._resident import Keep
        return self._fn.fn if isinstance(self._fn, Keep) else self._fn

    @property
    def remote(self) -> Callable:
        """What runs on the cluster: the function, or the wrapper that keeps its result."""
        return self._fn

    @property
    def call_options(self) -> Options:
        """The options its calls run with (validated, immutable)."""
        return self._options

    def options(self, **changes) -> RemoteFunction:
        """The same function with some options changed (as Ray's ``.options()``):
        ``train.options(gpus=2, timeout="2h").submit(x)``; the function's own keywords are
        then free to have any name."""
        return RemoteFunction(self._fn, Options.make(self._options, **changes))

    def __call__(self, *args, **kwargs) -> Any:
        from ._client import get_client  # grpc loads on first use, not on `import bulletin`
        call = split_keywords(self._fn, kwargs, self._options, what="the call")
        return get_client()._call(self._fn, args, call.kwargs, call.options, call.key)

    def submit(self, *args, **kwargs):
        """Runs the call remotely; returns a Future. Keywords as in ``Client.submit``."""
        from ._client import get_client
        return get_client().submit(self, *args, **kwargs)

    def map(self, *iterables, **kwargs):
        """One call per element, zipping several iterables like builtins.map; returns Futures.
        Keywords as in ``Client.map``."""
        from ._client import get_client
        return get_client().map(self, *iterables, **kwargs)

    def __repr__(self) -> str:
        o = self._options
        kind = (f"gpus={o.gpus}, cpus={o.cpu_demand:g}" if o.gpus
                else f"cpus={o.cpu_demand:g}")
        return f"<bulletin remote function {self.__qualname__} ({kind})>"


def _decorator(fn, defaults: Options, given: dict, keep: bool = False):
    options = Options.make(defaults, **given)  # validated now, so mistakes show at definition

    def remote(f):
        if keep:  # the result stays on the cluster, a bulletin.Resident comes back (issue 29)
            from ._resident import Keep
            f = functools.update_wrapper(Keep(f), f, updated=())
        return RemoteFunction(f, options)
    return remote if fn is None else remote(fn)


def gpu(fn: Callable | None = None, /, *, gpus: int | float = 1, cpus: float | None = None,
        memory: int | str | None = None, qos: str | None = None,
        timeout: float | str | None = None, retries: int | None = None,
        priority: int | None = None, credits: float | None = None,
        pip: list[str] | None = None, keep: bool = False):
    """Runs the function on GPUs: ``@bulletin.gpu`` (one whole GPU) or
    ``@bulletin.gpu(gpus=2, cpus=8, memory="32GiB", qos="interactive", timeout="2h")``.
    ``pip=[...]``: packages the call needs that the worker lacks (docs/environments.md).
    ``keep=True``: the result stays on the cluster and a ``bulletin.Resident`` handle comes back
    (a result on the GPU stays there anyway: docs/notebooks.md).
    """
    return _decorator(fn, Options(gpus=1), dict(
        gpus=gpus, cpus=cpus, memory=memory, qos=qos, timeout=timeout, retries=retries,
        priority=priority, credits=credits, pip=pip), keep)


def cpu(fn: Callable | None = None, /, *, cpus: float = 1, memory: int | str | None = None,
        qos: str | None = None, timeout: float | str | None = None,
        retries: int | None = None, priority: int | None = None,
        credits: float | None = None, pip: list[str] | None = None):
    """Runs the function on CPU only: ``@bulletin.cpu`` or ``@bulletin.cpu(cpus=4)``."""
    return _decorator(fn, Options(gpus=0), dict(
        cpus=cpus, memory=memory, qos=qos, timeout=timeout, retries=retries,
        priority=priority, credits=credits, pip=pip))
