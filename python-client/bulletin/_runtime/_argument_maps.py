"""The executor's mappings of its calls' large argument objects, kept from one call to the next.

Mapping a stored object is cheap; reading it through a fresh mapping is not. On ``/dev/shm`` with
4 KiB pages the first touch of each page takes a fault, and unmapping tears the page tables down
again: together 0.1-0.2 s per GiB on the development VM, paid by every call that reads a large
argument. A training loop passes the same dataset to call after call, so the executor keeps a
large argument's mapping while consecutive calls name its object.

A loop that passes a new batch each call is the other common case, and there a kept mapping
costs more than it saves: the writer's next batch cannot go into the released batch's file
while this executor still maps it (the kernel refuses the write lease), so every batch took
fresh memory of the store, zeroed page by page. So a mapping outlives its call only once two
consecutive calls named the object: the first call's mapping goes when that call ends, and a
loop over one dataset pays one more mapping (its second call) before the rest reuse it.

Only the mapping is kept. Every call decodes its own values from it, so no call sees what an
earlier one did to a decoded list or dict, and the mapping itself is read-only. Content
addressing makes the reuse safe: an id names the same bytes for as long as its file exists.

A kept mapping must not hold memory the store believes it freed, nor a file it wants to recycle
(an open file refuses the write lease that recycling takes). So a background thread unmaps, off
the calls' path:
- at once, the mappings that the call just started does not name;
- when a call ends, the mappings of objects the call before it did not name;
- within ``sweep_seconds``, the mapping of a file the store deleted.

A large object freshly mapped is also *populated ahead of the call*: a thread asks the kernel
for its page-table entries (``MADV_POPULATE_READ``), 64 MiB at a time from the start, while the
function reads it from the start on the call's own thread. The faults the function would take
one per 16 pages are then taken on another core, ahead of it (``v + 0`` over 1 GiB freshly
mapped on the 2-core VM: 0.106-0.114 s against 0.174-0.177 s, in one process, four runs).
"""

from __future__ import annotations

import mmap
import os
import threading

import pyarrow as pa

from .._data._arena import libc_madvise
from .._data._objects import map_read_only

KEEP_MIN = 1 << 20  # smaller objects are cheap to map and read again: not kept
POPULATE_MIN = 64 << 20  # a mapping this large is populated ahead of the call's reads
_POPULATE_STEP = 64 << 20
_MADV_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22)  # Linux 5.14


class _Kept:
    __slots__ = ("fd", "buffer", "nbytes")

    def __init__(self, fd: int, buffer: pa.Buffer, nbytes: int):
        self.fd, self.buffer, self.nbytes = fd, buffer, nbytes

    def deleted(self) -> bool:
        try:
            return os.fstat(self.fd).st_nlink == 0
        except OSError:
            return True

    def close(self) -> None:
        # The mapping goes when the last value decoded from it does (user code may keep one).
        self.buffer = None
        os.close(self.fd)


class ArgumentMaps:
    """Read-only mappings of large argument objects, by id, for the calls of one executor."""

    def __init__(self, sweep_seconds: float = 0.5):
        self._kept: dict[str, _Kept] = {}
        self._dropped: list[_Kept] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._sweeping = False  # the thread runs only while something is kept or dropped
        self._sweep_seconds = sweep_seconds
        self._named: set[str] = set()  # the objects the running (or last) call names
        self._named_before: set[str] = set()  # and those the call before it named
        self.reused = 0  # mappings a call found kept: for tests and benchmarks

    def begin(self, oids) -> None:
        """A call naming the objects ``oids`` starts: the other mappings are let go."""
        names = set(oids)
        with self._lock:
            self._named_before, self._named = self._named, names
            self._drop_locked(lambda oid: oid not in names)

    def end(self) -> None:
        """The call ended: the mappings of objects the call before it did not name go too (see
        the module's doc). Call it once the call's own values are gone, so that the unmapping
        happens on the background thread, not on whichever thread drops the last value."""
        with self._lock:
            before = self._named_before
            self._drop_locked(lambda oid: oid not in before)

    def _drop_locked(self, which) -> None:
        for oid in [oid for oid in self._kept if which(oid)]:
            self._dropped.append(self._kept.pop(oid))
        if self._dropped:
            self._wake.set()

    def buffer(self, oid: str, path: str) -> pa.Buffer:
        """The object's bytes, mapped read-only: a kept mapping when its file still exists."""
        with self._lock:
            kept = self._kept.get(oid)
            if kept is not None and not kept.deleted():
                self.reused += 1
                return kept.buffer
        fd = os.open(path, os.O_RDONLY)
        try:
            buffer = map_read_only(fd)
        except BaseException:
            os.close(fd)
            raise
        size = len(buffer)
        if size >= POPULATE_MIN:
            threading.Thread(target=_populate, args=(buffer,), name="bulletin-populate",
                             daemon=True).start()
        if size < KEEP_MIN:
            os.close(fd)
            return buffer
        with self._lock:
            previous = self._kept.pop(oid, None)
            if previous is not None:
                self._dropped.append(previous)
                self._wake.set()
            self._kept[oid] = _Kept(fd, buffer, size)
            if not self._sweeping:
                self._sweeping = True
                threading.Thread(target=self._sweep_loop, name="bulletin-argument-maps",
                                 daemon=True).start()
        return buffer

    def kept_bytes(self) -> int:
        with self._lock:
            return sum(kept.nbytes for kept in self._kept.values())

    def _sweep_loop(self) -> None:
        while True:
            self._wake.wait(self._sweep_seconds)
            self._wake.clear()
            with self._lock:
                for oid, kept in list(self._kept.items()):
                    if kept.deleted():
                        self._dropped.append(self._kept.pop(oid))
                dropped, self._dropped = self._dropped, []
                done = not self._kept
                if done:
                    self._sweeping = False  # the next kept mapping starts a thread again
            for kept in dropped:
                kept.close()
            if done:
                return


def _populate(buffer: pa.Buffer) -> None:
    """Makes the page-table entries of a read-only mapping, from its start, a step at a time
    (the call reads it from the start too, and takes over any page not reached yet). Holding
    ``buffer`` keeps the mapping for as long as this runs. An older kernel refuses the advice:
    the call then faults its pages in itself, as before."""
    for offset in range(0, buffer.size, _POPULATE_STEP):
        if libc_madvise(buffer.address + offset, min(_POPULATE_STEP, buffer.size - offset),
                        _MADV_POPULATE_READ) != 0:
            return

