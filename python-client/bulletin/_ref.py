"""bulletin.Ref: an object put in the cluster's store by ``Client.scatter``.

It stands where Dask's scatter returns a Future: pass it as an argument (anywhere inside the
arguments) and the executor gets the value, never uploaded again; ``result()`` and
``client.gather`` fetch the value; ``wait`` and ``as_completed`` count it as done.
"""

from __future__ import annotations

from typing import Callable

from ._placeholders import reduce_ref


class Ref:
    """An object kept in the cluster's store; dropping the last Python reference to it (or
    closing its client) lets the store free it."""

    status = "finished"

    def __init__(self, oid: str, nbytes: int, kind: str, release: Callable[[str], None],
                 fetch: Callable | None = None):
        self.id = oid
        self.nbytes = nbytes
        self.kind = kind
        self._release = release
        self._fetch = fetch

    @property
    def key(self) -> str:
        return self.id

    def result(self, timeout=None):
        """The value, fetched from the store (mapped where the store is on this host)."""
        if self._fetch is None:
            raise RuntimeError("this Ref was made without a client to fetch it")
        if self._release is None:
            raise RuntimeError(f"Ref {self.id[:12]} was released; its object may be gone")
        return self._fetch(self.id, self.nbytes)

    def __await__(self):
        """``await ref`` in a coroutine: the value, fetched on a worker thread."""
        return self._result_async().__await__()

    async def _result_async(self):
        import asyncio
        return await asyncio.get_running_loop().run_in_executor(None, self.result)

    # A Ref is a finished Future for everything that waits: done, never cancelled, no error.

    def done(self) -> bool:
        return True

    def cancelled(self) -> bool:
        return False

    def exception(self, timeout=None):
        return None

    def traceback(self, timeout=None):
        return None

    def add_done_callback(self, fn: Callable) -> None:
        fn(self)

    def release(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release(self.id)

    def __del__(self):
        try:
            self.release()
        except Exception:
            pass

    def __reduce__(self):
        # Anywhere inside a call's arguments, a Ref resolves remotely (see _placeholders).
        return reduce_ref(self)

    def __repr__(self) -> str:
        return f"<bulletin.Ref {self.id} {self.kind} {self.nbytes} bytes>"
