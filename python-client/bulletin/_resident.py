"""``bulletin.Resident``: a handle to a value left on the cluster's GPU (docs/notebooks.md).

A ``%%bulletin`` cell that binds a value on the GPU (a CUDA tensor, a module on CUDA, an
optimizer whose state is there), or a call made with ``keep=True``, leaves the value in its
user's executor and hands back this handle: a few fields (shape, dtype, device, size) and an
id. Passing the handle into a later cell or call gives that code the value itself: where it
lands on the executor that holds it, with no copy; else restored from where it was spilled
(``_runtime._resident``). ``fetch()`` (or ``cpu()``, or any attribute the handle does not have)
brings a copy here.

Pickled, a handle is its id and fields; unpickled inside an executor's call it is replaced by
the value (``resolving``), so it works at any depth of the arguments.
"""

from __future__ import annotations

import contextvars
from typing import Callable

from ._errors import BulletinError

# How the executor turns a handle into its value while it unpickles a call's arguments.
_resolver: contextvars.ContextVar = contextvars.ContextVar("bulletin_resident_resolver",
                                                          default=None)


class ResidentLostError(BulletinError, LookupError):
    """A handle's value is no longer on the cluster (dropped after its idle time, at the end of
    its session, or never this user's)."""


class Resident:
    """A value left on the cluster (on a GPU there), named by a handle. ``fetch()`` or
    ``cpu()`` copies it here; passed to a ``%%bulletin`` cell or a call it is the value there."""

    __slots__ = ("id", "name", "kind", "shape", "dtype", "device", "nbytes", "gpus", "worker",
                 "_cached")

    def __init__(self, id: str, name: str, kind: str, shape, dtype: str, device: str,
                 nbytes: int, gpus: int = 1, worker: str = ""):
        self.id, self.name, self.kind = id, name, kind
        self.shape = tuple(shape) if shape is not None else None
        self.dtype, self.device, self.nbytes, self.gpus = dtype, device, int(nbytes), gpus
        self.worker = worker  # the worker that keeps it: the scheduler prefers it
        self._cached = None

    def _fields(self) -> tuple:
        return (self.id, self.name, self.kind, self.shape, self.dtype, self.device,
                self.nbytes, self.gpus, self.worker)

    def __reduce__(self):
        from ._placeholders import _pickling
        call = _pickling.get()
        if call is not None and hasattr(call, "note_resident"):
            call.note_resident(self)  # the call prefers the worker that keeps it
        return _handle, self._fields()

    def __repr__(self) -> str:
        from ._status import format_bytes
        what = self.kind + (f" {list(self.shape)}" if self.shape is not None else "")
        what += f" {self.dtype}" if self.dtype else ""
        return (f"<bulletin.Resident {self.name}: {what} on {self.device}, "
                f"{format_bytes(self.nbytes)}; kept on the cluster: pass it to a %%bulletin "
                f"cell or call, or .fetch() it here>")

    def fetch(self):
        """A copy of the value here (tensors and modules on the CPU); one call to the
        executor that holds it. The copy is fetched once per handle."""
        if self._cached is None:
            from ._client import get_client
            from ._config import Options
            future = get_client()._call_to_end(_to_host, (self,), {}, Options(gpus=self.gpus))
            self._cached = (future.result(),)
        return self._cached[0]

    def cpu(self):
        return self.fetch()

    def __getattr__(self, attribute):
        # Any other use reads the value here (as a local value would be used). Not a private
        # name: IPython looks for _repr_html_, _ipython_display_... on whatever it shows, and
        # showing a handle must not fetch its value.
        if attribute.startswith("_"):
            raise AttributeError(attribute)
        return getattr(self.fetch(), attribute)


class Keep:
    """A function whose result stays on the cluster as a handle (``keep=True``)."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "result")
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)

    def __call__(self, *args, **kwargs):
        from ._runtime import _resident
        return _resident.keep(self.fn(*args, **kwargs), self.__name__)


def _handle(*fields):
    resolve = _resolver.get()
    if resolve is not None:
        return resolve(fields[0])
    return Resident(*fields)


def _to_host(value):
    """Runs in the executor: a CPU copy of a resident value, the resident one untouched."""
    from ._runtime import _resident
    return _resident.host_copy(value)


def resolving(resolve: Callable[[str], object]):
    """While an executor unpickles a call's arguments: each handle becomes ``resolve(id)``."""
    from ._placeholders import set_within
    return set_within(_resolver, resolve)
