"""A large result computed straight into store memory: written once, by the function.

Around each call the executor offers its largest pre-faulted spare file (``_data._arena``) to
NumPy's allocator (``bulletin._native``): the function's first array large enough for it lives
in the spare, a page after its start. When the function returns that very array, and nothing
but the executor still refers to it, the executor writes the object's header into that first
page and its end marker after the array, hashes the bytes where they are, and names the spare
as the result: no copy of the result into the store follows (one Ray makes, and bulletin made
until now). Otherwise nothing changes: the result is copied as before, and the spare goes back
to the spares once the array that holds it is freed.

Why the only reference matters: once named, the file is a store object, immutable and maybe
mapped by readers. A function that kept the array (a global, a cache) could write into it later;
such a result is copied instead, and the array keeps the memory it was lent.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .. import _native
from .._codec import Encoded
from .._codec._ipc import PAGE
from .._data._arena import Spare
from .._data._later import unlink_later
from .._data._objects import encode, write_file
from .._data._write_maps import RECYCLE_MIN, WriteMappings

# A spare is lent to an allocation of at least this share of it: a small array would hold a
# large spare for nothing (the result it was meant for is then copied).
_SHARE = 5


def _references(box: list) -> int:
    return sys.getrefcount(box[0])


_ALONE = _references([object()])  # what ``_references`` says of a value only a list holds


class Prepared(NamedTuple):
    """A result ``prepare`` made in its spare: ``named`` when it is the result already."""
    oid: str
    size: int
    spare: Spare | None
    named: bool
    copy: bool = False


class _Lent:
    """A spare offered to (or held by) an array, and the export that pins its mapping."""

    __slots__ = ("spare", "pin", "address", "outlived")

    def __init__(self, spare: Spare):
        self.spare = spare
        self.pin = ctypes.c_char.from_buffer(spare.map)  # the mapping cannot close under it
        self.address = ctypes.addressof(self.pin) + PAGE
        self.outlived = False  # an array holds it after its call ended

    def unpin(self) -> None:
        self.pin = None


class ResultMemory:
    """An executor's lending of spare memory to its calls (one call at a time)."""

    def __init__(self, maps: WriteMappings, tag: str, may_compile: bool = True):
        """``tag``: the executor's id (``BULLETIN_EXECUTOR_ID``) in the names of its spares;
        ``may_compile``: False under a memory limit (only a library compiled before is used)."""
        self._maps = maps
        self._tag = tag
        self._may_compile = may_compile
        self._named_spares = 0
        self._lender: _native.Lender | None = None
        self._loading: threading.Thread | None = None
        self._lent: _Lent | None = None  # the spare an array holds (offered, or kept)
        self.adopted = 0  # results named in place: for tests and benchmarks

    def lending(self):
        """Around the function: its first large allocation may get the largest spare (a
        context manager; one that does nothing when there is none to lend)."""
        return nullcontext() if self._offer() is None else self._lent_during_call()

    @contextmanager
    def _lent_during_call(self):
        before = self._lender.install()
        try:
            yield
        finally:
            self._lender.uninstall(before)
            if not self._lender.withdraw():
                self._give_back()  # no array took it

    def holds(self, value) -> bool:
        """Whether ``value`` is the array the call's spare was lent to, dense, and its owner: a
        view's base could be held elsewhere (its references are not the view's)."""
        lent = self._lent
        return (lent is not None and type(value) is np.ndarray and value.flags.owndata
                and value.flags.c_contiguous and value.nbytes >= RECYCLE_MIN
                and value.ctypes.data == lent.address)

    def prepare(self, box: list, link_stored) -> Prepared | None:
        """Makes the spare holding the array in ``box`` (``holds``) the whole object: its header
        in the page before the array, its end after it, its id from the bytes where they are.
        None, the array left in ``box``, when something besides ``box`` still refers to it or
        its object does not fit around it: the caller copies it as usual. ``link_stored(id)``:
        True when the store's equal object was linked as the result instead (the spare is then
        a spare again, and the result ``named``); else ``name`` names the spare."""
        if _references(box) != _ALONE:
            return None
        lent = self._lent
        encoded = encode(box[0])
        if (encoded.payload_offset(lent.address) != PAGE
                or encoded.nbytes > len(lent.spare.map)):
            return None
        del box[0]  # from here on ``encoded`` alone holds the array
        oid = encoded.digest()  # the bytes where the function left them: hashed, not copied
        size = encoded.nbytes
        view = memoryview(lent.spare.map)[:size]
        try:
            encoded.write_around(view, PAGE)
        finally:
            view.release()
        del encoded  # the array is freed here, and with it the lend
        if self._lender.lent():
            # Held from outside Python (a C extension kept its pointer): the object is copied
            # out of the spare, which stays lent until that lets go (``end``).
            return Prepared(oid, size, lent.spare, named=False, copy=True)
        self._lent = None
        lent.unpin()
        if link_stored(oid):
            self._maps.put_back_spare(lent.spare, lent.spare.size)
            return Prepared(oid, size, None, named=True)
        return Prepared(oid, size, lent.spare, named=False)

    def name(self, prepared: Prepared, path: str, staged: bool) -> None:
        """Names the spare ``prepare`` made the object ``path``. ``staged``: the agent put a
        released object's file at ``path`` for the result (asked for with Stage): it becomes a
        spare in place of the one the result takes, so no fresh memory is made for the next."""
        path = Path(path)
        if staged and not self._maps.recycle_as_spare(path, self._spare_name(path.parent)):
            unlink_later(path)
        if prepared.copy:
            view = memoryview(prepared.spare.map)[:prepared.size]
            try:
                write_file(path, Encoded("tensor", [view], {}))
            finally:
                view.release()
            return
        self._maps.keep_spare(prepared.spare, path, prepared.size, prepared.oid)
        self.adopted += 1

    def _spare_name(self, folder: Path) -> Path:
        """A name for a spare made of a released object's file: in the staging folder, with the
        executor's id, so that the agent deletes what is left of it when the executor ends."""
        self._named_spares += 1
        return folder / f".exec-{self._tag}-spare-{self._named_spares}"

    def expect(self, size: int) -> None:
        """A result of ``size`` bytes was copied: the next one like it may be lent a spare."""
        if self._maps.spares is not None:
            self._maps.spares.want(size)

    def end(self) -> None:
        """After a call: a spare whose array is gone is a spare again (an array a raised
        exception's frame held, say); one still held waits for a later call's end. Once there
        are spares, the lender is loaded, between calls."""
        if self._lender is None:
            if self._maps.spares is not None:
                self._load()
            return
        if self._lent is None:
            return
        if not self._lender.lent():
            self._give_back()
        elif not self._lent.outlived:
            # Kept by the function (a global): no longer a write in progress, which would hold
            # off the spares made in the background for as long.
            self._lent.outlived = True
            self._maps.spares.written()

    def _offer(self) -> _Lent | None:
        if self._maps.spares is None or self._lender is None:
            return None
        self.end()
        if self._lent is not None:
            return None  # an array from an earlier call still holds it
        spare = self._maps.spares.take_largest()
        if spare is None:
            return None
        lent = _Lent(spare)
        usable = spare.size - PAGE  # the object's end after the array must fit too: ``prepare``
        if usable < RECYCLE_MIN or not self._lender.offer(
                lent.address, usable, max(RECYCLE_MIN, usable // _SHARE), lent.address - PAGE,
                spare.size, spare.fd):
            lent.unpin()
            self._maps.put_back_spare(spare, spare.size)
            return None
        self._lent = lent
        return lent

    def _give_back(self) -> None:
        lent, self._lent = self._lent, None
        lent.unpin()
        if lent.outlived:
            self._maps.spares.give(lent.spare)  # made again meanwhile, maybe: within budget
        else:
            self._maps.put_back_spare(lent.spare, lent.spare.size)

    def _load(self) -> None:
        """Compiles and loads the lender off the call's path: the calls after it lend."""
        if self._loading is not None:
            return

        def load() -> None:
            lender = _native.lender(self._may_compile)
            if lender is None:
                print(f"[bulletin executor] large results are copied into the store: "
                      f"{_native.why_not()}", file=sys.stderr, flush=True)
            self._lender = lender

        self._loading = threading.Thread(target=load, name="bulletin-lender", daemon=True)
        self._loading.start()

