"""The lease channel's wire: framing and the handshake, shared by the client and the executor.

A lease (docs/internals.md, "Leases") is a call the runtime schedules like any other; its
executor connects back to the client and runs the calls of a burst that the client sends it
directly. This module is what both ends say on that connection:

- The handshake. The executor opens with ``MAGIC``, the lease's id and a nonce; the client
  answers with a nonce and an HMAC over both nonces under the lease's secret; the executor
  answers with its own HMAC. The secret travelled only inside the lease call's arguments, which
  the runtime gives to an executor of the caller's own account: each end has proven it holds it
  before any call or result crosses. A process that reaches the client's port learns nothing
  and can send nothing; an executor that reached the wrong listener sends nothing either.
- Frames: an 8-byte little-endian length, then a pickle (protocol 5) of a list of messages and
  the sizes of the frame's tails, then the tails' bytes. A list so that what one side has ready
  leaves in one write (a burst's calls, a batch of results). A tail is a large encoded value
  (a result over ``TAIL_MIN``), sent from its own buffers and received into one buffer that
  decoding maps: two copies (into the kernel and out of it) instead of a pickle's three more.
  Both ends are processes of the same user, authenticated above: a frame is trusted as a call's
  own bytes are.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
import select
import socket
import struct

import numpy as np

from ._data._bulk import recv_exact

MAGIC = b"BLS1"
ID_BYTES = 16
NONCE_BYTES = 16
_MAC_BYTES = 32
_LENGTH = struct.Struct("<Q")
# A frame larger than this is refused: a broken peer must not make the other end allocate
# without bound (a call's inline bytes are far below it; large values travel as their own calls).
MAX_FRAME = 1 << 34


class LeaseProtocolError(Exception):
    """The peer broke the protocol, failed the handshake or closed the connection."""


def _mac(secret: bytes, role: bytes, first: bytes, second: bytes) -> bytes:
    return hmac.new(secret, role + first + second, hashlib.sha256).digest()


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    return recv_exact(sock, size, LeaseProtocolError, "the peer closed the lease connection")


def executor_hello(sock: socket.socket, lease_id: bytes, secret: bytes) -> None:
    """The executor's side of the handshake; raises LeaseProtocolError if the client's proof
    is wrong (it reached something that is not the client that made the lease)."""
    nonce = os.urandom(NONCE_BYTES)
    sock.sendall(MAGIC + lease_id + nonce)
    reply = recv_exactly(sock, NONCE_BYTES + _MAC_BYTES)
    client_nonce, proof = reply[:NONCE_BYTES], reply[NONCE_BYTES:]
    if not hmac.compare_digest(proof, _mac(secret, b"client", nonce, client_nonce)):
        raise LeaseProtocolError("the lease's client failed the handshake")
    sock.sendall(_mac(secret, b"executor", client_nonce, nonce))


def client_greeting(sock: socket.socket) -> tuple[bytes, bytes]:
    """Reads the executor's opening: (lease id, its nonce)."""
    opening = recv_exactly(sock, len(MAGIC) + ID_BYTES + NONCE_BYTES)
    if opening[:len(MAGIC)] != MAGIC:
        raise LeaseProtocolError("not a bulletin lease connection")
    return opening[len(MAGIC):len(MAGIC) + ID_BYTES], opening[len(MAGIC) + ID_BYTES:]


def client_prove(sock: socket.socket, secret: bytes, executor_nonce: bytes) -> None:
    """The client's proof, then the executor's checked."""
    nonce = os.urandom(NONCE_BYTES)
    sock.sendall(nonce + _mac(secret, b"client", executor_nonce, nonce))
    proof = recv_exactly(sock, _MAC_BYTES)
    if not hmac.compare_digest(proof, _mac(secret, b"executor", nonce, executor_nonce)):
        raise LeaseProtocolError("the lease's executor failed the handshake")


# Encoded values at least this large travel as a frame's tail, not inside its pickle.
TAIL_MIN = 1 << 20
_TAIL_CHUNK = 8 << 20


def frame(messages: list) -> bytes:
    """A frame without tails, as bytes (one write)."""
    data = pickle.dumps((messages, ()), protocol=5)
    return _LENGTH.pack(len(data)) + data


def send_frame(sock: socket.socket, messages: list, tails: list = ()) -> None:
    """Sends a frame whose tails are ``Encoded`` values, each from its own buffers."""
    if not tails:
        sock.sendall(frame(messages))
        return
    data = pickle.dumps((messages, [tail.nbytes for tail in tails]), protocol=5)
    sock.sendall(_LENGTH.pack(len(data)) + data)
    for tail in tails:
        for chunk in tail.iter_chunks(_TAIL_CHUNK):
            sock.sendall(chunk)


class FrameReader:
    """Reads frames from a socket, keeping what arrived beyond the last whole frame."""

    def __init__(self, sock: socket.socket):
        self._sock = sock
        self._buffer = bytearray()

    def ready(self) -> bool:
        """Whether a whole frame is buffered, or bytes wait on the socket (without blocking)."""
        return self._whole() or self._readable(0)

    def _readable(self, timeout: float | None) -> bool:
        # A TLS socket may hold decrypted bytes that select() cannot see.
        pending = getattr(self._sock, "pending", None)
        if pending is not None and pending():
            return True
        readable, _, _ = select.select([self._sock], [], [], timeout)
        return bool(readable)

    def read(self, timeout: float | None = None) -> list | None:
        """The next frame's messages, for a frame without tails (see ``read_with_tails``)."""
        read = self.read_with_tails(timeout)
        if read is None:
            return None
        messages, tails = read
        if tails:
            raise LeaseProtocolError("a frame with tails where none may come")
        return messages

    def read_with_tails(self, timeout: float | None = None) -> tuple[list, list] | None:
        """The next frame's messages and tails (each a buffer of its own); None if no frame
        came within ``timeout`` seconds (None: wait for good). Raises LeaseProtocolError when
        the peer closed the connection."""
        while not self._whole():
            if timeout is not None and not self._readable(timeout):
                return None
            chunk = self._sock.recv(1 << 20)
            if not chunk:
                raise LeaseProtocolError("the peer closed the lease connection")
            self._buffer += chunk
        size = _LENGTH.unpack_from(self._buffer)[0]
        data = bytes(self._buffer[_LENGTH.size:_LENGTH.size + size])
        del self._buffer[:_LENGTH.size + size]
        messages, sizes = pickle.loads(data)
        return messages, [self._tail(n) for n in sizes]

    def _tail(self, size: int) -> memoryview:
        if size > MAX_FRAME:
            raise LeaseProtocolError(f"a lease frame's tail of {size} bytes is over the limit")
        tail = memoryview(np.empty(size, dtype=np.uint8))
        have = min(size, len(self._buffer))
        tail[:have] = self._buffer[:have]
        del self._buffer[:have]
        while have < size:
            got = self._sock.recv_into(tail[have:], min(size - have, _TAIL_CHUNK))
            if not got:
                raise LeaseProtocolError("the peer closed the lease connection")
            have += got
        return tail

    def _whole(self) -> bool:
        if len(self._buffer) < _LENGTH.size:
            return False
        size = _LENGTH.unpack_from(self._buffer)[0]
        if size > MAX_FRAME:
            raise LeaseProtocolError(f"a lease frame of {size} bytes is over the limit")
        return len(self._buffer) >= _LENGTH.size + size
