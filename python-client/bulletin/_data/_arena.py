"""Pre-faulted spare memory for large writes into the same-host store: the first one too.

On /dev/shm with 4 KiB pages a write into a fresh file pays a page fault, a zeroed page and a
page-table entry per 4 KiB: several times the copy. A released object's file (``_write_maps``)
helps only once something was released. So a writer keeps a few *spare files*, allocated and
mapped ahead of need by a background thread: a large write takes one, copies into the mapping it
already has (a plain memory copy), gives the file its name and truncates it to the object's size.

Where the runtime keeps a host arena (``HelloReply.host_arena_bytes``), a same-host client's
spares come from it: files the runtime pre-faulted once for the whole host, moved into this
user's folder (``TakeArenaSpare``) and only mapped here, so the client pays page-table entries,
not zeroed pages. Otherwise (an executor; a runtime without an arena) a spare is an anonymous
file (``O_TMPFILE``) in the writer's own store folder: it has no name until it holds an object,
so no other process can open it, and a writer that dies leaves nothing behind (its memory goes
with its last mapping). Either way its pages are fresh (zeroed) and only ever reach one user's
folder: no bytes of anyone cross to anyone else.

The memory is taken from the machine while it waits. The budget: ``initial`` bytes filled at
start, grown on demand (a write larger than every spare makes the next spare that large) up to
``limit``; spares are dropped, and none made, while the machine runs short of memory (less than
``_LOW_MEMORY_SHARE`` of its memory available) or the store's file system is nearly full.
"""

from __future__ import annotations

import mmap
import os
import threading
from pathlib import Path

from ._objects import reserve

_O_TMPFILE = getattr(os, "O_TMPFILE", 0)
_GRANULE = 2 << 20  # spare sizes are rounded up to this: a write a few bytes larger still fits
# A spare is cut to a write only while its tail is at most this many times the write: on
# /dev/shm freeing a tail costs about a fifth of what faulting the same bytes into a fresh file
# does (two cores: 0.25 against 1.3 ms per MiB; the GPU machine's cut: 0.13 ms per MiB).
_CUT_RATIO = 4
_LOW_MEMORY_SHARE = 0.10  # below this share of the machine's memory available: give spares back
_CHECK_SECONDS = 5.0
_RETRY_SECONDS = 0.5  # the host arena had no file yet: ask again after this
_WAIT_FOR_FILL = 60.0  # at most this long for a spare being made (a fresh write is slower)
_CLOSE_WAIT = 30.0  # close() waits at most this long for a fill under way to end


class NotYet(Exception):
    """A spare source has none now but may later (the host arena is still filling)."""


class Spare:
    """One pre-faulted file and this process's mapping of it: anonymous, or (from the host
    arena) named ``path`` in the writer's folder until it holds an object."""

    __slots__ = ("fd", "map", "path")

    def __init__(self, fd: int, mapped: mmap.mmap, path: Path | None = None):
        self.fd, self.map, self.path = fd, mapped, path

    @property
    def size(self) -> int:
        return len(self.map)

    def name(self, path: Path) -> None:
        """Gives the spare a name in its folder (fails if ``path`` exists)."""
        if self.path is not None:
            if os.path.lexists(path):
                raise FileExistsError(path)
            os.rename(self.path, path)  # one folder of one tmpfs: atomic
            self.path = None  # from now on the file is the write's, not a spare
            return
        # linkat(AT_SYMLINK_FOLLOW) through /proc: the one way to name an O_TMPFILE file
        # without CAP_DAC_READ_SEARCH (os.link takes linkat only when given a dir fd).
        fds = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.link(str(self.fd), path, src_dir_fd=fds, follow_symlinks=True)
        finally:
            os.close(fds)

    def close(self) -> None:
        if self.path is not None:  # an unused arena spare: its memory goes back to the host
            try:
                os.unlink(self.path)
            except OSError:
                pass
        try:
            self.map.close()
        except BufferError:  # a view is still exported; unmapped when collected
            pass
        os.close(self.fd)


def open_spare(path: Path, size: int) -> Spare:
    """Maps a pre-faulted file handed to this process (``TakeArenaSpare``) for writing, its
    page-table entries made now, off the write path: the pages themselves exist already."""
    fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
    try:
        mapped = mmap.mmap(fd, size, flags=mmap.MAP_SHARED)
    except BaseException:
        os.close(fd)
        raise
    spare = Spare(fd, mapped, Path(path))
    try:
        _prefault_for_writing(mapped)
    except BaseException:
        spare.close()
        raise
    return spare


def supported(folder: Path) -> bool:
    """Whether anonymous files can be made (and later named) in ``folder``."""
    if not _O_TMPFILE or not os.path.isdir("/proc/self/fd"):
        return False
    try:
        os.close(os.open(folder, _O_TMPFILE | os.O_RDWR, 0o600))
    except OSError:
        return False
    return True


class SpareFiles:
    """Spare files of one folder, filled in the background; ``take`` hands one out."""

    def __init__(self, folder: Path, initial_bytes: int, limit_bytes: int, source=None):
        """``source(size)``: where spares come from (a Spare, None when refused, or NotYet);
        None: anonymous files this process pre-faults itself."""
        self.folder = Path(folder)
        self._source = source
        self._limit = _round_up(limit_bytes)
        self._target = min(_round_up(initial_bytes), self._limit)
        # Sizes of the spares to make next, in order: at start a ladder that fills the budget
        # (a write takes the smallest spare that fits, and cutting a much larger one to size
        # costs time freeing its tail), then one of each size taken.
        self._plan: list[int] = _ladder(self._target)
        self._spares: list[Spare] = []
        self._cond = threading.Condition()
        self._closed = False
        self._filling = 0  # the size of the spare being made, 0 when none
        self._writing = 0  # spares taken whose write has not ended yet
        # Sizes the source refused since a spare was last taken: not asked for again on a
        # write's behalf until then (each ask is an RPC to the runtime).
        self._refused: set[int] = set()
        # Counters for tests and benchmarks.
        self.taken = 0
        self.given_back = 0
        self.fill_seconds = 0.0
        self._thread = threading.Thread(target=self._run, name="bulletin-arena", daemon=True)
        self._thread.start()

    # -- what writers use -----------------------------------------------------------------------

    def take(self, size: int) -> Spare | None:
        """The smallest spare of at least ``size`` bytes, or None (the writer then writes a fresh
        file, and the next spare is made at least this large, within the limit). None too when
        the smallest that fits costs more to cut to the write than a fresh file (``_serves``)."""
        with self._cond:
            # A spare that fits is being made: waiting for it costs less than writing a fresh
            # file (which would pay the same faults, competing with the fill for the memory).
            self._cond.wait_for(lambda: self._closed or not _serves(self._filling, size)
                                or any(_serves(s.size, size) for s in self._spares),
                                _WAIT_FOR_FILL)
            spare = self._smallest_fitting(size)
            if spare is None:
                self._grow_for(_round_up(size))
                return None
            if not _serves(spare.size, size):
                # Cut to size, it would also be gone for the large write that needs it (a
                # client's first 2 MiB argument took the 1 GiB spare, and the dataset written
                # next paid every page fault: 0.96 s instead of 0.13 s on two cores). A fresh
                # file for this write, and one of its size made next if the budget has room as
                # it stands.
                self._plan_if_room(_round_up(size))
                return None
            return self._hand_out(spare, size)

    def take_largest(self) -> Spare | None:
        """The largest spare ready now, without waiting, for a write whose size is not known
        yet: an executor lends it to its function's first large array (``bulletin._native``).
        Then ``written`` once it holds an object, or ``put_back(spare, spare.size)``."""
        with self._cond:
            if not self._spares:
                return None
            spare = max(self._spares, key=lambda s: s.size)
            return self._hand_out(spare, spare.size)

    def _hand_out(self, spare: Spare, size: int) -> Spare:
        self._spares.remove(spare)
        self._refused.clear()  # the writer holds less now: the source may say yes
        self.taken += 1
        # Made again in the background, the size of what was taken (a loop writing
        # same-sized objects finds one ready each time), once the write is done: filling
        # while the writer copies would take the memory bandwidth (and, on a small
        # machine, the core) the copy needs.
        self._plan.append(_round_up(size))
        self._writing += 1
        return spare

    def put_back(self, spare: Spare, size: int) -> None:
        """A spare taken for a write of ``size`` bytes that was not needed after all (the store
        had the object): it is ready again, as it was (holding this writer's own bytes)."""
        with self._cond:
            self._spares.append(spare)
            try:
                self._plan.remove(_round_up(size))  # not made again: it came back
            except ValueError:
                pass
            self._writing -= 1
            self._cond.notify_all()

    def want(self, size: int) -> None:
        """The writer expects writes of ``size`` bytes before they come (an executor lends a
        spare to its function, bulletin/_runtime/_result_memory.py): one that size is made if
        none serves it, is planned or is being made."""
        with self._cond:
            size = _round_up(size)
            if (self._closed or size in self._plan or _serves(self._filling, size)
                    or any(_serves(s.size, size) for s in self._spares)):
                return
            self._grow_for(size)

    def give(self, spare: Spare) -> None:
        """A spare made elsewhere (a released object's file the writer maps already): it takes
        the place of one the background thread would make, or is closed when the spares fill
        the budget (as grown by the writes) already."""
        with self._cond:
            kept = not self._closed and (sum(s.size for s in self._spares) + spare.size
                                         <= self._target)
            if kept:
                self._spares.append(spare)
                served = [p for p in self._plan if p <= spare.size]
                if served:
                    self._plan.remove(max(served))
                self._cond.notify_all()
        if not kept:
            spare.close()

    def written(self) -> None:
        """The write into a taken spare is done: the background thread may fill again."""
        with self._cond:
            self._writing -= 1
            self._cond.notify_all()

    def _grow_for(self, size: int) -> None:
        """After a write no spare fitted: the next spare is made that large, within the limit,
        giving back smaller spares where they stand in its way."""
        if size > self._limit:
            return
        self._spares.sort(key=lambda s: s.size)
        while self._spares and sum(s.size for s in self._spares) + size > self._limit:
            self._spares.pop(0).close()
            self.given_back += 1
        self._target = max(self._target, sum(s.size for s in self._spares) + size)
        self._plan.insert(0, size)
        self._cond.notify_all()

    def _plan_if_room(self, size: int) -> None:
        """The next spare made is ``size`` bytes if the budget holds it beside the spares there
        are (none is given back for it) and the source did not refuse that size since a spare
        was last taken; else none is."""
        if (sum(s.size for s in self._spares) + size <= self._target
                and size not in self._plan and size not in self._refused):
            self._plan.insert(0, size)
            self._cond.notify_all()

    def serves(self, size: int) -> bool:
        """Whether ``take(size)`` would hand out a spare now."""
        with self._cond:
            spare = self._smallest_fitting(size)
            return spare is not None and _serves(spare.size, size)

    def _smallest_fitting(self, size: int) -> Spare | None:
        return min((s for s in self._spares if s.size >= size), key=lambda s: s.size,
                   default=None)

    def largest(self) -> int:
        with self._cond:
            return max((s.size for s in self._spares), default=0)

    def spare_bytes(self) -> int:
        with self._cond:
            return sum(s.size for s in self._spares)

    def wait_filled(self, timeout: float) -> bool:
        """Waits until the background thread has made what the budget asks (benchmarks, tests)."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._closed or not self._filling and not self._wants_more(), timeout)

    def close(self) -> None:
        """Deletes the spares; returns once a fill under way has ended and deleted its spare
        too, so that none is left in the folder (the caller may remove the folder next)."""
        with self._cond:
            self._closed = True
            spares, self._spares = self._spares, []
            self._cond.notify_all()
        for spare in spares:
            spare.close()
        if self._thread is not threading.current_thread():
            self._thread.join(_CLOSE_WAIT)

    # -- the background thread ------------------------------------------------------------------

    def _wants_more(self) -> bool:
        if self._writing:
            return False
        held = sum(s.size for s in self._spares)
        while self._plan and held + self._plan[0] > self._target:
            self._plan.pop(0)  # no longer fits the budget (smaller ones may)
        return bool(self._plan)

    def _run(self) -> None:
        import time

        while True:
            with self._cond:
                while not self._closed and not self._wants_more():
                    self._cond.wait(_CHECK_SECONDS)
                    if self._pressed():
                        self._give_back_locked()
                if self._closed:
                    return
                if self._pressed():
                    self._give_back_locked()
                    self._cond.wait(_CHECK_SECONDS)
                    continue
                size = self._filling = self._plan.pop(0)
            start = time.perf_counter()
            later = False
            try:
                spare = self._source(size) if self._source else _make(self.folder, size)
            except NotYet:
                spare, later = None, True
            except Exception:  # noqa: BLE001 - a failed fill must not end the thread
                spare = None
            with self._cond:
                self._filling = 0
                self.fill_seconds += time.perf_counter() - start
                if later and not self._closed:
                    self._plan.insert(0, size)  # the host arena is filling: ask again soon
                    self._cond.notify_all()
                    self._cond.wait(_RETRY_SECONDS)
                    continue
                if spare is None or self._closed:
                    if spare is not None:
                        spare.close()
                    elif self._source is not None:
                        self._refused.add(size)
                    if self._source is None:
                        self._target = 0  # the folder cannot take more: stop trying
                    self._cond.notify_all()
                    continue
                self._spares.append(spare)
                self._cond.notify_all()

    def _pressed(self) -> bool:
        """Whether the machine, or the store's file system, runs short of memory."""
        try:
            fs = os.statvfs(self.folder)
        except OSError:
            return True
        if fs.f_bavail * fs.f_frsize < 2 * max(self._plan[:1] + [_GRANULE]):
            return True
        available, total = _meminfo()
        return total > 0 and available < total * _LOW_MEMORY_SHARE

    def _give_back_locked(self) -> None:
        spares, self._spares = self._spares, []
        self.given_back += len(spares)
        for spare in spares:
            spare.close()


def _make(folder: Path, size: int) -> Spare:
    """An anonymous file of ``size`` bytes in ``folder``, its pages allocated and mapped here."""
    fd = os.open(folder, _O_TMPFILE | os.O_RDWR, 0o600)
    try:
        reserve(fd, size, folder / ".spare")  # a full share: an error here, never a SIGBUS
        mapped = mmap.mmap(fd, size, flags=mmap.MAP_SHARED)
    except BaseException:
        os.close(fd)
        raise
    _prefault_for_writing(mapped)
    return Spare(fd, mapped)


_MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)  # Linux 5.14


def _prefault_for_writing(mapped: mmap.mmap) -> None:
    """Allocates (zeroed) pages and writable page-table entries: all the work a first write
    would otherwise do a page at a time. MAP_POPULATE is not enough: on a shared mapping it
    faults pages in for reading, and the first write to each still takes a fault.

    Through ctypes, not ``mmap.madvise``: a ctypes call lets go of the GIL, and filling 1 GiB
    takes a second or more during which the writer's own threads (its gRPC calls) must run."""
    import numpy as np

    pages = np.frombuffer(mapped, dtype=np.uint8)
    try:
        if libc_madvise(pages.ctypes.data, len(pages), _MADV_POPULATE_WRITE) == 0:
            return
        # An older kernel: touch one byte of every page (numpy lets go of the GIL too).
        pages[::mmap.PAGESIZE] = 0
    finally:
        del pages


def libc_madvise(address: int, length: int, advice: int) -> int:
    """madvise(2) through ctypes, which lets go of the GIL for the call (``mmap.madvise`` keeps
    it); 0, or -1 with errno set."""
    import ctypes

    global _MADVISE
    if _MADVISE is None:
        libc = ctypes.CDLL(None, use_errno=True)
        _MADVISE = libc.madvise
        _MADVISE.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        _MADVISE.restype = ctypes.c_int
    return _MADVISE(address, length, advice)


_MADVISE = None


def _ladder(budget: int) -> list[int]:
    """Spare sizes that fill ``budget``: powers of two (plus one granule, for an object's
    header), largest first, none below 4 MiB."""
    sizes, left, power = [], budget, 1 << 40
    while power >= 4 << 20:
        if power + _GRANULE <= left:
            sizes.append(power + _GRANULE)
            left -= power + _GRANULE
        else:
            power >>= 1
    return sizes


def _serves(spare_size: int, size: int) -> bool:
    """Whether a spare of ``spare_size`` bytes takes a write of ``size``: it fits, and cutting
    it to the write costs less than writing a fresh file (see ``_CUT_RATIO``). A 256 MiB write
    still takes a 1 GiB spare (0.19 s to cut it against 0.34 s of page faults on two cores):
    the runtime's arena may have no file of its size for this writer, which holds its share
    already."""
    wanted = _round_up(size)
    return spare_size >= size and spare_size - wanted <= _CUT_RATIO * wanted


def _round_up(size: int) -> int:
    return -(-size // _GRANULE) * _GRANULE


def _meminfo() -> tuple[int, int]:
    """(MemAvailable, MemTotal) in bytes; (0, 0) when unknown."""
    values = {}
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("MemAvailable", "MemTotal"):
                    values[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return 0, 0
    return values.get("MemAvailable", 0), values.get("MemTotal", 0)
