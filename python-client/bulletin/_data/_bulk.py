"""The client side of the runtime's bulk data port: an object's bytes over one raw TCP
connection, named by a single-use ticket from ``OpenTransfer`` (wire format: docs/internals.md,
and the Java side in ``BulkConnection``). One connection per transfer, CRC32C over the whole
object; the caller decides what to retry."""

from __future__ import annotations

import ctypes
import hashlib
import hmac
import mmap
import queue
import socket
import ssl
import struct
import sys
import threading

import numpy as np

from .. import _tls
from ._objects import crc32c_extend

MAGIC = 0x424C4B44  # "BLKD"
VERSION = 1
# A worker's own data port: a request carrying a ticket the head signed (docs/data-plane.md).
VERSION_DIRECT = 2
OK, REFUSED, CORRUPT, FAILED = 0, 1, 2, 3
# Bytes per send/recv call: large enough that the per-call cost vanishes, small enough that the
# CRC of one piece runs while the kernel still holds the previous one in the socket buffer.
PIECE = 8 << 20
# A data connection that moves nothing for this long has failed.
IDLE_SECONDS = 60.0


class BulkError(Exception):
    """The runtime answered a data connection with a non-OK status (REFUSED, CORRUPT, FAILED)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class PinMismatch(ssl.SSLError):
    """A worker's data port presented another certificate than the one the head named."""


def connect(host: str, port: int, timeout: float, tls=None,
            pin: bytes | None = None, worker: str | None = None) -> socket.socket:
    """Opens a data connection (over TLS with the ``ssl.SSLContext`` ``tls``: the runtime's
    certificate checked, the handshake done here); OSError when the port cannot be reached
    within timeout, ssl.SSLError when the handshake fails.

    ``pin``: a worker's own port (``tls`` from ``_tls.pinned_context``): the peer's certificate
    must have this SHA-256, checked once the handshake is done and before this returns, so the
    caller sends its ticket to no other peer (PinMismatch).

    ``worker``: a worker's port that serves its worker certificate (``tls`` from
    ``_tls.worker_context``, which checks it against the cluster CA): it must name this worker
    id, checked the same way (PinMismatch)."""
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is not None:
            sock = tls.wrap_socket(sock, server_hostname=None if pin or worker else host)
        if worker is not None:
            names = [value for kind, value in (sock.getpeercert() or {}).get("subjectAltName", ())
                     if kind == "URI" and value.startswith(_tls.WORKER_URI)]
            if names != [_tls.WORKER_URI + worker]:
                raise PinMismatch(f"the data port {host}:{port} presented the certificate of "
                                  f"{', '.join(names) or 'no worker'}, not of worker {worker} "
                                  "(the keeper the head gave the ticket for)")
        if pin is not None:
            got = hashlib.sha256(sock.getpeercert(binary_form=True) or b"").digest()
            if not hmac.compare_digest(got, pin):
                raise PinMismatch(f"the data port {host}:{port} presented a certificate with "
                                  f"SHA-256 {got.hex()}, not {pin.hex()} (the one the head "
                                  "gave with the ticket): not the worker the ticket is for")
        sock.settimeout(IDLE_SECONDS)
    except BaseException:
        sock.close()
        raise
    return sock


def _crc_view(piece) -> np.ndarray:
    # google_crc32c reads bytes or numpy arrays only: a uint8 view of the piece costs no copy.
    return np.frombuffer(piece, dtype=np.uint8)


def put(sock: socket.socket, ticket: bytes, encoded, corrupt: bool = False,
        on_sent=None) -> None:
    """Sends an encoded object under a PUT ticket; returns once the runtime stored it.
    ``on_sent(n)`` is told each piece's size as it leaves (a progress bar).

    ``corrupt`` flips a bit in the first piece sent (after its CRC was taken): the test hook
    for the retry of a corrupted upload.
    """
    with sock:
        _hello(sock, ticket)
        # The CRC (when not computed with the content id) runs on another core while this
        # thread sends (both release the GIL).
        crc = _Background(_crc_of, encoded)
        for piece in encoded.iter_chunks(PIECE):
            if corrupt and len(piece):
                corrupt = False
                piece = bytes([piece[0] ^ 1]) + bytes(piece[1:])
            sock.sendall(piece)
            if on_sent is not None:
                on_sent(len(piece))
        sock.sendall(struct.pack(">I", crc.result()))
        status = recv_exact(sock, 1)[0]
        message = _message(sock)
        if status != OK:
            raise BulkError(status, message)


class ReceiveBuffers:
    """The memory of earlier downloads, reused once nothing uses it any more (the caller dropped
    the arrays decoded from it: no buffer of it is exported): a download into pages already
    faulted in runs at socket speed, a fresh one pays a page fault per 4 KiB. At most
    ``limit_bytes`` are kept."""

    def __init__(self, limit_bytes: int):
        self._limit = limit_bytes
        self._kept: list[mmap.mmap] = []
        self._lock = threading.Lock()
        self.reused = 0  # downloads into kept memory: for tests and benchmarks

    def take(self, size: int):
        """(buffer of at least ``size`` bytes, whether its pages are already in)."""
        with self._lock:
            best = None
            for kept in self._kept:
                if (size <= len(kept) <= 2 * size and (best is None or len(kept) < len(best))
                        and not _exported(kept)):
                    best = kept
            if best is not None:
                self.reused += 1
                return best, True
            fresh = _buffer(size)
            if size and size <= self._limit:
                self._keep(fresh)
            return fresh, False

    def _keep(self, fresh) -> None:
        total = sum(len(k) for k in self._kept) + len(fresh)
        for kept in list(self._kept):
            if total <= self._limit:
                break
            if not _exported(kept):  # nobody uses it: let it go
                self._kept.remove(kept)
                total -= len(kept)
        if total <= self._limit:
            self._kept.append(fresh)


def _exported(buffer: mmap.mmap) -> bool:
    """Whether some buffer (a memoryview, an Arrow buffer, a numpy array) still exports it: an
    mmap refuses to resize then, even to its own size (which is otherwise a no-op)."""
    try:
        buffer.resize(len(buffer))
    except BufferError:
        return True
    except (OSError, SystemError, ValueError):  # a platform that cannot resize: never reuse
        return True
    return False


def get(sock: socket.socket, ticket: bytes, size: int, buffers: ReceiveBuffers | None = None,
        direct: bool = False, checksum: bool = True):
    """Receives an object under a GET ticket into memory of ``buffers`` (or fresh memory);
    returns a buffer of exactly ``size`` bytes. ``direct``: ``ticket`` is a request for a
    worker's own port (``direct_request``). ``checksum=False``: a worker's port over TLS, which
    sends no CRC (its AEAD records authenticate every byte; Java's BulkWire.NO_CRC).

    Raises BulkError(CORRUPT) when the bytes fail their CRC32C check.
    """
    with sock:
        _hello(sock, ticket, direct)
        (sent_size,) = struct.unpack(">Q", recv_exact(sock, 8))
        if sent_size != size:
            raise BulkError(FAILED, f"the runtime sends {sent_size} bytes, {size} were announced")
        out, warm = buffers.take(size) if buffers is not None else (_buffer(size), False)
        view = memoryview(out)[:size]
        # Two helpers on the other core: one faults fresh pages in ahead of the copy from the
        # socket, one checks the CRC of what has arrived behind it.
        populate = _Background(_populate, out, 0 if warm else size)
        arrived: queue.SimpleQueue = queue.SimpleQueue()
        crc = _Background(_crc_behind if checksum else _no_crc, view, arrived)
        try:
            got = checked = 0
            while got < size:
                n = sock.recv_into(view[got:min(size, got + PIECE)])
                if not n:
                    raise ConnectionError(f"the data connection closed after {got} of {size} "
                                          "bytes")
                got += n
                if got - checked >= PIECE or got == size:
                    arrived.put((checked, got))
                    checked = got
            (expected,) = struct.unpack(">I", recv_exact(sock, 4))
        finally:
            arrived.put(None)
            crc = crc.result()
            populate.result()
        if checksum and crc != expected:
            view.release()
            raise BulkError(CORRUPT, "the downloaded bytes failed their CRC32C check")
        return view


def _buffer(size: int):
    """Private anonymous memory for a download. Not huge pages: on the development VM their
    allocation took from 0.1 to 2.7 s per GiB, 4 KiB pages faulted in ahead (_populate) were
    steadier."""
    if size == 0:
        return bytearray()
    return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)


def _no_crc(view: memoryview, arrived: queue.SimpleQueue) -> int:
    for _ in iter(arrived.get, None):
        pass
    return 0


def _crc_behind(view: memoryview, arrived: queue.SimpleQueue) -> int:
    crc = 0
    for start, end in iter(arrived.get, None):
        crc = crc32c_extend(crc, _crc_view(view[start:end]))
    return crc


def _crc_of(encoded) -> int:
    return encoded.crc32c()  # often computed already, with the content id


_MADV_POPULATE_WRITE = 23  # Linux 5.14+; older kernels answer EINVAL and nothing is done
_POPULATE_STEP = 32 << 20


def _populate(out, size: int) -> None:
    """Allocates the pages of fresh anonymous memory, without changing what is in them (a
    concurrent write into the same pages is safe)."""
    if size == 0 or not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)  # ctypes calls run without the GIL
    madvise = libc.madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    address = ctypes.addressof(ctypes.c_char.from_buffer(out))
    for offset in range(0, size, _POPULATE_STEP):
        if madvise(address + offset, min(_POPULATE_STEP, size - offset), _MADV_POPULATE_WRITE):
            return


class _Background:
    """Runs fn(*args) on a daemon thread; result() joins it and re-raises its error."""

    def __init__(self, fn, *args):
        self._value = self._error = None
        self._thread = threading.Thread(target=self._run, args=(fn, args), daemon=True,
                                        name="bulletin-bulk")
        self._thread.start()

    def _run(self, fn, args) -> None:
        try:
            self._value = fn(*args)
        except BaseException as exc:  # handed to result()
            self._error = exc

    def result(self):
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


def direct_request(reader: str, namespace: str, oid: str, ticket: bytes) -> bytes:
    """What a worker's port reads (Java's DirectTicket.request): who asks, for which object,
    and the head's ticket; strings as Java's writeUTF (u16 length, then the ASCII bytes)."""
    def utf(text: str) -> bytes:
        data = text.encode("ascii")
        return struct.pack(">H", len(data)) + data
    return utf(reader) + utf(namespace) + utf(oid) + struct.pack(">I", len(ticket)) + ticket


def _hello(sock: socket.socket, ticket: bytes, direct: bool = False) -> None:
    if direct:
        sock.sendall(struct.pack(">III", MAGIC, VERSION_DIRECT, len(ticket)) + ticket)
    else:
        sock.sendall(struct.pack(">II", MAGIC, VERSION) + ticket)
    status = recv_exact(sock, 1)[0]
    if status != OK:
        raise BulkError(status, _message(sock))


def _message(sock: socket.socket) -> str:
    (length,) = struct.unpack(">I", recv_exact(sock, 4))
    return recv_exact(sock, length).decode("utf-8", "replace") if length else ""


def recv_exact(sock: socket.socket, n: int, error: type[Exception] = ConnectionError,
               closed: str = "the runtime closed the data connection") -> bytes:
    """``n`` bytes from ``sock``; ``error(closed)`` if the peer closes first."""
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise error(closed)
        data += chunk
    return bytes(data)
