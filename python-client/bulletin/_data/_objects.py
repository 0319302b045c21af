"""The data path of the client and the executor: how objects are encoded, named, written into
the node-local store, checked in transit and opened again.

The encoding is the Arrow codec (``bulletin._codec``), imported here only: every other module
encodes and decodes through this one.
"""

from __future__ import annotations

import errno
import hashlib
import mmap
import os
import socket
import uuid
from pathlib import Path

import pyarrow as pa

from .._codec import decode, encode, peek_kind  # noqa: F401
from .._errors import StoreFullError
from .._placeholders import stored_object
from .._ref import Ref  # noqa: F401 (the client's handle of a store object)

STAGE_PREFIX = ".stage-"


class StoreRef:
    """Stands in the pickled arguments for an object that travels on its own (a large array,
    a scatter ref, an earlier call's result); the executor replaces it with the object's value."""

    __slots__ = ("id",)

    def __init__(self, oid: str):
        self.id = oid

    def __reduce__(self):
        return stored_object, (self.id,)

    def __repr__(self) -> str:
        return f"StoreRef({self.id})"


def host_id() -> str:
    """Same value as the runtime's HelloReply.host_id on the same host and network namespace.

    The network namespace is part of it: a client in another namespace (another host, for all
    the data path knows) takes the gRPC path.
    """
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = ""
    try:
        netns = os.readlink("/proc/self/ns/net")
    except OSError:
        netns = ""
    text = f"{boot}\n{socket.gethostname()}\n{netns}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def crc32c_extend(crc: int, data: bytes) -> int:
    """CRC32C (Castagnoli) of ``data`` continuing from ``crc`` (0 to start)."""
    import google_crc32c
    return google_crc32c.extend(crc, data)


_SMALL_WRITE = 64 * 1024  # below this, one write(2) of the joined stream, nothing reserved first


def reserve(fd: int, size: int, path: Path) -> None:
    """Sizes a file to ``size`` bytes with its memory allocated now (``posix_fallocate``),
    before anything is written into it: a full store folder is then an error here that names
    the folder's use and size, before any byte is copied (and, for a writer that maps the file,
    not a SIGBUS in the middle of a copy, which in a notebook is the kernel dying)."""
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            os.ftruncate(fd, 0)  # what it allocated before it ran out goes back at once
            raise StoreFullError(_full(path, size)) from None
        if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise  # EOPNOTSUPP, EINVAL: a file system without fallocate, sized as before
    os.ftruncate(fd, size)  # a longer file (a recycled one) is cut to the object


def _full(path: Path, size: int) -> str:
    folder = Path(path).parent
    try:
        fs = os.statvfs(folder)
        total, free = fs.f_blocks * fs.f_frsize, fs.f_bavail * fs.f_frsize
        use = f"{(total - free) / 2**20:.1f} MiB of {total / 2**20:.1f} MiB are in use"
    except OSError:
        use = "its size cannot be read"
    return (f"an object of {size / 2**20:.1f} MiB does not fit in your share of this node's "
            f"object store ({folder}: {use}: objects you hold, and files being written or left "
            "there); nothing was stored. Release objects you no longer need (del the futures "
            "and refs, Ref.release()), or ask the cluster's owner for a larger share.")


def write_file(path: Path, encoded, digesting: bool = False, staged: bool = False) -> None:
    """Writes an encoded object into a new file: one copy, by the kernel (``pwrite``), into
    memory allocated first (``reserve``). ``digesting``: its id is computed too, for a writer
    that needs it and has not computed it. ``staged``: the file is there already, a pre-faulted
    one the agent staged for this writer alone (``ObjectStore.handOutSpare``), and is
    overwritten."""
    fd = os.open(path, os.O_RDWR if staged else os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        size = encoded.nbytes
        if size < _SMALL_WRITE:
            data = memoryview(encoded.to_bytes())
            while data:  # a short write means the disk filled up: the next one raises
                data = data[os.write(fd, data):]
        else:
            reserve(fd, size, path)
            encoded.write_to_file(fd)
        if digesting:
            # A pass over the source after the copy: xxh3 reads 1 GiB in about 35 ms on one
            # thread, and the kernel's copy saves several times that against a mapping's.
            encoded.digest()
    finally:
        os.close(fd)


def stage_name(session: str) -> str:
    """A new staged (dot-prefixed) file name of a session: the runtime sweeps them at its end."""
    return f"{STAGE_PREFIX}{session}-{uuid.uuid4().hex}"


# Below this, an object file is read, not mapped: a mapping costs three system calls and a
# page fault (a call's function and arguments file: 60 against 22 µs, codec_microbench-style).
READ_SMALLER_THAN = 64 * 1024


def open_object(path: str | Path):
    """Decodes an object file: mapped, so zero copy where the encoding allows (the mapping lives
    as long as the decoded value refers to it), or read when it is small."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size < READ_SMALLER_THAN:
            return decode(_read_whole(fd, size))
        return decode(map_read_only(fd))
    finally:
        os.close(fd)


def _read_whole(fd: int, size: int) -> bytes:
    data = os.read(fd, size)
    while len(data) < size:  # a read may return fewer bytes than asked for
        more = os.read(fd, size - len(data))
        if not more:
            break  # shorter than its size said: decode says what is missing
        data += more
    return data


def map_read_only(fd: int):
    """The whole file open at ``fd``, mapped read-only (an Arrow buffer; empty bytes for an
    empty file). A plain mmap wrapped as a buffer: pyarrow's own memory_map advises the kernel
    to read ahead every range it touches, which costs milliseconds on a 1 GiB object."""
    size = os.fstat(fd).st_size
    return pa.py_buffer(mmap.mmap(fd, size, prot=mmap.PROT_READ)) if size else b""
