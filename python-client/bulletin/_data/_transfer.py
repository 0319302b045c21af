"""Moving objects between a client and the runtime's store.

Same host (HelloReply.host_id equals ours and the staging folder is ours): an object is
written once, straight into a staged file of the staging folder, and adopted by the runtime; a
result is mapped from the store file, zero copy. Otherwise: the runtime's bulk data port (one
raw TCP connection per object under a ticket from OpenTransfer, CRC32C over the whole object,
see ``_bulk``); if that port cannot be reached, chunked PutObject / GetObject with a CRC32C per
chunk and over the whole object. A corrupted upload is sent again; a corrupted download is
fetched again (the gRPC path: from the bad chunk's offset). Before any upload the client asks
"has it?".

``BULLETIN_DATA_PATH``: ``auto`` (default) as above; ``bulk`` skips the same-host path (the data
port, else gRPC); ``grpc`` uses only PutObject / GetObject.
"""

from __future__ import annotations

import os
import ssl
import threading
from pathlib import Path
from time import perf_counter

import grpc
import pyarrow as pa

from . import _arena, _bulk
from .. import _tls
from .._reconnect import retry_lost
from .._errors import (BulletinError, RuntimeFailure, RuntimeUnreachableError, StoreFullError,
                       TlsError)
from .._codec import map_file
from ._objects import crc32c_extend, decode, host_id, open_object, stage_name
from ._write_maps import RECYCLE_MIN, WriteMappings
from .._proto import bulletin_pb2 as pb

_RETRIES = 3
_PATHS = ("auto", "bulk", "grpc")
# How long a data connection may take to open before the client uses gRPC instead.
_CONNECT_SECONDS = 3.0
_RPC_SECONDS = 30.0
# What a client pre-faults at start, at most (more only on demand, up to HelloReply.arena_bytes).
_ARENA_FIRST_FILL = 2 << 30


class Transfer:
    def __init__(self, conn, session_id: str, chunk_bytes: int, send_release):
        hello = conn.hello
        self._conn = conn
        self._session = session_id
        self._chunk = chunk_bytes
        self._send_release = send_release
        self.capacity = hello.store_capacity_bytes
        # Published objects are read in ``folder``; what this client writes goes to ``staging``
        # (the runtime takes it from there by rename and checks it: docs/security.md).
        self.folder = Path(hello.store_dir) if hello.store_dir else None
        self.staging = Path(hello.staging_dir) if hello.staging_dir else None
        path = os.environ.get("BULLETIN_DATA_PATH", "auto")
        if path not in _PATHS:
            raise BulletinError(f"BULLETIN_DATA_PATH must be one of {', '.join(_PATHS)}, "
                                f"not {path!r}")
        self.same_host = (path == "auto" and self.staging is not None
                          and hello.host_id == host_id() and _own_folder(self.staging))
        # The bulk data port (0: none, or given up on); on the host of the gRPC address.
        self._data_port = 0 if path == "grpc" else hello.data_port
        self._data_host = conn.address.rpartition(":")[0].strip("[]")
        self.bulk_unreachable: str | None = None  # why the data port was given up, if it was
        # Results kept on a worker come from that worker's own data port (TLS in a TLS cluster,
        # pinned to the certificate the head names); an address that could not be reached is
        # not tried again, and the latest reason is kept here.
        self._direct = self._data_port != 0
        self._cluster_tls = conn.data_tls() is not None
        self._worker_context = None
        self._direct_unreachable: set[str] = set()
        self.direct_unreachable: str | None = None
        # "same-host", "bulk", "direct" (a worker's own port) or "grpc": the latest transfer
        self.last_path: str | None = None
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}
        # Mappings of this client's large same-host writes, for the runtime to recycle.
        keep = self.capacity // 4 if self.capacity > 0 else 1 << 30
        self._maps = WriteMappings(keep, spares=self._spares(hello.arena_bytes))
        # Memory of this client's downloads, reused for the next ones once it is let go.
        self.receive_buffers = _bulk.ReceiveBuffers(keep)
        # Counters for benchmarks and tests: what crossed the wire or the store folder.
        self.uploaded_bytes = 0
        self.uploads = 0
        self.write_seconds = 0.0  # same-host: time spent copying into store files
        self.resends = 0  # uploads sent again after a failed CRC32C check
        self.corrupt_next_chunk = False  # test hook: flips a bit in the next uploaded chunk

    # -- holding objects in the store ---------------------------------------------------------

    def acquire(self, encoded) -> str:
        """Makes sure the store holds the object for this session; returns its id."""
        if self.same_host and encoded.nbytes <= self.capacity:
            with self._lock:
                held = set(self._held)
            spare = self._maps.take_spare(encoded.nbytes, held)
            if spare is not None:
                return self._acquire_through(spare, encoded)
        # Across hosts the bytes also need their CRC32C: one pass over them for both.
        oid = encoded.digest(with_crc32c=not self.same_host)
        with self._lock:
            if self._held.get(oid, 0) > 0:
                self._held[oid] += 1
                return oid
        if encoded.nbytes > self.capacity > 0:
            raise StoreFullError(
                f"this object is {encoded.nbytes} bytes, larger than the cluster's object store "
                f"({self.capacity} bytes); nothing was uploaded. Pass it in smaller pieces, or "
                "ask for a cluster started with a larger --store-capacity.")
        request = pb.HasObjectsRequest(ids=[oid])
        if self.same_host and encoded.nbytes >= RECYCLE_MIN:
            request.write_sizes.append(encoded.nbytes)
            request.mapped_ids.extend(self._maps.ids())
            request.spare_ready = self._maps.has_spare(encoded.nbytes)
        reply = self._conn.call(self._conn.stub.HasObjects, request, "HasObjects")
        if not reply.present[0]:
            retry_lost(self._conn, f"the upload of object {oid[:12]}", lambda: self.upload(
                oid, encoded, reply.staged_names[0] if reply.staged_names else ""))
        with self._lock:
            self._held[oid] = self._held.get(oid, 0) + 1
        return oid

    def _acquire_through(self, spare, encoded) -> str:
        """A large same-host write with a pre-faulted spare ready: the bytes are copied into it
        and hashed in the same pass (the id is known only after), then "has it?". If the store
        has the object the spare is put back (it held only this user's own bytes); else it
        becomes the object. One read of the bytes instead of two (digest, then copy)."""
        start = perf_counter()
        oid = self._maps.fill_spare(spare, encoded)
        copied = perf_counter() - start
        with self._lock:
            held = self._held.get(oid, 0) > 0
        present = held or self._conn.call(self._conn.stub.HasObjects, pb.HasObjectsRequest(
            ids=[oid]), "HasObjects").present[0]
        if present:
            self._maps.put_back_spare(spare, encoded.nbytes)
        else:
            name = stage_name(self._session)
            what = f"the upload of object {oid[:12]}"
            try:
                self._maps.keep_spare(spare, self.staging / name, encoded.nbytes, oid)
            except OSError:
                # Its file went away (a restarted runtime deletes the files its journal does
                # not name): the ordinary path, which falls back to the network if it must.
                retry_lost(self._conn, what, lambda: self.upload(oid, encoded))
            else:
                self.write_seconds += copied
                outages = self._conn.outages
                retry_lost(self._conn, what,
                           lambda: self._adopt_written(oid, encoded, name, outages))
                self.uploads += 1
                self.uploaded_bytes += encoded.nbytes
                self.last_path = "same-host"
        with self._lock:
            self._held[oid] = self._held.get(oid, 0) + 1
        return oid

    def _adopt_written(self, oid: str, encoded, name: str, outages: int) -> None:
        """Adopts a file written already. If the runtime restarted between the write and the
        adopt (``outages`` moved), it deleted the file with every other file its journal does
        not name: writes it again, into a new file."""
        try:
            self._adopt(oid, encoded, name)
        except BulletinError:
            if self._conn.outages == outages:
                raise
            self._adopt(oid, encoded, self._write_same_host(oid, encoded, ""))

    def release(self, oid: str) -> None:
        with self._lock:
            count = self._held.get(oid, 0)
            if count == 0:
                return
            if count > 1:
                self._held[oid] = count - 1
                return
            del self._held[oid]
        self._send_release(oid)

    def held(self) -> int:
        with self._lock:
            return len(self._held)

    # -- uploads ------------------------------------------------------------------------------

    def upload(self, oid: str, encoded, staged_name: str = "") -> None:
        """Puts an object the store lacks; ``staged_name``: a recycled file to overwrite."""
        if self.same_host:
            start = perf_counter()
            outages = self._conn.outages
            try:
                name = self._write_same_host(oid, encoded, staged_name)
            except OSError:
                self.same_host = False  # e.g. the folder went away: fall back to the network
            else:
                self.write_seconds += perf_counter() - start
                self._adopt_written(oid, encoded, name, outages)
                self.uploads += 1
                self.uploaded_bytes += encoded.nbytes
                self.last_path = "same-host"
                return
        what = f"the upload of object {oid[:12]}"
        from .._progress import upload_bar
        bar = upload_bar(encoded.nbytes, f"upload {oid[:12]}")
        try:
            self._upload_remote(oid, encoded, what, bar)
        finally:
            if bar is not None:
                bar.close()

    def _adopt(self, oid: str, encoded, staged_name: str) -> None:
        self._conn.call(self._conn.stub.AdoptObject, pb.AdoptObjectRequest(
            id=oid, size=encoded.nbytes, staged_name=staged_name), "AdoptObject")

    def _upload_remote(self, oid: str, encoded, what: str, bar) -> None:
        for attempt in range(_RETRIES):
            if bar is not None:
                bar.reset()
            last = attempt == _RETRIES - 1
            try:
                sock = self._data_connection()
                if sock is None:
                    self._put(oid, encoded, bar)
                else:
                    self._bulk_put(sock, oid, encoded, bar)
                return
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                    raise StoreFullError(f"the cluster's object store refused object {oid}: "
                                         f"{exc.details()}") from None
                if exc.code() != grpc.StatusCode.DATA_LOSS or last:
                    raise self._conn.error(exc, what) from None
            except _bulk.BulkError as exc:
                if exc.status != _bulk.CORRUPT or last:
                    raise self._bulk_failure(exc, what, attempt + 1) from None
            except TlsError:
                raise
            except OSError as exc:
                raise self._cut(exc, what) from None
            self.resends += 1

    def _bulk_put(self, sock, oid: str, encoded, bar=None) -> None:
        with sock:
            reply = self._conn.stub.OpenTransfer(pb.OpenTransferRequest(
                direction=pb.TRANSFER_PUT, id=oid, size=encoded.nbytes),
                metadata=self._conn.metadata, timeout=_RPC_SECONDS)
            corrupt, self.corrupt_next_chunk = self.corrupt_next_chunk, False
            self.uploaded_bytes += encoded.nbytes
            _bulk.put(sock, reply.ticket, encoded, corrupt,
                      on_sent=None if bar is None else bar.update)
        self.uploads += 1
        self.last_path = "bulk"

    def _data_connection(self):
        """A connection to the data port, or None: use gRPC (no port, or it cannot be reached:
        then not again for this client)."""
        if not self._data_port:
            return None
        try:
            return _bulk.connect(self._data_host, self._data_port, _CONNECT_SECONDS,
                                 self._conn.data_tls())
        except ssl.SSLError as exc:  # reached, but not trusted: say so, never go around it
            raise TlsError(
                f"the TLS handshake with the data port {self._data_host}:{self._data_port} "
                f"failed ({exc}); this client checked it against {self._conn.tls.describe()}. "
                "The gRPC port passed the same check, so the data port seems to be another "
                "server's: check the runtime with `bulletin status`.") from None
        except OSError as exc:
            self.bulk_unreachable = (f"the data port {self._data_host}:{self._data_port} "
                                     f"cannot be reached ({exc}); using gRPC")
            self._data_port = 0
            return None

    def _bulk_failure(self, exc: _bulk.BulkError, what: str, tries: int) -> BulletinError:
        if exc.status == _bulk.CORRUPT:
            return BulletinError(
                f"{what} failed its CRC32C check {tries} times; the network corrupts data. "
                "Check the link between this machine and the cluster.")
        if exc.status == _bulk.REFUSED:
            return RuntimeFailure(f"{what}: the runtime refused the data connection: "
                                  f"{exc.message}")
        return RuntimeFailure(f"{what} failed on the runtime: {exc.message}")

    def _cut(self, exc: OSError, what: str) -> BulletinError:
        return RuntimeUnreachableError(
            f"lost the data connection to {self._data_host}:{self._data_port} during {what} "
            f"({exc}). Check the runtime with `bulletin status`; set BULLETIN_DATA_PATH=grpc "
            "to move objects over the gRPC connection only.")

    def _write_same_host(self, oid: str, encoded, staged_name: str) -> str:
        """Writes the object into a staged file of the store folder; returns its name."""
        if staged_name:
            recycled = self.staging / staged_name
            try:
                if self._maps.write_recycled(recycled, encoded, oid):
                    return staged_name
            except BaseException:
                _unlink_quietly(recycled)
                raise
            _unlink_quietly(recycled)  # another process still maps it: theirs to keep
        name = stage_name(self._session)
        path = self.staging / name
        try:
            self._maps.write_new(path, encoded, oid)
        except BaseException:
            _unlink_quietly(path)
            raise
        return name

    def _spares(self, arena_bytes: int) -> _arena.SpareFiles | None:
        """Pre-faulted files for this client's large writes, filled in the background from now
        (same host only: elsewhere nothing is written into the store folder)."""
        if not self.same_host or arena_bytes < RECYCLE_MIN:
            return None
        if self._conn.hello.host_arena_bytes > 0:
            # From the host's arena: the runtime pre-faulted them once for every client.
            return _arena.SpareFiles(self.staging, min(arena_bytes, _ARENA_FIRST_FILL),
                                     arena_bytes, source=self._arena_spare)
        if not _arena.supported(self.staging):
            return None
        return _arena.SpareFiles(self.staging, min(arena_bytes, _ARENA_FIRST_FILL), arena_bytes)

    def _arena_spare(self, size: int):
        """A file of the host arena moved into this user's folder, mapped here; None when the
        arena says no (this user holds its share), NotYet when it is still filling."""
        reply = self._conn.stub.TakeArenaSpare(pb.ArenaSpareRequest(size=size),
                                               metadata=self._conn.metadata,
                                               timeout=_RPC_SECONDS)
        if not reply.staged_name:
            if reply.later:
                raise _arena.NotYet()
            return None
        return _arena.open_spare(self.staging / reply.staged_name, reply.size)

    @property
    def spares(self) -> _arena.SpareFiles | None:
        return self._maps.spares

    def close(self) -> None:
        self._maps.close()
        self.receive_buffers = _bulk.ReceiveBuffers(0)  # kept memory goes with its last user

    def _put(self, oid: str, encoded, bar=None) -> None:
        size = encoded.nbytes
        state = {"crc": 0}

        def chunks():
            offset = 0
            for piece in encoded.iter_chunks(self._chunk):
                data = bytes(piece)
                crc = crc32c_extend(0, data)
                state["crc"] = crc32c_extend(state["crc"], data)
                if self.corrupt_next_chunk and data:
                    self.corrupt_next_chunk = False
                    data = bytes([data[0] ^ 1]) + data[1:]
                last = offset + len(data) >= size
                chunk = pb.ObjectChunk(data=data, offset=offset, crc32c=crc, last=last)
                if offset == 0:
                    chunk.id, chunk.size = oid, size
                if last:
                    chunk.object_crc32c = state["crc"]
                offset += len(data)
                self.uploaded_bytes += len(data)
                if bar is not None:
                    bar.update(len(data))
                yield chunk
            if offset == 0:  # an empty object still needs its first (and last) chunk
                yield pb.ObjectChunk(id=oid, size=0, last=True)

        self._conn.stub.PutObject(chunks(), metadata=self._conn.metadata)
        self.uploads += 1
        self.last_path = "grpc"

    # -- downloads ----------------------------------------------------------------------------

    def fetch(self, oid: str, size: int):
        """The object's value: mapped from the store on this host, else downloaded."""
        if self.same_host:
            try:
                return _open_result(self.folder / oid)
            except FileNotFoundError:
                pass  # spilled to disk on the runtime's side: take the network path
        return decode(retry_lost(self._conn, f"the download of object {oid[:12]}",
                                 lambda: self._download(oid, size)))

    def _download(self, oid: str, size: int):
        what = f"the download of object {oid[:12]}"
        direct, failures = self._direct, 0
        while True:
            if not self._data_port:
                return self._grpc_download(oid, size)
            try:
                reply = self._conn.stub.OpenTransfer(pb.OpenTransferRequest(
                    direction=pb.TRANSFER_GET, id=oid, direct=direct),
                    metadata=self._conn.metadata, timeout=_RPC_SECONDS)
            except grpc.RpcError as exc:
                raise self._conn.error(exc, what) from None
            if reply.HasField("direct"):
                out = self._direct_get(reply.direct, oid, reply.size)
                if out is not None:
                    return out
                direct = False  # through the head this time: it pulls from the keeper
                continue
            sock = self._data_connection()
            if sock is None:
                return self._grpc_download(oid, size)
            with sock:
                try:
                    out = _bulk.get(sock, reply.ticket, reply.size, self.receive_buffers)
                except _bulk.BulkError as exc:
                    failures += 1
                    if exc.status != _bulk.CORRUPT or failures == _RETRIES:
                        raise self._bulk_failure(exc, what, failures) from None
                    continue
                except OSError as exc:
                    raise self._cut(exc, what) from None
            self.last_path = "bulk"
            return pa.py_buffer(out)

    def _worker_tls(self):
        """The context for workers' ports that serve their worker certificates (made once)."""
        if self._worker_context is None:
            self._worker_context = _tls.worker_context(self._conn.tls)
        return self._worker_context

    def _direct_get(self, source, oid: str, size: int):
        """The bytes straight from the worker that keeps them, or None: then the head's path."""
        if source.address in self._direct_unreachable:
            return None
        host, _, port = source.address.rpartition(":")
        pin = bytes(source.tls_fingerprint) or None
        worker = source.keeper if source.tls_worker_certificate else None
        if pin is None and worker is None and self._cluster_tls:
            # A TLS cluster's head names no plaintext port; if it did, the ticket and the bytes
            # would cross the network in the clear.
            self.direct_unreachable = (f"worker {source.keeper}'s data port {source.address} "
                                       "has no certificate pin in a TLS cluster; its objects "
                                       "come through the head")
            return None
        try:
            tls = (self._worker_tls() if worker is not None
                   else _tls.pinned_context() if pin else None)
            sock = _bulk.connect(host.strip("[]"), int(port), _CONNECT_SECONDS, tls=tls,
                                 pin=None if worker else pin, worker=worker)
        except OSError as exc:
            self._direct_unreachable.add(source.address)
            self.direct_unreachable = (f"worker {source.keeper}'s data port {source.address} "
                                       f"cannot be reached ({exc}); its objects come through "
                                       "the head")
            return None
        request = _bulk.direct_request(source.reader, source.namespace, oid, source.ticket)
        try:
            out = _bulk.get(sock, request, size, self.receive_buffers, direct=True,
                            checksum=tls is None)
        except (_bulk.BulkError, OSError) as exc:
            self.direct_unreachable = (f"worker {source.keeper} did not send {oid[:12]} "
                                       f"({exc}); it came through the head")
            return None
        self.last_path = "direct"
        return pa.py_buffer(out)

    def _grpc_download(self, oid: str, size: int) -> bytearray:
        self.last_path = "grpc"
        out = bytearray(size)
        view = memoryview(out)
        offset, failures = 0, 0
        while True:
            try:
                stream = self._conn.stub.GetObject(pb.GetObjectRequest(id=oid, offset=offset),
                                                   metadata=self._conn.metadata)
                for chunk in stream:
                    data = chunk.data
                    if crc32c_extend(0, data) != chunk.crc32c or chunk.offset != offset:
                        raise _BadChunk(chunk.offset)
                    view[offset:offset + len(data)] = data
                    offset += len(data)
                return out
            except _BadChunk as bad:
                stream.cancel()
                failures += 1
                if failures >= _RETRIES:
                    raise BulletinError(
                        f"the download of object {oid[:12]} failed its CRC32C check {failures} "
                        f"times at offset {bad.offset}; the network corrupts data. Check the "
                        "link between this machine and the cluster.") from None
            except grpc.RpcError as exc:
                raise self._conn.error(exc, f"the download of object {oid[:12]}") from None


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _open_result(path: Path):
    """A result mapped copy-on-write, not read-only: torch has no read-only tensors, so from a
    read-only mapping every tensor of a result was copied (a model's 45 MB state_dict: 12-35 ms
    of each training call); now they share the mapping, and a write reaches only private pages,
    never the store's file. Arrays come back writable, as from a download. Where a private
    writable mapping is refused (RLIMIT_DATA counts it: a nested call's client in an executor
    with memory=), the read-only mapping is the fallback."""
    try:
        return decode(map_file(path))
    except FileNotFoundError:
        raise
    except OSError:
        return open_object(path)


class _BadChunk(Exception):
    def __init__(self, offset: int):
        super().__init__(offset)
        self.offset = offset


def timed(fn, *args):
    start = perf_counter()
    value = fn(*args)
    return value, perf_counter() - start


def _own_folder(folder: Path) -> bool:
    """Whether this process may write objects into ``folder``: it is of this process's own
    account. Writable is not enough: the runtime takes from a user's staging folder only files
    of the account the folder belongs to (a root client may write anywhere, and its files in a
    run_as user's folder would be refused)."""
    try:
        return folder.stat().st_uid == os.geteuid() and os.access(folder, os.W_OK)
    except OSError:
        return False

