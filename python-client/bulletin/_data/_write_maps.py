"""Writes of large objects into the same-host store through mappings kept from earlier writes.

On /dev/shm with 4 KiB pages the first write into a fresh file costs a page fault, a zeroed
page and a page-table entry per 4 KiB: several times the copy itself. So the runtime hands a
same-host writer the file of one of its unreferenced objects (HasObjectsReply.staged_names);
its pages are allocated already. If this process wrote that file before and still has it mapped,
the write goes through that mapping at memory-copy speed.

Overwriting is only safe if nobody else still maps the file: a client may hold a zero-copy array
of an object it released, an executor may have kept an argument. The kernel knows: a write lease
(F_SETLEASE F_WRLCK) is granted only when no other open file, mapping included, refers to the
file. When it is refused the recycled file is left to its readers and a new one is written.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import threading
from collections import OrderedDict
from pathlib import Path

from ._arena import Spare, SpareFiles
from ._later import close_later
from ._objects import reserve, write_file

RECYCLE_MIN = 1 << 20  # smaller writes are cheap to fault in: not worth a kept mapping
_MAP_FLAGS = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)


class _Mapping:
    __slots__ = ("fd", "map", "oid")

    def __init__(self, fd: int, mapped: mmap.mmap, oid: str | None):
        self.fd, self.map, self.oid = fd, mapped, oid

    def close(self) -> None:
        try:
            self.map.close()
        except BufferError:  # a view is still exported; unmapped when collected
            pass
        os.close(self.fd)


class WriteMappings:
    """Writable mappings of the large files this process wrote, at most ``limit_bytes`` of them
    (least recently written dropped first). A file the runtime deleted is let go at the next
    write: until then the mapping alone keeps its memory."""

    def __init__(self, limit_bytes: int, max_files: int = 16, spares: SpareFiles | None = None):
        self._limit = limit_bytes
        # Pre-faulted files for writes no released object's file serves (``_arena``).
        self.spares = spares
        self._max_files = max_files
        self._maps: OrderedDict[tuple[int, int], _Mapping] = OrderedDict()  # (dev, inode)
        self._lock = threading.Lock()
        self.recycled_writes = 0  # writes through a kept mapping: for tests and benchmarks
        self.spare_writes = 0  # writes into a pre-faulted spare file

    @property
    def limit(self) -> int:
        return self._limit

    def ids(self) -> list[str]:
        """Objects whose files are still mapped here: the runtime gives these back first. Not
        those of files it deleted: under the same id it may hold another process's file (the
        store dropped this writer's equal copy), which this writer could only refuse."""
        with self._lock:
            self._sweep()
            return [m.oid for m in self._maps.values()]

    def write_new(self, path: Path, encoded, oid: str | None, stored=None) -> None:
        """Writes a new file, keeping its mapping when it is large. ``oid`` None: the id is not
        known yet, and is computed in the same pass as the copy (``Encoded.write_digesting``).
        ``stored(id)``, when given, is asked once the id is known and before a spare written
        into is named: True when the caller put an equal stored object at ``path`` instead; the
        spare then stays a spare, its memory not made again."""
        size = encoded.nbytes
        if size < RECYCLE_MIN or size > self._limit:
            write_file(path, encoded)
            return
        spare = self._take_spare(path, size)
        if spare is not None:
            self._write_spare(spare, path, encoded, oid, stored)
            return
        self._map_and_write(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600), path,
                            encoded, oid)

    def write_recycled(self, path: Path, encoded, oid: str | None) -> bool:
        """Overwrites a file the runtime staged from a released object; False when another
        process still maps it (the caller then writes a new file). ``oid``: as ``write_new``."""
        size = encoded.nbytes
        st = os.stat(path)  # not open(): an open of our own would fail the lease below
        if st.st_size < size:
            return False
        with self._lock:
            self._sweep()
            kept = self._maps.pop((st.st_dev, st.st_ino), None)
        if kept is not None and len(kept.map) >= size:
            if not _exclusive(kept.fd):
                close_later(kept)
                return False
            os.ftruncate(kept.fd, size)  # only now: a reader mapping the tail would fault
            kept.oid = oid
            self._write_and_keep(kept, encoded)
            self.recycled_writes += 1
            return True
        if kept is not None:
            close_later(kept)
        if self.has_spare(size):
            return False  # a spare is mapped here already: cheaper than mapping this file
        fd = os.open(path, os.O_RDWR)
        if not _exclusive(fd):
            os.close(fd)
            return False
        self._map_and_write(fd, path, encoded, oid)
        return True

    def take_spare(self, size: int, held=()) -> Spare | None:
        """A pre-faulted spare of at least ``size`` bytes, for a write whose id is not known
        yet (``Encoded.write_digesting``): then ``keep_spare`` or ``put_back_spare``. None when
        a file of a released object of this writer's (not in ``held``) is mapped here and
        fits: the runtime hands such a file back for the write (a loop writing a new batch each
        step), and the spare stays for a write with nothing to recycle. Taking it would have
        the spare made again in the background, which on a small machine slowed every write
        of such a loop by half (184-216 ms per GiB against 123-142 ms on two cores)."""
        if self.spares is None or size < RECYCLE_MIN or size > self._limit:
            return None
        with self._lock:
            self._sweep()
            if any(len(m.map) >= size and m.oid not in held for m in self._maps.values()):
                return None
        return self.spares.take(size)

    def keep_spare(self, spare: Spare, path: Path, size: int, oid: str) -> None:
        """The spare holds object ``oid`` (``size`` bytes): named ``path``, cut to its size and
        kept mapped like any large write."""
        try:
            spare.name(path)
            os.ftruncate(spare.fd, size)  # nobody else maps a spare: no reader can fault
        except BaseException:
            spare.close()
            raise
        finally:
            self.spares.written()
        kept = _Mapping(spare.fd, spare.map, oid)
        st = os.fstat(kept.fd)
        with self._lock:
            self._maps[(st.st_dev, st.st_ino)] = kept
            self._trim()
        self.spare_writes += 1

    def recycle_as_spare(self, path: Path, spare_path: Path) -> bool:
        """Makes the released object's file the runtime staged at ``path`` a spare named
        ``spare_path``, if this process maps it and no other does: its pages, and the mapping's
        page-table entries, exist already (a spare made instead takes fresh zeroed memory). False
        when it cannot be (the caller removes it)."""
        if self.spares is None:
            return False
        st = os.stat(path)
        with self._lock:
            self._sweep()
            kept = self._maps.pop((st.st_dev, st.st_ino), None)
        if kept is None:
            return False
        if not _exclusive(kept.fd):
            close_later(kept)
            return False
        os.rename(path, spare_path)  # one folder: the staging folder
        os.ftruncate(kept.fd, len(kept.map))  # a spare's file is as long as its mapping
        self.spares.give(Spare(kept.fd, kept.map, Path(spare_path)))
        return True

    def put_back_spare(self, spare: Spare, size: int) -> None:
        self.spares.put_back(spare, size)

    def has_spare(self, size: int) -> bool:
        return self.spares is not None and self.spares.serves(size)

    def _take_spare(self, path: Path, size: int) -> Spare | None:
        """A pre-faulted spare for a write to ``path`` (not named yet), or None."""
        if self.spares is None or Path(path).parent != self.spares.folder:
            return None
        return self.spares.take(size)

    def fill_spare(self, spare: Spare, encoded, oid: str | None = None) -> str:
        """Copies ``encoded`` into ``spare`` (hashing it in the same pass when ``oid`` is None)
        and returns its id; the spare goes back to the spares if the copy fails."""
        view = memoryview(spare.map)[:encoded.nbytes]
        try:
            if oid is None:
                return encoded.write_digesting(view)
            encoded.write_into(view)
            return oid
        except BaseException:
            self.put_back_spare(spare, encoded.nbytes)
            raise
        finally:
            view.release()

    def _write_spare(self, spare: Spare, path: Path, encoded, oid: str | None, stored) -> None:
        """Copies ``encoded`` into ``spare``, then names it ``path`` (``write_new``)."""
        oid = self.fill_spare(spare, encoded, oid)
        if stored is not None and stored(oid):
            self.put_back_spare(spare, encoded.nbytes)  # it holds only this writer's bytes
            return
        self.keep_spare(spare, path, encoded.nbytes, oid)

    def close(self) -> None:
        if self.spares is not None:
            self.spares.close()
        with self._lock:
            maps, self._maps = list(self._maps.values()), OrderedDict()
        for kept in maps:
            kept.close()

    def _map_and_write(self, fd: int, path: Path, encoded, oid: str | None) -> None:
        """Sizes an open file to the object (its memory reserved: see ``reserve``), maps it,
        writes it and keeps the mapping."""
        try:
            reserve(fd, encoded.nbytes, path)
            mapped = mmap.mmap(fd, encoded.nbytes, flags=_MAP_FLAGS)
        except BaseException:
            os.close(fd)
            raise
        self._write_and_keep(_Mapping(fd, mapped, oid), encoded)

    def _write_and_keep(self, kept: _Mapping, encoded) -> None:
        view = memoryview(kept.map)[:encoded.nbytes]
        try:
            if kept.oid is None:
                kept.oid = encoded.write_digesting(view)
            else:
                encoded.write_into(view)
        except BaseException:
            view.release()
            kept.close()
            raise
        view.release()
        st = os.fstat(kept.fd)
        with self._lock:
            self._maps[(st.st_dev, st.st_ino)] = kept
            self._trim()

    def _sweep(self) -> None:
        """Lets go of files the runtime deleted (only this mapping keeps their memory), off the
        write's path: unmapping 1 GiB took 0.35-0.44 s of each executor's result write on the
        2-core VM under load (``_later``)."""
        for key, kept in list(self._maps.items()):
            if os.fstat(kept.fd).st_nlink == 0:
                del self._maps[key]
                close_later(kept)

    def _trim(self) -> None:
        total = sum(len(m.map) for m in self._maps.values())
        while self._maps and (total > self._limit or len(self._maps) > self._max_files):
            _, oldest = self._maps.popitem(last=False)
            total -= len(oldest.map)
            close_later(oldest)


def _exclusive(fd: int) -> bool:
    """Whether ``fd`` is the only open file (mappings included) on its file."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
    except OSError:
        return False
    fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
    return True
