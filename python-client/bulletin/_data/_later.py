"""Freeing large memory off a call's path: one background thread per process.

Unmapping a populated 1 GiB mapping of ``/dev/shm`` tears down 262,144 page-table entries, and
closing the last reference to a deleted file gives its pages back to the kernel one by one:
0.05-0.4 s per GiB on the 2-core VM (more under load), all of it a wait for whoever does it.
Neither changes what any reader sees (the file's name is gone, or the mapping is no one's but
ours), so an executor storing a result, or a client writing an argument, hands that work here and
goes on. The kernel releases the GIL in ``munmap`` and ``close``, so the thread competes only for
a core, not for the interpreter.
"""

from __future__ import annotations

import os
import queue
import threading

_work: queue.SimpleQueue = queue.SimpleQueue()
_lock = threading.Lock()
_thread: threading.Thread | None = None


def close_later(closable) -> None:
    """Calls ``closable.close()`` on the background thread (a mapping, a file object)."""
    _submit(closable.close)


def close_fd_later(fd: int) -> None:
    """Closes a descriptor on the background thread: the last reference to a deleted file, whose
    pages are freed then."""
    _submit(lambda: os.close(fd))


def unlink_later(path) -> None:
    """Removes a file whose pages this process need not wait for (a staged file the result does
    not go into; 1 GiB: tens to hundreds of milliseconds): the name goes now, the last
    descriptor later. Another process that still maps it keeps its pages until it lets go."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # no FIFO waits
    except OSError:
        fd = -1
    os.unlink(path)
    if fd >= 0:
        close_fd_later(fd)


def _submit(work) -> None:
    global _thread
    _work.put(work)
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_run, name="bulletin-free-later", daemon=True)
            _thread.start()


def _run() -> None:
    while True:
        work = _work.get()
        try:
            work()
        except Exception:  # noqa: BLE001 - freeing is best effort; the kernel frees at exit
            pass


def drain(timeout: float = 10.0) -> bool:
    """Waits until everything handed here so far is done (tests; a process about to exit need
    not). False if it did not finish within ``timeout`` seconds."""
    done = threading.Event()
    _submit(done.set)
    return done.wait(timeout)
